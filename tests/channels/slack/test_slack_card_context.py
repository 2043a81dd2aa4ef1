"""A card that carries its context (`PermissionRequest.context`, issue 32) on the fake Slack:
what the session said just before the question shows in the card's own message, above its
title, each message drawn as the thread draws it, then a divider and the card; its update
keeps the context (in its latest version) and loses the buttons; a context too large for
one message loses its oldest messages under a "…" line, never the card or its buttons."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from aep_bridge import OutgoingMessage, PermissionOption, PermissionOutcome, PermissionRequest
from aep_bridge.contract.types import OutcomeStatus
from aep_bridge.markup import Diff, Paragraph, Span, parse_markdown
from aep_bridge.testing import FakeCore
from aep_bridge.testing.conformance import sample_message
from aep_bridge_slack import SlackChannel, look
from aep_bridge_slack.preview import SlackDialect

from .fake_slack import ALICE, C0AGENTS, FakeMessage, FakeSlack, Limits
from .probe import make_adapter, shown

SESSION = "s-ctx"
REPLY = OutgoingMessage(
    type="text",
    text="Found it: the rounding. I will fix totals.py.",
    blocks=parse_markdown("**Found it**: the `round()` call in *totals.py*.\n\nI will fix it."),
)
THOUGHT = sample_message("thought")
EDIT_RUNNING = OutgoingMessage(
    type="tool_call",
    key="tool-7",
    metadata={"tool": "Edit", "call_id": "tool-7", "status": "running", "activity": True},
    blocks=(Paragraph(spans=(Span(text="🔧 Edit "), Span(text="totals.py", code=True))),),
)
EDIT_DONE = OutgoingMessage(
    type="tool_update",
    key="tool-7",
    metadata={"tool": "Edit", "call_id": "tool-7", "status": "completed", "activity": True},
    blocks=(
        Paragraph(spans=(Span(text="✅ Edit "), Span(text="totals.py", code=True))),
        Diff(
            path="totals.py",
            unified="@@ -1 +1 @@\n-return round(x, 1)\n+return round(x, 2)",
            added=1,
            removed=1,
        ),
    ),
)
CARD = PermissionRequest(
    id="cCtx1",
    title="claude-code asks permission: Bash",
    description="pytest tests/test_totals.py",
    session_name="Fix totals",
    options=(
        PermissionOption(id="allow", label="Allow", is_allow=True),
        PermissionOption(id="deny", label="Deny"),
    ),
    context=(REPLY, THOUGHT, EDIT_DONE),
)
ANSWERED = PermissionOutcome(status=OutcomeStatus.ANSWERED, option_label="Allow", by="Alice")


@asynccontextmanager
async def started(fake: FakeSlack) -> AsyncIterator[tuple[SlackChannel, FakeCore]]:
    core = FakeCore(approvers=[ALICE["id"]])
    adapter = make_adapter(fake, core)
    core.attach(adapter)
    await adapter.start()
    try:
        await core.create_thread(adapter, SESSION, "Fix totals")
        yield adapter, core
    finally:
        await adapter.stop()


def _card(fake: FakeSlack) -> FakeMessage:
    (card,) = [m for m in fake.messages(C0AGENTS) if "❓" in m.text]
    return card


def _title_at(blocks: list[dict[str, Any]]) -> int:
    return next(i for i, b in enumerate(blocks) if b["type"] == "header")


def _sections(blocks: list[dict[str, Any]]) -> str:
    return "\n".join(
        str((b.get("text") or {}).get("text", ""))
        for b in blocks
        if b.get("type") in ("section", "header")
    )


async def test_the_card_shows_its_context_above_its_title_as_the_thread_shows_it() -> None:
    async with FakeSlack(limits=Limits.loose()) as fake:
        async with started(fake) as (adapter, core):
            await adapter.send_permission_request(SESSION, CARD)
            card = _card(fake)
            # the same messages sent on their own, as the thread shows them
            await core.create_thread(adapter, "s-alone", "Alone")
            for message in CARD.context:
                await adapter.send_message("s-alone", message)
            alone = adapter.core.thread_id(adapter.instance_name, "s-alone")
            assert alone is not None
            thread = [m for m in fake.thread(C0AGENTS, alone) if m.ts != alone]
        assert fake.violations == []  # Slack accepted it (50 blocks, 3,000 a section, ...)

    title = _title_at(card.blocks)
    above = card.blocks[:title]
    # each context message drawn exactly as the thread draws it, oldest first, then a divider
    assert above == [*(b for m in thread for b in m.blocks), {"type": "divider"}]
    words = shown(card)
    reply, thought, edit = (
        words.index("Found it: the round() call"),
        words.index("💭 Looking at the failing test first."),
        words.index("✅ Edit totals.py"),
    )
    question = words.index("❓ claude-code asks permission: Bash")
    assert reply < thought < edit < question
    assert "+return round(x, 2)" in words[edit:question]
    # rendered, not raw markdown: Slack's bold is one star, code one backtick
    raw = _sections(above)
    assert "**" not in raw
    assert "*Found it*" in raw
    assert "`round()`" in raw
    # then the card as it is without context: session, what is asked, its buttons
    assert card.blocks[title:] == _alone(CARD).blocks[_title_at(_alone(CARD).blocks) :]
    assert "Session: Fix totals" in words[question:]
    assert "pytest tests/test_totals.py" in words[question:]
    assert card.action_ids == ["aep_answer_0", "aep_answer_1"]
    # the notification says the question, not the context
    assert card.text.startswith("❓ claude-code asks permission: Bash")


def _alone(request: PermissionRequest) -> look.Look:
    return look.card_look(request.model_copy(update={"context": ()}))


async def test_the_update_keeps_the_context_in_its_latest_version_without_buttons() -> None:
    asked = CARD.model_copy(update={"context": (REPLY, EDIT_RUNNING)})
    async with FakeSlack(limits=Limits.loose()) as fake:
        async with started(fake) as (adapter, _):
            await adapter.send_permission_request(SESSION, asked)
            before = shown(_card(fake))
            # the core's request now holds the tool call's update (same key) in its place
            done = asked.model_copy(update={"context": (REPLY, EDIT_DONE)})
            await adapter.update_permission_request(SESSION, done, ANSWERED)
            card = _card(fake)
        assert fake.violations == []

    assert "🔧 Edit totals.py" in before
    words = shown(card)
    assert len(card.edits) == 1  # edited in place: one message
    assert words.index("Found it: the round() call") < words.index("✅ Edit totals.py")
    assert "🔧 Edit totals.py" not in words
    assert "+return round(x, 2)" in words
    assert words.index("✅ Edit totals.py") < words.index("❓ claude-code asks permission")
    assert card.buttons == []
    assert words.endswith("✅ Answered by Alice: Allow")
    assert {"type": "divider"} in card.blocks


async def test_a_context_too_large_loses_its_oldest_messages_never_the_card() -> None:
    long = [OutgoingMessage(type="text", text=f"message {n}: " + "word " * 500) for n in range(12)]
    many = [OutgoingMessage(type="thought", text=f"thought {n}") for n in range(80)]
    async with FakeSlack(limits=Limits.loose()) as fake:
        async with started(fake) as (adapter, _):
            for card_id, context in (("cLong", long), ("cMany", many)):
                request = CARD.model_copy(update={"id": card_id, "context": tuple(context)})
                await adapter.send_permission_request(SESSION, request)
            cards = [m for m in fake.messages(C0AGENTS) if m.buttons]
        assert fake.violations == []  # within 50 blocks and 3,000 a section

    for card, context in zip(cards, (long, many), strict=True):
        words = shown(card)
        assert len(card.blocks) <= 50
        first = words.split("\n", 1)[0]
        assert first.startswith("… ")
        assert "earlier messages left out" in first
        left_out = int(first.split()[1])
        assert 0 < left_out < len(context)
        # the newest message kept, above the card
        newest = words.index(context[-1].text.split(":")[0] + (":" if context is long else ""))
        assert newest < words.index("❓ claude-code asks permission: Bash")
        # the card whole: what is asked and both buttons
        assert "pytest tests/test_totals.py" in words
        assert card.action_ids == ["aep_answer_0", "aep_answer_1"]
    # the oldest left out, the latest shown, in order
    long_words, many_words = shown(cards[0]), shown(cards[1])
    assert "message 0:" not in long_words
    assert long_words.index("message 10:") < long_words.index("message 11:")
    assert "💭 thought 0\n" not in many_words
    assert "💭 thought 79\n" in many_words
    assert many_words.index("💭 thought 78\n") < many_words.index("💭 thought 79\n")


def test_the_preview_draws_the_card_s_context_above_it() -> None:
    html = SlackDialect().card_html(CARD, None)
    body = html[html.index('<div class="blocks">') :]
    reply = body.index("<strong>Found it</strong>")
    thought = body.index("💭 Looking at the failing test first.")
    edit = body.index("✅ Edit <code>totals.py</code>")
    rule = body.index("<hr>")
    title = body.index('<div class="header">❓ claude-code asks permission: Bash')
    assert reply < thought < edit < rule < title
    assert "<code>round()</code>" in body
    assert "**" not in body
    assert "```" not in body
    assert "+return round(x, 2)" in body
    assert '<span class="sbutton primary">Allow</span>' in body[title:]
    closed = SlackDialect().card_html(CARD, ANSWERED)
    assert "💭 Looking at the failing test first." in closed
    assert "sbutton" not in closed
