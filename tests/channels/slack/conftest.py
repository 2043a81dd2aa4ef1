"""What every Slack test checks: slack-bolt and slack-sdk logged no error (they log what goes
wrong in a listener, a Socket Mode frame or a parse of the fake's answers, and carry on)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _slack_logs_no_errors(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    caplog.set_level(logging.WARNING, logger="slack_bolt")
    caplog.set_level(logging.WARNING, logger="slack_sdk")
    yield
    errors = [
        f"{r.name}: {r.getMessage()}"
        for r in caplog.records
        if r.name.startswith(("slack_bolt", "slack_sdk")) and r.levelno >= logging.ERROR
    ]
    assert errors == []
