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
from aep_bridge.types import (
    ChannelUser,
    PermissionOption,
    PermissionRequest,
    Resolution,
    ResolutionStatus,
)
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
        probe = ConsoleProbe(channel, screen)
        await channel.start()

        async def restart() -> ConsoleChannel:
            """A bridge restart: a new console on the same terminal; lines typed go to it."""
            await channel.stop()
            probe.channel = ConsoleChannel(core, config, output=screen)
            await probe.channel.start()
            return probe.channel

        # The console has one user, the person at the keyboard: presses come as `local`.
        yield Harness(channel, core, probe, approver=channel.user, restart=restart)
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
    reader.feed_data(b"c7Qa 2\nc7Qa use the staging registry\n")
    async with asyncio.timeout(5):
        while len(core.presses) < 2:
            await asyncio.sleep(0.01)
    # by card id and the option's index (0-based): the core knows the session and options
    assert [(p.card_id, p.answer, p.via, p.user.id) for p in core.presses] == [
        ("c7Qa", 1, "button", "local"),
        ("c7Qa", "use the staging registry", "text", "local"),
    ]
    assert screen.lines[-1] == "[s1] Sent to the agent"
    await channel.stop()
    await channel.stop()


async def test_a_number_that_is_no_option_is_sent_as_words(screen: Screen):
    core = FakeCore()  # the card has no option 42
    core.next_resolution = Resolution(status=ResolutionStatus.REJECTED, reason="no such option")
    channel = ConsoleChannel(core, ConsoleConfig(name="console", read_input=False), output=screen)
    await channel.start()
    await channel.handle_line("c7Qa 42")
    assert [(p.card_id, p.answer, p.via) for p in core.presses] == [
        ("c7Qa", 41, "button"),
        ("c7Qa", "42", "text"),
    ]
    await channel.stop()


async def test_the_core_says_what_became_of_a_line_for_an_unknown_card(screen: Screen):
    core = FakeCore()
    core.next_resolution = Resolution(status=ResolutionStatus.UNKNOWN)
    channel = ConsoleChannel(core, ConsoleConfig(name="console", read_input=False), output=screen)
    await channel.start()
    assert await channel.handle_line("not-a-card") is None  # no answer: nothing to send
    resolution = await channel.handle_line("not-a-card 1")
    assert resolution is not None
    assert resolution.status is ResolutionStatus.UNKNOWN
    assert [(p.card_id, p.answer) for p in core.presses] == [("not-a-card", 0)]
    assert screen.lines[-1] == f"[not-a-card] {resolution.message}"
    await channel.stop()
