"""The daemon's envelope: positions never reused, logs one per session, names made safe."""

from __future__ import annotations

import json
from pathlib import Path

from aep_bridge.agents.emitter import Emitter


def test_every_start_takes_a_new_epoch(tmp_path: Path):
    epochs = [Emitter(tmp_path).epoch for _ in range(3)]
    assert epochs == [0, 1, 2]
    assert (tmp_path / "epoch").read_text() == "2\n"


def test_a_forgotten_session_that_comes_back_goes_on_after_its_last_position(tmp_path: Path):
    emitter = Emitter(tmp_path)
    emitter.SESSIONS = 2  # type: ignore[misc]
    first = emitter.session("codex", "s1")
    for _ in range(3):
        emitter.build(first, "run.finished", {})
    emitter.session("codex", "s2")
    emitter.session("codex", "s3")  # s1 is forgotten now
    assert ("codex", "s1") not in emitter.sessions
    again = emitter.session("codex", "s1")
    event = emitter.build(again, "run.finished", {})
    assert (event.epoch, event.seq) == (0, 3)
    lines = (tmp_path / "logs" / "codex" / "s1.jsonl").read_text().splitlines()
    assert [json.loads(line)["seq"] for line in lines] == [0, 1, 2, 3]


def test_a_session_id_that_is_not_a_plain_name_gets_a_hashed_log(tmp_path: Path):
    emitter = Emitter(tmp_path)
    state = emitter.session("claude-code", "../../etc/passwd")
    emitter.build(state, "session.started", {"client": {"name": "claude-code"}})
    [log] = (tmp_path / "logs" / "claude-code").iterdir()
    assert log.parent == tmp_path / "logs" / "claude-code"
    assert log.name.endswith(".jsonl")
    assert "passwd" not in log.name


def test_after_a_reconnect_only_recent_sessions_are_sent_again(tmp_path: Path):
    emitter = Emitter(tmp_path)
    emitter.REPLAYED = 1  # type: ignore[misc]
    old, new = emitter.session("codex", "old"), emitter.session("codex", "new")
    emitter.build(old, "run.finished", {})
    emitter.build(new, "run.finished", {})
    emitter.session("codex", "new")
    assert [e.session for e in emitter.recent()] == ["new"]


def test_a_sessions_first_event_names_the_os_user_and_the_bridge_shows_the_owner(tmp_path: Path):
    """Issue 34: the daemon reports who runs the agent (the `osuser` extension on a session's
    first event, the host in its source), which the bridge keeps as the session's owner."""
    from aep_bridge.loop.approvers import owner_of
    from aep_bridge.loop.sessions import Owner

    emitter = Emitter(tmp_path, host="ada-laptop", user="ada")
    state = emitter.session("claude-code", "s1")
    first = emitter.build(state, "session.started", {"client": {"name": "claude-code"}})
    second = emitter.build(state, "run.finished", {})
    assert first.extensions == {"osuser": "ada"}
    assert second.extensions == {}  # once a session, not on every event
    assert owner_of("ada", first) == Owner("ada", "ada", "ada-laptop")
    assert owner_of(None, first) is None  # no named token: no owner
