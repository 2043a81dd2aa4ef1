"""Each agent daemon says `hello` as itself, and refuses in words what it cannot take.

The bridge gives a connection back the sessions its identity (`agent`, `instance` of its
`hello`) claimed before a restart, so that answers waiting for them go at once. Every daemon
used to say `instance: "<hostname>/agentd"`: after a restart of the bridge, the daemon that
said `hello` first was given the other's sessions too, a press on the other's card went to
it, and it dropped the answer in silence (issue 30).
"""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path
from typing import Any

from aep_bridge.aep.build import make_event
from aep_bridge.agents.daemon import AgentDaemon
from tests.agents.live import payload
from tests.agents.real import real
from tests.agents.test_daemon_model import ClockLoop

CC = "claude-code"
ALLOW = {
    "hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "allow"}}
}


def _instance(directory: Path) -> str:
    """The `instance` a daemon of `directory` says in its `hello`."""
    hello = AgentDaemon(directory, "ws://127.0.0.1:9/socket", None).link._hello()
    return str(hello["identity"]["instance"])


def test_each_daemon_directory_has_its_own_instance_kept_across_restarts(tmp_path: Path) -> None:
    loop = ClockLoop()
    try:
        a, b = tmp_path / "a", tmp_path / "b"
        a.mkdir()
        b.mkdir()
        first = _instance(a)
        again = _instance(a)
        other = _instance(b)
        assert first == again  # a restarted daemon gets its own sessions back
        assert first != other  # and never another daemon's
        assert first.endswith("/agentd/" + (a / "instance").read_text().strip())
        # a file that is not one this daemon wrote is replaced, not trusted
        (b / "instance").write_text("../../etc/passwd\n")
        replaced = _instance(b)
        assert replaced not in (other, first)
        assert "passwd" not in replaced
    finally:
        loop.close()


async def test_after_a_bridge_restart_a_press_reaches_the_daemon_that_asked(
    tmp_path: Path,
) -> None:
    """Two daemons side by side; A holds a prompt. The bridge restarts while A is paused,
    so B says `hello` first. The press on A's card must wait for A, and reach it: never
    go to B (which would drop it, and A's agent would wait for nothing)."""
    async with real(tmp_path) as running:
        a = await running.daemon("agentd-a")
        b = await running.daemon("agentd-b")
        start = payload(CC, "SessionStart", session_id="session-of-b")
        assert await b.hook(start) is None  # B has a session of its own too
        asked = payload(CC, "PermissionRequest", session_id="session-of-a")
        asked["tool_input"] = {"command": "make deploy"}
        held = a.hook(asked, "120")
        await running.card("make deploy")

        a.signal(signal.SIGSTOP)
        await running.restart_bridge()
        await b.relay(True)  # B is back, and said hello first
        card = await running.card("make deploy")
        said = await running.press(card, "Allow")
        a.signal(signal.SIGCONT)
        assert await asyncio.wait_for(held, 60) == ALLOW, said
        # B never had A's session, nor its answer
        assert not (b.directory / "logs" / CC / "session-of-a.jsonl").exists()


def _respond(session: str, subject: str) -> Any:
    return make_event(
        "control.attention.respond",
        source="aep://bridge/aep-bridge",
        agent="aep-bridge",
        session=session,
        subject=subject,
        cause=subject,
        data={"answer": {"option": "allow"}},
    )


def test_an_answer_the_daemon_cannot_take_is_refused_in_words(tmp_path: Path) -> None:
    """A command for a request this daemon does not hold, in a session it has only in its
    logs (it restarted) or never had: `control.rejected` `invalid` in that session, so the
    card says the answer was refused, rather than silence until the ack window passes."""
    loop = ClockLoop()
    try:
        old = AgentDaemon(tmp_path, "ws://127.0.0.1:9/socket", None)
        loop.run_until_complete(old.handle(CC, payload(CC, "SessionStart", session_id="had"), 1))
        daemon = AgentDaemon(tmp_path, "ws://127.0.0.1:9/socket", None)  # it restarted
        daemon.link.connected = True
        for session in ("had", "never-had"):
            command = _respond(session, "01JREQUESTNOBODYHOLDS00000")
            loop.run_until_complete(daemon.loop.on_command(command))
            [raw] = [raw for raw in daemon.link.queued() if command.id.encode() in raw]
            ack = json.loads(raw)
            assert ack["type"] == "control.rejected"
            assert ack["session"] == session
            assert ack["cause"] == command.id
            assert ack["data"]["reason"] == "invalid"
            assert ack["capture"] == "metadata"  # (its words stay home at the default ceiling)
            # a retry gets the same refusal, byte for byte
            before = daemon.link.queued()
            loop.run_until_complete(daemon.loop.on_command(command))
            assert daemon.link.queued()[len(before) :] == [raw]
        # the session it had is answered in that session's own stream
        had = [json.loads(r) for r in daemon.link.queued() if b'"session":"had"' in r]
        assert {event["agent"] for event in had} == {CC}
    finally:
        loop.close()
