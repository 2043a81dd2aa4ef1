"""Discord's preview dialect: offered by the channel without an instance, Discord's rows of
five buttons, a form's one button, a message drawn from the very content and embeds the
channel sends, and the page `aep-bridge preview` draws with it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from aep_bridge import (
    FormField,
    OutgoingMessage,
    PermissionOption,
    PermissionOutcome,
    PermissionRequest,
)
from aep_bridge.contract.types import OutcomeStatus
from aep_bridge.markup import Code, Details, Paragraph, Span
from aep_bridge_discord import DiscordChannel
from aep_bridge_discord.preview import DiscordDialect
from tests.bridge_process import ROOT

PREVIEW = (sys.executable, "-m", "aep_bridge", "preview", "--demo", "--channel", "discord")


def _request(*labels: str, **extra: object) -> PermissionRequest:
    return PermissionRequest.model_validate(
        {
            "id": "c1",
            "title": "claude-code asks permission: Bash",
            "description": "git push",
            "options": [PermissionOption(id=f"o{i}", label=text) for i, text in enumerate(labels)],
            **extra,
        }
    )


def test_the_channel_offers_its_dialect_without_an_instance() -> None:
    dialect = DiscordChannel.preview_dialect()
    assert isinstance(dialect, DiscordDialect)
    assert dialect.name == "Discord"
    assert dialect.resend_on_notify
    assert dialect.thread_name("x" * 150) == "x" * 99 + "…"


def test_a_card_shows_rows_of_five_until_it_closes_and_a_form_one_button() -> None:
    dialect = DiscordDialect()
    request = _request(*(f"Option {n}" for n in range(7)))
    assert dialect.card_buttons(request, None) == [
        [f"Option {n}" for n in range(5)],
        ["Option 5", "Option 6"],
    ]
    answered = PermissionOutcome(status=OutcomeStatus.ANSWERED, option_label="Deny", by="Alice")
    assert dialect.card_buttons(request, answered) == []
    assert answered.summary() in dialect.card_html(request, answered)
    form = _request(kind="form", fields=[FormField(id="f1", type="string", label="Note")])
    assert dialect.card_buttons(form, None) == [["Fill in ✏️"]]


def test_aep_bridge_preview_draws_the_demo_in_discord_s_look(tmp_path: Path) -> None:
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": path, "AEP_BRIDGE_PLUGINS": "aep_bridge_discord"}
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
    assert 'class="discord"' in shown
    assert "<script" not in shown
    # the failing run's output in a red embed, the edits' diffs in green ones, the plan
    failing = shown.index("FAILED tests/test_totals.py::test_rounding - assert 10.0 == 10.01")
    assert shown.rindex('<div class="embed red">', 0, failing) > shown.rindex("</li>", 0, failing)
    assert shown.count('<div class="embed green">') >= 3
    assert "📋 Plan" in shown
    assert '<div class="subtext">Finished in 1m 23s' in shown
    # drawn, not shown as markdown
    body = shown[shown.index("<body") :]
    for raw in ("**", "```", "-# ", "\\_", "](<"):
        assert raw not in body, raw


def test_the_preview_draws_what_the_channel_sends() -> None:
    message = OutgoingMessage(
        type="tool_update",
        text="",
        key="activity:1",
        metadata={"activity": True},
        blocks=(
            Paragraph(
                spans=(
                    Span(text="❌ "),
                    Span(text="Bash", bold=True),
                    Span(text=" "),
                    Span(text="make **all**", code=True),
                    Span(text=" — exit 2", italic=True),
                )
            ),
            Details(summary="last 2 lines", blocks=(Code(code="E   <b>boom</b>\nFAILED t"),)),
        ),
    )
    html = DiscordDialect().message_html(message)
    assert html == (
        '<div class="line">❌ <strong>Bash</strong> <code>make **all**</code> '
        "<em>— exit 2</em></div>"
        '<div class="embed red"><div class="embed-title">❌ <strong>Bash</strong> '
        "<code>make **all**</code> <em>— exit 2</em></div>"
        '<div class="embed-description"><pre><code>E   &lt;b&gt;boom&lt;/b&gt;\nFAILED t'
        "</code></pre></div>"
        '<div class="embed-footer">last 2 lines</div></div>'
    )


def test_a_card_with_more_options_than_discord_takes_shows_the_25_buttons_sent() -> None:
    """The buttons are read from the view the channel attaches (`card_view`), which keeps
    Discord's 25: the preview shows no 26th button the bot never sent."""
    request = _request(*(f"Option {n}" for n in range(30)))
    assert DiscordDialect().card_buttons(request, None) == [
        [f"Option {n}" for n in range(row, row + 5)] for row in range(0, 25, 5)
    ]
