"""What every Slack test checks: slack-bolt and slack-sdk logged no error (they log what goes
wrong in a listener, a Socket Mode frame or a parse of the fake's answers, and carry on)."""

from __future__ import annotations

from aep_bridge.testing import library_logs_nothing_wrong

_slack_logs_no_errors = library_logs_nothing_wrong("slack_bolt", "slack_sdk")

#: bolt's one known record when a test stops the bridge (a restart) while bolt still acks an
#: envelope over the closing Socket Mode session: a module whose test restarts assigns
#: `library_logs_nothing_wrong("slack_bolt", "slack_sdk", allow=AT_A_RESTART)` under the
#: fixture's name above
AT_A_RESTART = (
    r"^slack_bolt\.AsyncApp: Failed to run a request listener: Cannot write to closing transport",
)
