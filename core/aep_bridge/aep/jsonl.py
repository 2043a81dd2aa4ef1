"""Session logs: the JSONL binding (AEP-0003 §3.1), checked line by line.

A bad line never stops the check: it is reported with its number and the next line is read.
Lines are read with a size cap, so one enormous line costs bounded memory.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

from .envelope import Event
from .errors import InvalidEvent, Violation
from .stream import StreamChecker
from .validation import DEFAULT_MAX_EVENT_BYTES, parse_event

_CHUNK = 1 << 16


@dataclass(frozen=True, slots=True)
class Line:
    """One line of a log: its 1-based number and bytes, or `size` alone when over the cap."""

    number: int
    data: bytes | None
    size: int


def read_lines(stream: BinaryIO, *, max_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> Iterator[Line]:
    """Yield the lines of `stream` without their line ending; never hold more than the cap.

    The cap counts the line's content: `\n` and `\r\n` endings are allowed on top of it.
    """
    number = 0
    while True:
        chunk = stream.readline(max_bytes + 2)
        if not chunk:
            return
        number += 1
        ended = chunk.endswith(b"\n")
        data = chunk[:-1].removesuffix(b"\r") if ended else chunk
        if len(data) <= max_bytes:
            yield Line(number, data, len(data))
            continue
        size = len(data)
        while not ended:  # drain the rest of the oversized line
            rest = stream.readline(_CHUNK)
            if not rest:
                break
            ended = rest.endswith(b"\n")
            size += len(rest) - (1 if ended else 0)
        yield Line(number, None, size)


def oversized(line: Line, limit: int) -> Violation:
    """The violation for a line over the size cap."""
    return Violation(
        "AEP-0003 §3.2", f"line is {line.size} bytes, over the {limit}-byte event limit"
    )


@dataclass(slots=True)
class Finding:
    """A violation on a line of a file."""

    file: str
    line: int
    violation: Violation

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.violation}"

    def to_dict(self) -> dict[str, object]:
        return {"file": self.file, "line": self.line, **self.violation.to_dict()}


@dataclass(slots=True)
class LogCheck:
    """Checks one or more logs as a single stream: envelope, payload, then stream rules."""

    max_bytes: int = DEFAULT_MAX_EVENT_BYTES
    checker: StreamChecker = field(default_factory=StreamChecker)
    lines: int = 0
    valid: int = 0

    def check(self, name: str, stream: BinaryIO) -> Iterator[Finding]:
        for line in read_lines(stream, max_bytes=self.max_bytes):
            self.lines += 1
            for violation in self.check_line(line):
                yield Finding(name, line.number, violation)

    def check_line(self, line: Line) -> list[Violation]:
        if line.data is None:
            return [oversized(line, self.max_bytes)]
        if not line.data.strip():
            return [Violation("AEP-0003 §3.1", "blank line: a log holds one event per line")]
        try:
            event: Event = parse_event(line.data, max_bytes=self.max_bytes)
        except InvalidEvent as exc:
            return exc.violations
        self.valid += 1
        return self.checker.fold(event)
