"""AEP 0.1, the Agent Event Protocol, as the bridge reads and writes it.

- `parse_event` / `validate_event`: bytes or objects in, an `Event` or `InvalidEvent` out,
  with the official schemas' verdict and every violation named by its rule;
- `StreamChecker`: the rules across events (terminals, ordering, collisions, acks, forms);
- `Filter`: the attr-match subscription dialect;
- `downlevel`, `Redactor`: capture gating and redaction before content leaves the machine;
- `make_event`, `make_respond_command`, `make_routed`: what the bridge itself emits.
"""

from .build import make_command, make_event, make_respond_command, make_routed
from .capture import downlevel, gate_form_values
from .envelope import Event
from .errors import InvalidEvent, InvalidFilter, Violation
from .filters import MATCH_ALL, Filter
from .ids import new_id, parse_source, source_uri
from .jsonl import LogCheck, read_lines
from .redaction import RedactionPolicy, Redactor, digest
from .registry import AEP_VERSION, Capture, Severity
from .stream import StreamChecker
from .validation import parse_event, validate_event

__all__ = [
    "AEP_VERSION",
    "MATCH_ALL",
    "Capture",
    "Event",
    "Filter",
    "InvalidEvent",
    "InvalidFilter",
    "LogCheck",
    "RedactionPolicy",
    "Redactor",
    "Severity",
    "StreamChecker",
    "Violation",
    "digest",
    "downlevel",
    "gate_form_values",
    "make_command",
    "make_event",
    "make_respond_command",
    "make_routed",
    "new_id",
    "parse_event",
    "parse_source",
    "read_lines",
    "source_uri",
    "validate_event",
]
