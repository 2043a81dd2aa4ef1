"""The built-in console channel: the conformance kit, and answering from the keyboard."""

from __future__ import annotations

import asyncio
import io
from collections.abc import AsyncIterator

import pytest

from aep_bridge.testing import (
    ButtonView,
    ChannelConformance,
    FakeCore,
    Harness,
    MessageView,
    ThreadView,
)
from aep_bridge.types import ChannelUser, PermissionOption, PermissionRequest
from aep_bridge_console import ConsoleChannel, ConsoleConfig


class Screen(io.StringIO):
    """The terminal: each `print` is one message."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []
        self._current = ""

    def write(self, text: str) -> int:
        if text == "\n":
            self.lines.append(self._current)
            self._current = ""
        else:
            self._current += text
        return len(text)


class ConsoleProbe:
    def __init__(self, channel: ConsoleChannel, screen: Screen) -> None:
        self.channel = channel
        self.screen = screen

    async def threads(self) -> list[ThreadView]:
        return []

    async def messages(self, thread_id: str | None = None) -> list[MessageView]:
        views = []
        for i, line in enumerate(self.screen.lines):
            text = line.split("] ", 1)[1] if line.startswith("[") else line
            buttons: tuple[ButtonView, ...] = ()
            if "answer with: " in text:
                choices = text.split("answer with: ", 1)[1].split("\n", 1)[0].split("   ")
                buttons = tuple(
                    ButtonView(label=c.split(" = ", 1)[1], data=c.split(" = ", 1)[0].encode())
                    for c in choices
                )
            views.append(MessageView(str(i), None, text, buttons))
        return views

    async def press(self, message: MessageView, button: ButtonView, user: ChannelUser) -> None:
        await self.channel.handle_line(button.data.decode())

    async def reply(self, thread_id, text, user, reply_to=None) -> None:
        await self.channel.handle_line(text)


@pytest.fixture
def screen() -> Screen:
    return Screen()


class TestConsoleConformance(ChannelConformance):
    @pytest.fixture
    async def harness(self, screen: Screen) -> AsyncIterator[Harness]:
        core = FakeCore()
        config = ConsoleConfig(name="console", approvers=["local"], read_input=False)
        channel = ConsoleChannel(core, config, output=screen)
        await channel.start()
        # The console has one user, the person at the keyboard: presses come as `local`.
        yield Harness(channel, core, ConsoleProbe(channel, screen), approver=channel.user)
        await channel.stop()


def _request() -> PermissionRequest:
    return PermissionRequest(
        id="c7Qa",
        title="claude-code wants to run Bash",
        description="rm -rf build/",
        options=(
            PermissionOption(id="allow", label="Allow"),
            PermissionOption(id="deny", label="Deny"),
        ),
        accepts_text=True,
    )


async def test_typed_answers_reach_the_core_as_options_or_words(screen: Screen):
    core = FakeCore()
    reader = asyncio.StreamReader()
    channel = ConsoleChannel(core, ConsoleConfig(name="console"), output=screen, answers=reader)
    await channel.start()
    await channel.send_permission_request("s1", _request())
    assert "answer with: c7Qa 1 = Allow   c7Qa 2 = Deny" in "\n".join(screen.lines)
    reader.feed_data(b"c7Qa 2\nnot-a-card 1\nc7Qa use the staging registry\n")
    async with asyncio.timeout(5):
        while len(core.presses) < 2:
            await asyncio.sleep(0.01)
    assert [(p.answer, p.via, p.user.id) for p in core.presses] == [
        ("deny", "button", "local"),
        ("use the staging registry", "text", "local"),
    ]
    assert screen.lines[-1].endswith("Sent to the agent")
    await channel.stop()
    await channel.stop()
