"""The channel measures its own card (issue 32): the core folds into a card only what
`DiscordChannel.measure_card` says fits, and a folded message is posted nowhere else, so the
measure must be exact for the channel's drawing: at most `max_message_length` exactly when
the card, as sent and as its outcome's edit redraws it, shows its whole context with no
"left out" line, within Discord's 2,000. Against the fake Discord (which refuses what
Discord refuses), through the real discord.py, and through the core's real `Outbox`."""

from __future__ import annotations

import asyncio

import pytest

from aep_bridge import (
    OutcomeStatus,
    OutgoingMessage,
    PermissionOutcome,
    PermissionRequest,
)
from aep_bridge.commands.simtime import VirtualTime
from aep_bridge.markup import Code, Details, Diff, Paragraph, Span
from aep_bridge.outbox import Job, Outbox
from aep_bridge.store import Store
from tests import permission_card

from .fake_discord import FakeDiscord, Limits
from .test_discord_channel import CARD, DENIED, SESSION, started

LEFT_OUT = "left out"
#: an answer in words full of what Discord's markdown escapes: its outcome line is long
WORDY = PermissionOutcome(
    status=OutcomeStatus.ANSWERED, text="*_~`|" * 120, by="Alice (the on-call approver)"
)


def _said(marker: str, words: int = 4) -> OutgoingMessage:
    return OutgoingMessage(type="text", text=f"{marker}: " + "checking the fixture " * words)


def _tool_update(marker: str, lines: int) -> OutgoingMessage:
    """A finished tool call with its diff and output: embeds in the thread, text in a card."""
    unified = "\n".join(f"+    {marker}_{i} = quantize(line_{i}.amount)" for i in range(lines))
    line = Paragraph(
        spans=(Span(text="✅ "), Span(text="Edit", bold=True), Span(text=f" {marker}.py"))
    )
    return OutgoingMessage(
        type="tool_update",
        text="",
        blocks=(
            line,
            Details(summary="diff", blocks=(Diff(path=f"{marker}.py", unified=unified),)),
            Details(summary="output", blocks=(Code(code="12 passed in 0.4s"),)),
        ),
        key=f"tool:{marker}",
        metadata={"status": "completed"},
    )


def _long_command() -> PermissionRequest:
    return CARD.model_copy(
        update={"id": "cLong", "description": "make check && " + "pytest tests/a.py " * 80}
    )


def _pip_install() -> PermissionRequest:
    """Claude Code's Bash card for a `pip install`, with its reason."""
    tool_input = {"command": PIP_INSTALL, "description": permission_card.REASON}
    payload = permission_card.hook_payload(
        "PermissionRequest", cwd=permission_card.CWD, tool_input=tool_input
    )
    return permission_card.card_of(payload, card="kPip")


PIP_INSTALL = "pip install -e '.[test]' hypothesis==6.112.0"

#: (a card, the session's messages oldest first): each message carries its marker
CASES: dict[str, tuple[PermissionRequest, tuple[OutgoingMessage, ...]]] = {
    "short messages": (CARD, tuple(_said(f"M{i}") for i in range(5))),
    "a long reply": (CARD, (_said("M0"), _said("M1", words=70), _said("M2"))),
    "a tool update with a diff": (CARD, (_said("M0"), _tool_update("M1", 45), _said("M2"))),
    "many messages": (CARD, tuple(_said(f"M{i:02}", words=2) for i in range(40))),
    "a long command": (_long_command(), tuple(_said(f"M{i}", words=8) for i in range(6))),
    # over a thousand characters of command: no room for any context, and the measure says so
    "a very long Bash command": (permission_card.bash_card(), (_said("M0"), _said("M1"))),
    "a realistic Bash card": (
        _pip_install(),
        (_said("M0"), _said("M1", words=30), _tool_update("M2", 30), _said("M3")),
    ),
}


def _shows_all(content: str, context: tuple[OutgoingMessage, ...]) -> bool:
    """Every context message's visible words are in `content` (a diff's first and last
    lines too), and no "left out" line."""
    for message in context:
        if message.blocks:
            folds = [b for d in message.blocks if isinstance(d, Details) for b in d.blocks]
            for fold in folds:
                lines = fold.unified.splitlines() if isinstance(fold, Diff) else [fold.code]
                if not (lines[0] in content and lines[-1] in content):
                    return False
        elif message.text.split(":")[0] + ":" not in content:
            return False
    return LEFT_OUT not in content


def _with(request: PermissionRequest, context: tuple[OutgoingMessage, ...]) -> PermissionRequest:
    return request.model_copy(update={"context": context})


async def _drawn(
    request: PermissionRequest, outcome: PermissionOutcome
) -> tuple[str, str, list[object]]:
    """The card as posted, then as its outcome's edit left it, and what the fake refused."""
    async with FakeDiscord(limits=Limits.loose()) as fake:
        async with started(fake) as (adapter, core):
            thread = int(await core.create_thread(adapter, SESSION, "measure"))
            await adapter.send_permission_request(SESSION, request)
            (posted,) = fake.messages(thread, from_bot=True)
            content = posted.content
            await adapter.update_permission_request(SESSION, request, outcome)
            (edited,) = fake.messages(thread, from_bot=True)
        return content, edited.content, list(fake.violations)


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("outcome", [DENIED, WORDY], ids=["denied", "wordy answer"])
async def test_a_card_measured_to_fit_shows_its_whole_context_sent_and_answered(
    case: str, outcome: PermissionOutcome
) -> None:
    """The core folds the newest messages while the measure allows: the most it would fold
    shows in full when sent and when answered; one more would have been cut when sent (the
    measure is exact, not a guess on the safe side)."""
    request, said = CASES[case]
    async with FakeDiscord(limits=Limits.loose()) as fake, started(fake) as (adapter, _):
        limit = adapter.capabilities.max_message_length
        sizes = [adapter.measure_card(_with(request, said[-k:])) for k in range(1, len(said) + 1)]
    assert sizes == sorted(sizes), "a message more made the card smaller"
    taken = sum(1 for size in sizes if size <= limit)
    folded = said[-taken:] if taken else ()
    posted, answered, refused = await _drawn(_with(request, folded), outcome)
    assert refused == []
    for content in (posted, answered):
        assert _shows_all(content, folded), f"{case}: measured to fit, but cut:\n{content}"
        assert len(content) <= 2000
    assert "Alice" in answered
    if taken < len(said):  # the next one the measure refused would indeed have been cut
        one_more = said[-taken - 1 :]
        posted, _, refused = await _drawn(_with(request, one_more), outcome)
        assert refused == []
        assert not _shows_all(posted, one_more), f"{case}: measured too long, but fit:\n{posted}"
    if case == "short messages":
        assert taken == len(said), f"five short messages do not fit a short card: {sizes}"


async def test_a_realistic_bash_card_takes_its_few_short_messages() -> None:
    """A `pip install` command, its reason, three short messages before it: all in the card."""
    request = _with(_pip_install(), (_said("M0"), _said("M1"), _said("M2")))
    async with FakeDiscord(limits=Limits.loose()) as fake, started(fake) as (adapter, _):
        assert adapter.measure_card(request) <= adapter.capabilities.max_message_length
    posted, answered, refused = await _drawn(request, DENIED)
    assert refused == []
    assert permission_card.in_order(posted, "M0:", "M1:", "M2:", "pip install")
    assert _shows_all(answered, request.context)


async def test_through_the_outbox_every_message_shows_once_none_left_out() -> None:
    """A session queued more than a card can carry, then asked: the core folds what the
    card shows in full and sends the rest ahead of it, so each message is on Discord
    exactly once, as its own message or in the card, and nothing is left out."""
    # ~400 characters each, then tool calls whose diffs are embeds in the thread, text in a card
    said = [_said(f"Q{i:02}", words=20) for i in range(10)]
    said += [_tool_update("Q10", 12), _tool_update("Q11", 12)]
    request = CARD.model_copy(update={"id": "cOut"})
    vt, store = VirtualTime(), Store.memory()
    async with FakeDiscord(limits=Limits.loose()) as fake:
        async with started(fake) as (adapter, core):
            thread = int(await core.create_thread(adapter, SESSION, "outbox"))
            outbox = Outbox(adapter, store, clock=vt.clock, sleep=vt.sleep)
            await outbox.start()
            try:
                for message in said:
                    outbox.submit(Job.message(SESSION, message))
                outbox.submit(Job.permission(SESSION, request))
                await asyncio.wait_for(outbox.idle(), 30)
                outbox.submit(Job.permission_update(SESSION, request, DENIED))
                await asyncio.wait_for(outbox.idle(), 30)
            finally:
                await outbox.stop(0)
                await vt.close()
                store.close()
        assert fake.violations == []
        messages = fake.messages(thread, from_bot=True)
        shown = [m.content for m in messages]
        embedded = [str(e.get("description", "")) for m in messages for e in m.embeds]
    (card,) = [content for content in shown if "❓" in content]
    assert "Answered by Alice: Deny" in card
    assert LEFT_OUT not in card
    everything = "\n".join([*shown, *embedded])
    # each message by its own words: a reply's marker, a tool call's diff's first and last line
    marks = [f"Q{i:02}:" for i in range(10)] + [
        f"{q}_{n} =" for q in ("Q10", "Q11") for n in (0, 11)
    ]
    counts = {mark: everything.count(mark) for mark in marks}
    assert set(counts.values()) == {1}, counts
    # the newest, just before the question, in the card whole
    assert "Q11_0 =" in card
    assert "Q11_11 =" in card
