"""Owners (issue 34, item 3): each session carries its owner (the principal whose token sent
its first event, the OS user and host its daemon reported), kept across restarts; a route's
`approvers: "owner"` admits only the owner's chat identities (`people`), refusing anyone else
before anything changes, with a reason; the owner's heads-ups go to them privately; the
two-person rule counts a person once across platforms. The real bridge in process, its memory
channels, SQLite on disk.
"""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from aep_bridge.commands.audit_export import export
from aep_bridge.config.config import BridgeConfig, resolve_channels
from aep_bridge.contract.types import ChannelUser, ResolutionStatus
from aep_bridge.intake.principals import Principal
from aep_bridge.loop.approvers import NOT_OWNER
from aep_bridge.loop.sessions import Owner

from .rig import Rig, memory_host

ADA_ALPHA = ChannelUser(id="u-ada", name="Ada")
ADA_BETA = ChannelUser(id="ada-beta", name="Ada (beta)")
BOB = ChannelUser(id="u-bob", name="Bob")
ADA = Principal("ada", "agent")
CAROL = Principal("carol", "agent")

PEOPLE = {
    "ada": {"alpha": "u-ada", "beta": "ada-beta"},
    "bob": {"alpha": "u-bob", "beta": "u-bob"},
}


def _channels() -> dict[str, Any]:
    # Bob is an approver of both channels: only the route's rule keeps him out
    block = {"type": "memory", "approvers": ["u-ada", "ada-beta", "u-bob"]}
    return {"alpha": dict(block), "beta": dict(block)}


def _rig(tmp_path: Any, approvers: Any = "owner", **extra: Any) -> Rig:
    route = {"match": {}, "channels": ["alpha", "beta"], "approvers": approvers, **extra}
    return Rig(tmp_path, channels=_channels(), routes=[route], people=PEOPLE)


def _refusals(rig: Rig) -> list[dict[str, Any]]:
    out = io.StringIO()
    export(rig.store, out, fmt="jsonl")
    records = [json.loads(line) for line in out.getvalue().splitlines()]
    return [r for r in records if r["kind"] == "press.refused"]


async def test_only_the_owner_answers_and_a_stranger_is_told_why_before_any_change(tmp_path):
    async with _rig(tmp_path) as rig:
        agent = rig.agent(principal=ADA, os_user="ada", host="ada-laptop")
        agent.start()
        agent.ask()
        await rig.settle()
        allow = rig.buttons("alpha")[0][1]
        refused = await rig.channel("alpha").press(allow, BOB)
        assert refused.status is ResolutionStatus.NOT_ALLOWED
        assert refused.reason == NOT_OWNER
        assert NOT_OWNER in refused.message  # what the channel shows Bob
        await rig.settle()
        assert agent.commands == []  # nothing was sent, the card is still open
        assert [b for b, _ in rig.buttons("alpha")] == ["Allow", "Deny"]
        [record] = _refusals(rig)
        assert (record["actor"]["id"], record["data"]["reason"]) == ("u-bob", NOT_OWNER)
        # Ada answers from the other platform, with her identity there
        accepted = await rig.channel("beta").press(rig.buttons("beta")[0][1], ADA_BETA)
        assert accepted.status is ResolutionStatus.ACCEPTED
        await rig.settle()
        assert [c.type for c in agent.commands] == ["control.attention.respond"]
        again = await rig.channel("alpha").press(allow, ADA_ALPHA)
        assert again.status is not ResolutionStatus.ACCEPTED
        await rig.settle()
        assert len(agent.commands) == 1  # never answered twice


async def test_the_owner_is_kept_across_a_restart_and_still_decides(tmp_path):
    async with _rig(tmp_path) as rig:
        agent = rig.agent(principal=ADA, os_user="ada", host="ada-laptop")
        agent.start()
        await rig.settle()
        [session] = rig.bridge.sessions.all()
        assert session.owner == Owner("ada", "ada", "ada-laptop")
    async with _rig(tmp_path) as rig:
        [session] = rig.bridge.sessions.all()
        assert session.owner == Owner("ada", "ada", "ada-laptop")
        assert session.owner.describe() == "ada (ada@ada-laptop)"
        agent = rig.agent(principal=ADA)
        agent._seq = 1
        agent.ask()
        await rig.settle()
        refused = await rig.channel("alpha").press(rig.buttons("alpha")[0][1], BOB)
        assert (refused.status, refused.reason) == (ResolutionStatus.NOT_ALLOWED, NOT_OWNER)
        accepted = await rig.channel("alpha").press(rig.buttons("alpha")[0][1], ADA_ALPHA)
        assert accepted.status is ResolutionStatus.ACCEPTED


async def test_an_owner_not_under_people_fails_closed_saying_how_to_fix_it(tmp_path):
    async with _rig(tmp_path) as rig:
        agent = rig.agent(principal=CAROL)
        agent.start()
        agent.ask()
        await rig.settle()
        for user in (ADA_ALPHA, BOB):
            refused = await rig.channel("alpha").press(rig.buttons("alpha")[0][1], user)
            assert refused.status is ResolutionStatus.NOT_ALLOWED
            assert "people.carol.alpha" in refused.message
        await rig.settle()
        assert agent.commands == []


async def test_a_session_without_a_named_token_has_no_owner_and_fails_closed(tmp_path):
    async with _rig(tmp_path) as rig:
        agent = rig.agent()  # the bridge's own, in-process: no principal
        agent.start()
        agent.ask()
        await rig.settle()
        [session] = rig.bridge.sessions.all()
        assert session.owner is None
        refused = await rig.channel("alpha").press(rig.buttons("alpha")[0][1], ADA_ALPHA)
        assert refused.status is ResolutionStatus.NOT_ALLOWED
        assert "aep-bridge token create" in refused.message
        assert agent.commands == []


async def test_a_named_person_on_the_route_answers_too(tmp_path):
    async with _rig(tmp_path, approvers=["owner", "bob"]) as rig:
        agent = rig.agent(principal=ADA)
        agent.start()
        agent.ask()
        await rig.settle()
        stranger = ChannelUser(id="u-eve", name="Eve")
        refused = await rig.channel("alpha").press(rig.buttons("alpha")[0][1], stranger)
        assert refused.status is ResolutionStatus.NOT_ALLOWED
        accepted = await rig.channel("alpha").press(rig.buttons("alpha")[0][1], BOB)
        assert accepted.status is ResolutionStatus.ACCEPTED


async def test_text_answers_and_session_control_follow_the_owner_rule(tmp_path):
    async with _rig(tmp_path) as rig:
        agent = rig.agent(principal=ADA)
        agent.start()
        agent.ask(prompt="Which branch?", options=())
        await rig.settle()
        card_id = rig.card("alpha")[1].id
        refused = await rig.channel("alpha").core.answer_text(card_id, "main", BOB)
        assert (refused.status, refused.reason) == (ResolutionStatus.NOT_ALLOWED, NOT_OWNER)
        thread = rig.thread_of("alpha")
        await rig.channel("alpha").reply(thread, "/cancel", BOB, None)
        await rig.settle()
        assert f"/cancel: refused: {NOT_OWNER}" in rig.thread_texts("alpha")
        away = await rig.channel("alpha").core.set_away(
            True, BOB, session_id=rig.bridge.sessions.all()[0].id
        )
        assert (away.status, away.reason) == (ResolutionStatus.NOT_ALLOWED, NOT_OWNER)
        assert not rig.bridge.away.is_away(rig.bridge.sessions.all()[0].id)
        assert agent.commands == []


async def test_the_owners_heads_up_goes_to_them_privately_with_a_link_to_the_card(tmp_path):
    async with _rig(tmp_path) as rig:
        agent = rig.agent(principal=ADA)
        agent.start()
        agent.ask()
        await rig.settle()
        card_id = rig.card("alpha")[1].id
        [dm] = rig.channel("alpha").direct["u-ada"]
        assert f"memory://card/{card_id}" in dm.text
        [dm_beta] = rig.channel("beta").direct["ada-beta"]
        assert card_id in dm_beta.text
        assert "u-bob" not in rig.channel("alpha").direct
        # not also in the notifications place
        assert not [m for m in rig.channel("alpha").messages if m.thread_id is None]


async def test_an_unreachable_owner_gets_the_heads_up_in_the_notifications_place(tmp_path):
    async with _rig(tmp_path) as rig:
        rig.channel("alpha").unreachable.add("u-ada")
        agent = rig.agent(principal=ADA)
        agent.start()
        agent.ask()
        await rig.settle()
        assert "u-ada" not in rig.channel("alpha").direct
        assert [m for m in rig.channel("alpha").messages if m.thread_id is None]


async def test_two_person_rule_counts_one_person_once_across_platforms(tmp_path):
    async with _rig(tmp_path, approvers=["ada", "bob"], approvals=2) as rig:
        agent = rig.agent(principal=ADA)
        agent.start()
        agent.ask()
        await rig.settle()
        first = await rig.channel("alpha").press(rig.buttons("alpha")[0][1], ADA_ALPHA)
        assert (first.status, first.reason) == (ResolutionStatus.COUNTED, "1 of 2 approvals")
        again = await rig.channel("beta").press(rig.buttons("beta")[0][1], ADA_BETA)
        await rig.settle()
        assert agent.commands == []  # Ada on two platforms is one approval
        assert "1 of 2" in again.message
        second = await rig.channel("alpha").press(rig.buttons("alpha")[0][1], BOB)
        assert second.status is ResolutionStatus.ACCEPTED
        await rig.settle()
        assert len(agent.commands) == 1


@pytest.mark.parametrize(
    ("config", "key", "words"),
    [
        ({"people": {"ada": {"telegram": "1"}}}, "people.ada.telegram", "names no channel"),
        (
            {"people": {"ada": {"alpha": "1"}, "bob": {"alpha": "1"}}},
            "people.bob.alpha",
            "one user id is one person",
        ),
        (
            {"routes": [{"channels": ["alpha"], "approvers": ["owner", "zed"]}]},
            "routes[0].approvers[1]",
            "names no person",
        ),
    ],
)
def test_a_bad_people_or_approvers_config_names_the_key(config, key, words):
    parsed = BridgeConfig.model_validate({"channels": {"alpha": {"type": "memory"}}, **config})
    problems = resolve_channels(parsed, memory_host()).problems
    assert any(p.key == key and words in p.message for p in problems), problems


def test_approvers_on_a_route_matching_an_extension_is_refused():
    with pytest.raises(ValueError, match="approvers need a match"):
        BridgeConfig.model_validate(
            {"routes": [{"match": {"team": "x"}, "channels": ["a"], "approvers": "owner"}]}
        )


# -- per-person away (issue 33, item 1: a switch per person) --------------------------------


def _plain_rig(tmp_path: Any) -> Rig:
    """No owner route: the channels' approvers answer, and a person's `/away` is theirs."""
    return Rig(tmp_path, channels=_channels(), people=PEOPLE)


async def test_away_from_a_mapped_person_switches_the_sessions_they_own(tmp_path):
    async with _plain_rig(tmp_path) as rig:
        rig.agent("ada-1", principal=ADA).start()
        rig.agent("ada-2", principal=ADA).start()
        rig.agent("bob-1", principal=Principal("bob", "agent")).start()
        await rig.settle()
        thread = rig.thread_of("alpha", "ada-1")
        await rig.channel("alpha").reply(thread, "/away", ADA_ALPHA, None)
        await rig.settle()
        assert any(t.startswith("/away: ada is away") for t in rig.thread_texts("alpha", "ada-1"))
        away = rig.bridge.away
        assert [away.query(s)["away"] for s in ("ada-1", "ada-2", "bob-1")] == [True, True, False]
        state = away.describe()
        assert state["people"] == {"ada": {"away": True, "by": "Ada on alpha"}}
        assert {s["session"]: s["why"] for s in state["sessions"]}["ada-2"] == "person"
        # a session's own switch wins over its owner's
        ada_2 = rig.bridge.sessions.find_by_session("ada-2")
        assert ada_2 is not None
        away.set(False, session_id=ada_2.id, by="test")
        assert away.query("ada-2")["away"] is False
        # /back from her Telegram-side identity (beta) switches the same person
        await rig.channel("beta").reply(rig.thread_of("beta", "ada-1"), "/back", ADA_BETA, None)
        await rig.settle()
        assert away.query("ada-1")["away"] is False
        # the everywhere switch clears the people's switches too
        away.set(True, session_id=None, person="bob", by="test")
        assert away.query("bob-1")["away"] is True
        away.set(False, session_id=None, by="aep-bridge away")
        assert away.describe()["people"] == {}
        assert away.query("bob-1")["away"] is False


async def test_away_for_a_person_through_the_endpoint_and_status_lines(tmp_path):
    import httpx

    from aep_bridge.cli.away import away_lines
    from aep_bridge.intake.auth import AuthPolicy
    from aep_bridge.intake.endpoint import Endpoint

    token = "t" * 40
    async with _plain_rig(tmp_path) as rig:
        rig.agent("ada-1", principal=ADA).start()
        await rig.settle()
        app = Endpoint(rig.hub, AuthPolicy(token), away=rig.bridge.away).app
        transport = httpx.ASGITransport(app=app)
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8787") as c:
            unknown = await c.post("/away", json={"on": True, "person": "zed"}, headers=headers)
            assert (unknown.status_code, unknown.json()["error"]) == (404, "unknown-person")
            both = {"on": True, "person": "ada", "session": "ada-1"}
            assert (await c.post("/away", json=both, headers=headers)).status_code == 400
            ok = await c.post("/away", json={"on": True, "person": "ada"}, headers=headers)
            assert ok.status_code == 200
        assert rig.bridge.away.query("ada-1")["away"] is True
        lines = away_lines(rig.bridge.away.describe())
        assert "  ada: away (their switch)" in lines
        assert any(line.endswith("away (ada's switch)") for line in lines), lines


async def test_status_names_each_sessions_owner(tmp_path):
    from aep_bridge.cli.away import away_lines

    async with _plain_rig(tmp_path) as rig:
        agent = rig.agent("ada-1", principal=ADA, os_user="ada", host="ada-laptop")
        agent.start()
        agent.ask()
        await rig.settle()
        report = rig.bridge.status()
        [waiting] = report["pending"]["sessions"]
        assert waiting["owner"] == "ada (ada@ada-laptop)"
        rig.bridge.away.set(True, session_id=None, person="ada", by="test")
        lines = away_lines(rig.bridge.away.describe())
        assert any("owner ada (ada@ada-laptop)" in line for line in lines), lines
