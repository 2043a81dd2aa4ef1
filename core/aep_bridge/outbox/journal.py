"""The outbox's persisted jobs: written before `submit` returns, read back at the next start,
deleted once their call has settled.

What a kill may repeat: a job's row is deleted only after its adapter call returned, so a
call in flight when the process dies is made again after the restart (the one repeat
allowed). The deletes of the calls that settled together are written when the event loop
next gets control (`Journal.flush`); when a store group is open then (the bridge handling
events), or when the outbox commits a group to dispatch a job written in it, they join that
group and are durable with its commit instead of a commit of their own. So a call that
returned may also be made again after a SIGKILL that comes before that commit: at most the
calls settled since the loop last turned, or since the group they joined began. A group
whose commit fails (a full disk) loses the deletes it carried, and the events it held are
handled again, so those calls may repeat too; a delete that itself fails is kept and
written again with the next one (and at `stop`), so a restart does not repeat it.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Callable
from typing import Any, Final

from ..store import Store
from ..store.outbox import OutboxTable
from .jobs import RENAMED, Job, Priority, arguments
from .limiter import Limits

log = logging.getLogger(__name__)

#: how often (seconds) the recent calls are saved while sending: after a crash, at most the
#: calls of this last stretch are forgotten (a clean stop saves them all)
LIMITS_SAVE_EVERY: Final = 1.0


class Journal:
    """The `outbox` rows of one channel instance, and the deletes of settled calls."""

    def __init__(
        self, store: Store, channel: str, limits: Limits, clock: Callable[[], float]
    ) -> None:
        self.table = OutboxTable(store, channel)
        self._store = store
        self._channel = channel
        self._limits = limits
        self._clock = clock
        #: rows of settled calls, deleted together (`flush`); negated: a delete that failed
        self._forgetting: list[int] = []
        #: when the recent calls were last saved
        self.limits_saved = float("-inf")

    def insert(self, job: Job) -> int:
        """Persist `job` (in the caller's transaction); its row id."""
        return self.table.insert(
            job.op, job.session_id, job.json(), int(job.priority), job.coalesce, job.droppable
        )

    def replace(self, row: int, job: Job, *, priority: bool = False, key: bool = False) -> None:
        """`job` takes the place of the unsent job in `row` (same key); with `priority`, at
        its own priority; with `key`, under its own key (a merge of keyed messages)."""
        rank = int(job.priority) if priority else None
        self.table.replace(row, job.json(), job.droppable, rank)
        if key:
            self.table.rekey(row, job.coalesce)

    def delete(self, rows: list[int | None]) -> None:
        """Delete the rows of jobs that will not be sent (in the caller's transaction)."""
        ids = [row for row in rows if row is not None]
        if ids:
            self.table.delete(ids)

    def read(self) -> tuple[list[tuple[int, Job, tuple[Any, ...]]], int]:
        """The jobs a previous run left, in row order (submit order), each with its call's
        arguments; and how many rows could not be read (logged, and deleted)."""
        jobs: list[tuple[int, Job, tuple[Any, ...]]] = []
        bad: list[int] = []
        for row in self.table.rows():
            try:
                job = Job(
                    RENAMED.get(row.op, row.op),  # type: ignore[arg-type]  # see arguments
                    row.session_id,
                    json.loads(row.payload),
                    Priority(int(str(row.priority))),
                    row.coalesce,
                    row.droppable,
                )
                jobs.append((row.id, job, arguments(job)))
            except (ValueError, KeyError, TypeError) as exc:
                log.error(
                    "outbox %s: row %d (%s) cannot be read and is dropped: %s",
                    self._channel,
                    row.id,
                    row.op,
                    type(exc).__name__,
                )
                bad.append(row.id)
        if bad:
            self.delete(list(bad))
        return jobs, len(bad)

    # -- settled calls -----------------------------------------------------------------

    def forget(self, row: int) -> None:
        """Delete a settled job's row at the next `flush`: the rows of the calls settled
        together go in one statement. Until then (and if the delete fails) the call counts as
        in flight: it is only made again after a crash."""
        self._forgetting.append(row)

    @property
    def pending(self) -> bool:
        """Whether rows of settled calls wait to be deleted."""
        return bool(self._forgetting)

    def flush(self) -> None:
        """Write the deletes of the settled calls' rows (and, at most every
        `LIMITS_SAVE_EVERY`, the recent calls). In an open group they join it and are
        durable with its commit; otherwise they commit now. A row whose delete failed (a full
        disk) is kept, negated, and deleted with the next ones, or at `stop`."""
        rows, self._forgetting = self._forgetting, []
        if not rows:
            return
        ids = [abs(row) for row in rows]
        store = self._store
        try:
            with store.transaction(savepoint=False):  # joins an open group
                self.table.delete(ids)
                now = self._clock()
                if self._limits.any and now - self.limits_saved >= LIMITS_SAVE_EVERY:
                    self.save_limits(now)  # a crash forgets at most the last stretch
        except sqlite3.Error as exc:
            # kept for the next try; negated rows mark a failure already logged
            self._forgetting = [-row for row in ids] + self._forgetting
            if rows[0] > 0:
                log.error(
                    "outbox %s: the rows of %d settled calls could not be deleted (%s); "
                    "kept to be deleted again, so a restart does not repeat them",
                    self._channel,
                    len(ids),
                    exc,
                )

    def save_limits(self, now: float) -> None:
        """Write the calls still inside their windows (in the caller's transaction)."""
        self.limits_saved = now
        self._limits.save(self._store, self._channel, now)

    def save_limits_now(self) -> None:
        """Keep the calls still inside their windows for the next start: the platform counts
        them after a restart too (a bridge restarted within a minute must not send Telegram a
        group's 20 messages again)."""
        try:
            self.save_limits(self._clock())
            self._store.commit_group()
        except sqlite3.Error:
            log.warning("outbox %s: the recent calls could not be saved", self._channel)
