"""Rendering: an AEP event as what a channel shows.

`Renderer.render(event, ceiling=..., verbosity=...)` turns one event into the messages for a
session's thread, the notification (if any) that goes outside it, and a new thread name (on
`session.started`). `Renderer.permission_request` turns an `attention.requested` into the card
a channel shows with buttons; the core owns that card and its lifecycle.

Everything shown passes two gates, in this order:

1. **Capture.** The event is down-levelled to the channel's ceiling with `downlevel` (the
   bridge is a redacting re-emitter, AEP-0001 §8.2e), and then held to its own declared
   capture: a field above what the event claims is dropped, and below `redacted` the attention
   prompt and labels are the structural placeholders, whatever the emitter wrote there.
2. **Redaction.** Every string taken from the event goes through `Redactor.text` before it is
   composed or shortened (a secret cut in half would no longer match its pattern), and every
   finished message (its text and `metadata`, whoever produced it, vendor plugins included)
   goes through the pipeline once more.

The renderer keeps state, bounded: per session and ceiling, the plan (so the plan message
accumulates tasks), each step's name, the tool calls (for their lines' updates and the cards
they cause) and the working folder; per thread and look (ceiling, verbosity, what rings,
whether the channel edits), the conversation (`activity.Thread`: the open activity message,
the last bubble a footer may join, a reply held at quiet). The core renders each event once
per look, in order; the same event again for the same look gives the same rendering.

The package: `dispatch` (the `Renderer`, which maps each type to its handler), `draft`
(`Rendered`, `Draft`), `base` (the gate, redacted text, the bounded state), `cards` (the card
of a request, `aep_form_values`), one mixin module per event family (`session`, `run`,
`tool`, `attention`, `progress`, `message`, `agent`, `records`, `control`, `vendor`) and
`helpers`.

The mapping, type by type, is documented in `docs/rendering.md`.
"""

from __future__ import annotations

from .cards import aep_form_values
from .dispatch import RENDERED_TYPES, Renderer
from .draft import (
    DEFAULT_NOTIFY,
    NotificationKind,
    Rendered,
    ToolRenderer,
    VendorRenderer,
    Verbosity,
)
from .helpers import LEVELS

__all__ = [
    "DEFAULT_NOTIFY",
    "LEVELS",
    "RENDERED_TYPES",
    "NotificationKind",
    "Rendered",
    "Renderer",
    "ToolRenderer",
    "VendorRenderer",
    "Verbosity",
    "aep_form_values",
]
