"""The requests the daemon has open, on disk, so that the next daemon can close them.

A daemon that is killed (SIGKILL, a crash, the OOM killer) cannot close the requests it
raised, and the cards in the chat would stay open for ever, offering buttons nobody can
take. So every `attention.requested` the daemon emits is recorded here (`open.jsonl` in its
directory) as it is raised, and forgotten when its terminal event (`attention.resolved`,
`attention.timeout`) is emitted. What a daemon finds recorded when it starts was left open
by the last one: it closes each as dismissed (daemon.py), and forgets it.

The record is a journal, one line a change (`{"open": [id, agent, session]}`, then
`{"closed": id}`), appended with one `write` each: a prompt's answer goes back to the agent
right after its close is recorded, so that is kept cheap. The journal is rewritten with only
what is open (atomically: a new file moved in place) when the daemon starts and when it has
grown. A kill between two writes loses nothing written; a line cut short (a full disk) is
skipped when it is read back. Bounded: `LIMIT` open requests, `_MAX_BYTES` read back.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import stat
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from .paths import write_private

log = logging.getLogger("aep_bridge.agentd")

LEDGER_FILE: Final = "open.jsonl"
#: requests recorded at most; beyond it the oldest are forgotten (a held one still closes
#: at its `expires_at`, on the bridge)
LIMIT: Final = 1024
#: lines appended before the journal is rewritten with only what is open
COMPACT_AFTER: Final = 4096
#: the longest id, agent or session name read back (longer: not one this daemon wrote)
_MAX_NAME: Final = 1024
#: the longest journal read back (it is compacted long before: COMPACT_AFTER short lines)
_MAX_BYTES: Final = 4 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Left:
    """One open request: enough to close it in its session."""

    id: str
    agent: str
    session: str


class Ledger:
    """The open requests of this daemon, journaled in `directory`."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / LEDGER_FILE
        self._open: OrderedDict[str, Left] = OrderedDict()
        self._fd: int | None = None  # the journal, open for appending
        self._lines = 0  # appended since it was last rewritten
        self._failing = False  # the last write failed (said once until one succeeds)

    def __len__(self) -> int:
        return len(self._open)

    def left_open(self) -> list[Left]:
        """What the last daemon recorded and never closed, oldest first. A journal that
        cannot be read is logged and skipped (its held prompts close at their expiry)."""
        raw = self._read()
        if raw is None:
            return []
        found: OrderedDict[str, Left] = OrderedDict()
        for line in raw.splitlines():
            entry = _entry(line)
            if isinstance(entry, Left):
                found[entry.id] = entry
                while len(found) > LIMIT:
                    found.popitem(last=False)
            elif isinstance(entry, str):
                found.pop(entry, None)
        return list(found.values())

    def add(self, left: Left) -> None:
        """Record an open request, before the caller goes on."""
        self._open[left.id] = left
        while len(self._open) > LIMIT:
            self._open.popitem(last=False)
        self._append({"open": [left.id, left.agent, left.session]})

    def forget(self, request_id: str) -> None:
        """The request is closed: record that (nothing happens if it was not open)."""
        if self._open.pop(request_id, None) is not None:
            self._append({"closed": request_id})

    def save(self) -> None:
        """Rewrite the journal with only what is open now (a new file moved in place), and
        append to it from then on. Neither the journal nor its temporary is ever reached
        through a symlink: a planted one is replaced, the file it points to untouched."""
        self.close()
        lines = [_line({"open": [o.id, o.agent, o.session]}) for o in self._open.values()]
        try:
            write_private(self.path, b"".join(lines))
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW)
        except OSError as exc:
            self._failed(exc)
            return
        self._lines = 0
        self._failing = False

    def _read(self) -> bytes | None:
        """The journal's bytes; None (and one warning) when it is not there to read: absent
        (no warning), unreadable, a symlink or not a regular file (never followed: its
        requests close at their expiry), or over `_MAX_BYTES`."""
        try:
            descriptor = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except FileNotFoundError:
            return None
        except OSError as exc:
            why = "a symlink, not followed" if exc.errno == errno.ELOOP else str(exc)
            log.warning(
                "%s is not readable (%s); its requests close at their expiry", self.path, why
            )
            return None
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):  # (fdopen refuses a folder)
            os.close(descriptor)
            log.warning("%s is not a regular file; its requests close at their expiry", self.path)
            return None
        with os.fdopen(descriptor, "rb") as file:
            try:
                raw = file.read(_MAX_BYTES + 1)
            except OSError as exc:
                log.warning(
                    "%s is not readable (%s); its requests close at their expiry", self.path, exc
                )
                return None
        if len(raw) > _MAX_BYTES:
            log.warning(
                "%s is not readable (over %d bytes); its requests close at their expiry",
                self.path,
                _MAX_BYTES,
            )
            return None
        return raw

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _append(self, record: dict[str, Any]) -> None:
        if self._fd is None or self._lines >= COMPACT_AFTER:
            self.save()  # (what is open now includes this change)
            return
        line = _line(record)
        try:
            if os.write(self._fd, line) != len(line):
                raise OSError(f"{self.path}: a short write")
        except OSError as exc:
            self._failed(exc)
            return
        self._lines += 1
        self._failing = False

    def _failed(self, exc: OSError) -> None:
        """A full disk: the hook goes on; a killed daemon's cards close at their expiry."""
        if not self._failing:
            log.warning("cannot record the open requests in %s (%s)", self.path, exc)
        self._failing = True
        self.close()  # the next change rewrites the journal whole


def _line(record: dict[str, Any]) -> bytes:
    return json.dumps(record, separators=(",", ":")).encode() + b"\n"


def _entry(line: bytes) -> Left | str | None:
    """One journal line: a request opened (`Left`), one closed (its id), or None (a line
    cut short, or not one this daemon wrote)."""
    try:
        record = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(record, dict):
        return None
    opened, closed = record.get("open"), record.get("closed")
    if isinstance(opened, list) and len(opened) == 3 and all(map(_name, opened)):
        return Left(*opened)
    if _name(closed):
        return str(closed)
    return None


def _name(value: Any) -> bool:
    return isinstance(value, str) and 0 < len(value) <= _MAX_NAME


__all__ = ["COMPACT_AFTER", "LEDGER_FILE", "LIMIT", "Ledger", "Left"]
