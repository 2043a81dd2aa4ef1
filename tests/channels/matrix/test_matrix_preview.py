"""Matrix's preview dialect draws the very HTML the channel sends, a card's reactions under
it, and `aep-bridge preview --channel matrix` draws the reference session with it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from aep_bridge import OutgoingMessage, PermissionOption, PermissionOutcome, PermissionRequest
from aep_bridge.contract.types import OutcomeStatus
from aep_bridge_matrix import MatrixChannel, html
from aep_bridge_matrix.preview import MatrixDialect
from tests.bridge_process import ROOT

REQUEST = PermissionRequest(
    id="c1",
    title="claude-code asks permission: Bash",
    description="git push <b>@room</b>",
    options=(PermissionOption(id="a", label="Allow"), PermissionOption(id="d", label="Deny")),
)


def test_the_preview_draws_what_the_channel_sends():
    dialect = MatrixChannel.preview_dialect()
    assert isinstance(dialect, MatrixDialect)
    message = OutgoingMessage(type="text", text="<script>alert(1)</script>")
    assert html.message(message).html in dialect.message_html(message)
    assert "<script>" not in dialect.message_html(message)
    card = dialect.card_html(REQUEST, None)
    assert html.card(REQUEST).html in card
    assert "git push &lt;b&gt;@\u2060room&lt;/b&gt;" in card
    assert dialect.card_buttons(REQUEST, None) == [["1️⃣ 1", "2️⃣ 1"]]
    answered = PermissionOutcome(
        status=OutcomeStatus.ANSWERED, option_id="a", option_label="Allow", by="@ada:x.org"
    )
    assert dialect.card_buttons(REQUEST, answered) == []
    assert "Answered by @ada:x.org" in dialect.card_html(REQUEST, answered)


def test_aep_bridge_preview_draws_a_session_in_matrix(tmp_path: Path):
    out = tmp_path / "matrix.html"
    env = {**os.environ, "AEP_BRIDGE_PLUGINS": "aep_bridge_matrix", "PYTHONPATH": str(ROOT)}
    subprocess.run(
        [sys.executable, "-m", "aep_bridge", "preview", "--demo", "--channel", "matrix",
         "--out", str(out)],
        cwd=ROOT, env=env, check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    page = out.read_text()
    assert '<body class="matrix">' in page
    assert "❓" in page
    assert '<code class="language-' in page
