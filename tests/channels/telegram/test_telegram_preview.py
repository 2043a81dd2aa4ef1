"""Telegram's preview dialect: the bot's own HTML as a browser shows it, its keyboard's rows
under a card, and the channel offering it without being started."""

from __future__ import annotations

from aep_bridge import OutgoingMessage, PermissionOption, PermissionOutcome, PermissionRequest
from aep_bridge.contract.types import OutcomeStatus
from aep_bridge.markup import parse_markdown, plain
from aep_bridge.testing.conformance import sample_message
from aep_bridge_telegram import TelegramChannel
from aep_bridge_telegram.preview import TelegramDialect, browser_html


def test_the_channel_offers_its_dialect_without_an_instance() -> None:
    dialect = TelegramChannel.preview_dialect()
    assert isinstance(dialect, TelegramDialect)
    assert dialect.name == "Telegram"
    assert dialect.resend_on_notify


def test_an_expandable_quote_is_folded_and_opens_without_a_script() -> None:
    out = browser_html("output\n<blockquote expandable><pre>1 failed</pre></blockquote>\nafter")
    assert out == (
        'output\n<details class="expandable"><summary></summary><blockquote><pre>1 failed</pre>'
        "</blockquote></details>after"
    )


def test_telegram_tags_become_a_browsers_and_others_only_their_text() -> None:
    out = browser_html(
        "<b>b</b> <strong>s</strong> <i>i</i> <u>u</u> <s>x</s> <code>c</code> "
        '<pre><code class="language-python">x = 1</code></pre>'
        '<tg-spoiler>hidden</tg-spoiler> <marquee onclick="alert(1)">text</marquee>'
    )
    assert out == (
        "<b>b</b> <b>s</b> <i>i</i> <u>u</u> <s>x</s> <code>c</code> "
        '<pre><code class="language-python">x = 1</code></pre>'
        '<span class="spoiler">hidden</span> text'
    )


def test_entities_stay_text_and_unsafe_links_are_not_links() -> None:
    out = browser_html(
        '&lt;script&gt;alert(1)&lt;/script&gt; <a href="javascript:alert(2)">x</a> '
        '<a href="tg://user?id=1">y</a> <a href="https://example.com/?a=1&amp;b=2">z</a>'
    )
    assert "<script" not in out
    assert "javascript" not in out
    assert "tg://" not in out
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in out
    assert '<span class="link">x</span>' in out
    assert '<span class="link">y</span>' in out
    assert (
        '<a href="https://example.com/?a=1&amp;b=2" target="_blank" rel="noopener noreferrer">z</a>'
    ) in out


def _request(*labels: str) -> PermissionRequest:
    return PermissionRequest(
        id="c1",
        title="claude-code asks permission: Bash",
        description="git push",
        options=tuple(PermissionOption(id=f"o{i}", label=label) for i, label in enumerate(labels)),
    )


def test_a_card_shows_the_keyboards_rows_until_it_closes() -> None:
    dialect = TelegramDialect()
    request = _request("Allow", "Allow always", "Deny", "Ask me later")
    assert dialect.card_buttons(request, None) == [
        ["Allow", "Allow always", "Deny"],
        ["Ask me later"],
    ]
    assert "claude-code asks permission: Bash" in dialect.card_html(request, None)
    answered = PermissionOutcome(status=OutcomeStatus.ANSWERED, option_label="Deny", by="Alice")
    assert dialect.card_buttons(request, answered) == []
    assert answered.summary() in dialect.card_html(request, answered)


def test_a_card_shows_its_context_above_its_title_as_the_bot_sends_it() -> None:
    """`aep-bridge preview` draws a card's context as the bot does: each message as the
    topic shows it, the divider, then the card, and keeps it once the card closed."""
    dialect = TelegramDialect()
    blocks = parse_markdown("The **rounding** bug is in `totals.py`.")
    reply = OutgoingMessage(type="text", text=plain(blocks), blocks=blocks)
    thought = sample_message("thought")
    request = _request("Allow", "Deny").model_copy(update={"context": (reply, thought)})
    for outcome in (
        None,
        PermissionOutcome(status=OutcomeStatus.ANSWERED, option_label="Deny", by="Alice"),
    ):
        shown = dialect.card_html(request, outcome)
        reply_at = shown.index(dialect.message_html(reply))
        thought_at = shown.index(dialect.message_html(thought))
        title_at = shown.index("——————\n❓ <b>claude-code asks permission: Bash</b>")
        assert reply_at < thought_at < title_at
        assert "<b>rounding</b>" in shown
        assert "**" not in shown
    assert dialect.card_buttons(request, None) == [["Allow", "Deny"]]


def test_a_long_answer_is_shown_on_the_card_as_the_bot_cuts_it() -> None:
    """A closed card is drawn as the bot edits it (`format.card_with_outcome`): an answer
    in words longer than the card's outcome line has room for is cut with "…" there, so
    the preview cannot show a card the bot never sent."""
    request = _request("Allow", "Deny").model_copy(update={"accepts_text": True})
    words = "keep going " * 200
    answered = PermissionOutcome(status=OutcomeStatus.ANSWERED, text=words, by="Alice")
    shown = TelegramDialect().card_html(request, answered)
    assert "keep going " * 10 in shown
    assert words.strip() not in shown
    assert shown.endswith("…")
