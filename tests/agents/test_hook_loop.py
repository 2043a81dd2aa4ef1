"""The whole agent side, end to end: a hook process, the daemon, the bridge, a person.

Each test runs `aep-bridge hook AGENT` as the agent does, with a recorded payload of that
agent on stdin, against a running `aep-bridge agentd` and a real bridge whose phone is a
memory channel. What the hook prints is what the agent reads.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest
from aep_sdk.gen import AepEvent
from aep_sdk.projection import project_state

from aep_bridge.aep.build import make_respond_command
from aep_bridge.aep.payloads import Answer
from aep_bridge.aep.validation import parse_event
from aep_bridge.contract.types import ResolutionStatus
from aep_bridge.intake.auth import AuthPolicy
from aep_bridge.intake.source import LocalSource
from tests.agents.live import ALICE, MALLORY, Live, get, live, payload
from tests.bridge_process import free_port
from tests.core.rig import Rig
from tests.intake.conftest import TOKEN, Served, serve
from tests.official import assert_valid

pytestmark = pytest.mark.asyncio

CC = "claude-code"


async def _started(running: Live, agent: str = CC) -> None:
    """The session and a run are open, as when the agent is working."""
    for name in ("SessionStart", "UserPromptSubmit"):
        done = await running.hook(agent, payload(agent, name))
        assert done.status == 0
        assert done.output is None


async def test_a_permission_allowed_from_the_phone_lets_claude_code_run_the_tool(tmp_path: Path):
    async with live(tmp_path) as running:
        await _started(running)
        hook = running.hook(CC, payload(CC, "PermissionRequest"))
        card = await running.card()
        request = running.channel.cards[card][1]
        assert running.labels(card) == ["Allow", "Allow Bash(npm test) for this session", "Deny"]
        assert "npm test" in f"{request.title}\n{request.description}"
        await running.press(card, "Allow")
        done = await hook
        assert done.status == 0
        assert done.output == {
            "hookSpecificOutput": {
                "hookEventName": "PermissionRequest",
                "decision": {"behavior": "allow"},
            }
        }
        types = [e["type"] for e in running.events(CC)]
        answered = types.index("attention.answered")
        assert types[answered - 1] == "control.accepted"
        assert types[answered + 1] == "attention.resolved"


async def test_allow_for_this_session_returns_the_one_rule_the_button_names(tmp_path: Path):
    async with live(tmp_path) as running:
        await _started(running)
        hook = running.hook(CC, payload(CC, "PermissionRequest"))
        await running.press(await running.card(), "Allow Bash(npm test) for this session")
        decision = (await hook).output["hookSpecificOutput"]["decision"]
        assert decision == {
            "behavior": "allow",
            "updatedPermissions": [
                {
                    "type": "addRules",
                    "rules": [{"toolName": "Bash", "ruleContent": "npm test"}],
                    "behavior": "allow",
                    "destination": "session",
                }
            ],
        }


async def test_an_edit_of_etc_gets_a_mode_or_a_folder_only_from_a_button_that_says_so(
    tmp_path: Path,
):
    """Issue 30: "Allow for this session" on an Edit whose suggestions were `setMode
    acceptEdits` and `addDirectories ["/etc"]` returned both. Now each has its own button,
    labelled with what it grants, and returns that one suggestion and nothing else."""
    edit = payload(CC, "PermissionRequest-Edit-etc")
    mode = "Allow and switch this session to acceptEdits mode"
    folder = "Allow and add folder /etc for this session"
    async with live(tmp_path) as running:
        await _started(running)
        hook = running.hook(CC, edit)
        card = await running.card()
        assert running.labels(card) == ["Allow", mode, folder, "Deny"]
        await running.press(card, mode)
        decision = (await hook).output["hookSpecificOutput"]["decision"]
        assert decision["updatedPermissions"] == [
            {"type": "setMode", "mode": "acceptEdits", "destination": "session"}
        ]
        hook = running.hook(CC, edit)
        await running.press(await running.card(2), folder)
        decision = (await hook).output["hookSpecificOutput"]["decision"]
        assert decision["updatedPermissions"] == [
            {"type": "addDirectories", "directories": ["/etc"], "destination": "session"}
        ]
        hook = running.hook(CC, edit)
        await running.press(await running.card(3), "Allow")
        assert (await hook).output["hookSpecificOutput"]["decision"] == {"behavior": "allow"}
        answered = [
            e["data"]["answer"] for e in running.events(CC) if e["type"] == "attention.answered"
        ]
        assert answered == [
            {"option": "allow_mode_acceptEdits"},
            {"option": "allow_directories"},
            {"option": "allow"},
        ]


async def test_without_a_suggestion_there_is_no_session_button(tmp_path: Path):
    """Claude Code suggested nothing it would remember: the bridge makes no rule up."""
    async with live(tmp_path) as running:
        await _started(running)
        bare = payload(CC, "PermissionRequest", permission_suggestions=None)
        hook = running.hook(CC, bare)
        card = await running.card()
        assert running.labels(card) == ["Allow", "Deny"]
        await running.press(card, "Allow")
        assert (await hook).output["hookSpecificOutput"]["decision"] == {"behavior": "allow"}


async def test_a_text_answer_is_a_deny_with_the_persons_guidance(tmp_path: Path):
    async with live(tmp_path) as running:
        await _started(running)
        hook = running.hook(CC, payload(CC, "PermissionRequest"))
        card = await running.card()
        await running.channel.core.answer_text(card, "use pytest -x instead", ALICE)
        decision = (await hook).output["hookSpecificOutput"]["decision"]
        assert decision == {"behavior": "deny", "message": "use pytest -x instead"}
        answered = [e for e in running.events(CC) if e["type"] == "attention.answered"]
        assert answered[-1]["data"]["answer"]["option"] == "deny"


async def test_a_stranger_cannot_answer_and_the_hook_keeps_waiting(tmp_path: Path):
    async with live(tmp_path) as running:
        await _started(running)
        hook = running.hook(CC, payload(CC, "PermissionRequest"), "--hold", "3")
        card = await running.card()
        await running.press(card, "Allow", MALLORY)
        done = await hook  # nobody allowed answered: the hold passes
        assert done.output is None
        types = [e["type"] for e in running.events(CC)]
        assert "attention.answered" not in types
        assert types[-1] == "attention.timeout"


async def test_no_answer_within_the_hold_gives_the_agent_its_own_dialog(tmp_path: Path):
    async with live(tmp_path) as running:
        await _started(running)
        done = await running.hook(CC, payload(CC, "PermissionRequest"), "--hold", "1")
        assert done.status == 0
        assert done.stdout == ""
        timeout = [e for e in running.events(CC) if e["type"] == "attention.timeout"]
        assert len(timeout) == 1
        assert timeout[0]["data"]["after_ms"] >= 900


async def test_the_tool_running_anyway_dismisses_the_card(tmp_path: Path):
    """The person answered in the terminal: the agent runs the tool, the card closes."""
    async with live(tmp_path) as running:
        await _started(running)
        hook = running.hook(CC, payload(CC, "PermissionRequest"))
        await running.card()
        await running.hook(CC, payload(CC, "PostToolUse"))
        assert (await hook).output is None
        resolved = [e for e in running.events(CC) if e["type"] == "attention.resolved"]
        assert resolved[-1]["data"] == {"resolution": "dismissed"}


async def test_codex_allowed_from_the_phone(tmp_path: Path):
    async with live(tmp_path) as running:
        await _started(running, "codex")
        hook = running.hook("codex", payload("codex", "PermissionRequest"))
        await running.press(await running.card(), "Allow")
        assert (await hook).output == {
            "hookSpecificOutput": {
                "hookEventName": "PermissionRequest",
                "decision": {"behavior": "allow"},
            }
        }


async def test_codex_allow_for_this_session_is_kept_by_the_daemon(tmp_path: Path):
    async with live(tmp_path) as running:
        await _started(running, "codex")
        hook = running.hook("codex", payload("codex", "PermissionRequest"))
        card = await running.card()
        assert running.labels(card) == ["Allow", "Allow this exact call for this session", "Deny"]
        await running.press(card, "Allow this exact call for this session")
        first = (await hook).output
        assert first["hookSpecificOutput"]["decision"]["behavior"] == "allow"
        again = await running.hook("codex", payload("codex", "PermissionRequest"))
        assert again.output == first  # the same request again: allowed without asking
        assert len(running.channel.cards) == 1
        other = payload("codex", "PermissionRequest", tool_input={"command": "rm -rf /"})
        third = running.hook("codex", other, "--hold", "1")
        await running.card(2)  # a different command is asked again
        assert (await third).output is None
        elsewhere = payload("codex", "PermissionRequest", cwd="/srv/prod")
        fourth = running.hook("codex", elsewhere, "--hold", "1")
        await running.card(3)  # the same command in another folder is another call
        assert (await fourth).output is None


async def test_a_dead_bridge_never_holds_the_agent(tmp_path: Path):
    """Nobody can answer while the bridge is away: a permission prompt is not held (the
    agent shows its own dialog at once), and the hooks return with nothing to say."""
    async with live(tmp_path, daemon=False) as running:
        dead = {"AEP_BRIDGE_URL": "http://127.0.0.1:9", "AEP_BRIDGE_TOKEN": "x"}
        # the bridge is up, but the daemon the hook starts points where nothing listens
        for name in ("SessionStart", "PreToolUse", "PermissionRequest"):
            done = await running.hook(CC, payload(CC, name), **dead)
            assert done.status == 0
            assert done.stdout == ""
        status, body = await get(running.directory, "/healthz")
        assert (status, body) == (200, {"ok": True, "relay": False})
        # the events wait in the session log all the same; the prompt was closed at once
        types = [e["type"] for e in running.events(CC)]
        assert types == [
            "session.started",
            "tool.requested",
            "attention.requested",
            "attention.resolved",
        ]
        assert running.events(CC)[-1]["data"] == {"resolution": "dismissed"}


async def test_garbage_on_stdin_is_skipped_quietly(tmp_path: Path):
    async with live(tmp_path) as running:
        for body in (b"not json", b"[1, 2]", b"{}", b""):
            done = await running.hook(CC, body)
            assert done.status == 0
            assert done.stdout == ""
        assert running.events(CC) == []


async def test_every_event_the_daemon_emits_is_valid_and_its_log_validates(tmp_path: Path):
    async with live(tmp_path) as running:
        for agent, names in (
            (
                CC,
                [
                    "SessionStart",
                    "UserPromptSubmit",
                    "PreToolUse",
                    "PostToolUse",
                    "Notification",
                    "Stop",
                    "SessionEnd",
                ],
            ),
            ("codex", ["SessionStart", "PreToolUse", "PostToolUse", "Stop"]),
        ):
            for name in names:
                assert (await running.hook(agent, payload(agent, name))).status == 0
            for event in running.events(agent):
                assert_valid(event)
                AepEvent.model_validate(event)  # the official SDK's model, an independent peer
            # the official SDK's projection folds the session with no position fault
            state = project_state(running.events(agent))
            assert not state.get("violations"), state["violations"]
        from aep_bridge.cli import main

        logs = sorted((running.directory / "logs").rglob("*.jsonl"))
        assert len(logs) == 2
        for log in logs:
            assert main(["validate", str(log)]) == 0, log


async def test_claude_codes_question_is_a_form_answered_from_the_phone(tmp_path: Path):
    async with live(tmp_path) as running:
        await _started(running)
        hook = running.hook(CC, payload(CC, "PermissionRequest-AskUserQuestion"), "--hold", "10")
        card = await running.card()
        request = running.channel.cards[card][1]
        fields = {f.label: f for f in request.fields}
        database = fields["Database: Which database should the new service use?"]
        regions = fields["Regions: Which regions should we roll out to?"]
        sqlite = next(c.id for c in database.choices if c.label == "SQLite")
        await running.channel.core.answer_form(
            card, {database.id: sqlite, regions.id: ["c1", "ap-south"]}, ALICE
        )
        decision = (await hook).output["hookSpecificOutput"]["decision"]
        assert decision["behavior"] == "allow"
        assert decision["updatedInput"]["answers"] == {
            "Which database should the new service use?": "SQLite",
            "Which regions should we roll out to?": "us-east, ap-south",
        }


async def test_an_mcp_servers_form_is_answered_from_the_phone(tmp_path: Path):
    async with live(tmp_path) as running:
        await _started(running)
        hook = running.hook(CC, payload(CC, "Elicitation"), "--hold", "10")
        card = await running.card()
        fields = {f.label: f for f in running.channel.cards[card][1].fields}
        environment = fields["Environment"]
        production = next(c.id for c in environment.choices if c.label == "Production")
        values = {
            environment.id: production,
            fields["Replica count"].id: 3,
            fields["Proceed immediately"].id: True,
        }
        await running.channel.core.answer_form(card, values, ALICE)
        output = (await hook).output["hookSpecificOutput"]
        assert output["hookEventName"] == "Elicitation"
        assert output["action"] == "accept"
        assert output["content"] == {"environment": "production", "replicas": 3, "confirm": True}


async def test_a_waiting_agent_is_a_heads_up_closed_when_the_person_is_back(tmp_path: Path):
    async with live(tmp_path) as running:
        await _started(running)
        await running.hook(CC, payload(CC, "Stop"))
        await running.hook(CC, payload(CC, "Notification"))  # idle_prompt
        card = await running.card()
        request = running.channel.cards[card][1]
        assert request.informational  # nothing to press: the person answers in the terminal
        await running.hook(CC, payload(CC, "UserPromptSubmit"))
        types = [e["type"] for e in running.events(CC)]
        assert types[-2:] == ["attention.resolved", "run.started"]


async def test_the_first_hook_starts_the_daemon(tmp_path: Path):
    async with live(tmp_path, daemon=False) as running:
        done = await running.hook(CC, payload(CC, "SessionStart"))
        assert done.status == 0
        await running.wait_relay(True)
        async with asyncio.timeout(10):
            while not running.channel.threads:  # the session reached the phone
                await asyncio.sleep(0.02)


async def test_a_restarted_daemon_takes_a_new_epoch_and_the_session_goes_on(tmp_path: Path):
    async with live(tmp_path) as running:
        await _started(running)
        await running.stop_daemon()
        await running.start_daemon()
        hook = running.hook(CC, payload(CC, "PermissionRequest"))
        await running.press(await running.card(), "Deny")
        assert (await hook).output["hookSpecificOutput"]["decision"]["behavior"] == "deny"
        epochs = [(e["epoch"], e["seq"]) for e in running.events(CC)]
        assert epochs[0][0] + 1 == epochs[-1][0]
        assert epochs == sorted(epochs)
        assert len(running.channel.threads) == 1  # still the one thread


async def test_events_wait_for_a_bridge_that_is_away(tmp_path: Path):
    channels = {"phone": {"type": "memory", "approvers": ["alice"]}}
    async with Rig(tmp_path / "bridge", channels=channels) as rig:
        port = free_port()
        directory = tmp_path / "agentd"
        directory.mkdir(mode=0o700)
        running = Live(rig, Served(rig.hub, port), directory)
        try:
            await running.start_daemon(wait=False)
            await running.wait_relay(False)
            for name in ("SessionStart", "UserPromptSubmit", "PreToolUse"):
                assert (await running.hook(CC, payload(CC, name))).status == 0
            async with serve(rig.hub, AuthPolicy(TOKEN), port=port):
                await running.wait_relay(True)
                async with asyncio.timeout(10):
                    while not running.channel.messages:  # what waited reached the phone
                        await asyncio.sleep(0.02)
                assert len(running.channel.threads) == 1
        finally:
            await running.stop_daemon()


async def test_a_command_sent_twice_is_decided_once_with_the_same_ack(tmp_path: Path):
    """The bridge sends an answer again when its ack is late: the agent applies it once,
    and the retry gets the very same ack."""
    async with live(tmp_path) as running:
        await _started(running)
        hook = running.hook(CC, payload(CC, "PermissionRequest"), "--hold", "10")
        await running.card()
        [request] = [
            parse_event(json.dumps(e).encode())
            for e in running.events(CC)
            if e["type"] == "attention.requested"
        ]
        bridge = LocalSource(running.rig.hub)
        command = make_respond_command(
            request, Answer(option="deny"), source="aep://localhost/agent/tester", agent="tester"
        )
        first = await bridge.send_command(command, timeout=5)
        again = await bridge.send_command(command, timeout=5)
        assert first.status == "accepted"
        assert again.ack.raw == first.ack.raw
        assert (await hook).output["hookSpecificOutput"]["decision"]["behavior"] == "deny"
        types = [e["type"] for e in running.events(CC)]
        assert types.count("control.accepted") == 1
        assert types.count("attention.answered") == 1


@pytest.mark.parametrize(("action", "last"), [("accept", "answered"), ("decline", "dismissed")])
async def test_an_mcp_form_answered_in_the_terminal_closes_the_card(
    tmp_path: Path, action: str, last: str
):
    async with live(tmp_path) as running:
        await _started(running)
        hook = running.hook(CC, payload(CC, "Elicitation"), "--hold", "20")
        await running.card()
        await running.hook(CC, payload(CC, "ElicitationResult", action=action))
        assert (await hook).output is None  # the agent has its answer already
        events = running.events(CC)
        assert events[-1]["type"] == "attention.resolved"
        assert events[-1]["data"]["resolution"] == last
        if action == "accept":
            assert events[-2]["type"] == "attention.answered"
            assert events[-2]["data"]["via"] == "oob"


async def test_the_configs_attention_ceiling_keeps_the_command_off_the_phone(tmp_path: Path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"agents": {"attention_capture": "metadata"}}))
    async with live(tmp_path, daemon=False) as running:
        await running.start_daemon("--config", str(config))
        await _started(running)
        hook = running.hook(CC, payload(CC, "PermissionRequest"), "--hold", "10")
        card = await running.card()
        request = running.channel.cards[card][1]
        shown = f"{request.title}\n{request.description}"
        assert "npm test" not in shown
        assert "Bash" in shown  # which tool asks is structure, and stays
        # at metadata the buttons say the options' ids (AEP-0003 §9.2: structure only)
        assert running.labels(card) == ["allow", "allow_session", "deny"]
        await running.press(card, "allow")
        assert (await hook).output["hookSpecificOutput"]["decision"]["behavior"] == "allow"


async def test_a_config_the_daemon_cannot_use_names_the_key(tmp_path: Path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"agents": {"capture": "everything"}}))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "aep_bridge",
            "agentd",
            "--dir",
            str(tmp_path / "d"),
            "--config",
            str(config),
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 2
    assert "agents.capture" in done.stderr


# -- a daemon that dies with a prompt held (issue 30) ------------------------------------------


async def test_a_prompt_held_by_a_killed_daemon_closes_when_the_next_one_starts(tmp_path: Path):
    """The daemon is SIGKILLed while a prompt is held: the hook fails open at once (the
    agent asks for itself), and the next daemon to start closes the card the dead one left
    open; a later press on it is refused, never "Sent to the agent"."""
    async with live(tmp_path) as running:
        await _started(running)
        hook = running.hook(CC, payload(CC, "PermissionRequest"))
        card = await running.card()
        await running.kill_daemon()
        done = await hook
        assert (done.status, done.stdout) == (0, "")  # no opinion: the agent's own dialog
        assert running.buttons(card)  # nobody has closed it yet
        await running.start_daemon()
        assert "Dismissed" in await running.closed(card)
        pressed = await running.press(card, "Allow")
        assert pressed.status is ResolutionStatus.ALREADY_ANSWERED
        assert pressed.message == "This question is closed: Dismissed by the agent"
        closing = running.events(CC)[-1]
        assert closing["type"] == "attention.resolved"
        assert closing["data"] == {"resolution": "dismissed"}
        assert closing["epoch"] == running.events(CC)[0]["epoch"] + 1  # the new daemon's
        # closed once: a third daemon finds nothing left open
        await running.stop_daemon()
        await running.start_daemon()
        assert [e["type"] for e in running.events(CC)].count("attention.resolved") == 1


async def test_a_prompt_closes_at_its_expiry_when_no_daemon_comes_back(tmp_path: Path):
    """The request says when its hold ends (`expires_at`): the bridge closes the card then
    by itself, even when the daemon that held it is gone for good."""
    async with live(tmp_path) as running:
        await _started(running)
        hook = running.hook(CC, payload(CC, "PermissionRequest"), "--hold", "2")
        card = await running.card()
        [request] = [e for e in running.events(CC) if e["type"] == "attention.requested"]
        expires = datetime.fromisoformat(request["data"]["expires_at"].replace("Z", "+00:00"))
        sent = datetime.fromisoformat(request["time"].replace("Z", "+00:00"))
        assert 1.5 <= (expires - sent).total_seconds() <= 2.5  # the hold's end
        await running.kill_daemon()
        assert (await hook).stdout == ""
        assert "Expired" in await running.closed(card)
        pressed = await running.press(card, "Allow")
        assert pressed.status is ResolutionStatus.EXPIRED
        assert pressed.message == "This question is closed: Expired without an answer"
        assert running.rig.bridge.attention.get(card).status == "expired"


async def test_a_clean_stop_lets_the_hook_go_and_closes_its_card(tmp_path: Path):
    """SIGTERM while a prompt is held: the hook returns at once with no opinion, the card
    closes as dismissed before the daemon is gone, and the daemon does not wait out the hold."""
    async with live(tmp_path) as running:
        await _started(running)
        hook = running.hook(CC, payload(CC, "PermissionRequest"), "--hold", "600")
        card = await running.card()
        async with asyncio.timeout(30):  # far under the hold: the stop does not wait it out
            await running.stop_daemon()
            done = await hook
        assert (done.status, done.stdout) == (0, "")
        assert "Dismissed" in await running.closed(card)


class _Gate:
    """A TCP proxy in front of the bridge that holds every connection until it is opened
    (the daemon's link to the bridge is under way, and not up yet), or, `refusing`, closes
    each at once (the bridge is away), counting them."""

    def __init__(self, target: int, *, refusing: bool = False) -> None:
        self.target = target
        self.refusing = refusing
        self.attempts = 0
        self.open = asyncio.Event()
        self.server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def __aenter__(self) -> _Gate:
        self.server = await asyncio.start_server(self._pipe, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self.server is not None
        self.server.close()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.attempts += 1
        if self.refusing and not self.open.is_set():
            writer.close()
            return
        await self.open.wait()
        upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", self.target)

        async def copy(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            try:
                while chunk := await source.read(65536):
                    sink.write(chunk)
                    await sink.drain()
            except OSError:
                pass
            finally:
                sink.close()

        await asyncio.gather(copy(reader, upstream_writer), copy(upstream_reader, writer))


async def _raised(running: Live) -> None:
    """Until the daemon has raised the prompt (it is in the session log)."""
    async with asyncio.timeout(15):
        while not any(e["type"] == "attention.requested" for e in running.events(CC)):
            await asyncio.sleep(0.01)


async def test_the_first_prompt_after_a_start_waits_for_the_bridge_link(tmp_path: Path):
    """The first hook starts the daemon, and the prompt comes before its link to the bridge
    is up: it waits for the link (a moment) instead of being dismissed at once."""
    async with live(tmp_path, daemon=False) as running, _Gate(running.served.port) as gate:
        for name in ("SessionStart", "UserPromptSubmit"):  # these start the daemon
            assert (await running.hook(CC, payload(CC, name), AEP_BRIDGE_URL=gate.url)).status == 0
        hook = running.hook(CC, payload(CC, "PermissionRequest"), AEP_BRIDGE_URL=gate.url)
        await _raised(running)  # the link is still held at the gate
        gate.open.set()
        card = await running.card()
        assert running.buttons(card)  # open, to be answered
        await running.press(card, "Allow")
        decision = (await hook).output["hookSpecificOutput"]["decision"]
        assert decision == {"behavior": "allow"}


async def test_a_bridge_link_that_does_not_come_up_frees_the_prompt_at_once(tmp_path: Path):
    """The wait for the link is bounded: a link that stays down dismisses the prompt well
    before its hold, and the agent shows its own dialog."""
    async with live(tmp_path, daemon=False) as running, _Gate(running.served.port) as gate:
        await running.start_daemon(wait=False, AEP_BRIDGE_URL=gate.url)
        await running.wait_relay(False)
        async with asyncio.timeout(30):  # far under the hold
            done = await running.hook(CC, payload(CC, "PermissionRequest"), "--hold", "600")
        assert (done.status, done.stdout) == (0, "")
        types = [e["type"] for e in running.events(CC)]
        assert types[-2:] == ["attention.requested", "attention.resolved"]
        assert running.events(CC)[-1]["data"] == {"resolution": "dismissed"}
        gate.open.set()  # the bridge is reached later: the card comes, closed
        assert "Dismissed" in await running.closed(await running.card())


async def test_a_prompt_brings_the_link_back_at_once_when_the_bridge_is_back(tmp_path: Path):
    """The bridge was away long enough that the daemon retries only every few seconds; it is
    back, and a prompt comes before the next retry: the daemon tries at once, and the prompt
    reaches the chat instead of going back to the agent."""
    async with (
        live(tmp_path, daemon=False) as running,
        _Gate(running.served.port, refusing=True) as gate,
    ):
        await running.start_daemon(wait=False, AEP_BRIDGE_URL=gate.url)
        await running.wait_relay(False)
        await _started(running)
        async with asyncio.timeout(30):
            while gate.attempts < 5:  # 0.2 + 0.5 + 1 + 2 s of retries: the next is in 5 s
                await asyncio.sleep(0.05)
        gate.open.set()  # the bridge is back
        hook = running.hook(CC, payload(CC, "PermissionRequest"))
        card = await running.card()
        assert running.buttons(card)
        await running.press(card, "Deny")
        assert (await hook).output["hookSpecificOutput"]["decision"]["behavior"] == "deny"


# -- a hook's own errors (issue 30) --------------------------------------------------------------


@pytest.mark.parametrize("agent", [CC, "codex"])
@pytest.mark.parametrize(
    "body",
    [
        b"[" * 200_000,  # nested deeper than json can read
        b'{"hook_event_name": "PermissionRequest", "session_id": "\xff\xfe"}',  # not UTF-8
        b"",
        b" " * 100 + b"\n",
        b'{"hook_event_name": "PreToolUse", "x": "' + b"a" * (9 * 1024 * 1024) + b'"}',
    ],
    ids=["deep", "not-utf-8", "empty", "blank", "huge"],
)
async def test_a_hook_never_fails_the_agent_on_what_it_reads(
    tmp_path: Path, agent: str, body: bytes
):
    """Whatever comes on stdin, the hook exits 0 and prints nothing: the agent decides alone."""
    async with live(tmp_path) as running:
        done = await running.hook(agent, body)
        assert done.status == 0, done.stderr
        assert done.stdout == ""
        assert running.events(agent) == []
        status, _ = await get(running.directory, "/healthz")
        assert status == 200
