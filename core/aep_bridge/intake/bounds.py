"""The bridge's own bounds on an event's identifying strings, checked as an event comes in.

AEP gives `id`, `source`, `session` and the other correlation ids no length (AEP-0001 §12:
"no charset or length guarantee"), and the bridge keys its store on them: the dedupe window on
`(source, id)`, sessions and resume positions on `(source, session)`, questions and answers on
ids. Unbounded, 200 events with a 450 KB `source` and `id` each (each under the 1 MiB event
limit) grew `state.db` by 630 MB, none of it in the replay buffers' budget. So every source
(HTTP, the WebSocket, relays, followed logs) refuses an event whose identifying strings are
longer than these, as invalid, before anything of it is kept. The bounds are generous: a ULID
is 26 characters, the agents' session ids are UUIDs (36), and a `source` in the recommended
form `aep://{host}/agent/{agent}/session/{session}` with ids at the bound still fits.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Final

from ..aep.envelope import Event
from ..aep.errors import InvalidEvent, Violation
from ..aep.validation import parse_event

#: characters of an id: `id`, `agent`, `session`, `run`, `step`, `cause`
ID_CHARS: Final = 512
#: characters of `source` (a URI that often embeds the agent and the session)
SOURCE_CHARS: Final = 2048
#: characters of `subject` (a tool's name, a file's path, a request's id)
SUBJECT_CHARS: Final = 4096

#: each identifying attribute and its bound, in the envelope's order (AEP-0001 §5.1)
LIMITS: Final = MappingProxyType(
    {
        "id": ID_CHARS,
        "subject": SUBJECT_CHARS,
        "source": SOURCE_CHARS,
        "agent": ID_CHARS,
        "session": ID_CHARS,
        "run": ID_CHARS,
        "step": ID_CHARS,
        "cause": ID_CHARS,
    }
)

#: what a refusal cites: the endpoint's limits on what it takes in (a 400 `invalid-event`)
RULE: Final = "AEP-0003 §3.2"


def overlong(event: Event) -> list[Violation]:
    """A violation for each identifying string of `event` over its bound (the value itself is
    not quoted: it is what is too long)."""
    found = []
    for name, limit in LIMITS.items():
        value = getattr(event, name)
        if value is not None and len(value) > limit:
            found.append(
                Violation(
                    RULE,
                    f"{name} is {len(value):,} characters, over this bridge's limit of "
                    f"{limit:,} for it (AEP sets none; the bridge keys its store on it)",
                    name,
                )
            )
    return found


def parse_bounded(data: bytes | str, *, max_bytes: int) -> Event:
    """`parse_event`, then the bounds: raises `InvalidEvent` naming every broken rule."""
    event = parse_event(data, max_bytes=max_bytes)
    problems = overlong(event)
    if problems:
        raise InvalidEvent(problems, raw=event.raw)
    return event


__all__ = ["ID_CHARS", "LIMITS", "SOURCE_CHARS", "SUBJECT_CHARS", "overlong", "parse_bounded"]
