"""The session registry: which AEP session is which bridge session, and its thread per channel.

AEP session identity is emitter-scoped, so a session is keyed by `(source, session)`. The
bridge gives each one a short opaque id (what adapters see) and records, per channel, the
platform thread it lives in. Creating a thread is decided here before it is done: a row in
state `creating` is written first, so a restart never creates a second thread for a session,
unless the bridge died during the very platform call that was creating it.
"""

from __future__ import annotations

import json
import secrets
import sys
from dataclasses import dataclass, replace
from typing import Literal

from ..aep.envelope import Event
from ..store import Store
from ..store.sessions import SessionRow

ThreadState = Literal["creating", "open", "closed"]


def new_session_id() -> str:
    """A short, opaque, unguessable id: safe in URLs, button data and logs."""
    return "s" + secrets.token_hex(5)


@dataclass(frozen=True, slots=True)
class Owner:
    """Who a session is: the principal whose token sent its first event (its owner), and the
    OS user and host its daemon reported (the `osuser` extension, the source's host)."""

    principal: str
    os_user: str | None = None
    host: str | None = None

    def describe(self) -> str:
        """`ada (ada@laptop)`, as `status` and the web page show it."""
        where = "@".join(part for part in (self.os_user, self.host) if part)
        return f"{self.principal} ({where})" if where else self.principal

    def to_json(self) -> str:
        return json.dumps({"principal": self.principal, "os_user": self.os_user, "host": self.host})

    @classmethod
    def from_json(cls, text: str) -> Owner | None:
        """The owner a row keeps, or None for one this bridge cannot read."""
        try:
            value = json.loads(text)
        except ValueError:
            return None
        if not isinstance(value, dict) or not isinstance(value.get("principal"), str):
            return None
        os_user, host = value.get("os_user"), value.get("host")
        return cls(
            value["principal"],
            os_user if isinstance(os_user, str) else None,
            host if isinstance(host, str) else None,
        )


@dataclass(frozen=True, slots=True)
class SessionRecord:
    id: str
    source: str
    session: str
    stream: str
    agent: str
    name: str
    state: Literal["open", "ended"]
    #: who the session is (set at its first event, when its source names principals)
    owner: Owner | None = None


@dataclass(frozen=True, slots=True)
class ThreadRecord:
    session_id: str
    channel: str
    thread_id: str | None
    state: ThreadState
    name: str = ""
    #: where on its channel the thread goes, when a route placed it (`routes[].places`)
    place: str | None = None


class Sessions:
    """Sessions and their thread bindings, in the store.

    Held in memory for every session the store knows, so kept compact: each string once
    (a record shares its event's strings; agent, stream, channel and state names are
    interned), a session's threads in one tuple, and no index keyed by tuples.
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        self._by_id: dict[str, SessionRecord] = {}
        #: session name -> its record, or its records (one a source) when several sources
        #: use the name: `(source, session)` lookups start here, with no tuple a session
        self._by_session: dict[str, SessionRecord | list[SessionRecord]] = {}
        #: session id -> its threads, one per channel it is routed to, in routing order
        self._threads: dict[str, tuple[ThreadRecord, ...]] = {}
        #: channel -> thread id -> session id
        self._by_thread: dict[str, dict[str, str]] = {}
        self._load()

    def _load(self) -> None:
        for row in self.store.session_rows():
            self._remember(_session_record(row))
        for session_id, text in self.store.session_owner_rows():
            known = self._by_id.get(session_id)
            if known is not None:
                self._remember(replace(known, owner=Owner.from_json(text)))
        for session_id, channel, thread_id, state, name, place in self.store.thread_rows():
            self._hold_thread(session_id, channel, thread_id, state, name, place)

    def _hold_thread(
        self,
        session_id: str,
        channel: str,
        thread_id: str | None,
        state: str,
        name: str,
        place: str | None = None,
    ) -> None:
        """Hold a new thread record, compact: the session record's own id string, the channel
        and state names interned."""
        known = self._by_id.get(session_id)
        self._put_thread(
            ThreadRecord(
                known.id if known is not None else session_id,
                sys.intern(channel),
                thread_id,
                sys.intern(state),  # type: ignore[arg-type]
                name,
                None if place is None else sys.intern(place),
            )
        )

    def _put_thread(self, record: ThreadRecord) -> None:
        threads = self._threads.get(record.session_id, ())
        for i, known in enumerate(threads):
            if known.channel == record.channel:
                threads = (*threads[:i], record, *threads[i + 1 :])
                break
        else:
            threads = (*threads, record)
        self._threads[record.session_id] = threads
        if record.thread_id is not None:
            self._by_thread.setdefault(record.channel, {})[record.thread_id] = record.session_id

    def _remember(self, record: SessionRecord) -> None:
        """Add a record, or replace the one of its `(source, session)`."""
        same = self._by_session.get(record.session)
        if same is None:
            self._by_session[record.session] = record
        elif isinstance(same, SessionRecord):
            if same.source == record.source:
                self._by_session[record.session] = record
            else:
                self._by_session[record.session] = [same, record]
        else:
            for i, known in enumerate(same):
                if known.source == record.source:
                    same[i] = record
                    break
            else:
                same.append(record)
        self._by_id[record.id] = record

    # -- sessions ----------------------------------------------------------------------

    def get(self, session_id: str) -> SessionRecord | None:
        return self._by_id.get(session_id)

    def find(self, source: str, session: str) -> SessionRecord | None:
        found = self._by_session.get(session)
        if isinstance(found, SessionRecord):
            return found if found.source == source else None
        for known in found or ():
            if known.source == source:
                return known
        return None

    def find_by_session(self, session: str) -> SessionRecord | None:
        """The one known session with this id, whatever its source; None if none or several.

        For events foreign to a session (another consumer's command, `attention.routed`):
        they name the session but come from elsewhere.
        """
        found = self._by_session.get(session)
        return found if isinstance(found, SessionRecord) else None

    def find_all(self, session: str) -> list[SessionRecord]:
        """Every known session with this id, one a source (away mode's query names the
        session alone)."""
        found = self._by_session.get(session)
        if found is None:
            return []
        return [found] if isinstance(found, SessionRecord) else list(found)

    def all(self) -> list[SessionRecord]:
        """Every known session, the oldest first (as loaded, then as created)."""
        return list(self._by_id.values())

    def get_or_create(
        self, event: Event, stream: str, name: str, owner: Owner | None = None
    ) -> tuple[SessionRecord, bool]:
        """The session `event` belongs to, created on its first event (exactly once), with
        `owner` then."""
        key = event.session_key
        assert key is not None, "agent-scoped events have no session"
        known = self.find(*key)
        if known is not None:
            return known, False
        record = SessionRecord(
            new_session_id(),
            key[0],
            key[1],
            sys.intern(stream),
            sys.intern(event.agent),
            name,
            "open",
            owner,
        )
        with self.store.transaction():
            row = self.store.add_session(
                record.id,
                record.source,
                record.session,
                stream,
                record.agent,
                name,
                None if owner is None else owner.to_json(),
            )
        created = row[0] == record.id
        stored = record if created else _session_record(row)
        self._remember(stored)
        return stored, created

    def rename(self, session_id: str, name: str) -> None:
        record = self._by_id[session_id]
        self.store.set_session_name(session_id, name)
        self._remember(_replace(record, name=name))

    def end(self, session_id: str) -> None:
        record = self._by_id[session_id]
        self.store.end_session(session_id)
        self._remember(_replace(record, state="ended"))

    def forget(self, session_ids: list[str]) -> None:
        """Drop sessions the store has forgotten (`retention`): their records and threads."""
        for session_id in session_ids:
            record = self._by_id.pop(session_id, None)
            for thread in self._threads.pop(session_id, ()):
                if thread.thread_id is not None:
                    by_thread = self._by_thread.get(thread.channel, {})
                    if by_thread.get(thread.thread_id) == session_id:
                        del by_thread[thread.thread_id]
            if record is None:
                continue
            same = self._by_session.get(record.session)
            if same is record:
                del self._by_session[record.session]
            elif isinstance(same, list):
                same[:] = [known for known in same if known.id != session_id]
                if len(same) == 1:
                    self._by_session[record.session] = same[0]
                elif not same:
                    del self._by_session[record.session]

    def __len__(self) -> int:
        return len(self._by_id)

    # -- threads -----------------------------------------------------------------------

    def thread(self, session_id: str, channel: str) -> ThreadRecord | None:
        for known in self._threads.get(session_id, ()):
            if known.channel == channel:
                return known
        return None

    def channels(self, session_id: str) -> list[str]:
        """The channels the session was routed to when it began."""
        return [t.channel for t in self._threads.get(session_id, ())]

    def threads(self, state: ThreadState) -> list[ThreadRecord]:
        return [t for threads in self._threads.values() for t in threads if t.state == state]

    def begin_thread(
        self, session_id: str, channel: str, name: str, place: str | None = None
    ) -> None:
        """Decide (and record) that the session gets a thread in `channel` (at `place`, when a
        route placed it), before creating it."""
        if self.thread(session_id, channel) is not None:
            return
        self.store.add_thread(session_id, channel, name, place)
        for other in self._threads.get(session_id, ()):
            if other.name == name:
                name = other.name  # one string for the session's threads alike
                break
        self._hold_thread(session_id, channel, None, "creating", name, place)

    def bind_thread(self, session_id: str, channel: str, thread_id: str) -> None:
        """The platform created the thread: remember its id (state `open`)."""
        known = self.thread(session_id, channel)
        if known is None:
            raise KeyError((session_id, channel))
        self.store.bind_thread(session_id, channel, thread_id)
        self._put_thread(replace(known, thread_id=thread_id, state="open"))

    def name_thread(self, session_id: str, channel: str, name: str) -> bool:
        """Record a new name; False when it is the name the thread already has."""
        known = self.thread(session_id, channel)
        if known is None or known.name == name:
            return False
        self.store.set_thread_name(session_id, channel, name)
        self._put_thread(replace(known, name=name))
        return True

    def close_thread(self, session_id: str, channel: str) -> None:
        """The session ended: its open thread is done (one still being created stays so)."""
        known = self.thread(session_id, channel)
        if known is None or known.state != "open":
            return
        self.store.close_thread(session_id, channel)
        self._put_thread(replace(known, state="closed"))

    def thread_id(self, channel: str, session_id: str) -> str | None:
        known = self.thread(session_id, channel)
        return None if known is None else known.thread_id

    def place(self, channel: str, session_id: str) -> str | None:
        """Where a route placed the session's thread on `channel`; None: the channel's own."""
        known = self.thread(session_id, channel)
        return None if known is None else known.place

    def session_of_thread(self, channel: str, thread_id: str) -> str | None:
        return self._by_thread.get(channel, {}).get(thread_id)


def _session_record(row: SessionRow) -> SessionRecord:
    """A record from a `sessions` row, its few distinct names (agent, stream, state) interned."""
    id_, source, session, stream, agent, name, state = row
    return SessionRecord(
        id_,
        source,
        session,
        sys.intern(stream),
        sys.intern(agent),
        session if name == session else name,
        sys.intern(state),  # type: ignore[arg-type]
    )


def _replace(record: SessionRecord, **changes: str) -> SessionRecord:
    return replace(record, **changes)  # type: ignore[arg-type]
