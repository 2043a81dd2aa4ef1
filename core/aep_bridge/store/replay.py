"""The embedded relay's replay buffer (`relay_buffer`, `relay_evicted`, `relay_sessions`): a
restart of the bridge loses no event an emitter was acknowledged for, and the disk it takes
has a budget.

Each buffer keeps its newest `keep` events (the hub's count, `intake.replay_buffer`). On top
of that the bytes of every buffer together stay within a budget (`intake.max_replay_bytes`).
The store sums each buffer's bytes and counts its events once (`_Accounts`) and keeps them up
to date as running totals, with each buffer's place in the order of activity and the end of
each ended session, in memory: the hot path writes the events, and looks for what to evict
only in a buffer that holds more than it keeps. When each buffer last took
events and when its session ended reach `relay_sessions` once a minute, at a trim and at
the stop (`save_activity`); a crash in between costs only the order of the next trim and the
end of the sessions that ended meanwhile (their buffers then go by the budget alone). A
flush that takes the total past the budget trims it to `TRIM_TO` of it in one go, oldest
first: whole buffers of ended sessions (the earliest ended first), then live sessions' oldest
events (the least recently active session first, whole if need be). A trimmed position is
recorded in `relay_evicted`, as count eviction records it: a consumer resuming from before it
gets `replay-exhausted` and what is still held (AEP-0003 §5); a buffer trimmed whole is gone,
and its session is absent from replays. Ended sessions' buffers also go
`intake.replay_retention` seconds after their `session.ended` (`expire_buffers`).
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, Final

from .database import _MAX_INT, Database

if TYPE_CHECKING:
    from ..aep.envelope import Event

#: `(source, session)`: whose buffer
BufferKey = tuple[str, str]
#: A trim brings the total down to this share of the budget: the next one is due only after
#: an eighth of the budget has come in, not at every flush.
TRIM_TO: Final = 7 / 8
#: the event type whose arrival starts an ended session's retention
_ENDED: Final = "session.ended"

_EVICTED = (
    "INSERT INTO relay_evicted VALUES (?, ?, ?, ?) "
    "ON CONFLICT (source, session) DO UPDATE SET epoch = excluded.epoch, seq = excluded.seq "
    "WHERE (excluded.epoch, excluded.seq) > (relay_evicted.epoch, relay_evicted.seq)"
)


def _event_id(raw: object) -> str | None:
    """The `id` of a stored event's bytes, or None if they are not a JSON object."""
    try:
        value = json.loads(bytes(raw) if isinstance(raw, (bytes, memoryview)) else str(raw))
    except ValueError:
        return None
    event_id = value.get("id") if isinstance(value, dict) else None
    return event_id if isinstance(event_id, str) else None


class _Accounts:
    """What the buffers hold, in memory: read from the tables once, then kept up to date."""

    __slots__ = ("active", "counts", "ended", "sizes", "total")

    def __init__(self, conn: sqlite3.Connection) -> None:
        held: dict[BufferKey, int] = {}
        #: each buffer's events: a flush looks for what to evict only in one holding more
        #: than it keeps, and finds it from the oldest end
        self.counts: dict[BufferKey, int] = {}
        for a, b, size, count in conn.execute(
            "SELECT source, session, total(length(raw)), count(*) FROM relay_buffer "
            "GROUP BY source, session"
        ):
            key = (str(a), str(b))
            held[key] = int(size)
            self.counts[key] = int(count)
        #: each buffer's bytes, the least recently active first
        self.sizes: dict[BufferKey, int] = {}
        #: the ended sessions' buffers and when each ended, the earliest first
        self.ended: dict[BufferKey, float] = {}
        for source, session, _active, ended in conn.execute(
            "SELECT source, session, active, ended FROM relay_sessions ORDER BY active"
        ).fetchall():
            key = (str(source), str(session))
            self.sizes[key] = held.pop(key, 0)
            if ended is not None:
                self.ended[key] = float(ended)
        for key, size in held.items():  # held with no row (a crash between the two writes)
            self.sizes[key] = size
        self.ended = dict(sorted(self.ended.items(), key=lambda item: item[1]))
        self.total = sum(self.sizes.values())
        #: buffers that took events since their activity was last written, and when
        self.active: dict[BufferKey, float] = {}


class ReplayTables(Database):
    """`relay_buffer`, `relay_evicted` and `relay_sessions`."""

    #: what the buffers hold (None until first needed, and after a rollback)
    _accounts: _Accounts | None = None

    def _forget_caches(self) -> None:
        """A write was rolled back: read what the buffers hold afresh when next needed."""
        self._accounts = None

    def _held(self) -> _Accounts:
        accounts = self._accounts
        if accounts is None:
            accounts = self._accounts = _Accounts(self._conn)
        return accounts

    def replay_bytes(self) -> int:
        """The bytes of every buffered event: the total the budget bounds."""
        return self._held().total

    def buffer_events(
        self,
        events: Iterable[Event],
        keep: int,
        *,
        budget: int | None = None,
        now: float | None = None,
    ) -> list[BufferKey]:
        """Add positioned events to the persisted replay buffer, keeping `keep` a session and
        `budget` bytes in all (None: no budget); `now` is when (the hub's clock).

        Returns the buffers the budget emptied: the hub forgets them.
        """
        if now is None:
            now = time.time()
        added: dict[BufferKey, int] = {}  # bytes
        rows_of: dict[BufferKey, int] = {}  # events
        ended: list[BufferKey] = []
        rows: list[tuple[str, str, int, int, bytes]] = []
        for event in events:
            key, position = event.session_key, event.position
            if key is None or position is None or max(position) > _MAX_INT:
                continue
            raw = event.raw
            rows.append((key[0], key[1], position[0], position[1], raw))
            added[key] = added.get(key, 0) + len(raw)
            rows_of[key] = rows_of.get(key, 0) + 1
            if event.type == _ENDED:
                ended.append(key)
        if not rows:
            return []
        held = self._held()
        sizes, counts = held.sizes, held.counts
        emptied: list[BufferKey] = []
        with self.transaction():
            self._no_undo()
            conn = self._conn
            inserted = conn.executemany(
                "INSERT OR IGNORE INTO relay_buffer VALUES (?, ?, ?, ?, ?)", rows
            ).rowcount
            if inserted != len(rows):  # a position held already (rare): count what is there
                for key in added:
                    size, count = self._held_rows(key)
                    added[key] = size - sizes.get(key, 0)
                    rows_of[key] = count - counts.get(key, 0)
            for key, new in rows_of.items():
                over = counts.get(key, 0) + new - keep
                counts[key] = counts.get(key, 0) + new
                if over <= 0:
                    continue  # within what it keeps: nothing to look for
                cut = conn.execute(
                    "SELECT epoch, seq FROM relay_buffer WHERE source = ? AND session = ? "
                    "ORDER BY epoch, seq LIMIT 1 OFFSET ?",
                    (*key, over - 1),
                ).fetchone()
                if cut is not None:
                    added[key] -= self._drop_through(*key, *cut)
            for key, delta in added.items():  # the most recently active last
                sizes[key] = sizes.pop(key, 0) + delta
                held.active[key] = now
            for key in ended:
                held.ended.setdefault(key, now)
            held.total += sum(added.values())
            if budget is not None and held.total > budget:
                emptied = self._trim(budget)
        return emptied

    def _held_rows(self, key: BufferKey) -> tuple[int, int]:
        """The bytes and the events one buffer holds, counted in the table."""
        row = self._conn.execute(
            "SELECT total(length(raw)), count(*) FROM relay_buffer "
            "WHERE source = ? AND session = ?",
            key,
        ).fetchone()
        return int(row[0]), int(row[1])

    def _drop_through(self, source: str, session: str, epoch: int, seq: int) -> int:
        """Drop one buffer's events up to `(epoch, seq)` and record it as evicted; returns
        their bytes (its count of events is kept up to date here)."""
        conn = self._conn
        where = "WHERE source = ? AND session = ? AND (epoch, seq) <= (?, ?)"
        key = (source, session, epoch, seq)
        freed = conn.execute(f"SELECT total(length(raw)) FROM relay_buffer {where}", key)
        size = int(freed.fetchone()[0])
        dropped = conn.execute(f"DELETE FROM relay_buffer {where}", key).rowcount
        conn.execute(_EVICTED, key)
        counts = self._held().counts
        counts[(source, session)] = counts.get((source, session), 0) - dropped
        return size

    def _drop_whole(self, keys: list[BufferKey]) -> None:
        """Drop whole buffers, in the tables and in the accounts (in the caller's transaction)."""
        for table in ("relay_buffer", "relay_evicted", "relay_sessions"):
            self._conn.executemany(f"DELETE FROM {table} WHERE source = ? AND session = ?", keys)
        held = self._held()
        for key in keys:
            held.total -= held.sizes.pop(key, 0)
            held.counts.pop(key, None)
            held.ended.pop(key, None)
            held.active.pop(key, None)

    def _trim(self, budget: int) -> list[BufferKey]:
        """Bring the total down to `TRIM_TO` of `budget`, oldest first (see the module);
        returns the buffers emptied. Runs inside the caller's transaction."""
        held = self._held()
        need = held.total - int(budget * TRIM_TO)
        emptied: list[BufferKey] = []
        live = (key for key in held.sizes if key not in held.ended)
        for key in [*held.ended, *live]:
            if need <= 0:
                break
            size = held.sizes.get(key, 0)
            if key in held.ended or size <= need:
                emptied.append(key)
                need -= size
                continue
            taken, cut = 0, None
            for epoch, seq, length in self._conn.execute(
                "SELECT epoch, seq, length(raw) FROM relay_buffer WHERE source = ? "
                "AND session = ? ORDER BY epoch, seq",
                key,
            ).fetchall():
                taken += int(length)
                cut = (int(epoch), int(seq))
                if taken >= need:
                    break
            if cut is not None:
                freed = self._drop_through(*key, *cut)
                held.sizes[key] = size - freed
                held.total -= freed
                need -= freed
        self._drop_whole(emptied)
        self._save_activity(held)
        return emptied

    def trim_buffers(self, budget: int) -> list[BufferKey]:
        """Bring the buffers within `budget` now (a restart with a lower budget); returns the
        buffers emptied."""
        if self.replay_bytes() <= budget:
            return []
        with self.transaction():
            self._no_undo()
            return self._trim(budget)

    def expire_buffers(self, ended_before: float) -> list[BufferKey]:
        """Drop the buffers of sessions that ended at or before `ended_before`; returns them.

        Costs no SQL while nothing is due: the ended ones are kept in the order they ended.
        """
        held = self._held()
        due = []
        for key, ended in held.ended.items():
            if ended > ended_before:
                break
            due.append(key)
        if due:
            with self.transaction():
                self._no_undo()
                self._drop_whole(due)
        return due

    def drop_buffer(self, source: str, session: str) -> None:
        """Forget one session's persisted replay buffer."""
        with self.transaction():
            self._no_undo()
            self._drop_whole([(source, session)])

    def save_activity(self) -> None:
        """Write when each buffer last took events and when its session ended, for a
        restart: the order of trimming, and the retention (the server does it once a minute
        and at the stop, a trim does, and so does `close`)."""
        held = self._accounts
        if held is not None and held.active:
            with self.transaction():
                self._no_undo()
                self._save_activity(held)

    def _save_activity(self, held: _Accounts) -> None:
        self._conn.executemany(
            "INSERT INTO relay_sessions (source, session, active, ended) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (source, session) DO UPDATE SET active = excluded.active, "
            "ended = coalesce(relay_sessions.ended, excluded.ended)",
            [(*key, when, held.ended.get(key)) for key, when in held.active.items()],
        )
        held.active.clear()

    def close(self) -> None:
        """Write what `save_activity` writes (unless a transaction is open: a store closed
        in the middle of one keeps only what was committed), then close."""
        if self._accounts is not None and not self._depth:
            # closed already, or a full disk: the next start sums the buffers again
            with contextlib.suppress(sqlite3.Error):
                self.save_activity()
            self._accounts = None
        super().close()

    def replay_usage(self) -> tuple[int, int]:
        """`(bytes, buffers)`: what the replay buffers hold, for `aep-bridge status`."""
        held = self._held()
        return held.total, len(held.sizes)

    def buffered_keys(self) -> Iterator[tuple[str, str, int, int, str]]:
        """`(source, session, epoch, seq, id)` of every persisted buffered event, per session
        in position order, without validating the events (a restart may face a million).

        SQLite's JSON functions read the ids; a build without them (before 3.38 they were
        optional) gets them from Python's json module.
        """
        order = " ORDER BY source, session, epoch, seq"
        rows: Iterable[tuple[Any, ...]]
        try:
            rows = self._conn.execute(
                "SELECT source, session, epoch, seq, json_extract(json, '$.id') FROM "
                "(SELECT source, session, epoch, seq, CAST(raw AS TEXT) AS json "
                "FROM relay_buffer) WHERE json_valid(json)" + order
            )
        except sqlite3.OperationalError:  # no such function: json_extract
            rows = (
                (source, session, epoch, seq, _event_id(raw))
                for source, session, epoch, seq, raw in self._conn.execute(
                    "SELECT source, session, epoch, seq, raw FROM relay_buffer" + order
                )
            )
        for source, session, epoch, seq, event_id in rows:
            if isinstance(event_id, str):
                yield source, session, epoch, seq, event_id

    def evicted_positions(self) -> dict[tuple[str, str], tuple[int, int]]:
        """The newest evicted position of each buffer that has lost events."""
        rows = self._conn.execute("SELECT source, session, epoch, seq FROM relay_evicted")
        return {(str(a), str(b)): (int(c), int(d)) for a, b, c, d in rows}

    def buffered(self, source: str, session: str, size: int) -> list[tuple[int, int, bytes]]:
        """The newest `size` buffered events of one session, `(epoch, seq, raw)` in position
        order."""
        rows = self._conn.execute(
            "SELECT epoch, seq, raw FROM relay_buffer WHERE source = ? AND session = ? "
            "ORDER BY epoch DESC, seq DESC LIMIT ?",
            (source, session, size),
        ).fetchall()
        return [(int(e), int(q), bytes(r)) for e, q, r in reversed(rows)]

    def evicted(self, source: str, session: str) -> tuple[int, int] | None:
        """The newest position eviction dropped from one session's buffer, or None."""
        row = self._conn.execute(
            "SELECT epoch, seq FROM relay_evicted WHERE source = ? AND session = ?",
            (source, session),
        ).fetchone()
        return None if row is None else (int(row[0]), int(row[1]))
