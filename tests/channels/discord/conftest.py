"""What every Discord test checks: discord.py logged no error (it logs what goes wrong in a
gateway event, a button's callback or a parse of the fake's payloads, and carries on)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _discord_logs_no_errors(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    caplog.set_level(logging.WARNING, logger="discord")
    yield
    errors = [
        f"{r.name}: {r.getMessage()}"
        for r in caplog.records
        if r.name.startswith("discord") and r.levelno >= logging.ERROR
    ]
    assert errors == []
