"""Slack's preview dialect: offered by the channel without an instance, it draws the very
Block Kit the channel sends as a Slack client does (mrkdwn parsed back, context lines small
and grey, buttons styled inside the card), and `aep-bridge preview --channel slack` draws the
reference session with it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from aep_bridge import (
    NotificationMessage,
    OutgoingMessage,
    PermissionOption,
    PermissionOutcome,
    PermissionRequest,
)
from aep_bridge.contract.types import OutcomeStatus
from aep_bridge.markup import Code, Details, Paragraph, Span
from aep_bridge_slack.channel import SlackChannel
from aep_bridge_slack.preview import SlackDialect, block_html, inline, mrkdwn_html
from tests.bridge_process import ROOT

PREVIEW = (sys.executable, "-m", "aep_bridge", "preview", "--demo", "--channel", "slack")


def _request() -> PermissionRequest:
    return PermissionRequest(
        id="c1",
        title="claude-code asks permission: Bash",
        description="git push <!channel>",
        options=(
            PermissionOption(id="allow", label="Allow", is_allow=True),
            PermissionOption(id="deny", label="Deny"),
            PermissionOption(id="o2", label="Always allow pushes"),
        ),
    )


def test_the_channel_offers_its_dialect_without_an_instance() -> None:
    dialect = SlackChannel.preview_dialect()
    assert isinstance(dialect, SlackDialect)
    assert dialect.name == "Slack"
    assert dialect.slug == "slack"
    assert not dialect.resend_on_notify


def test_mrkdwn_is_drawn_as_slack_draws_it() -> None:
    assert inline("*bold* _it_ ~gone~ `a*b*` <https://x.example/?a=1&amp;b=2|the link>") == (
        "<strong>bold</strong> <em>it</em> <s>gone</s> <code>a*b*</code> "
        '<a href="https://x.example/?a=1&amp;b=2" target="_blank" rel="noopener noreferrer">'
        "the link</a>"
    )
    # markers inside a word, or with a zero-width space beside them, are text (as in Slack)
    assert inline("snake_case_name a\u200b*\u200bb\u200b*\u200b") == "snake_case_name a*b*"
    # an unsafe target is its text, and an entity is what it stands for
    assert inline("<javascript:alert(1)|x> &lt;!channel&gt;") == "x &lt;!channel&gt;"
    assert mrkdwn_html("> quoted\n```\n*not bold* &lt;\n```") == (
        '<blockquote><div class="line">quoted</div></blockquote>'
        "<pre><code>*not bold* &lt;</code></pre>"
    )


def test_blocks_are_drawn_context_grey_and_buttons_styled() -> None:
    assert block_html({"type": "context", "elements": [{"type": "mrkdwn", "text": "_x_"}]}) == (
        '<div class="context"><span class="element"><em>x</em></span></div>'
    )
    html = SlackDialect().card_html(_request(), None)
    assert '<span class="sbutton primary">Allow</span>' in html
    assert '<span class="sbutton danger">Deny</span>' in html
    assert '<span class="sbutton">Always allow pushes</span>' in html
    assert "git push &lt;!channel&gt;" in html
    assert SlackDialect().card_buttons(_request(), None) == []  # drawn inside the card
    closed = PermissionOutcome(status=OutcomeStatus.ANSWERED, option_label="Deny", by="Alice")
    html = SlackDialect().card_html(_request(), closed)
    assert "sbutton" not in html
    assert '<div class="context"><span class="element">✅ Answered by Alice: Deny' in html


def test_the_preview_draws_what_the_channel_sends() -> None:
    message = OutgoingMessage(
        type="tool_update",
        key="activity:1",
        metadata={"activity": True},
        blocks=(
            Paragraph(
                spans=(
                    Span(text="❌ "),
                    Span(text="Bash", bold=True),
                    Span(text=" "),
                    Span(text="make *all*", code=True),
                    Span(text=" — exit 2", italic=True),
                )
            ),
            Details(summary="last 2 lines", blocks=(Code(code="E   <b>boom</b>\nFAILED t"),)),
        ),
    )
    html = SlackDialect().message_html(message)
    blocks = html[html.index('<div class="blocks">') :]
    assert blocks == (
        '<div class="blocks"><div class="section"><div class="line">❌ <strong>Bash</strong> '
        "<code>make *all*</code> <em>— exit 2</em></div></div>"
        '<div class="context"><span class="element"><em>last 2 lines</em></span></div>'
        '<div class="section"><pre><code>E   &lt;b&gt;boom&lt;/b&gt;\nFAILED t</code></pre>'
        "</div></div>"
    )


def test_a_heads_up_and_its_closing_update() -> None:
    note = NotificationMessage(
        session_id="s1", session_name="Fix totals", type="permission", summary="Allow Bash?"
    )
    assert "❓ <strong>Fix totals</strong>: Allow Bash?" in SlackDialect().notification_html(note)
    closed = note.model_copy(
        update={"outcome": "Allow, by Alice", "outcome_status": OutcomeStatus.ANSWERED}
    )
    assert "✅ <strong>Fix totals</strong>: Allow Bash? — Allow, by Alice" in (
        SlackDialect().notification_html(closed)
    )


def test_aep_bridge_preview_draws_the_demo_in_slack_s_look(tmp_path: Path) -> None:
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": path, "AEP_BRIDGE_PLUGINS": "aep_bridge_slack"}
    page = tmp_path / "page.html"
    done = subprocess.run(
        [*PREVIEW, "--out", str(page)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    shown = page.read_text()
    assert '<body class="slack">' in shown
    assert "<script" not in shown
    # the failing run's output kept to its end in a code block, the plan, the closing line
    failing = shown.index("FAILED tests/test_totals.py::test_rounding - assert 10.0 == 10.01")
    assert shown.rindex("<pre><code>", 0, failing) > shown.rindex("</li>", 0, failing)
    assert "📋 <strong>Plan</strong>" in shown
    assert '<span class="element">Finished in 1m 23s' in shown
    # the card answered in the terminal: its outcome, no buttons
    assert "🖥️ Answered in the terminal: Allow" in shown
    # drawn, not shown as mrkdwn
    body = shown[shown.index("<body") :]
    for raw in ("```", "&amp;lt;", "*Plan*", "|http"):
        assert raw not in body, raw


def test_a_runs_end_is_previewed_on_the_sessions_parent_not_as_a_heads_up() -> None:
    """Slack says a run's end on the session's parent message (no 🏁 heads-up rings): the
    preview shows it so, at the head of the thread, and only the question's heads-up under
    Notifications; and no empty thread named after the session's id appears beside it."""
    from aep_bridge.commands.preview_command import render

    recording = ROOT / "tests" / "sessions" / "realistic.jsonl"
    shown = render(recording.read_bytes(), recording.name, "slack", text=True)
    threads, notes = shown.split("# Notifications", 1)
    assert [line for line in threads.splitlines() if line.startswith("# ")] == [
        "# Fix invoice rounding"
    ]
    head = threads.split("-" * 40, 1)[0]
    assert "🏁 claude-code finished: Fixed: invoice totals off by a cent" in head
    assert "finished" not in notes
    assert "asks permission" in notes
