"""What every test of a platform channel checks: its SDK logged nothing wrong.

An SDK logs what goes wrong in a gateway event, a callback or a parse of the fake's answers,
and carries on: the test would pass while the channel missed what the person did. In your
channels' tests' conftest.py:

    from aep_bridge.testing import library_logs_nothing_wrong

    _chat_sdk_logs_no_errors = library_logs_nothing_wrong("chat_sdk")

and every test there fails if a logger named `chat_sdk` (or below it) logged an error
(`level=logging.WARNING`: a warning too), during its setup, its call or its teardown.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Literal

import pytest

__all__ = ["library_logs_nothing_wrong", "logged_wrong"]


def logged_wrong(
    records: Iterable[logging.LogRecord], loggers: tuple[str, ...], level: int = logging.ERROR
) -> list[str]:
    """The records of `loggers` (or their children) at `level` or above, as `name: message`."""
    return [
        f"{r.name}: {r.getMessage()}"
        for r in records
        if r.levelno >= level and any(r.name == n or r.name.startswith(f"{n}.") for n in loggers)
    ]


def library_logs_nothing_wrong(
    *loggers: str, level: int = logging.ERROR, allow: tuple[str, ...] = ()
) -> Callable[..., Any]:
    """An autouse pytest fixture: the test fails if `loggers` logged at `level` or above.
    `allow`: patterns (`re.search` on `name: message`) of a known record to let pass; assign
    the fixture under the conftest's name in one test module to narrow it to that module."""
    if not loggers:
        raise ValueError("name the SDK's loggers, e.g. library_logs_nothing_wrong('discord')")

    @pytest.fixture(autouse=True)
    def _library_logs_nothing_wrong(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
        for name in loggers:
            caplog.set_level(min(level, logging.WARNING), logger=name)
        yield
        # `caplog.records` after the yield holds only the teardown's records: read every phase
        phases: tuple[Literal["setup", "call", "teardown"], ...] = ("setup", "call", "teardown")
        records = [r for when in phases for r in caplog.get_records(when)]
        wrong = logged_wrong(records, loggers, level)
        assert [w for w in wrong if not any(re.search(a, w) for a in allow)] == []

    return _library_logs_nothing_wrong
