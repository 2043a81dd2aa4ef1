"""The toolkit's `wait_seconds`: the wait a platform's 429 names, never one that would stall
or spin the chat's queue."""

from __future__ import annotations

from aep_bridge import wait_seconds


def test_the_first_wait_named_is_taken_as_seconds() -> None:
    assert wait_seconds(1.5, "9", default=5) == 1.5
    assert wait_seconds(None, "12", default=5) == 12.0, "a Retry-After header's text"
    assert wait_seconds(0, default=5) == 0.0, "no wait is a wait"


def test_a_wait_that_is_no_number_negative_or_endless_is_passed_over() -> None:
    for bad in ("Wed, 21 Oct 2026 07:28:00 GMT", "-3", "inf", "nan", float("inf"), -1.0):
        assert wait_seconds(bad, default=5) == 5, bad
    assert wait_seconds("soon", None, "2", default=5) == 2.0
    assert wait_seconds(default=5) == 5
