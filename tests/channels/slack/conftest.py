"""What every Slack test checks: slack-bolt and slack-sdk logged no error (they log what goes
wrong in a listener, a Socket Mode frame or a parse of the fake's answers, and carry on)."""

from __future__ import annotations

from aep_bridge.testing import library_logs_nothing_wrong

_slack_logs_no_errors = library_logs_nothing_wrong("slack_bolt", "slack_sdk")
