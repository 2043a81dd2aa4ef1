"""`aep-bridge demo`: the scripted session against a real bridge, answered in a channel.

The bridge is the real core behind the real AEP endpoint on a loopback port (tests/core/rig.py
and tests/intake/conftest.py `serve`), with a memory channel standing for any channel: the
demo must not care which one answers. Nothing of ours is replaced.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import re
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from aep_bridge.cli import validate
from aep_bridge.commands.demo_agent import FORM, LABEL, PERMISSION, DemoAgent, take
from aep_bridge.commands.tinyagent import Cancelled
from aep_bridge.contract.types import ChannelUser, ResolutionStatus
from aep_bridge.intake.auth import AuthPolicy
from aep_bridge.markup import Code
from aep_bridge.testing import MemoryChannel
from tests.core.rig import Rig, memory_host
from tests.intake.conftest import TOKEN, Served, serve
from tests.official import is_valid

ALICE = ChannelUser(id="alice", name="Alice")
RELEASE = {"f1": "c2", "f2": "Fixes the flaky checkout"}  # Beta, with notes


@dataclass
class Demo:
    rig: Rig
    served: Served
    lines: list[str] = field(default_factory=list)

    @property
    def phone(self) -> MemoryChannel:
        return self.rig.channel("phone")

    def agent(self, **options: Any) -> DemoAgent:
        return DemoAgent(self.served.ws, TOKEN, pace=0, say=self.lines.append, **options)

    async def card(self, count: int, timeout: float = 15.0) -> str:
        """The id of the `count`-th card in the channel, once it is there."""
        async with asyncio.timeout(timeout):
            while len(self.phone.cards) < count:
                await asyncio.sleep(0.02)
        return list(self.phone.cards)[count - 1]

    def labels(self, card: str) -> list[str]:
        return [o.label for o in self.phone.cards[card][1].options]

    async def press(self, card: str, label: str) -> None:
        resolution = await self.phone.press(f"{card}:{self.labels(card).index(label)}", ALICE)
        assert resolution.status is ResolutionStatus.ACCEPTED, resolution

    async def fill(self, card: str, values: dict[str, Any]) -> None:
        resolution = await self.phone.core.answer_form(card, values, ALICE)
        assert resolution.status is ResolutionStatus.ACCEPTED, resolution

    def texts(self) -> str:
        return "\n".join(m.text for m in self.phone.messages)


@contextlib.asynccontextmanager
async def bridge(tmp_path: Path) -> AsyncIterator[Demo]:
    channels = {"phone": {"type": "memory", "approvers": ["alice"]}}
    async with (
        Rig(tmp_path / "bridge", channels=channels) as rig,
        serve(rig.hub, AuthPolicy(TOKEN)) as served,
    ):
        yield Demo(rig, served)


def _types(agent: DemoAgent) -> list[str]:
    return [e.type for e in agent.sent]


async def test_the_demo_is_a_whole_session_answered_in_a_channel(tmp_path):
    async with bridge(tmp_path) as demo:
        agent = demo.agent()
        playing = asyncio.create_task(agent.run())
        push = await demo.card(1)
        assert demo.labels(push) == ["Allow", "Deny"]
        assert "git push origin fix/checkout" in demo.phone.cards[push][1].description
        # the card names the call it asks about: the command in code, not the prompt's words
        codes = [b for b in demo.phone.cards[push][1].details if isinstance(b, Code)]
        assert [(c.code, c.language) for c in codes] == [("git push origin fix/checkout", "bash")]
        await demo.press(push, "Allow")
        release = await demo.card(2)
        assert [f.label for f in demo.phone.cards[release][1].fields] == [
            "Release channel",
            "Release notes",
        ]
        await demo.fill(release, RELEASE)
        given = await asyncio.wait_for(playing, 15)
        await demo.rig.settle()

        assert [str(g) for g in given] == [
            "push: allow (via aep-bridge)",
            "release: channel: beta, notes: Fixes the flaky checkout (via aep-bridge)",
        ]
        assert demo.lines == [
            f"demo session {agent.session} started: watch it in your channels",
            "waiting for your answer (push): answer it in any channel",
            str(given[0]),
            "waiting for your answer (release): answer it in any channel",
            str(given[1]),
        ]

        # what a person sees in the channel: the thread, the tools, the answers, the reply
        [thread] = demo.phone.threads.values()
        assert thread.name == LABEL
        assert thread.closed
        shown = demo.texts()
        for seen in ("pytest -x tests/test_checkout.py", "Reproduce the flaky failure", "Beta"):
            assert seen in shown
        assert "Answered by Alice: Allow" in shown

        types = _types(agent)
        assert types[:3] == ["session.started", "message.user.submitted", "run.started"]
        assert types[-2:] == ["run.finished", "session.ended"]
        for needed in (
            "progress.task.planned",
            "progress.task.completed",
            "tool.failed",
            "tool.completed",
            "message.agent.replied",
        ):
            assert needed in types
        # a real agent's answer: accepted, answered, resolved, for each question
        assert types.count("control.accepted") == 2
        assert types.count("attention.answered") == 2
        assert types.count("attention.resolved") == 2
        answered = [e.data for e in agent.sent if e.type == "attention.answered"]
        assert answered[0]["answer"] == {"option": "allow"}
        assert answered[1]["answer"] == {
            "values": {"channel": "beta", "notes": "Fixes the flaky checkout"}
        }
        edit = next(e for e in agent.sent if e.type == "tool.requested" and e.subject == "Edit")
        assert edit.capture == "redacted"
        assert "args_redacted" in (edit.data or {})
        reply = next(e for e in agent.sent if e.type == "message.agent.replied")
        assert "pushed `fix/checkout`" in reply.data["text"]
        assert "**Beta**" in reply.data["text"]


async def test_every_event_the_demo_sends_is_valid_as_recorded(tmp_path):
    async with bridge(tmp_path) as demo:
        agent = demo.agent()
        playing = asyncio.create_task(agent.run())
        await demo.press(await demo.card(1), "Deny")
        await demo.fill(await demo.card(2), {"f1": "c1"})
        await asyncio.wait_for(playing, 15)

    wire = [json.loads(e.raw) for e in agent.sent]
    assert all(is_valid(event) for event in wire)
    log = tmp_path / "demo.jsonl"
    # the session's own events, as its log would hold them (commands' acks are sequenced too)
    log.write_text("".join(json.dumps(event) + "\n" for event in wire))
    out, err = io.StringIO(), io.StringIO()
    assert validate([str(log)], out=out, err=err) == 0, out.getvalue()
    assert err.getvalue().startswith(f"ok: {len(wire)} line(s), {len(wire)} valid event(s)")


async def test_a_denied_push_is_not_pushed_and_the_agent_says_so(tmp_path):
    async with bridge(tmp_path) as demo:
        agent = demo.agent()
        playing = asyncio.create_task(agent.run())
        await demo.press(await demo.card(1), "Deny")
        await demo.fill(await demo.card(2), {"f1": "c3"})
        given = await asyncio.wait_for(playing, 15)

    assert [str(g) for g in given] == [
        "push: deny (via aep-bridge)",
        "release: channel: nightly (via aep-bridge)",
    ]
    failed = [e for e in agent.sent if e.type == "tool.failed"]
    assert failed[-1].subject == "Bash"
    assert "denied" in failed[-1].data["error"]["message"]
    reply = next(e for e in agent.sent if e.type == "message.agent.replied")
    assert "**not pushed**" in reply.data["text"]


async def test_a_question_nobody_answers_times_out_and_the_session_ends(tmp_path):
    async with bridge(tmp_path) as demo:
        agent = demo.agent(timeout=0.3)
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(agent.run(), 15)
        await demo.rig.settle()
        assert "Expired without an answer" in demo.texts()
    assert _types(agent)[-3:] == ["attention.timeout", "run.failed", "session.ended"]
    assert agent.sent[-1].data == {"reason": "timeout"}


async def test_cancel_from_the_channel_ends_the_demo(tmp_path):
    async with bridge(tmp_path) as demo:
        agent = demo.agent()
        playing = asyncio.create_task(agent.run())
        await demo.card(1)
        thread = next(iter(demo.phone.threads))
        await demo.phone.reply(thread, "/cancel", ALICE, None)
        with pytest.raises(Cancelled):
            await asyncio.wait_for(playing, 15)
    types = _types(agent)
    assert types[-3:] == ["control.accepted", "run.cancelled", "session.ended"]
    assert agent.sent[-1].data == {"reason": "killed"}


async def test_the_demo_is_answered_by_typing_in_the_console(tmp_path):
    """A channel without forms answers in words: the console's typed lines."""
    import aep_bridge_console

    screen = io.StringIO()
    channels = {"console": {"type": "console", "approvers": ["local"], "read_input": False}}
    async with (
        Rig(tmp_path / "bridge", channels=channels, host=memory_host(aep_bridge_console)) as rig,
        serve(rig.hub, AuthPolicy(TOKEN)) as served,
    ):
        console = rig.bridge.channels["console"].adapter
        console.output = screen  # the terminal the bridge runs in
        lines: list[str] = []
        agent = DemoAgent(served.ws, TOKEN, pace=0, say=lines.append)
        playing = asyncio.create_task(agent.run())

        async def short_id(count: int) -> str:
            async with asyncio.timeout(15):
                while len(found := re.findall(r"or type: (\w{4,6}) ", screen.getvalue())) < count:
                    await asyncio.sleep(0.02)
            return found[count - 1]

        push = await short_id(1)
        assert f"answer with: {push} 1 = Allow   {push} 2 = Deny" in screen.getvalue()
        await console.handle_line(f"{push} 1")
        release = await short_id(2)
        await console.handle_line(f"{release} soon please")  # names no channel: refused
        async with asyncio.timeout(15):
            while "The agent refused the answer" not in screen.getvalue():
                await asyncio.sleep(0.02)
        await console.handle_line(f"{release} Beta ship it today")
        given = await asyncio.wait_for(playing, 15)
        await rig.settle()

    assert [str(g) for g in given] == [
        "push: allow (via aep-bridge)",
        "release: channel: beta, notes: ship it today (via aep-bridge)",
    ]
    rejected = [e for e in agent.sent if e.type == "control.rejected"]
    assert [e.data["reason"] for e in rejected] == ["invalid"]
    assert "name the release channel first" in rejected[0].data["detail"]
    shown = screen.getvalue()
    assert "release channel: **Beta**" not in shown  # markdown is rendered, not shown raw
    assert "release channel: Beta" in shown


@pytest.mark.parametrize(
    ("answer", "taken"),
    [
        ({"option": "allow"}, {"option": "allow"}),
        ({"text": "ALLOW"}, {"option": "allow"}),
        ({"text": "Deny"}, {"option": "deny"}),
        ({"text": "go ahead"}, {"option": "deny", "text": "go ahead"}),  # words never grant
        ({"option": "always"}, "no such option"),
        ({}, "the answer names no option of this request"),
    ],
)
def test_words_to_the_permission_name_an_option_or_deny(answer, taken):
    assert take(PERMISSION, answer) == taken


@pytest.mark.parametrize(
    ("answer", "taken"),
    [
        ({"values": {"channel": "beta"}}, {"values": {"channel": "beta"}}),
        ({"values": {"notes": "x"}}, "Release channel is required"),
        ({"text": "nightly"}, {"text": "nightly", "values": {"channel": "nightly"}}),
        (
            {"text": " Stable  fixes checkout "},
            {
                "text": " Stable  fixes checkout ",
                "values": {"channel": "stable", "notes": "fixes checkout"},
            },
        ),
        (
            {"text": "tomorrow"},
            "name the release channel first (stable, beta, nightly), then any notes",
        ),
    ],
)
def test_the_release_form_takes_values_or_words(answer, taken):
    assert take(FORM, answer) == taken


async def test_stopping_the_demo_ends_its_session_instead_of_leaving_it_running(tmp_path):
    """Ctrl-C at the demo's terminal cancels its task: the channel sees the session end."""
    async with bridge(tmp_path) as demo:
        agent = demo.agent()
        playing = asyncio.create_task(agent.run())
        await demo.card(1)
        playing.cancel()
        with pytest.raises(asyncio.CancelledError):
            await playing
        await demo.rig.settle()
        [thread] = demo.phone.threads.values()
        assert thread.closed
    assert _types(agent)[-2:] == ["run.cancelled", "session.ended"]
    assert agent.sent[-2].data == {"by": "user"}


async def test_the_demo_command_prints_each_answer_and_exits_0(tmp_path):
    async with bridge(tmp_path) as demo:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "aep_bridge",
            "demo",
            "--url",
            demo.served.http,
            "--token",
            TOKEN,
            "--pace",
            "0",
            "--timeout",
            "30",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            await demo.press(await demo.card(1), "Allow")
            await demo.fill(await demo.card(2), RELEASE)
            out, err = await asyncio.wait_for(process.communicate(), 30)
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
    assert process.returncode == 0, err.decode()
    lines = out.decode().splitlines()
    assert "push: allow (via aep-bridge)" in lines
    assert "release: channel: beta, notes: Fixes the flaky checkout (via aep-bridge)" in lines
    assert lines[-1] == "demo finished: the session has ended"


async def test_the_demo_command_says_when_no_bridge_answers(tmp_path):
    from tests.bridge_process import free_port

    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "aep_bridge",
        "demo",
        "--url",
        f"http://127.0.0.1:{free_port()}",
        "--token",
        TOKEN,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 2
    assert "aep-bridge demo: connect: cannot connect to ws://127.0.0.1:" in err.decode()
