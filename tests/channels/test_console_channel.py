"""The built-in console channel: the conformance kit, and answering from the keyboard."""

from __future__ import annotations

import asyncio
import io
import logging
import re
from collections.abc import AsyncIterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aep_bridge.contract.types import (
    ChannelUser,
    FormChoice,
    FormField,
    OutcomeStatus,
    OutgoingMessage,
    PermissionOption,
    PermissionOutcome,
    PermissionRequest,
    Resolution,
    ResolutionStatus,
)
from aep_bridge.testing import (
    ButtonView,
    ChannelConformance,
    FakeCore,
    Harness,
    MessageView,
    ThreadView,
)
from aep_bridge.testing.fixture import BridgeFixture
from aep_bridge_console import ConsoleChannel, ConsoleConfig
from aep_bridge_console.channel import CONTINUATION
from tests import permission_card
from tests.terminal_text import HOSTILE, SHOWN, raw_controls


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
            text = text.replace("\n" + CONTINUATION, "\n")  # a message's further lines
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


# -- short ids ---------------------------------------------------------------------------


def _core_card(card_id: str, title: str = "claude-code wants to run Bash") -> PermissionRequest:
    """A card with the core's kind of id: `c` and 16 hex digits, too long to type."""
    return _request().model_copy(update={"id": card_id, "title": title})


def _short_of(screen: Screen, title: str) -> str:
    """The short id the screen shows for the card titled `title`."""
    text = "\n".join(screen.lines)
    card = text.split(f"? {title}", 1)[1]
    return card.split("answer with: ", 1)[1].split(" ", 1)[0]


async def test_a_card_shows_a_short_id_that_answers_it(screen: Screen):
    core = FakeCore()
    channel = ConsoleChannel(core, ConsoleConfig(name="console", read_input=False), output=screen)
    await channel.start()
    await channel.send_permission_request("s1", _core_card("c0123456789abcdef", "Run make?"))
    await channel.send_permission_request("s1", _core_card("cfedcba9876543210", "Push?"))
    first, second = _short_of(screen, "Run make?"), _short_of(screen, "Push?")
    for short in (first, second):
        assert 4 <= len(short) <= 6
        assert short.isalnum()
        assert short == short.lower()
        assert not set(short) & set("ilo01"), "no characters read as each other"
    assert first != second
    assert f"or type: {first} <your answer>" in "\n".join(screen.lines)
    await channel.handle_line(f"{first} 2")
    await channel.handle_line(f"{second.upper()} not on Fridays")  # any case
    assert [(p.card_id, p.answer) for p in core.presses] == [
        ("c0123456789abcdef", 1),
        ("cfedcba9876543210", "not on Fridays"),
    ]
    assert screen.lines[-1] == "[s1] Sent to the agent"
    await channel.stop()


async def test_a_short_id_still_answers_after_a_restart(screen: Screen):
    core = FakeCore()
    config = ConsoleConfig(name="console", read_input=False)
    before = ConsoleChannel(core, config, output=screen)
    await before.start()
    await before.send_permission_request("s1", _core_card("c0123456789abcdef"))
    short = _short_of(screen, "claude-code wants to run Bash")
    await before.stop()
    after = ConsoleChannel(core, config, output=screen)  # a new process: only the state is left
    await after.start()
    await after.handle_line(f"{short} 1")
    assert [(p.card_id, p.answer) for p in core.presses] == [("c0123456789abcdef", 0)]
    # the card shown again (re-sent after the restart) keeps its short id
    await after.send_permission_request("s1", _core_card("c0123456789abcdef", "Again?"))
    assert _short_of(screen, "Again?") == short
    await after.stop()


async def test_short_ids_are_unique_among_open_cards_and_drawn_again_when_closed(
    screen: Screen, monkeypatch: pytest.MonkeyPatch
):
    from aep_bridge_console import channel as console

    draws = iter(["kaaa"] * 3 + ["kbbb"] + ["kaaa"] * 10)
    monkeypatch.setattr(console, "_draw", lambda length: next(draws))
    core = FakeCore()
    channel = ConsoleChannel(core, ConsoleConfig(name="console", read_input=False), output=screen)
    await channel.start()
    await channel.send_permission_request("s1", _core_card("c" + "1" * 16, "One?"))
    await channel.send_permission_request("s1", _core_card("c" + "2" * 16, "Two?"))
    assert (_short_of(screen, "One?"), _short_of(screen, "Two?")) == ("kaaa", "kbbb")
    answered = PermissionOutcome(
        status=OutcomeStatus.ANSWERED, option_id="allow", option_label="Allow", by="local"
    )
    await channel.update_permission_request("s1", _core_card("c" + "1" * 16, "One?"), answered)
    # until drawn again, a closed card's id still names it: the core says what became of it
    await channel.handle_line("kaaa 1")
    assert core.presses[-1].card_id == "c" + "1" * 16
    await channel.send_permission_request("s1", _core_card("c" + "3" * 16, "Three?"))
    assert _short_of(screen, "Three?") == "kaaa"  # free again: its card is closed
    await channel.handle_line("kaaa 1")
    assert core.presses[-1].card_id == "c" + "3" * 16
    await channel.stop()


async def test_a_console_that_cannot_read_says_so_once_at_start(
    screen: Screen, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr("sys.stdin", io.StringIO())  # not a terminal
    core = FakeCore()
    with caplog.at_level(logging.INFO, logger="aep_bridge"):
        channel = ConsoleChannel(core, ConsoleConfig(name="console"), output=screen)
        await channel.start()
        await channel.send_permission_request("s1", _core_card("c0123456789abcdef"))
        await channel.stop()
        quiet = ConsoleChannel(core, ConsoleConfig(name="quiet", read_input=False), output=screen)
        await quiet.start()
        await quiet.stop()
    said = [r for r in caplog.records if "standard input is not a terminal" in r.getMessage()]
    assert [(r.levelno, r.getMessage().split(":")[0]) for r in said] == [
        (logging.WARNING, "console console")
    ]
    assert "answer with: " in "\n".join(screen.lines)  # the question is still shown


# -- an agent's text reaches the terminal as text (issue 30, item 6) -------------------------


async def test_an_agents_escape_sequences_are_shown_not_run_in_the_terminal(tmp_path):
    """The real core and the real console channel, an agent on the real hub whose session
    name, message, question and options carry a screen clear, OSC 0 (window title), OSC 52
    (the clipboard), an 8-bit CSI, a carriage return, DEL, a bidi override and a newline
    before a line that looks like the log's: the terminal gets text only, and the person
    sees each of them as an escape."""
    import aep_bridge_console
    from tests.core.rig import Rig, memory_host

    screen = io.StringIO()
    channels = {"console": {"type": "console", "approvers": ["local"], "read_input": False}}
    host = memory_host(aep_bridge_console)
    async with Rig(tmp_path / "bridge", channels=channels, host=host) as rig:
        console = rig.bridge.channels["console"].adapter
        console.output = screen  # the terminal the bridge runs in
        agent = rig.agent(session="s-" + HOSTILE)
        agent.start(label="fix " + HOSTILE)
        agent.say(HOSTILE)
        agent.ask("Run ls? " + HOSTILE, options=[("allow", "Allow " + HOSTILE), "deny"])
        await rig.settle()
        short = re.search(r"answer with: (\w{4,6}) 1 = ", screen.getvalue())
        assert short is not None, screen.getvalue()
        await console.handle_line(f"{short.group(1)} 1")
        await rig.settle()
    shown = screen.getvalue()
    assert raw_controls(shown) == [], shown
    # a question is read as markdown (issue 32): its carriage return becomes a line break,
    # as in a message, which hides nothing; every other escape is shown as written
    for escape in SHOWN:
        if escape != "\\r":
            assert escape in shown, (escape, shown)
    card = shown.split("Run ls?")[1]
    assert "rm -rf ~" in card
    assert "ls -la" in card.split("rm -rf ~")[1]
    # the message, the card, its option, and the answer all came to the screen
    assert "\\u001b]52;c;cm0gLXJmIH4=\\u0007" in shown.split("Run ls?")[1]
    assert "Sent to the agent" in shown
    assert agent.answers == [{"option": "allow"}]
    # the agent's newline is a further line of its message, indented: nothing it wrote
    # starts a line as the console's own lines and the log's do
    assert not any(line.startswith("aep-bridge: ") for line in shown.splitlines())
    # (the question, read as markdown, joins its soft line break into a space)
    assert "aep-bridge: error: forged" in shown


@settings(max_examples=100, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(st.one_of(st.characters(), st.sampled_from([chr(c) for c in range(0xA0)]))))
async def test_whatever_an_agent_writes_the_console_prints_only_text(text: str):
    screen = Screen()
    channel = ConsoleChannel(
        FakeCore(), ConsoleConfig(name="console", read_input=False), output=screen
    )
    await channel.create_session_thread("s1", text)
    await channel.send_message("s1", OutgoingMessage(type="text", text=text))
    await channel.send_permission_request(
        "s1", _request().model_copy(update={"title": text, "description": text})
    )
    printed = "\n".join(screen.lines)
    assert raw_controls(printed) == []
    printed.encode("utf-8")
    # each line is the console's own, or a further line of a message, indented (or empty)
    lines = printed.split("\n")
    assert all(not line or line.startswith(("[", "session ", CONTINUATION)) for line in lines)


async def test_a_line_for_a_closed_card_is_told_what_became_of_it(
    bridge: BridgeFixture, capsys: pytest.CaptureFixture[str]
):
    """Through the real core: a card answered from the keyboard, then typed to again (its
    short id still names it), says what became of its question (issue 30, item 9)."""
    running = await bridge.start("console", {"approvers": ["local"], "read_input": False})
    agent = running.agent()
    agent.start()
    agent.ask("Run `make deploy`?", options=[("allow", "Allow"), ("deny", "Deny")])
    await running.settle()
    console = running.adapter
    assert isinstance(console, ConsoleChannel)
    short = capsys.readouterr().out.split("or type: ", 1)[1].split(" ", 1)[0]
    assert (await console.handle_line(f"{short} 2")).accepted
    await running.settle()
    assert agent.answers == [{"option": "deny"}]
    late = await console.handle_line(f"{short} 1")
    assert late is not None
    by = console.user.display
    assert late.message == f"This question is closed: Answered by {by}: Deny"
    assert late.message in capsys.readouterr().out
    await running.settle()
    assert agent.answers == [{"option": "deny"}]  # nothing more was sent


# -- a form's card lists its fields and how to answer each (issue 32, item 3) ----------------

_DEPLOY_FIELDS = [
    {
        "id": "env",
        "type": "select",
        "label": "Environment",
        "required": True,
        "choices": [{"id": "stg", "label": "Staging"}, {"id": "prod", "label": "Production"}],
    },
    {"id": "replicas", "type": "number", "label": "Replicas", "min": 1, "max": 10},
    {"id": "notify", "type": "boolean", "label": "Tell the team?"},
    {
        "id": "areas",
        "type": "select",
        "label": "Areas",
        "multi": True,
        "choices": [{"id": "api", "label": "API"}, {"id": "web", "label": "Web"}],
    },
    {"id": "note", "type": "string", "label": "Release note", "required": True},
]


async def test_a_forms_card_lists_its_fields_and_answering_as_it_says_fills_it_in(
    bridge: BridgeFixture, capsys: pytest.CaptureFixture[str]
):
    """Through the real core: a form's card in the terminal names each field, says which are
    required, numbers each choice and shows the line that answers them all; typing that line
    sends the agent the form's values in its own ids (issue 32, item 3)."""
    running = await bridge.start("console", {"approvers": ["local"], "read_input": False})
    agent = running.agent()
    agent.start()
    request = agent.ask("Deploy settings", options=[], kind="form", fields=_DEPLOY_FIELDS)
    await running.settle()
    console = running.adapter
    assert isinstance(console, ConsoleChannel)
    card = capsys.readouterr().out
    assert "fill in with: " in card, card  # the card says how to fill the form in
    short = card.split("fill in with: ", 1)[1].split(" ", 1)[0]
    for line in (
        "1. Environment (required): one of 1 = Staging   2 = Production",
        "2. Replicas: a number from 1 to 10",
        "3. Tell the team?: yes or no",
        "4. Areas: any of 1 = API   2 = Web (several as 1,2)",
        "5. Release note (required): words",
        f"fill in with: {short} 1=<choice>; 2=<number>; 3=<yes/no>; 4=<choices>; 5=<words>",
        "(a field's number, = and its value, with ; between fields; leave a field out to skip",
        f"or type: {short} <your answer> (in words, instead of the form)",
    ):
        assert f"\n{CONTINUATION}{line}" in card, (line, card)
    # a line that is no answer to the form says why, and nothing is sent
    wrong = await console.handle_line(f"{short} 1=Staging; 2=many; 5=ships")
    assert wrong is not None
    assert not wrong.accepted
    assert "field 2 (Replicas) takes a number from 1 to 10" in capsys.readouterr().out
    missing = await console.handle_line(f"{short} 1=2")  # the release note is required
    assert missing is not None
    assert missing.message == "Not accepted: Release note is required"
    await running.settle()
    assert agent.answers == []
    # as the card says: choices by number (or label), yes/no, several choices, words
    typed = f"{short.upper()} 1=2; 2=3; 3=yes; 4=1,web; 5=ships the new login"
    assert (await console.handle_line(typed)) is not None
    await running.settle()
    commands = [c for c in agent.commands if c.type == "control.attention.respond"]
    assert [c.subject for c in commands] == [request.id]
    assert agent.answers == [
        {
            "values": {
                "env": "prod",
                "replicas": 3,
                "notify": True,
                "areas": ["api", "web"],
                "note": "ships the new login",
            }
        }
    ]


async def test_a_form_typed_after_a_restart_still_fills_in_and_strangers_are_refused_first(
    screen: Screen,
):
    """The form's fields are kept with its short id, so the line the card showed still fills
    it in after a restart; the core is asked who may answer before the line is read; a
    `;` inside words is told as such, and nothing is sent."""
    core = FakeCore(approvers={"local"})
    config = ConsoleConfig(name="console", read_input=False)
    before = ConsoleChannel(core, config, output=screen)
    await before.start()
    form = PermissionRequest(
        id="c0123456789abcdef",
        kind="form",
        title="Deploy settings",
        accepts_text=True,
        fields=(
            FormField(
                id="f1",
                type="select",
                label="Environment",
                required=True,
                other=True,
                choices=(FormChoice(id="c1", label="Staging"), FormChoice(id="c2", label="Prod")),
            ),
            FormField(id="f2", type="string", label="Release note"),
        ),
    )
    await before.send_permission_request("s1", form)
    short = "\n".join(screen.lines).split("fill in with: ", 1)[1].split(" ", 1)[0]
    await before.stop()
    after = ConsoleChannel(core, config, output=screen)
    await after.start()
    told = await after.handle_line(f"{short} 2=ships; fast")
    assert told is not None
    assert told.message.startswith("Not accepted: 'fast' is not N=value")
    assert core.presses == []
    await after.handle_line(f"{short} 1=staging; 2=ships fast")
    await after.handle_line(f"{short} 1=canary")  # the field takes your own words
    assert [(p.card_id, p.answer, p.via) for p in core.presses] == [
        ("c0123456789abcdef", {"f1": "c1", "f2": "ships fast"}, "form"),
        ("c0123456789abcdef", {"f1": "canary"}, "form"),
    ]
    after.user = ChannelUser(id="mallory", name="Mallory")  # not an approver here
    refused = await after.handle_line(f"{short} 1=2")
    assert refused is not None
    assert refused.status is ResolutionStatus.NOT_ALLOWED
    assert len(core.presses) == 2
    assert [r.user.id for r in core.refused] == ["mallory"]
    await after.stop()


# -- the card a person judges, in the order they read it (issue 32) ------------------------


async def test_a_real_bash_card_reads_session_folder_command_reason_then_options():
    """Claude Code's permission, through the real mapping and renderer, on the console: the
    session (the line's prefix) and agent, the folder under home, the whole long command,
    the reason without markdown's markers, then how to answer."""
    screen = Screen()
    channel = ConsoleChannel(
        FakeCore(), ConsoleConfig(name="console", read_input=False), output=screen
    )
    await channel.create_session_thread("s1", permission_card.SESSION_NAME)
    await channel.send_permission_request("s1", permission_card.bash_card())
    printed = "\n".join(screen.lines[-1:])
    assert permission_card.in_order(
        printed,
        f"[{permission_card.SESSION_NAME}] ? claude-code asks permission: Bash",
        f"Folder: {permission_card.FOLDER}",
        permission_card.COMMAND,  # whole
        permission_card.REASON_SHOWN,
        "answer with: ",
    )
    assert "`" not in printed
    assert "**" not in printed
    assert "Permission requested" not in printed


def _call(kind: str, call: str, text: str) -> OutgoingMessage:
    status = "running" if kind == "tool_call" else "completed"
    return OutgoingMessage(type=kind, text=text, metadata={"call_id": call, "status": status})  # type: ignore[arg-type]


async def test_a_tool_call_that_finishes_is_printed_once_with_what_came_of_it(screen: Screen):
    channel = ConsoleChannel(
        FakeCore(), ConsoleConfig(name="console", read_input=False), output=screen
    )
    await channel.start()
    await channel.send_message("s1", _call("tool_call", "t1", "⏳ Glob invoices/**/*.py"))
    await channel.send_message("s1", _call("tool_update", "t1", "✅ Glob invoices/**/*.py"))
    await channel.send_message("s1", _call("tool_call", "t2", "⏳ Grep round"))
    await channel.send_message("s1", _call("tool_update", "t2", "✅ Grep round — 1 match"))
    await channel.stop()
    assert screen.lines == [
        "[s1] tool: ✅ Glob invoices/**/*.py",
        "[s1] tool: ✅ Grep round — 1 match",
    ]


async def test_a_call_still_running_is_printed_above_what_follows_it_and_its_question(
    screen: Screen,
):
    channel = ConsoleChannel(
        FakeCore(), ConsoleConfig(name="console", read_input=False), output=screen
    )
    await channel.start()
    await channel.send_message("s1", _call("tool_call", "t1", "⏳ Bash pip install"))
    await channel.send_permission_request("s1", _core_card("c0123456789abcdef", "Run pip?"))
    await channel.send_message("s1", _call("tool_update", "t1", "✅ Bash pip install"))
    await channel.send_message("s1", _call("tool_call", "t2", "⏳ Bash pytest"))
    await channel.send_message("s1", OutgoingMessage(type="text", text="All green."))
    await channel.stop()
    said = [line.split("] ", 1)[1].split("\n")[0] for line in screen.lines]
    assert said == [
        "tool: ⏳ Bash pip install",
        "? Run pip?",
        "tool: ✅ Bash pip install",
        "tool: ⏳ Bash pytest",
        "All green.",
    ]


async def test_a_call_that_runs_long_is_printed_while_it_runs(
    screen: Screen, monkeypatch: pytest.MonkeyPatch
):
    from aep_bridge_console import channel as console

    monkeypatch.setattr(console, "LONG_CALL", 0.0)
    channel = ConsoleChannel(
        FakeCore(), ConsoleConfig(name="console", read_input=False), output=screen
    )
    await channel.start()
    await channel.send_message("s1", _call("tool_call", "t1", "⏳ Bash make build"))
    for _ in range(3):  # the timer's turn on the loop
        await asyncio.sleep(0)
    assert screen.lines == ["[s1] tool: ⏳ Bash make build"]
    await channel.send_message("s1", _call("tool_update", "t1", "✅ Bash make build"))
    await channel.stop()
    assert screen.lines[-1] == "[s1] tool: ✅ Bash make build"
    assert len(screen.lines) == 2
