"""The console view of `aep-bridge run`: one line per event, from every source, each once.

Until the core loop renders sessions into channels, this is how a person sees what reaches
the bridge. It consumes exactly as the core will: through an `EventSource`, recording each
delivery in the store, so a restart shows nothing twice.
"""

from __future__ import annotations

import sys
from typing import TextIO

from .aep.envelope import Event
from .intake.source import EventSource
from .store import Store


def render_line(event: Event) -> str:
    """When, who, which session, what happened and to what."""
    where = f" {event.session}" if event.session else ""
    about = f" {event.subject}" if event.subject else ""
    return f"{event.time} {event.agent}{where} {event.type}{about}"


async def show(source: EventSource, store: Store, out: TextIO | None = None) -> None:
    """Print every new event of `source` until it ends.

    Deliveries are recorded under the source's own name, which is what a relay client
    resumes from: one consumer per source (the core loop takes this place later).
    """
    out = out or sys.stdout
    async for event in source.events(from_="all"):
        if store.record_delivery(source.name, event):
            print(render_line(event), file=out, flush=True)
