"""A card that carries its context (issue 32): what its session said just before it, folded
by the core into the card's own message (`PermissionRequest.context`), is drawn above the
card as the thread draws each message, then a rule, then the card and its buttons; the
outcome's edit redraws it all; a context too long for Discord's 2,000 loses its oldest
messages, never the card. Against the fake Discord (which refuses what Discord refuses),
through the real discord.py, and in the preview dialect."""

from __future__ import annotations

import re

from aep_bridge import OutgoingMessage, PermissionRequest
from aep_bridge.markup import Code, Details, Diff, Paragraph, Span
from aep_bridge.testing.conformance import sample_message
from aep_bridge_discord import markdown
from aep_bridge_discord.look import card_markdown
from aep_bridge_discord.preview import DiscordDialect
from tests import permission_card

from .fake_discord import FakeDiscord, FakeMessage, Limits
from .test_discord_channel import CARD, DENIED, SESSION, started
from .test_discord_markdown import render, visible

#: a reply with markdown: bold, inline code, a code block
REPLY = OutgoingMessage(
    type="text",
    text="",
    blocks=(
        Paragraph(
            spans=(
                Span(text="The rounding is "),
                Span(text="off by a cent", bold=True),
                Span(text=" in "),
                Span(text="totals.py", code=True),
                Span(text=":"),
            )
        ),
        Code(code="round(10.005, 2)  # 10.0", language="python"),
    ),
)
THOUGHT = sample_message("thought")


def _line(icon: str, tool: str, what: str, summary: str = "") -> Paragraph:
    spans = [Span(text=f"{icon} "), Span(text=tool, bold=True), Span(text=" "), Span(text=what)]
    if summary:
        spans.append(Span(text=f" — {summary}", italic=True))
    return Paragraph(spans=tuple(spans))


def _activity(*blocks: Paragraph | Details) -> OutgoingMessage:
    return OutgoingMessage(
        type="tool_update", text="", blocks=blocks, key="activity:1", metadata={"activity": True}
    )


EDIT_DIFF = Details(
    summary="diff",
    blocks=(Diff(path="totals.py", unified="-    return round(x, 2)\n+    return q(x)", added=1),),
)
#: the session's tool calls: an edit done with its diff, a test run still running
RUNNING = _activity(
    _line("✅", "Edit", "totals.py", "+1 −1"), EDIT_DIFF, _line("⏳", "Bash", "make")
)
#: the same message edited since: the run finished, with its output
FINISHED = _activity(
    _line("✅", "Edit", "totals.py", "+1 −1"),
    EDIT_DIFF,
    _line("✅", "Bash", "make", "exit 0"),
    Details(summary="output", blocks=(Code(code="12 passed in 0.4s"),)),
)


def _with(request: PermissionRequest, *context: OutgoingMessage) -> PermissionRequest:
    return request.model_copy(update={"context": context})


def _card_message(messages: list[FakeMessage]) -> FakeMessage:
    (card,) = [m for m in messages if "❓" in m.content]
    return card


def _prose(content: str) -> str:
    """What a person reads outside code blocks (Discord draws the markdown)."""
    return visible(render(re.sub(r"(?s)```.*?```", "", content)))


async def test_a_card_shows_its_context_above_its_title_as_the_thread_draws_it() -> None:
    request = _with(permission_card.edit_card(), REPLY, THOUGHT, RUNNING)
    async with FakeDiscord(limits=Limits.loose()) as fake:
        async with started(fake) as (adapter, core):
            thread = int(await core.create_thread(adapter, SESSION, "context"))
            # the same messages as the thread shows them, for comparison
            for message in (REPLY, THOUGHT):
                await adapter.send_message(SESSION, message)
            await adapter.send_permission_request(SESSION, request)
        assert fake.violations == []
        reply, thought, card = fake.messages(thread, from_bot=True)
    context, rule, own = card.content.partition(f"\n\n{markdown.RULE}\n")
    assert rule, card.content
    # each context message drawn exactly as the thread draws it, oldest first
    assert context.startswith(f"{reply.content}\n\n{thought.content}\n\n")
    assert thought.content == "💭 Looking at the failing test first."
    # the tool calls: their lines with their icons, the diff as a diff block, in the content
    # (an embed would sit under the card), above the card
    assert permission_card.in_order(
        context,
        "✅ **Edit** totals.py *— +1 −1*",
        "```diff\n-    return round(x, 2)\n+    return q(x)\n```",
        "⏳ **Bash** make",
    )
    assert card.embeds == []
    # rendered: no markdown marker where Discord draws it
    assert "**" not in _prose(context)
    assert "off by a cent" in _prose(context)
    # then the card as it is without context, and its buttons
    assert own == card_markdown(request)
    assert own.startswith("❓ **claude-code asks permission: Edit**")
    labels = [c["label"] for row in card.components for c in row["components"]]
    assert labels == [o.label for o in request.options]
    assert len(card.content) <= 2000


async def test_the_outcome_redraws_the_context_in_its_latest_version_without_buttons() -> None:
    async with FakeDiscord(limits=Limits.loose()) as fake:
        async with started(fake) as (adapter, core):
            thread = int(await core.create_thread(adapter, SESSION, "context"))
            await adapter.send_permission_request(SESSION, _with(CARD, REPLY, THOUGHT, RUNNING))
            # the core's update carries the context, the activity edited since
            await adapter.update_permission_request(
                SESSION, _with(CARD, REPLY, THOUGHT, FINISHED), DENIED
            )
        assert fake.violations == []
        card = _card_message(fake.messages(thread, from_bot=True))
    assert card.components == []
    assert permission_card.in_order(
        card.content,
        "off by a cent",
        "💭 Looking at the failing test first.",
        "✅ **Bash** make *— exit 0*",
        "12 passed in 0.4s",
        markdown.RULE,
        "❓ **claude-code asks permission: Bash**",
        "rm -rf build/",
        "Answered by Alice: Deny",
    )
    assert "⏳" not in card.content


async def test_a_context_too_long_loses_its_oldest_messages_never_the_card() -> None:
    said = [
        OutgoingMessage(type="text", text=f"Message {i}: " + "word " * 120) for i in range(1, 7)
    ]
    request = _with(permission_card.edit_card(), *said)
    async with FakeDiscord(limits=Limits.loose()) as fake:
        async with started(fake) as (adapter, core):
            thread = int(await core.create_thread(adapter, SESSION, "context"))
            await adapter.send_permission_request(SESSION, request)
            posted = _card_message(fake.messages(thread, from_bot=True)).content
            await adapter.update_permission_request(SESSION, request, DENIED)
        assert fake.violations == []
        card = _card_message(fake.messages(thread, from_bot=True))
    for content in (posted, card.content):
        assert len(content) <= 2000
        shown = [i for i in range(1, 7) if f"Message {i}:" in content]
        assert shown, content
        assert shown == list(range(7 - len(shown), 7))  # the newest kept
        gone = 6 - len(shown)
        assert content.startswith(f"-# … {gone} earlier messages left out\n\n")
        assert "❓ **claude-code asks permission: Edit**" in content
    assert card_markdown(request) in posted  # the card whole
    assert "Answered by Alice: Deny" in card.content


def test_the_preview_draws_a_card_s_context_above_it() -> None:
    dialect = DiscordDialect()
    html = dialect.card_html(_with(CARD, REPLY, THOUGHT, RUNNING), None)
    assert permission_card.in_order(
        html,
        "<strong>off by a cent</strong>",
        "💭 Looking at the failing test first.",
        "✅ <strong>Edit</strong> totals.py",
        "return q(x)",
        "⏳ <strong>Bash</strong> make",
        markdown.RULE,
        "❓ <strong>claude-code asks permission: Bash</strong>",
    )
    assert "**" not in html
    # without context, the card as before
    assert markdown.RULE not in dialect.card_html(CARD, None)


async def test_an_error_and_a_plan_in_the_context_stay_above_the_card_not_in_embeds() -> None:
    """In the thread they are embeds, which Discord draws under all of a message's text: in
    a card's message they would sit under the card, so they are its text, above it."""
    request = _with(CARD, sample_message("plan"), sample_message("error"))
    async with FakeDiscord(limits=Limits.loose()) as fake:
        async with started(fake) as (adapter, core):
            thread = int(await core.create_thread(adapter, SESSION, "context"))
            await adapter.send_permission_request(SESSION, request)
        assert fake.violations == []
        card = _card_message(fake.messages(thread, from_bot=True))
    assert card.embeds == []
    assert permission_card.in_order(
        card.content,
        "📋 1\\. reproduce",
        "**⚠️ run failed: budget\\_exceeded**",
        markdown.RULE,
        "❓ **claude-code asks permission: Bash**",
    )
