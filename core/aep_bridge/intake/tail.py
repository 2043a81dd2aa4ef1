"""Session logs on disk: following `{root}/{agent}/{session}.jsonl` (AEP-0003 §3.1).

An agent, or its adapter, appends one event per line to a file; `tail -f` is a conformant
way to consume it, and `LogTailer` is that, for many files at once: it polls `root` (no
inotify dependency), picks up new files, follows appends, and notices truncation (start
again at 0) and rotation (finish the old file, then read the new one from 0).

These sessions are read-only: a file has no emitter connection to answer through, so no
command (a button press, a text answer) can reach an agent that only writes a log.

Resume is by byte offset, the file being its own replay buffer (AEP-0003 §7). The offset of
an event is committed to the store when the consumer asks for the next one, so a consumer
that crashes mid-event gets that one event again on restart, and dedupes it on
`(source, id)`. A line is consumed only once its `\\n` is there: half a line waits for the
rest. A bad line (not JSON, not a valid event, over the size cap, another major version) is
reported once, skipped, and never stops the tail.

File reads run inline on the event loop: they are local, bounded by the size cap, and the
tailer yields to other tasks now and then while catching up on a backlog.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import stat
import time
from collections import deque
from collections.abc import AsyncIterator, Generator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Final

from ..aep.capture import downlevel
from ..aep.envelope import Event
from ..aep.errors import InvalidEvent, Violation
from ..aep.filters import Filter
from ..aep.jsonl import Finding, Line, oversized
from ..aep.registry import Capture
from ..aep.validation import DEFAULT_MAX_EVENT_BYTES
from ..store import Store
from .bounds import parse_bounded
from .source import CommandResult

log = logging.getLogger(__name__)

#: How many findings `LogTailer.problems` keeps (the oldest go first).
MAX_PROBLEMS: Final = 1000
#: A file with no new bytes for this long has its handle closed (it reopens when it grows),
#: so a root holding thousands of finished sessions does not hold thousands of descriptors.
IDLE_CLOSE_SECONDS: Final = 60.0
#: While catching up, let other tasks run after this many lines.
_YIELD_EVERY: Final = 256
_SKIP_CHUNK: Final = 1 << 16
_COUNT_CHUNK: Final = 1 << 20


#: What a pass over the files yields: the file, the offset after the line, and its event.
_Taken = Generator[tuple["_Tracked", int, Event], None, None]


def _is_foreign_major(violations: list[Violation]) -> bool:
    """The verdict `parse_event` gives a line of another major version (AEP-0003 §3.1)."""
    return (
        len(violations) == 1
        and violations[0].rule == "AEP-0003 §3.1"
        and violations[0].path == "aep"
    )


@dataclass(slots=True, eq=False)
class _Tracked:
    """One followed file: what is read, what is done, what is committed."""

    key: str
    inode: int
    #: where the next read starts (past a partial line's start only while skipping one)
    offset: int
    #: everything before this is processed and taken by the consumer: safe to commit
    done: int
    #: what the store holds for this file, or -1 when it holds another file's offset
    committed: int
    file: BinaryIO | None = None
    #: the file size at the last read: no need to read again until it changes
    checked: int = -1
    #: lines before `base_offset`, counted only when a finding needs a line number
    base_offset: int = 0
    base_lines: int | None = 0
    #: complete lines read since `base_offset`
    lines: int = 0
    #: inside an oversized line: its size so far
    skipping: int | None = None
    last_growth: float = 0.0

    def restart(self) -> None:
        """Truncated: read again from the start."""
        self.offset = self.done = 0
        self.checked = -1
        self.base_offset, self.base_lines, self.lines = 0, 0, 0
        self.skipping = None

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None


class LogTailer:
    """Follows every `glob` match under `root` and yields their events, file by file.

    `follow()` runs until `stop()` is called or its task is cancelled; one runs at a time,
    on the thread that uses the store. A consumer that leaves the loop without `stop()` (a
    `break`, an exception) gets the event it was holding again from the next `follow()`.
    """

    def __init__(
        self,
        root: Path,
        store: Store,
        *,
        poll_interval: float = 0.25,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
        glob: str = "*/*.jsonl",
    ) -> None:
        if poll_interval <= 0:
            raise ValueError(f"poll_interval must be positive, not {poll_interval}")
        if max_event_bytes <= 0:
            raise ValueError(f"max_event_bytes must be positive, not {max_event_bytes}")
        self.root = Path(root).expanduser().resolve()
        self.store = store
        self.poll_interval = poll_interval
        self.max_event_bytes = max_event_bytes
        self.glob = glob
        self.idle_close_after = IDLE_CLOSE_SECONDS
        self._tracked: dict[str, _Tracked] = {}
        self._problems: deque[Finding] = deque(maxlen=MAX_PROBLEMS)
        self._foreign_reported: set[str] = set()
        self._unreadable: set[str] = set()
        self._stopped = False
        self._following = False
        self._wake = asyncio.Event()

    @property
    def files(self) -> int:
        """How many logs are being followed now."""
        return len(self._tracked)

    @property
    def problems(self) -> list[Finding]:
        """Bad lines seen, oldest first: file, line number, and the broken rule."""
        return list(self._problems)

    def stop(self) -> None:
        """Stop following: commit what was consumed and end `follow()` at its next step.

        The event the consumer holds now is not committed until it asks for the next one;
        a stopped tailer stays stopped.
        """
        self._stopped = True
        self._wake.set()
        self._flush()

    async def follow(self) -> AsyncIterator[Event]:
        """Every event appended to the logs, in file order, until stopped or cancelled."""
        if self._following:
            raise RuntimeError("this LogTailer is already following")
        self._following = True
        if not self._tracked:  # nothing followed yet: the logs deleted meanwhile are done
            self.store.forget_missing_file_offsets(str(self.root))
        poll: _Taken | None = None
        taken = 0
        try:
            while not self._stopped:
                poll = self._poll()
                for tracked, end, event in poll:
                    yield event
                    # the consumer asked for the next event: the last one is taken
                    tracked.done = end
                    self._commit(tracked)
                    if self._stopped:
                        break
                    taken += 1
                    if taken % _YIELD_EVERY == 0:
                        await asyncio.sleep(0)
                poll.close()
                poll = None
                if self._stopped:
                    break
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.poll_interval):
                        await self._wake.wait()
        finally:
            if poll is not None:
                poll.close()
            self._following = False
            try:
                self._flush()
            except Exception:  # the store may be closed by now; the next run rereads a line
                log.warning("log tail: could not commit offsets on exit", exc_info=True)
            # forget the read state: a later `follow()` starts again from what was committed
            for tracked in self._tracked.values():
                tracked.close()
            self._tracked.clear()

    # -- one pass over the files -----------------------------------------------------------

    def _poll(self) -> _Taken:
        """One pass: every file's new complete lines, as `(file, end offset, event)`."""
        present: set[str] = set()
        for path in self._discover():
            key = str(path)
            present.add(key)
            yield from self._visit(key)
        for key in sorted(self._tracked.keys() - present):
            yield from self._vanish(key)
        self._flush()

    def _discover(self) -> list[Path]:
        try:
            return sorted(self.root.glob(self.glob))
        except OSError as exc:
            log.debug("log tail: cannot list %s: %s", self.root, exc)
            return []

    def _visit(self, key: str) -> _Taken:
        try:
            st = os.stat(key)
        except FileNotFoundError:
            if key in self._tracked:
                yield from self._vanish(key)
            return
        except OSError as exc:
            self._unreadable_once(key, exc)
            return
        if not stat.S_ISREG(st.st_mode):
            return
        tracked = self._tracked.get(key)
        if tracked is not None and st.st_ino != tracked.inode:
            log.info("log tail: %s was rotated; finishing the old file, then the new one", key)
            yield from self._vanish(key)
            tracked = None
        if tracked is None:
            tracked = self._tracked[key] = self._start(key, st.st_ino, st.st_size)
        if st.st_size < tracked.offset:
            log.info("log tail: %s was truncated; reading it again from the start", key)
            tracked.restart()
        if st.st_size != tracked.checked and st.st_size > tracked.offset:
            yield from self._read(tracked, st.st_size)
        elif (
            tracked.file is not None
            and time.monotonic() - tracked.last_growth > self.idle_close_after
        ):
            tracked.close()

    def _start(self, key: str, inode: int, size: int) -> _Tracked:
        """Begin following `key`: at its committed offset if that is still this file's."""
        offset = 0
        committed = -1
        stored = self.store.file_offset(key)
        if stored is not None and stored[0] == inode:
            committed = stored[1]
            if stored[1] <= size and self._at_line_start(key, stored[1]):
                offset = stored[1]
            else:
                log.info("log tail: %s changed while stopped; reading it from the start", key)
        return _Tracked(
            key=key,
            inode=inode,
            offset=offset,
            done=offset,
            committed=committed,
            base_offset=offset,
            base_lines=0 if offset == 0 else None,
            last_growth=time.monotonic(),
        )

    def _at_line_start(self, key: str, offset: int) -> bool:
        """Whether `offset` follows a `\\n`: a cheap check that an offset fits the file."""
        if offset == 0:
            return True
        try:
            with open(key, "rb") as file:
                file.seek(offset - 1)
                return file.read(1) == b"\n"
        except OSError:
            return False

    def _open(self, tracked: _Tracked) -> BinaryIO | None:
        if tracked.file is not None:
            return tracked.file
        try:  # held open across polls, so no `with`
            file = open(tracked.key, "rb")  # noqa: SIM115
        except OSError as exc:
            self._unreadable_once(tracked.key, exc)
            return None
        if os.fstat(file.fileno()).st_ino != tracked.inode:
            file.close()  # replaced between stat and open: the next pass sees the new file
            return None
        self._unreadable.discard(tracked.key)
        tracked.file = file
        return file

    def _read(self, tracked: _Tracked, limit: int) -> _Taken:
        """The complete lines of `tracked` from its offset up to about `limit` bytes."""
        file = self._open(tracked)
        if file is None:
            return
        tracked.checked = limit
        tracked.last_growth = time.monotonic()
        cap = self.max_event_bytes
        file.seek(tracked.offset)
        while tracked.offset < limit:
            if tracked.skipping is not None:
                chunk = file.readline(_SKIP_CHUNK)
                if not chunk:
                    return
                tracked.offset += len(chunk)
                tracked.skipping += len(chunk)
                if chunk.endswith(b"\n"):
                    size = tracked.skipping - 1
                    tracked.skipping = None
                    tracked.lines += 1
                    self._report(tracked, [oversized(Line(0, None, size), cap)])
                    tracked.done = tracked.offset
                continue
            chunk = file.readline(cap + 1)
            if not chunk:
                return
            if not chunk.endswith(b"\n"):
                if len(chunk) > cap:  # an oversized line: skip to its end, maybe later
                    tracked.offset += len(chunk)
                    tracked.skipping = len(chunk)
                    continue
                file.seek(tracked.offset)  # half a line: wait for the rest
                return
            tracked.offset += len(chunk)
            tracked.lines += 1
            data = chunk[:-1].removesuffix(b"\r")
            if not data.strip():
                self._report(
                    tracked,
                    [Violation("AEP-0003 §3.1", "blank line: a log holds one event per line")],
                )
                tracked.done = tracked.offset
                continue
            try:
                event = parse_bounded(data, max_bytes=cap)
            except InvalidEvent as exc:  # invalid, or ids too long to keep (`bounds`)
                self._report(tracked, exc.violations)
                tracked.done = tracked.offset
                continue
            yield tracked, tracked.offset, event
            file.seek(tracked.offset)  # cheap when unmoved; safe if anything read meanwhile

    def _vanish(self, key: str) -> _Taken:
        """`key` is gone or is another file now: finish what the open handle still has."""
        tracked = self._tracked.get(key)
        if tracked is None:
            return
        if tracked.file is not None:
            try:
                size = os.fstat(tracked.file.fileno()).st_size
            except OSError:
                size = tracked.offset
            if size > tracked.offset:
                yield from self._read(tracked, size)
        self._commit(tracked)
        tracked.close()
        del self._tracked[key]

    # -- offsets -----------------------------------------------------------------------------

    def _commit(self, tracked: _Tracked) -> None:
        if tracked.done != tracked.committed:
            self.store.set_file_offset(tracked.key, tracked.inode, tracked.done)
            tracked.committed = tracked.done

    def _flush(self) -> None:
        """Commit every file's processed offset (never past an event still being handled)."""
        pending = [t for t in self._tracked.values() if t.done != t.committed]
        if not pending:
            return
        with self.store.transaction():
            for tracked in pending:
                self._commit(tracked)

    # -- findings ----------------------------------------------------------------------------

    def _line_number(self, tracked: _Tracked) -> int:
        """The 1-based number of the line just read, counting earlier lines only if needed."""
        if tracked.base_lines is None:
            tracked.base_lines = self._count_lines(tracked, tracked.base_offset)
        return tracked.base_lines + tracked.lines

    def _count_lines(self, tracked: _Tracked, end: int) -> int:
        file = tracked.file
        if file is None:
            return 0
        count, position = 0, 0
        while position < end:
            block = os.pread(file.fileno(), min(_COUNT_CHUNK, end - position), position)
            if not block:
                break
            count += block.count(b"\n")
            position += len(block)
        return count

    def _report(self, tracked: _Tracked, violations: list[Violation]) -> None:
        """Record a bad line once; another major version only once per file (AEP-0003 §3.1)."""
        line = self._line_number(tracked)
        if _is_foreign_major(violations):
            if tracked.key in self._foreign_reported:
                log.debug("log tail: %s:%d: %s", tracked.key, line, violations[0])
                return
            self._foreign_reported.add(tracked.key)
            log.warning(
                "log tail: %s:%d: %s; further lines of other versions in this file are "
                "skipped without a word",
                tracked.key,
                line,
                violations[0],
            )
        else:
            log.warning(
                "log tail: %s:%d: line skipped: %s",
                tracked.key,
                line,
                "; ".join(str(v) for v in violations),
            )
        for violation in violations:
            self._problems.append(Finding(tracked.key, line, violation))

    def _unreadable_once(self, key: str, exc: OSError) -> None:
        if key not in self._unreadable:
            self._unreadable.add(key)
            log.warning("log tail: cannot read %s: %s (will keep trying)", key, exc)


__all__ = ["IDLE_CLOSE_SECONDS", "MAX_PROBLEMS", "LogTailer"]


class LogSource:
    """Session logs as an `EventSource`: read-only, so every command is refused `no-route`.

    Nobody is connected on the other side of a file: a request raised in a log can be shown
    but never answered through the bridge.
    """

    def __init__(self, root: Path, store: Store, *, glob: str = "*/*.jsonl") -> None:
        self.root = root
        self.name = f"logs:{root}"
        self._tailer = LogTailer(root, store, glob=glob)
        self._closed = False

    #: nobody is on the other end of a log file to take an answer: requests are shown only
    answers = False

    @property
    def closed(self) -> bool:
        return self._closed

    def status(self) -> dict[str, Any]:
        """For `aep-bridge status`: the folder, the logs open now, the bad lines seen."""
        return {
            "root": str(self.root),
            "files": self._tailer.files,
            "bad_lines": len(self._tailer.problems),
        }

    async def events(
        self,
        filter_spec: dict[str, Any] | None = None,
        *,
        capture: Capture | None = None,
        from_: object = None,
    ) -> AsyncIterator[Event]:
        """Logged events (resuming by file offset), filtered and down-levelled as asked."""
        filter_ = Filter.parse(filter_spec or {})
        async for event in self._tailer.follow():
            if filter_.matches_event(event):
                yield event if capture is None else downlevel(event, capture)

    async def send_command(self, command: Event, *, timeout: float = 10.0) -> CommandResult:
        return CommandResult(
            "refused",
            code="no-route",
            detail="sessions read from log files cannot be answered through the bridge",
        )

    def principal_of(self, session_id: str) -> str | None:
        """None: these sessions came through no token of this bridge."""
        return None

    async def roster(self) -> list[dict[str, Any]]:
        return []

    async def close(self) -> None:
        self._closed = True
        self._tailer.stop()
