"""How long a platform's 429 says to wait: the number it names, read with care, since a
wait that is text, negative or endless would stall a chat's queue or spin on it."""

from __future__ import annotations

import contextlib
import math


def wait_seconds(*named: float | str | None, default: float) -> float:
    """The first of `named` (a number of seconds, or its text: a `Retry-After` header) that
    is a finite wait of zero or more seconds, else `default`."""
    for value in (value for value in named if value is not None):
        with contextlib.suppress(ValueError):
            seconds = float(value)
            if seconds >= 0 and math.isfinite(seconds):
                return seconds
    return default


__all__ = ["wait_seconds"]
