"""Away mode in the bridge (issue 33): the switches (`/away`, `/back` in a thread, the
channels' `BridgeCore.set_away`, everywhere), automatic away, and that it all outlives a
restart. A whole bridge in one process (`Rig`), its memory channels driven as a person
would; the HTTP side is tests/intake/test_away_route.py."""

from __future__ import annotations

import time

from aep_bridge.contract.types import ResolutionStatus
from aep_bridge.loop.away import NAMESPACE
from tests.core.rig import ALICE, MALLORY, Rig


async def _session(rig: Rig, session: str = "sess-1") -> str:
    """The bridge's id of the agent's session."""
    await rig.settle()
    record = rig.bridge.sessions.find_by_session(session)
    assert record is not None
    return record.id


async def test_away_and_back_in_a_thread_switch_that_session_for_approvers_only(tmp_path):
    async with Rig(tmp_path) as rig:
        rig.agent().start()
        rig.agent("sess-2").start()
        sid = await _session(rig)
        thread = rig.thread_of("alpha")
        await rig.channel("alpha").reply(thread, "/away", MALLORY, None)
        await rig.settle()
        assert "/away: refused: you are not an approver for this channel" in rig.thread_texts(
            "alpha"
        )
        assert rig.bridge.away.query("sess-1") == {"away": False, "hold_seconds": 1800}

        await rig.channel("alpha").reply(thread, "/away", ALICE, None)
        await rig.channel("alpha").reply(thread, "/status", ALICE, None)
        await rig.settle()
        texts = rig.thread_texts("alpha")
        assert any(
            t.startswith("/away: this session is away: when its agent finishes") for t in texts
        )
        assert any(
            t.endswith("; away (its agent asks here what next when it finishes)") for t in texts
        )
        assert rig.bridge.away.query("sess-1")["away"] is True
        assert rig.bridge.away.query("sess-2")["away"] is False  # only the thread's session
        [listed] = [s for s in rig.bridge.away.describe()["sessions"] if s["id"] == sid]
        assert (listed["away"], listed["why"], listed["by"]) == (True, "session", "Alice on alpha")

        await rig.channel("alpha").reply(thread, "/back", ALICE, None)
        await rig.settle()
        assert "/back: this session is back: its agent stops as usual when it finishes" in (
            rig.thread_texts("alpha")
        )
        assert rig.bridge.away.query("sess-1")["away"] is False


async def test_the_switches_outlive_a_restart(tmp_path):
    state = tmp_path / "state"
    async with Rig(state) as rig:
        rig.agent().start()
        await rig.settle()
        await rig.channel("alpha").reply(rig.thread_of("alpha"), "/away", ALICE, None)
        await rig.settle()
    async with Rig(state) as rig:
        assert rig.bridge.away.query("sess-1")["away"] is True
        assert rig.bridge.away.query("never-seen")["away"] is False


async def test_everywhere_covers_every_session_and_clears_their_own_switches(tmp_path):
    async with Rig(tmp_path, away={"hold_minutes": 5}) as rig:
        rig.agent().start()
        rig.agent("sess-2").start()
        sid = await _session(rig)
        away = rig.bridge.away
        away.set(False, session_id=sid, by="Alice on alpha")  # this one says back
        away.set(True, session_id=None, by="aep-bridge away")
        assert away.query("sess-1") == {"away": True, "hold_seconds": 300}
        assert away.query("sess-2")["away"] is True
        assert away.query("a-session-not-seen-yet")["away"] is True
        assert away.describe()["everywhere"] is True

        await rig.channel("alpha").reply(rig.thread_of("alpha"), "/back", ALICE, None)
        await rig.settle()
        assert away.query("sess-1")["away"] is False  # its own switch wins
        assert away.query("sess-2")["away"] is True

        away.set(False, session_id=None, by="aep-bridge away")  # back everywhere
        assert [away.query(s)["away"] for s in ("sess-1", "sess-2", "other")] == [False] * 3
        assert all(s["switch"] is None for s in away.describe()["sessions"])


async def test_a_channel_switches_through_its_core_for_approvers_only(tmp_path):
    async with Rig(tmp_path) as rig:
        rig.agent().start()
        sid = await _session(rig)
        core = rig.channel("beta").core
        refused = await core.set_away(True, MALLORY, session_id=sid)
        assert refused.status is ResolutionStatus.NOT_ALLOWED
        assert core.away_state()["sessions"][0]["away"] is False
        unknown = await core.set_away(True, ALICE, session_id="s0000000000")
        assert unknown.status is ResolutionStatus.UNKNOWN
        done = await core.set_away(True, ALICE, session_id=sid)
        assert done.status is ResolutionStatus.ACCEPTED
        [listed] = core.away_state()["sessions"]
        assert (listed["id"], listed["away"], listed["by"]) == (sid, True, "Alice on beta")
        everywhere = await core.set_away(True, ALICE)
        assert everywhere.status is ResolutionStatus.ACCEPTED
        assert rig.bridge.view.away_state()["everywhere"] is True


async def test_automatic_away_after_minutes_without_a_prompt_in_the_terminal(tmp_path):
    now = [1_000_000.0]
    async with Rig(tmp_path, clock=lambda: now[0], away={"after_minutes": 10}) as rig:
        agent = rig.agent()
        agent.start()  # counted from the session's first event
        await rig.settle()
        now[0] += 9 * 60
        assert rig.bridge.away.query("sess-1")["away"] is False
        now[0] += 60
        assert rig.bridge.away.query("sess-1")["away"] is True
        [listed] = rig.bridge.away.describe()["sessions"]
        assert listed["why"] == "automatic"

        agent.emit("run.started", {"trigger": "user"})  # a prompt typed in the terminal
        await rig.settle()
        assert rig.bridge.away.query("sess-1")["away"] is False
        now[0] += 10 * 60
        agent.emit("run.started", {"trigger": "control"})  # an instruction from the chat
        agent.say("done")  # the agent's own words are no prompt either
        await rig.settle()
        assert rig.bridge.away.query("sess-1")["away"] is True

        sid = await _session(rig)
        rig.bridge.away.set(False, session_id=sid, by="Alice on alpha")  # /back wins
        assert rig.bridge.away.query("sess-1")["away"] is False


async def test_automatic_away_is_off_by_default(tmp_path):
    now = [1_000_000.0]
    async with Rig(tmp_path, clock=lambda: now[0]) as rig:
        rig.agent().start()
        await rig.settle()
        now[0] += 10 * 24 * 3600
        assert rig.bridge.away.query("sess-1")["away"] is False
        assert rig.bridge.away.describe()["after_minutes"] is None


async def test_a_sessions_switch_goes_with_its_records_and_everywhere_stays(tmp_path):
    now = [time.time()]
    async with Rig(tmp_path, clock=lambda: now[0], away={"after_minutes": 5}) as rig:
        agent = rig.agent()
        agent.start()
        sid = await _session(rig)
        rig.bridge.away.set(True, session_id=sid, by="Alice on alpha")
        rig.agent("sess-2").start()
        await rig.settle()
        rig.bridge.away.set(True, session_id=None, by="aep-bridge away")
        rig.bridge.away.set(True, session_id=sid, by="Alice on alpha")
        assert {k.split(":")[0] for k, _ in rig.store.kv_items(NAMESPACE)} == {
            "everywhere",
            "prompt",
            "switch",
        }
        agent.end()
        await rig.settle()
        now[0] += 31 * 86400  # past store.session_retention_days
        assert await rig.bridge.retention.forget() == 1
        keys = [k for k, _ in rig.store.kv_items(NAMESPACE)]
        assert not [k for k in keys if sid in k]  # nothing of the forgotten session is kept
        assert "everywhere" in keys


async def test_the_kits_fake_core_switches_for_approvers_only_as_the_real_one():
    from aep_bridge.testing import FakeCore

    core = FakeCore(approvers=["alice"])
    refused = await core.set_away(True, MALLORY, session_id="s1")
    assert refused.status is ResolutionStatus.NOT_ALLOWED
    assert [r.user.id for r in core.refused] == ["mallory"]
    assert (await core.set_away(True, ALICE, session_id="s1")).accepted
    assert core.away_state()["sessions"] == [
        {"id": "s1", "away": True, "why": "session", "switch": True}
    ]
    assert (await core.set_away(True, ALICE)).accepted
    assert core.away_state()["everywhere"] is True
    assert core.away_state()["sessions"] == []
