"""The session registry: which AEP session is which bridge session, and its thread per channel.

AEP session identity is emitter-scoped, so a session is keyed by `(source, session)`. The
bridge gives each one a short opaque id (what adapters see) and records, per channel, the
platform thread it lives in. Creating a thread is decided here before it is done: a row in
state `creating` is written first, so a restart never creates a second thread for a session,
unless the bridge died during the very platform call that was creating it.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, replace
from typing import Literal

from .aep.envelope import Event
from .store import Store

ThreadState = Literal["creating", "open", "closed"]


def new_session_id() -> str:
    """A short, opaque, unguessable id: safe in URLs, button data and logs."""
    return "s" + secrets.token_hex(5)


@dataclass(frozen=True, slots=True)
class SessionRecord:
    id: str
    source: str
    session: str
    stream: str
    agent: str
    name: str
    state: Literal["open", "ended"]


@dataclass(frozen=True, slots=True)
class ThreadRecord:
    session_id: str
    channel: str
    thread_id: str | None
    state: ThreadState
    name: str = ""


class Sessions:
    """Sessions and their thread bindings, in the store."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._by_key: dict[tuple[str, str], SessionRecord] = {}
        self._by_id: dict[str, SessionRecord] = {}
        self._by_session: dict[str, list[SessionRecord]] = {}
        self._threads: dict[tuple[str, str], ThreadRecord] = {}
        #: session id -> the channels it is routed to (a thread row each), in routing order
        self._channels: dict[str, list[str]] = {}
        self._by_thread: dict[tuple[str, str], str] = {}
        self._load()

    def _load(self) -> None:
        for row in self.store.execute(
            "SELECT id, source, session, stream, agent, name, state FROM sessions"
        ):
            record = SessionRecord(*(str(v) for v in row))  # type: ignore[arg-type]
            self._remember(record)
        for row in self.store.execute(
            "SELECT session_id, channel, thread_id, state, name FROM threads"
        ):
            session_id, channel, thread_id, state, name = row
            self._put_thread(
                ThreadRecord(
                    str(session_id),
                    str(channel),
                    None if thread_id is None else str(thread_id),
                    str(state),  # type: ignore[arg-type]
                    str(name or ""),
                )
            )

    def _put_thread(self, record: ThreadRecord) -> None:
        key = (record.session_id, record.channel)
        if key not in self._threads:
            self._channels.setdefault(record.session_id, []).append(record.channel)
        self._threads[key] = record
        if record.thread_id is not None:
            self._by_thread[(record.channel, record.thread_id)] = record.session_id

    def _remember(self, record: SessionRecord) -> None:
        key = (record.source, record.session)
        if key not in self._by_key:
            self._by_session.setdefault(record.session, []).append(record)
        else:
            same = self._by_session[record.session]
            same[:] = [record if r.id == record.id else r for r in same]
        self._by_key[key] = record
        self._by_id[record.id] = record

    # -- sessions ----------------------------------------------------------------------

    def get(self, session_id: str) -> SessionRecord | None:
        return self._by_id.get(session_id)

    def find(self, source: str, session: str) -> SessionRecord | None:
        return self._by_key.get((source, session))

    def find_by_session(self, session: str) -> SessionRecord | None:
        """The one known session with this id, whatever its source; None if none or several.

        For events foreign to a session (another consumer's command, `attention.routed`):
        they name the session but come from elsewhere.
        """
        found = self._by_session.get(session, ())
        return found[0] if len(found) == 1 else None

    def get_or_create(self, event: Event, stream: str, name: str) -> tuple[SessionRecord, bool]:
        """The session `event` belongs to, created on its first event (exactly once)."""
        key = event.session_key
        assert key is not None, "agent-scoped events have no session"
        known = self._by_key.get(key)
        if known is not None:
            return known, False
        record = SessionRecord(new_session_id(), key[0], key[1], stream, event.agent, name, "open")
        now = time.time()
        with self.store.transaction():
            self.store.execute(
                "INSERT OR IGNORE INTO sessions (id, source, session, stream, agent, name, state, "
                "created, updated) VALUES (?, ?, ?, ?, ?, ?, 'open', ?, ?)",
                (record.id, record.source, record.session, stream, record.agent, name, now, now),
            )
            row = self.store.execute(
                "SELECT id, source, session, stream, agent, name, state FROM sessions "
                "WHERE source = ? AND session = ?",
                key,
            )[0]
        stored = SessionRecord(*(str(v) for v in row))  # type: ignore[arg-type]
        self._remember(stored)
        return stored, stored.id == record.id

    def rename(self, session_id: str, name: str) -> None:
        record = self._by_id[session_id]
        self.store.execute(
            "UPDATE sessions SET name = ?, updated = ? WHERE id = ?",
            (name, time.time(), session_id),
        )
        self._remember(_replace(record, name=name))

    def end(self, session_id: str) -> None:
        record = self._by_id[session_id]
        self.store.execute(
            "UPDATE sessions SET state = 'ended', updated = ? WHERE id = ?",
            (time.time(), session_id),
        )
        self._remember(_replace(record, state="ended"))

    def __len__(self) -> int:
        return len(self._by_id)

    # -- threads -----------------------------------------------------------------------

    def thread(self, session_id: str, channel: str) -> ThreadRecord | None:
        return self._threads.get((session_id, channel))

    def channels(self, session_id: str) -> list[str]:
        """The channels the session was routed to when it began."""
        return list(self._channels.get(session_id, ()))

    def threads(self, state: ThreadState) -> list[ThreadRecord]:
        return [t for t in self._threads.values() if t.state == state]

    def begin_thread(self, session_id: str, channel: str, name: str) -> None:
        """Decide (and record) that the session gets a thread in `channel`, before creating it."""
        if (session_id, channel) in self._threads:
            return
        self.store.execute(
            "INSERT OR IGNORE INTO threads (session_id, channel, name, state) "
            "VALUES (?, ?, ?, 'creating')",
            (session_id, channel, name),
        )
        self._put_thread(ThreadRecord(session_id, channel, None, "creating", name))

    def bind_thread(self, session_id: str, channel: str, thread_id: str) -> None:
        """The platform created the thread: remember its id (state `open`)."""
        known = self._threads[(session_id, channel)]
        self.store.execute(
            "UPDATE threads SET thread_id = ?, state = 'open' WHERE session_id = ? AND channel = ?",
            (thread_id, session_id, channel),
        )
        self._put_thread(replace(known, thread_id=thread_id, state="open"))

    def name_thread(self, session_id: str, channel: str, name: str) -> bool:
        """Record a new name; False when it is the name the thread already has."""
        known = self._threads.get((session_id, channel))
        if known is None or known.name == name:
            return False
        self.store.execute(
            "UPDATE threads SET name = ? WHERE session_id = ? AND channel = ?",
            (name, session_id, channel),
        )
        self._put_thread(replace(known, name=name))
        return True

    def close_thread(self, session_id: str, channel: str) -> None:
        """The session ended: its open thread is done (one still being created stays so)."""
        known = self._threads.get((session_id, channel))
        if known is None or known.state != "open":
            return
        self.store.execute(
            "UPDATE threads SET state = 'closed' WHERE session_id = ? AND channel = ?",
            (session_id, channel),
        )
        self._put_thread(replace(known, state="closed"))

    def thread_id(self, channel: str, session_id: str) -> str | None:
        known = self._threads.get((session_id, channel))
        return None if known is None else known.thread_id

    def session_of_thread(self, channel: str, thread_id: str) -> str | None:
        return self._by_thread.get((channel, thread_id))


def _replace(record: SessionRecord, **changes: str) -> SessionRecord:
    return replace(record, **changes)  # type: ignore[arg-type]
