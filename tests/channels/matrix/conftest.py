"""What every Matrix test checks: mautrix logged no warning or error (it logs a sync that
failed, a handler that raised or an answer it could not parse, and carries on)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _mautrix_logs_nothing_wrong(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    caplog.set_level(logging.WARNING, logger="mau")
    yield
    wrong = [
        f"{r.name}: {r.getMessage()}"
        for r in caplog.records
        if r.name.startswith("mau") and r.levelno >= logging.WARNING
    ]
    assert wrong == []
