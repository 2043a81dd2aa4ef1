"""The console view of `aep-bridge run`: one line per event, duplicates collapsed.

Until the channels arrive this is how a person sees what reaches the bridge. Delivery is
at-least-once, so events are deduped on `(source, id)` over a bounded window.
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from collections.abc import Sequence
from typing import TextIO

from .aep.envelope import Event


def render_line(event: Event) -> str:
    """When, who, which session, what happened and to what."""
    where = f" {event.session}" if event.session else ""
    about = f" {event.subject}" if event.subject else ""
    return f"{event.time} {event.agent}{where} {event.type}{about}"


class ConsoleSink:
    """Prints each new event; remembers the last `window` keys to drop redeliveries."""

    def __init__(self, out: TextIO | None = None, window: int = 100_000) -> None:
        self._out = out or sys.stdout
        self._seen: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._window = window

    async def __call__(self, events: Sequence[Event]) -> None:
        for event in events:
            key = event.dedupe_key
            if key in self._seen:
                continue
            self._seen[key] = None
            if len(self._seen) > self._window:
                self._seen.popitem(last=False)
            print(render_line(event), file=self._out, flush=True)
