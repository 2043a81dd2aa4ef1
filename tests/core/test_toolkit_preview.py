"""The toolkit's preview scaffolding (`aep_bridge.toolkit.preview`): a dialect built on
`SentPreview` draws the payload its channel sends and nothing else; agent text is escaped;
the look helpers every channel shares."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

import aep_bridge
from aep_bridge import (
    InlineHtml,
    OutgoingMessage,
    PermissionOutcome,
    PermissionRequest,
    SentPreview,
    autolinked,
    button_rows,
    expiry_time,
    heads_up_icon,
    message_icon,
    outcome_icon,
)
from aep_bridge.contract.preview import Shown, ShownCard, ShownMessage, ShownThread, page
from aep_bridge.contract.types import NotificationMessage, OutcomeStatus

#: a toy platform's payload: the text it posts and its buttons' labels in rows
Payload = tuple[str, list[list[str]]]


def _send_card(request: PermissionRequest, outcome: PermissionOutcome | None) -> Payload:
    """What the toy channel sends for a card: its title, its outcome once it has one, and
    its options as buttons, two a row, upper-cased (so a label drawn from the request instead
    of from the payload would show)."""
    text = request.title + (f"\n{outcome.summary()}" if outcome is not None else "")
    return text, button_rows([o.label.upper() for o in request.options], 2)


class ToyDialect(SentPreview[Payload]):
    name = "Toy"
    slug = "toy"

    def message_payload(self, content: OutgoingMessage) -> Payload:
        return content.text, []

    def card_payload(
        self, request: PermissionRequest, outcome: PermissionOutcome | None
    ) -> Payload:
        return _send_card(request, outcome)

    def payload_html(self, payload: Payload) -> str:
        return f'<p class="text">{self.escape(payload[0])}</p>'

    def payload_buttons(self, payload: Payload) -> list[list[str]]:
        return payload[1]


def _request(*labels: str, **extra: object) -> PermissionRequest:
    """A card offering `labels`; `extra` sets any other field (`expires_at`)."""
    options = [{"id": f"o{i}", "label": text} for i, text in enumerate(labels)]
    fields = {"id": "c1", "title": "claude-code asks permission: Bash", "options": options}
    return PermissionRequest.model_validate(fields | extra)


def test_a_cards_buttons_are_drawn_from_the_payload_the_channel_sends() -> None:
    request = _request("Allow", "Allow always", "Deny")
    assert ToyDialect().card_buttons(request, None) == [["ALLOW", "ALLOW ALWAYS"], ["DENY"]]


def test_a_closed_card_has_no_buttons_and_shows_its_outcome() -> None:
    request = _request("Allow", "Deny")
    answered = PermissionOutcome(status=OutcomeStatus.ANSWERED, option_label="Deny", by="Alice")
    dialect = ToyDialect()
    assert dialect.card_buttons(request, answered) == []
    assert "Answered by Alice: Deny" in dialect.card_html(request, answered)


def test_agent_text_in_a_bubble_is_escaped_on_the_page() -> None:
    said = OutgoingMessage(type="text", text='<script>alert("x")</script> & <b>bold</b>')
    card = _request("<img src=x onerror=alert(1)>")
    shown = Shown(threads=[ShownThread("s", [ShownMessage(said), ShownCard(card)])])
    html = page(shown, ToyDialect(), title="t", about="a")
    assert "<script" not in html
    assert "<img" not in html
    assert "<b>bold" not in html
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &lt;b&gt;bold" in html
    assert "&lt;IMG SRC=X ONERROR=ALERT(1)&gt;" in html  # the payload's label, escaped


def test_inline_html_escapes_plain_text_links_safe_addresses_and_keeps_drawn_markup() -> None:
    out = InlineHtml()
    out.text("see <https://example.com/a?b=1&c=2> or javascript:alert(1) ")
    out.html("<strong>")
    out.text("a<b")
    out.html("</strong>")
    drawn = out.done()
    assert drawn.startswith("see &lt;<a href=")
    assert 'href="https://example.com/a?b=1&amp;c=2"' in drawn
    assert 'rel="noopener noreferrer"' in drawn
    assert "javascript:alert(1)" in drawn
    assert 'href="javascript' not in drawn
    assert drawn.endswith("<strong>a&lt;b</strong>")


def test_autolinked_takes_the_platforms_own_pattern() -> None:
    slack_like = re.compile(r"https?://[^\s<>|]+")
    drawn = autolinked("https://a.example|label", slack_like)
    assert '<a href="https://a.example"' in drawn
    assert drawn.endswith("</a>|label")


def test_the_icons_of_a_message_an_outcome_and_a_heads_up() -> None:
    def update(**metadata: object) -> OutgoingMessage:
        return OutgoingMessage(type="tool_update", text="x", metadata=metadata)

    assert message_icon(update(status="failed")) == "❌"
    assert message_icon(update(status="something new")) == "🔧"
    assert message_icon(update(status="completed", activity=True)) == ""  # lines carry theirs
    assert message_icon(OutgoingMessage(type="plan", text="x")) == "📋"
    assert message_icon(OutgoingMessage(type="text", text="x")) == ""
    assert outcome_icon(PermissionOutcome(status=OutcomeStatus.EXPIRED)) == "⌛"
    done = NotificationMessage(type="completed", session_id="s", summary="done")
    assert heads_up_icon(done) == "🏁"
    asked = NotificationMessage(type="permission", session_id="s", summary="?")
    assert heads_up_icon(asked) == "❓"


def test_expiry_time_is_utc_and_none_when_it_never_expires() -> None:
    at = datetime(2026, 1, 2, 15, 4, tzinfo=timezone(timedelta(hours=2)))
    assert expiry_time(_request("Allow", expires_at=at)) == "13:04 UTC"
    assert expiry_time(_request("Allow")) is None
    beyond = datetime.max.replace(tzinfo=timezone(timedelta(hours=-5)))
    assert expiry_time(_request("Allow", expires_at=beyond)) is None


def test_button_rows_keep_order_and_the_last_row_short() -> None:
    assert button_rows(["a", "b", "c", "d", "e"], 2) == [["a", "b"], ["c", "d"], ["e"]]
    assert button_rows([], 5) == []


def test_the_toolkit_is_public_and_imported_only_on_first_use() -> None:
    from aep_bridge.toolkit import preview

    assert aep_bridge.SentPreview is preview.SentPreview
    check = (
        "import sys, aep_bridge; assert 'aep_bridge.toolkit.preview' not in sys.modules; "
        "aep_bridge.SentPreview; assert 'aep_bridge.toolkit.preview' in sys.modules"
    )
    subprocess.run([sys.executable, "-c", check], check=True, timeout=60)


@pytest.mark.parametrize("module", ["setup", "preview", "text"])
def test_a_toolkit_module_defines_only_public_names_or_private_ones(module: str) -> None:
    """These modules have no `__all__` (the package's `_HOMES` lists their names): every name
    one defines without a leading underscore is a public `aep_bridge` name."""
    path = Path(aep_bridge.__file__).parent / "toolkit" / f"{module}.py"
    defined: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defined.add(node.name)
        elif isinstance(node, ast.Assign):
            defined.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            defined.add(node.target.id)
    public = {name for name in defined if not name.startswith("_")}
    assert public
    assert public - set(aep_bridge.__all__) == set()
