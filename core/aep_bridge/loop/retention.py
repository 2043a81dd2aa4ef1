"""The retention of ended sessions' records (`store.session_retention_days`).

A session that ended longer ago than the retention is forgotten: its records in the store (its
threads, questions, answers, cards, resume positions, any replay buffer) and the bridge's
memory of it. The audit trail's records older than `audit.retention_days` go in the same
rounds (`AuditLog.prune`). At start (`forget_ended`, before anything reads the sessions)
and, for a bridge that never restarts, once a minute while it runs (`Retention`), off the
event path: in batches of `FORGET_BATCH` sessions, one short transaction each, the event
loop free between two.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections.abc import Callable
from typing import Final

from ..store import Store
from .audit import AuditLog
from .sessions import Sessions

log = logging.getLogger("aep_bridge")

#: Sessions forgotten in one store transaction at most: some milliseconds of the write lock.
FORGET_BATCH: Final = 100
#: Seconds between two rounds at most; a quarter of the retention when that is shorter.
FORGET_EVERY: Final = 60.0
#: Seconds between two rounds at least, however short the retention.
FORGET_EVERY_MIN: Final = 1.0
_DAY: Final = 86_400.0


def forget_ended(store: Store, before: float, batch: int = FORGET_BATCH) -> list[str]:
    """Forget, in the store, every session that ended before `before`, a batch a
    transaction; returns their ids."""
    forgotten: list[str] = []
    while True:
        ids = store.forget_ended_sessions(before, batch)
        forgotten += ids
        if len(ids) < batch:
            return forgotten


class Retention:
    """Forgets the sessions that ended over `days` ago while the bridge runs (`run`)."""

    def __init__(
        self,
        store: Store,
        sessions: Sessions,
        days: float,
        *,
        clock: Callable[[], float] = time.time,
        audit: AuditLog | None = None,
        audit_days: float = 365.0,
    ) -> None:
        """`clock`: the wall clock the retention counts on (the store's times are wall
        clock times), a test's own. `audit`: the audit trail, whose records older than
        `audit_days` go in the same rounds (`audit.retention_days`)."""
        self.store = store
        self.sessions = sessions
        self.days = days
        self.clock = clock
        self.audit = audit
        self.audit_days = audit_days

    @property
    def interval(self) -> float:
        """Seconds between two rounds: a minute, or a quarter of a shorter retention."""
        return min(FORGET_EVERY, max(FORGET_EVERY_MIN, self.days * _DAY / 4))

    async def forget(self, batch: int = FORGET_BATCH) -> int:
        """One round: forget every session due, a batch a transaction, letting the event
        loop run between two; returns how many went."""
        before = self.clock() - self.days * _DAY
        count = 0
        while True:
            self.store.commit_group()  # a batch is a transaction of its own, not an event's
            ids = self.store.forget_ended_sessions(before, batch)
            self.sessions.forget(ids)
            count += len(ids)
            if len(ids) < batch:
                break
            await asyncio.sleep(0)  # events go first
        if count:
            log.info("store: forgot %d session(s) that ended over %g days ago", count, self.days)
        if self.audit is not None:
            self.store.commit_group()
            self.audit.prune(self.audit_days)
        return count

    async def run(self) -> None:
        """`forget` every `interval` seconds, until cancelled."""
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.forget()
            except sqlite3.Error as exc:  # a full disk, a lock: the next round tries again
                if self.store.report_damage(exc):
                    return  # the bridge stops (status 6)
                log.warning("ended sessions could not be forgotten now: %s", exc)
            except Exception:  # a bug must not end the rounds for good
                log.exception("ended sessions could not be forgotten")


__all__ = ["FORGET_BATCH", "Retention", "forget_ended"]
