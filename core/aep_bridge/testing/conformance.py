"""The conformance suite every channel passes (`ChannelConformance`), run on a `Harness`: one
adapter started against its fake platform, a `FakeCore` and a probe. See the package's
docstring and docs/writing-a-channel.md."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

from ..contract.adapter import ChannelAdapter
from ..contract.types import (
    OUTGOING_KINDS,
    ChannelCapabilities,
    ChannelUser,
    FormChoice,
    FormField,
    NotificationMessage,
    OutcomeStatus,
    OutgoingMessage,
    PermissionOption,
    PermissionOutcome,
    PermissionRequest,
    Resolution,
    ResolutionStatus,
)
from ..markup import Code, Details, Diff, Paragraph, Span, parse_markdown, plain
from ..text.text import measure
from .memory import FakeCore, Press
from .views import ButtonView, MessageView, PlatformProbe

if TYPE_CHECKING:
    from ..outbox import Job

# The outbox and the store are imported where a test uses them: the `bridge` fixture's plugin
# loads this package, and must not load the bridge's parts with it.

# -- the harness -----------------------------------------------------------------------


@dataclass(slots=True)
class Harness:
    """One adapter, started against its fake platform, with a fake core and a probe."""

    adapter: ChannelAdapter
    core: FakeCore
    probe: PlatformProbe
    approver: ChannelUser
    #: how long to wait for a press to travel through the platform to the core
    timeout: float = 5.0
    #: stop `adapter` and start a new one of the same config, on the same platform and
    #: core, and return it (the kit stops it): what a bridge restart does to a channel.
    #: Without it, the kit skips the restart tests.
    restart: Callable[[], Awaitable[ChannelAdapter]] | None = None
    #: start another adapter of this channel, on the same platform and core, in a config in
    #: which it declines some calls (`ChannelAdapter.call_kind` None: Slack or Discord
    #: without `notifications_channel_id` make no heads-ups), and return it (the kit stops
    #: it). Without it, the kit checks declined calls on `adapter` alone, if it declines any.
    declining: Callable[[], Awaitable[ChannelAdapter]] | None = None

    def __post_init__(self) -> None:
        if self.core.approvers is None:  # the core refuses anyone else, as the real one does
            self.core.approvers = {self.approver.id}


# -- the conformance suite -------------------------------------------------------------

SESSION = "sess-1"
_WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "the",
    "lazy",
    "dog",
    "and",
    "keeps",
    "running",
]


#: an agent's reply as agents write them (the kit's blocks test parses it), and what of it a
#: person must read on every channel
_MARKDOWN = """## Fixed: invoice rounding

**Root cause:** `round()` rounds half to even; see [decimal docs](https://docs.python.org/3/library/decimal.html).

| file | callers |
|---|---|
| billing/invoice.py | 3 |

- changed `total()`
  - kept the old name as an alias
- added a test

```python
total = quantize(amount, Decimal("0.01"))
```
"""
_MARKDOWN_WORDS = (
    "Fixed: invoice rounding",
    "Root cause:",
    "round()",
    "rounds half to even",
    "decimal docs",
    "file",
    "callers",
    "billing/invoice.py",
    "changed",
    "total()",
    "kept the old name as an alias",
    "added a test",
    'total = quantize(amount, Decimal("0.01"))',
)


def sample_message(kind: str) -> OutgoingMessage:
    """A plausible message of each kind, with the structure the core puts in `metadata`."""
    samples: dict[str, dict[str, Any]] = {
        "text": {"text": "All tests pass."},
        "thought": {"text": "Looking at the failing test first."},
        "tool_call": {
            "text": "Bash: make test",
            "key": "tool-1",
            "metadata": {"tool": "Bash", "call_id": "tool-1", "status": "running"},
        },
        "tool_update": {
            "text": "Bash: make test (done in 1.2 s)",
            "key": "tool-1",
            "metadata": {"tool": "Bash", "call_id": "tool-1", "status": "completed"},
        },
        "plan": {
            "text": "1. reproduce\n2. fix\n3. test",
            "metadata": {"entries": [{"content": "reproduce", "status": "completed"}]},
        },
        "usage": {"text": "1,204 tokens in, 320 out", "metadata": {"input_tokens": 1204}},
        "session_end": {"text": "Session ended normally.", "notify": True},
        "error": {"text": "run failed: budget_exceeded", "notify": True},
        "attachment": {"text": "report.txt"},
        "system_message": {"text": "The agent compacted its context."},
    }
    return OutgoingMessage.model_validate({"type": kind, **samples[kind]})


def _request(card: str, options: list[tuple[str, str]], **extra: Any) -> PermissionRequest:
    return PermissionRequest(
        id=card,
        title="claude-code wants to run Bash",
        description="rm -rf build/",
        options=tuple(
            PermissionOption(id=oid, label=label, is_allow=label == "Allow")
            for oid, label in options
        ),
        **extra,
    )


def _form(card: str) -> PermissionRequest:
    """A form of three fields: a choice, a yes/no and words."""
    return PermissionRequest(
        id=card,
        kind="form",
        title="Deploy settings",
        fields=(
            FormField(
                id="f1",
                type="select",
                label="Environment",
                required=True,
                choices=(FormChoice(id="c1", label="Staging"), FormChoice(id="c2", label="Prod")),
            ),
            FormField(id="f2", type="boolean", label="Tell the team?"),
            FormField(id="f3", type="string", label="Release note", required=True),
        ),
    )


def _calls() -> list[Job]:
    """One of every call the core makes through the outbox, as it queues them."""
    from ..outbox import Job, card_key

    request = _request("cK1n", [("o1", "Allow"), ("o2", "Deny")])
    outcome = PermissionOutcome(
        status=OutcomeStatus.ANSWERED, option_id="o1", option_label="Allow", by="alice"
    )
    asked = NotificationMessage(
        session_id=SESSION,
        session_name="Fix the flaky test",
        type="permission",
        summary="claude-code is waiting for you",
        request_id=request.id,
    )
    closing = asked.model_copy(
        update={"outcome": outcome.summary(), "outcome_status": OutcomeStatus.ANSWERED}
    )
    done = NotificationMessage(session_id=SESSION, type="completed", summary="claude-code done")
    return [
        *(Job.message(SESSION, sample_message(k)) for k in ("text", "tool_call", "tool_update")),
        Job.permission(SESSION, request),
        Job.permission_update(SESSION, request, outcome),
        Job.notification(asked, key=f"heads-up:{request.id}", after=card_key(request.id)),
        Job.notification(closing),
        Job.notification(done),
        Job.rename(SESSION, "Fix the flaky login test"),
        Job.archive(SESSION),
    ]


def _declines(adapter: ChannelAdapter, job: Job) -> bool:
    from ..outbox.jobs import arguments

    return adapter.call_kind(job.op, arguments(job)) is None


def _chosen(press: Press, request: PermissionRequest) -> int | None:
    """The index of the option a press chose, whether the adapter sent its index or its id."""
    if isinstance(press.answer, int):
        return press.answer
    ids = [o.id for o in request.options]
    return ids.index(press.answer) if press.answer in ids else None


def _visible(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


class ChannelConformance:
    """What every channel must do. Subclass and provide a `harness` fixture (async)."""

    @pytest.fixture
    async def harness(self) -> Harness:  # pragma: no cover - plugins override it
        raise NotImplementedError("provide a `harness` fixture that yields a started Harness")

    @staticmethod
    async def _thread(h: Harness, name: str = "Fix the flaky test") -> str:
        return await h.core.create_thread(h.adapter, SESSION, name)

    @staticmethod
    async def _card(h: Harness, request: PermissionRequest) -> MessageView:
        await h.adapter.send_permission_request(SESSION, request)
        for message in reversed(await h.probe.messages()):
            if request.title in message.text or message.buttons:
                return message
        raise AssertionError("the permission card did not appear on the platform")

    @staticmethod
    @contextlib.asynccontextmanager
    async def _declining(h: Harness) -> AsyncIterator[ChannelAdapter | None]:
        """An adapter that declines some calls: the harness's own, if it does, else one
        `Harness.declining` starts (stopped after), else None."""
        if any(_declines(h.adapter, job) for job in _calls()):
            yield h.adapter
            return
        if h.declining is None:
            yield None
            return
        adapter = await h.declining()
        try:
            yield adapter
        finally:
            await adapter.stop()
            h.core.attach(h.adapter)

    async def _wait_for_press(self, h: Harness, count: int) -> None:
        async with asyncio.timeout(h.timeout):
            while len(h.core.presses) < count:
                h.core.pressed.clear()
                await h.core.pressed.wait()

    async def test_capabilities_and_name_are_declared(self, harness: Harness) -> None:
        adapter = type(harness.adapter)
        assert isinstance(adapter.name, str)
        assert adapter.name
        ChannelCapabilities.model_validate(adapter.capabilities)

    async def test_a_thread_is_created_once_and_renamed(self, harness: Harness) -> None:
        h = harness
        before = len(await h.probe.threads())
        thread = await self._thread(h)
        assert thread, "create_session_thread must return the platform thread id"
        if not h.adapter.capabilities.threads:
            return
        threads = await h.probe.threads()
        assert len(threads) == before + 1
        created = next(t for t in threads if t.id == thread)
        assert "Fix the flaky test" in created.name
        await h.adapter.rename_session_thread(SESSION, "Fix the flaky login test")
        renamed = next(t for t in await h.probe.threads() if t.id == thread)
        assert "Fix the flaky login test" in renamed.name
        assert len(await h.probe.threads()) == before + 1

    async def test_every_message_type_is_shown(self, harness: Harness) -> None:
        h = harness
        await self._thread(h)
        for kind in OUTGOING_KINDS:
            await h.adapter.send_message(SESSION, sample_message(kind))
        shown = " ".join(m.text for m in await h.probe.messages())
        for kind in ("text", "error", "session_end"):
            assert _visible(sample_message(kind).text) in _visible(shown), kind

    async def test_an_unknown_message_type_is_tolerated(self, harness: Harness) -> None:
        await self._thread(harness)
        future = OutgoingMessage.model_construct(type="hologram", text="from a newer core")  # type: ignore[arg-type]
        await harness.adapter.send_message(SESSION, future)

    async def test_a_tool_update_replaces_its_card(self, harness: Harness) -> None:
        h = harness
        await self._thread(h)
        await h.adapter.send_message(SESSION, sample_message("tool_call"))
        count = len(await h.probe.messages())
        await h.adapter.send_message(SESSION, sample_message("tool_update"))
        messages = await h.probe.messages()
        assert "done in 1.2 s" in messages[-1].text or any(
            "done in 1.2 s" in m.text for m in messages
        )
        if h.adapter.capabilities.edits:
            assert len(messages) == count, "with edits, an update edits the card in place"

    async def test_agent_text_is_shown_verbatim_not_as_markup(self, harness: Harness) -> None:
        h = harness
        await self._thread(h)
        tricky = "if a < b && c > d: print('<b>bold</b>') *x* _y_ `z` [l](http://x)"
        await h.adapter.send_message(SESSION, OutgoingMessage(type="text", text=tricky))
        shown = (await h.probe.messages())[-1].text
        assert tricky in shown

    async def test_a_message_with_blocks_reads_without_markdown_markers(
        self, harness: Harness
    ) -> None:
        """The agent's markdown arrives parsed (`OutgoingMessage.blocks`): a channel shows
        every word of it in its own dialect, or as the plain `text`, never the raw markers."""
        h = harness
        await self._thread(h)
        blocks = parse_markdown(_MARKDOWN)
        before = len(await h.probe.messages())
        message = OutgoingMessage(type="text", text=plain(blocks), blocks=blocks, notify=True)
        await h.adapter.send_message(SESSION, message)
        shown = _visible(" ".join(m.text for m in (await h.probe.messages())[before:]))
        for words in _MARKDOWN_WORDS:
            assert words in shown, words
        for marker in ("**", "## ", "]("):
            assert marker not in shown, f"raw markdown {marker!r} shown"

    async def test_folded_output_and_a_diff_are_shown_not_lost(self, harness: Harness) -> None:
        """An activity message folds a failure's last lines (`Details`) and an edit's change
        (`Diff`) under their line: a channel may fold them too, but every line of them is
        in what it shows (the failing assertion, the new code), and an update of the message
        replaces it. (Contract 1.2.)"""
        h = harness
        await self._thread(h)
        before = len(await h.probe.messages())
        line = Paragraph(spans=(Span(text="❌ "), Span(text="pytest -q", code=True)))
        failure = Details(
            summary="output",
            blocks=(Code(code="E       assert 10.0 == 10.01\nFAILED test_rounding"),),
        )
        change = Diff(path="totals.py", unified="@@ -1 +1 @@\n-a = 1\n+a = 2\n", added=1, removed=1)
        blocks = (line, failure, Paragraph(spans=(Span(text="✅ Edit totals.py"),)), change)
        first = OutgoingMessage(
            type="tool_update", blocks=blocks[:2], text=plain(blocks[:2]), key="a1"
        )
        await h.adapter.send_message(SESSION, first)
        update = OutgoingMessage(type="tool_update", blocks=blocks, text=plain(blocks), key="a1")
        await h.adapter.send_message(SESSION, update)
        new = (await h.probe.messages())[before:]
        shown = _visible(" ".join(m.text for m in new))
        for words in ("pytest -q", "assert 10.0 == 10.01", "FAILED test_rounding", "a = 2"):
            assert words in shown, words
        if h.adapter.capabilities.edits:
            assert len(new) == 1, "the update was not an edit of the same message"

    async def test_a_card_shows_what_exactly_is_approved(self, harness: Harness) -> None:
        """A card's `details` (the command in a code block, the folder) are shown, in the
        channel's dialect or as the plain `description`. (Contract 1.2.)"""
        h = harness
        await self._thread(h)
        details = (
            Code(code="git push -u origin fix/rounding", language="bash"),
            Paragraph(spans=(Span(text="in "), Span(text="~/src/invoicer", code=True))),
        )
        request = _request("d4Tx", [("o1", "Allow"), ("o2", "Deny")])
        request = request.model_copy(update={"details": details, "description": plain(details)})
        card = await self._card(h, request)
        shown = _visible(card.text)
        assert "git push -u origin fix/rounding" in shown
        assert "~/src/invoicer" in shown

    async def test_a_card_press_reaches_the_core_with_the_right_ids(self, harness: Harness) -> None:
        h = harness
        if not h.adapter.capabilities.buttons:
            pytest.skip("this channel has no buttons")
        await self._thread(h)
        request = _request("c7Qa", [("o1", "Allow"), ("o2", "Deny")])
        card = await self._card(h, request)
        assert [b.label for b in card.buttons] == ["Allow", "Deny"]
        await h.probe.press(card, card.buttons[1], h.approver)
        await self._wait_for_press(h, 1)
        press = h.core.presses[-1]
        assert (press.card_id, _chosen(press, request), press.user.id, press.via) == (
            "c7Qa",
            1,
            h.approver.id,
            "button",
        )

    async def test_a_press_is_resolved_by_card_id_alone(self, harness: Harness) -> None:
        """A button carries the card id and the option; the core knows the rest. After the
        adapter restarts with its state wiped, a press on an old card still reaches the core
        as that card and option: the adapter kept nothing to answer it. (Contract 1.2.)"""
        h = harness
        if not h.adapter.capabilities.buttons:
            pytest.skip("this channel has no buttons")
        if h.restart is None:
            pytest.skip("the harness has no `restart`")
        await self._thread(h)
        request = _request("cDQf", [("o1", "Allow"), ("o2", "Deny"), ("o3", "Always")])
        card = await self._card(h, request)
        h.core.states.clear()
        adapter = await h.restart()
        try:
            await h.probe.press(card, card.buttons[2], h.approver)
            await self._wait_for_press(h, 1)
            press = h.core.presses[-1]
            assert (press.card_id, _chosen(press, request), press.via) == ("cDQf", 2, "button")
        finally:
            await adapter.stop()

    async def test_a_card_from_before_a_restart_still_shows_its_outcome(
        self, harness: Harness
    ) -> None:
        """What an adapter keeps in its `ChannelState` is there after a restart: a card
        posted before it is still edited with its outcome, its buttons gone."""
        h = harness
        if not h.adapter.capabilities.edits:
            pytest.skip("this channel cannot edit a card")
        if h.restart is None:
            pytest.skip("the harness has no `restart`")
        await self._thread(h)
        request = _request("cEQg", [("o1", "Allow"), ("o2", "Deny")])
        await self._card(h, request)
        count = len(await h.probe.messages())
        adapter = await h.restart()
        try:
            outcome = PermissionOutcome(
                status=OutcomeStatus.ANSWERED, option_id="o2", option_label="Deny", by="alice"
            )
            await adapter.update_permission_request(SESSION, request, outcome)
            messages = await h.probe.messages()
            assert len(messages) == count, "the card is edited, not posted again"
            shown = [m for m in messages if outcome.summary() in m.text]
            assert shown, "the outcome is shown on the card"
            assert all(m.buttons == () for m in shown), "a closed card keeps no buttons"
        finally:
            await adapter.stop()

    async def test_an_altered_press_never_reaches_the_core(self, harness: Harness) -> None:
        """Presses that come over HTTP (the channel's own routes, which the bridge does not
        authenticate) carry a token from `core.sign`: altered, they are refused before the
        core hears of them. Channels without routes get presses from their platform."""
        h = harness
        if not h.adapter.capabilities.buttons or not h.adapter.routes():
            pytest.skip("this channel takes no presses over its own HTTP routes")
        await self._thread(h)
        card = await self._card(h, _request("cFQh", [("o1", "Allow"), ("o2", "Deny")]))
        button = card.buttons[0]
        data = button.data
        # one byte changed at a time, at a dozen places spread over the data (and its end)
        for at in sorted({*range(0, len(data), max(1, len(data) // 12)), len(data) - 1}):
            altered = data[:at] + (b"A" if data[at : at + 1] != b"A" else b"B") + data[at + 1 :]
            with contextlib.suppress(Exception):  # the platform may report the refusal
                await h.probe.press(card, ButtonView(button.label, altered), h.approver)
        await asyncio.sleep(0.2)
        assert h.core.presses == [], "a press with altered data reached the core"
        await h.probe.press(card, button, h.approver)
        await self._wait_for_press(h, 1)
        assert h.core.presses[-1].card_id == "cFQh"

    async def test_presses_by_anyone_go_to_the_core_which_decides(self, harness: Harness) -> None:
        """Adapters never decide who may answer: a stranger's press reaches the core too."""
        h = harness
        if not h.adapter.capabilities.buttons:
            pytest.skip("this channel has no buttons")
        if not h.adapter.capabilities.identifies_users:
            pytest.skip("this platform does not say who pressed")
        await self._thread(h)
        h.core.next_resolution = Resolution(status=ResolutionStatus.NOT_ALLOWED)
        card = await self._card(h, _request("c8Qb", [("o1", "Allow")]))
        stranger = ChannelUser(id="stranger-99", name="Mallory")
        await h.probe.press(card, card.buttons[0], stranger)
        await self._wait_for_press(h, 1)
        assert h.core.presses[-1].user.id == "stranger-99"

    async def test_a_strangers_press_on_a_form_changes_nothing(self, harness: Harness) -> None:
        """Someone who is no approver presses a form's buttons: the core refuses each press
        (and logs it), and nothing anyone sees changes, so no approver later fills in a
        field a stranger chose. A channel that keeps a person's progress through a form
        asks `core.may_answer` before it changes anything."""
        h = harness
        caps = h.adapter.capabilities
        if not (caps.forms and caps.buttons):
            pytest.skip("this channel has no forms")
        if not caps.identifies_users:
            pytest.skip("this platform does not say who pressed")
        await self._thread(h)
        card = await self._card(h, _form("cFsn"))
        assert card.buttons, "a form's card offers a way to fill it in"
        before = await h.probe.messages()
        stranger = ChannelUser(id="stranger-99", name="Mallory")
        for button in card.buttons:
            await h.probe.press(card, button, stranger)
        async with asyncio.timeout(h.timeout):  # until the core refused each, or the card moved
            while len(h.core.refused) < len(card.buttons) and await h.probe.messages() == before:
                await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)  # an edit the adapter started would land meanwhile
        assert await h.probe.messages() == before, "a stranger's press changed the chat"
        assert len(h.core.refused) >= len(card.buttons), "each press was refused by the core"
        assert all(r.user.id != h.approver.id for r in h.core.refused)

    async def test_the_outcome_is_shown_and_the_buttons_go(self, harness: Harness) -> None:
        h = harness
        await self._thread(h)
        request = _request("c9Qc", [("o1", "Allow"), ("o2", "Deny")])
        await self._card(h, request)
        outcome = PermissionOutcome(
            status=OutcomeStatus.ANSWERED, option_id="o1", option_label="Allow", by="alice"
        )
        await h.adapter.update_permission_request(SESSION, request, outcome)
        messages = await h.probe.messages()
        assert any(outcome.summary() in m.text for m in messages), "the outcome must be shown"
        if h.adapter.capabilities.edits:
            card = next(m for m in messages if outcome.summary() in m.text)
            assert card.buttons == (), "a closed card keeps no buttons"

    async def test_an_informational_request_has_no_buttons(self, harness: Harness) -> None:
        h = harness
        await self._thread(h)
        request = _request("cAQd", [("o1", "Allow"), ("o2", "Deny")], informational=True)
        await h.adapter.send_permission_request(SESSION, request)
        shown = [m for m in await h.probe.messages() if "rm -rf build/" in m.text]
        assert shown, "an informational request is still shown"
        assert all(m.buttons == () for m in shown)

    async def test_long_text_is_split_under_the_declared_limit(self, harness: Harness) -> None:
        h = harness
        caps = h.adapter.capabilities
        await self._thread(h)
        words = [f"{_WORDS[i % len(_WORDS)]}{i}" for i in range(caps.max_message_length // 2)]
        text = " ".join(words)
        assert measure(text, caps.length_unit) > 2 * caps.max_message_length
        before = len(await h.probe.messages())
        await h.adapter.send_message(SESSION, OutgoingMessage(type="text", text=text))
        pieces = (await h.probe.messages())[before:]
        assert len(pieces) >= 3
        for piece in pieces:
            assert measure(piece.text, caps.length_unit) <= caps.max_message_length
        shown = _visible(" ".join(p.text for p in pieces))
        positions = [shown.find(w) for w in (words[0], words[len(words) // 2], words[-1])]
        assert -1 not in positions, "all the text is shown"
        assert positions == sorted(positions), "in order"

    async def test_button_data_stays_under_the_declared_limit(self, harness: Harness) -> None:
        h = harness
        caps = h.adapter.capabilities
        if not caps.buttons:
            pytest.skip("this channel has no buttons")
        await self._thread(h)
        count = min(caps.max_buttons, 3)
        options = [(f"option-{i}-" + "x" * 60, f"Choice {i}") for i in range(count)]
        request = _request("cBQe" + "z" * 20, options)
        card = await self._card(h, request)
        assert len(card.buttons) == count
        for button in card.buttons:
            assert len(button.data) <= caps.max_button_data
        await h.probe.press(card, card.buttons[-1], h.approver)
        await self._wait_for_press(h, 1)
        assert _chosen(h.core.presses[-1], request) == count - 1

    async def test_a_notification_is_delivered(self, harness: Harness) -> None:
        h = harness
        if not h.adapter.capabilities.heads_ups:
            pytest.skip("this channel has no place for heads-ups")
        await self._thread(h)
        await h.adapter.send_notification(
            NotificationMessage(
                session_id=SESSION,
                session_name="Fix the flaky test",
                type="permission",
                summary="claude-code is waiting for you",
            )
        )
        assert any("claude-code is waiting for you" in m.text for m in await h.probe.messages())

    async def test_a_heads_up_names_its_session(self, harness: Harness) -> None:
        """A heads-up says which session: its name, then what happened ("Fix invoice
        rounding: claude-code finished"), never "a session"; a heads-up of no session (an
        agent went offline) is what happened alone. (Issue 32.)"""
        h = harness
        if not h.adapter.capabilities.heads_ups:
            pytest.skip("this channel has no place for heads-ups")
        await self._thread(h)
        for notification in (
            NotificationMessage(
                session_id=SESSION,
                session_name="Fix invoice rounding",
                type="completed",
                summary="claude-code finished",
            ),
            NotificationMessage(session_id="", type="error", summary="claude-code went offline"),
        ):
            await h.adapter.send_notification(notification)
        texts = [f"{m.title}\n{m.text}" for m in await h.probe.messages()]
        assert any("Fix invoice rounding" in t and "claude-code finished" in t for t in texts)
        assert any("claude-code went offline" in t for t in texts)
        assert not any("a session" in t for t in texts)

    async def test_a_heads_up_goes_privately_to_its_recipients(self, harness: Harness) -> None:
        """A channel declaring `direct_messages` tells a heads-up with `recipients` (the
        session's owner) privately, naming its session and linking to the card, instead
        of posting it in the notifications place. (Issue 34.)"""
        h = harness
        if not h.adapter.capabilities.direct_messages:
            pytest.skip("this channel declares no direct messages")
        direct = getattr(h.probe, "direct_messages", None)
        assert direct is not None, (
            "a channel declaring direct_messages needs a probe with "
            "`async def direct_messages(user_id) -> list[MessageView]`"
        )
        await self._thread(h)
        card = await self._card(h, _request("c1dm", [("allow", "Allow"), ("deny", "Deny")]))
        before = await h.probe.messages()
        await h.adapter.send_notification(
            NotificationMessage(
                session_id=SESSION,
                session_name="Fix invoice rounding",
                type="permission",
                summary="claude-code is waiting for you",
                request_id="c1dm",
                recipients=(h.approver.id,),
            )
        )
        private = await direct(h.approver.id)
        assert len(private) == 1
        text = _visible(f"{private[0].title}\n{private[0].text}")
        assert "Fix invoice rounding" in text
        assert "claude-code is waiting for you" in text
        assert card.id in text or "c1dm" in text or "://" in text  # its link to the card
        after = await h.probe.messages()
        assert not any("claude-code is waiting for you" in m.text for m in after[len(before) :])

    async def test_every_call_says_what_it_costs(self, harness: Harness) -> None:
        """`call_kind` answers for every call the core makes: a post, an edit, both, or None
        (the channel will not make it); a channel without heads-ups declines them all, and
        one that declares `edit_rate_limits` calls a card's update an edit. (Contract 1.2.)"""
        from ..outbox.jobs import arguments

        h = harness
        async with self._declining(h) as other:
            for adapter in {id(a): a for a in (h.adapter, other) if a is not None}.values():
                caps = adapter.capabilities
                for job in _calls():
                    kind = adapter.call_kind(job.op, arguments(job))
                    assert kind in (None, "post", "edit", "both"), (job.op, kind)
                    if job.op == "send_notification" and not caps.heads_ups:
                        assert kind is None, "a channel without heads-ups declines them"
                    if job.op == "update_permission_request" and caps.edit_rate_limits:
                        assert kind == "edit", "a card's update edits it in place"

    async def test_a_call_the_channel_declines_is_never_queued_made_or_charged(
        self, harness: Harness
    ) -> None:
        """A call the channel says it will not make (a heads-up where it has no place for
        them) goes through the core's outbox without a trace: never queued, never reaching
        the platform, never counted against a limit; and a card queued right after it goes
        out at once, without waiting for a slot. (Contract 1.2.)"""
        from ..commands.simtime import VirtualTime
        from ..outbox import Job, Outbox
        from ..store import Store

        h = harness
        async with self._declining(h) as adapter:
            if adapter is None:
                pytest.skip(
                    "this channel makes every call (for a config of it that declines some, "
                    "give the Harness `declining`)"
                )
            declined = [job for job in _calls() if _declines(adapter, job)]
            await h.core.create_thread(adapter, SESSION, "Fix the flaky test")
            vt, store = VirtualTime(), Store.memory()
            outbox = Outbox(adapter, store, clock=vt.clock, sleep=vt.sleep)
            await outbox.start()
            try:
                before = await h.probe.messages()
                for job in declined:
                    outbox.submit(job)
                    assert outbox.backlog == 0, f"{job.op} was queued"
                await asyncio.wait_for(outbox.idle(), h.timeout)
                assert await h.probe.messages() == before, "a declined call reached the platform"
                stats = outbox.stats
                assert (stats["declined"], stats["sent"], stats["charged"]) == (len(declined), 0, 0)
                request = _request("cK2n", [("o1", "Allow"), ("o2", "Deny")])
                outbox.submit(Job.permission(SESSION, request))
                await asyncio.wait_for(outbox.idle(), h.timeout)
                assert vt.now == 0.0, "the card waited for a slot"
                assert outbox.stats["sent"] == 1
                shown = await h.probe.messages()
                assert any(request.title in m.text for m in shown), "the card was delivered"
            finally:
                await outbox.stop(0)
                await vt.close()
                store.close()

    async def test_a_card_comes_after_what_its_session_did_before_it(
        self, harness: Harness
    ) -> None:
        """A session's burst (it starts, the agent says a few things and runs a tool, then
        asks) goes through the core's outbox at the channel's declared limits; the thread, as
        the platform shows it, reads the burst and then the card below it, never the card
        above what led to it. (Issue 32.)"""
        from ..commands.simtime import VirtualTime
        from ..outbox import Job, Outbox
        from ..store import Store

        h = harness
        thread = await self._thread(h)
        burst = [
            OutgoingMessage(type="system_message", text="claude-code started: fix the tests"),
            OutgoingMessage(type="thought", text="Reading the failing test first."),
            sample_message("tool_call"),
            OutgoingMessage(type="text", text="The fixture leaks; running the suite again."),
        ]
        request = _request("cB3q", [("o1", "Allow"), ("o2", "Deny")])
        vt, store = VirtualTime(), Store.memory()
        outbox = Outbox(h.adapter, store, clock=vt.clock, sleep=vt.sleep)
        await outbox.start()
        try:
            for message in burst:  # in quick succession, while the outbox is running
                outbox.submit(Job.message(SESSION, message))
            outbox.submit(Job.permission(SESSION, request))
            await asyncio.wait_for(outbox.idle(), h.timeout)
        finally:
            await outbox.stop(0)
            await vt.close()
            store.close()
        shown = await h.probe.messages(thread if h.adapter.capabilities.threads else None)
        texts = [_visible(f"{m.title}\n{m.text}") for m in shown]
        card = next((i for i, m in enumerate(shown) if request.title in m.text or m.buttons), None)
        assert card is not None, "the permission card did not appear on the platform"
        places = {
            message.text: next(
                (i for i, t in enumerate(texts) if _visible(message.text) in t), None
            )
            for message in burst
        }
        if all(place is None for place in places.values()):
            pytest.skip("this channel shows none of a session's messages")
        above = [text for text, place in places.items() if place is not None and place > card]
        assert not above, f"the card came before what led to it: {above}"

    async def test_a_card_carries_what_its_session_said_just_before_it(
        self, harness: Harness
    ) -> None:
        """Where the channel shows a card's context (`card_context`), a session's burst and
        its question go out as one call, the card, in the first free slot: what led to the
        question reads above its title in the card's own message, in order. A later edit of a
        message it carries (the tool call finishing) and the card's outcome both show in the
        card, and nothing else appears in the thread. (Issue 32.)"""
        from ..commands.simtime import VirtualTime
        from ..outbox import Job, Outbox
        from ..store import Store

        h = harness
        if not h.adapter.capabilities.card_context:
            pytest.skip("this channel does not show a card's context (card_context)")
        thread = await self._thread(h)
        where = thread if h.adapter.capabilities.threads else None
        before = len(await h.probe.messages(where))
        running = sample_message("tool_call")
        burst = [
            OutgoingMessage(type="system_message", text="claude-code started: fix the tests"),
            OutgoingMessage(type="thought", text="Reading the failing test first."),
            running,
            OutgoingMessage(type="text", text="The fixture leaks; running the suite again."),
        ]
        request = _request("cX7k", [("o1", "Allow"), ("o2", "Deny")])
        vt, store = VirtualTime(), Store.memory()
        calls: list[str] = []
        outbox = Outbox(
            h.adapter,
            store,
            clock=vt.clock,
            sleep=vt.sleep,
            on_sent=lambda _, job, __: calls.append(job.op),
        )
        await outbox.start()
        try:
            for message in burst:
                outbox.submit(Job.message(SESSION, message))
            outbox.submit(Job.permission(SESSION, request))
            await asyncio.wait_for(outbox.idle(), h.timeout)
            assert calls == ["send_permission_request"], f"the card waited for {calls[:-1]}"
            shown = (await h.probe.messages(where))[before:]
            assert len(shown) == 1, [m.text for m in shown]
            card = _visible(f"{shown[0].title}\n{shown[0].text}")
            places = [card.find(_visible(m.text)) for m in burst]
            assert -1 not in places, f"the card does not show all of its context: {card}"
            assert places == sorted(places), f"the context is out of order: {card}"
            assert max(places) < card.find(_visible(request.description))
            done = sample_message("tool_update")  # the same call, finished
            outbox.submit(Job.message(SESSION, done))
            outbox.submit(
                Job.permission_update(
                    SESSION,
                    request,
                    PermissionOutcome(status=OutcomeStatus.ANSWERED, option_label="Allow"),
                )
            )
            await asyncio.wait_for(outbox.idle(), h.timeout)
        finally:
            await outbox.stop(0)
            await vt.close()
            store.close()
        shown = (await h.probe.messages(where))[before:]
        assert len(shown) == 1, "an edit of what the card carries became a message of its own"
        card = _visible(f"{shown[0].title}\n{shown[0].text}")
        assert _visible(done.text) in card, f"the finished call is not in the card: {card}"
        assert "Allow" in card, f"the card does not show its outcome: {card}"
        assert not shown[0].buttons, "the answered card still has its buttons"

    async def test_stop_is_idempotent(self, harness: Harness) -> None:
        await harness.adapter.stop()
        await harness.adapter.stop()
