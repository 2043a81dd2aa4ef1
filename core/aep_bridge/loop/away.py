"""Away mode: whether the person is away from a session's terminal, so that the agent daemon
holds the agent's stop and asks the chat what next (issue 33, docs/agents.md).

A session is away if its own switch says so (on or off), else if its owner's switch says so
(a person's, `people`: `/away` from their chat identity, `aep-bridge away --person NAME`),
else if the everywhere switch is on, else if automatic away applies (`away.after_minutes`: no
prompt typed in its terminal, `message.user.submitted` or a `run.started` by the user, for
that long, counted from the session's first event when none was typed). Switching
everywhere clears the sessions' and the people's own switches: `aep-bridge away off` means
nothing is held, whatever was said.

The switches and each session's last terminal prompt are kept in the store (`kv`), a
session's keys named by its id so that they go with its records (store/kv.py). A person's
switch applies to the sessions they own (`SessionRecord.owner`).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Collection
from typing import Any, Final, Literal

from ..aep.envelope import Event
from ..store import Store
from .sessions import SessionRecord, Sessions

log = logging.getLogger("aep_bridge.away")

#: The kv namespace of the switches and of the terminal prompts' times.
NAMESPACE: Final = "bridge:away"
EVERYWHERE: Final = "everywhere"
#: The most sessions `describe` lists (the open ones, newest switches first).
MAX_LISTED: Final = 200
#: The most characters of who switched that are kept.
MAX_BY: Final = 120

Why = Literal["session", "person", "everywhere", "automatic"]


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _switch_key(session_id: str) -> str:
    return f"switch:{session_id}"


def _person_key(person: str) -> str:
    return f"person:{person}"


def _prompt_key(session_id: str) -> str:
    return f"prompt:{session_id}"


def is_terminal_prompt(event: Event) -> bool:
    """Whether `event` says a person typed a prompt in the agent's own terminal."""
    if event.type == "message.user.submitted":
        return True
    if event.type == "run.started":
        data = event.data if isinstance(event.data, dict) else {}
        return data.get("trigger") == "user"
    return False


class AwayState:
    """The away switches and automatic away, over the store. The bridge owns one
    (`bridge.away`); the endpoint's `/away`, the chat's `/away` `/back` and the channels'
    `BridgeCore.set_away` all switch through it."""

    def __init__(
        self,
        store: Store,
        sessions: Sessions,
        *,
        after_minutes: float | None = None,
        hold_minutes: float = 30.0,
        clock: Callable[[], float] = time.time,
        people: Collection[str] = (),
    ) -> None:
        """`people`: the names a person's switch may be set for (the config's `people`)."""
        self.people = frozenset(people)
        self.store = store
        self.sessions = sessions
        self.after_minutes = after_minutes
        self.hold_seconds = int(hold_minutes * 60)
        self._clock = clock

    # -- reading ---------------------------------------------------------------------------

    def _switch(self, key: str) -> dict[str, Any] | None:
        raw = self.store.kv_get(NAMESPACE, key)
        if raw is None:
            return None
        try:
            value = json.loads(raw)
        except ValueError:
            return None
        return value if isinstance(value, dict) and isinstance(value.get("on"), bool) else None

    def _last_prompt(self, session_id: str) -> float | None:
        raw = self.store.kv_get(NAMESPACE, _prompt_key(session_id))
        try:
            return float(raw) if raw is not None else None
        except ValueError:
            return None

    def why(self, session_id: str) -> Why | None:
        """Why the session is away (which rule), or None when it is not."""
        own = self._switch(_switch_key(session_id))
        if own is not None:
            return "session" if own["on"] else None
        record = self.sessions.get(session_id)
        owner = None if record is None or record.owner is None else record.owner.principal
        person = None if owner is None else self._switch(_person_key(owner))
        if person is not None:
            return "person" if person["on"] else None
        everywhere = self._switch(EVERYWHERE)
        if everywhere is not None and everywhere["on"]:
            return "everywhere"
        if self.after_minutes is not None:
            last = self._last_prompt(session_id)
            if last is not None and self._clock() - last >= self.after_minutes * 60:
                return "automatic"
        return None

    def is_away(self, session_id: str) -> bool:
        """Whether the agent of this session (the bridge's session id) is to be held when it
        stops."""
        return self.why(session_id) is not None

    def query(self, session: str) -> dict[str, Any]:
        """`GET /away?session=`: for the AEP session id the daemon knows. A session the bridge
        has not seen follows the everywhere switch; one that several sources share is away
        only if each of them is (nothing is held unless the bridge is sure)."""
        records = self.sessions.find_all(session)
        if records:
            away = all(self.is_away(record.id) for record in records)
        else:
            everywhere = self._switch(EVERYWHERE)
            away = everywhere is not None and bool(everywhere["on"])
        return {"away": away, "hold_seconds": self.hold_seconds}

    def describe(self) -> dict[str, Any]:
        """The whole state, for `status` and the web page: the everywhere switch, automatic
        away, the hold, and each open session (or one with its own switch) with whether it
        is away and why."""
        everywhere = self._switch(EVERYWHERE) or {"on": False}
        switches: dict[str, dict[str, Any]] = {}
        people: dict[str, dict[str, Any]] = {}
        for key, _ in self.store.kv_items(NAMESPACE):
            if key.startswith("switch:"):
                found = self._switch(key)
                if found is not None:
                    switches[key.removeprefix("switch:")] = found
            elif key.startswith("person:"):
                found = self._switch(key)
                if found is not None:
                    people[key.removeprefix("person:")] = found
        listed: list[dict[str, Any]] = []
        records = [r for r in self.sessions.all() if r.state == "open" or r.id in switches]
        for record in records[-MAX_LISTED:]:
            own = switches.get(record.id)
            why = self.why(record.id)
            listed.append(
                {
                    "id": record.id,
                    "session": record.session,
                    "agent": record.agent,
                    "name": record.name,
                    "away": why is not None,
                    "why": why,
                    "switch": None if own is None else own["on"],
                    "by": None if own is None else own.get("by"),
                    "owner": None if record.owner is None else record.owner.principal,
                    "owned_by": None if record.owner is None else record.owner.describe(),
                }
            )
        return {
            "everywhere": bool(everywhere["on"]),
            "by": everywhere.get("by"),
            "after_minutes": self.after_minutes,
            "hold_seconds": self.hold_seconds,
            "people": {
                name: {"away": bool(found["on"]), "by": found.get("by")}
                for name, found in sorted(people.items())
            },
            "sessions": listed,
            "more_sessions": max(0, len(records) - MAX_LISTED),
        }

    # -- switching -------------------------------------------------------------------------

    def set(self, on: bool, *, session_id: str | None, by: str, person: str | None = None) -> None:
        """Switch one session (its bridge id), one person (`person`: the sessions they own)
        or, with neither, every session (which clears the sessions' and people's own
        switches). `by` says who, for the log and `describe`. Raises `KeyError` for a
        session the bridge does not know."""
        if session_id is not None and self.sessions.get(session_id) is None:
            raise KeyError(session_id)
        value = json.dumps({"on": on, "by": _clip(by, MAX_BY), "at": round(self._clock(), 3)})
        with self.store.transaction():
            if session_id is not None:
                self.store.channel_kv_set(NAMESPACE, _switch_key(session_id), value)
            elif person is not None:
                self.store.kv_set(NAMESPACE, _person_key(person), value)
            else:
                for key, _ in self.store.kv_items(NAMESPACE):
                    if key.startswith(("switch:", "person:")):
                        self.store.kv_delete(NAMESPACE, key)
                self.store.kv_set(NAMESPACE, EVERYWHERE, value)
        self.store.commit_group()
        where = "everywhere"
        if session_id is not None or person is not None:
            where = f"for session {session_id}" if session_id else f"for {person}'s sessions"
        log.info("away %s %s by %s", "on" if on else "off", where, _clip(by, MAX_BY))

    def refusal(self, name: str, session: str | None, person: str | None) -> str | None:
        """Why a named token that is not an admin's (its principal `name`) may not make this
        switch, or None when it may: only its own person's switch (`people.<name>`), or a
        session it owns. An unknown session is refused as another's is (no oracle)."""
        if name not in self.people:
            return (
                f"this needs an admin token, or a token named after a person: {name} is not "
                f"under people (add people.{name})"
            )
        if person is not None and person != name:
            return f"a token switches its own person's away ({name}), not {person}'s"
        if session is not None:
            known = self.sessions.get(session)
            records = [known] if known is not None else self.sessions.find_all(session)
            owners = {None if r.owner is None else r.owner.principal for r in records}
            if owners != {name}:
                return f"session {session} is not {name}'s (its owner or an admin switches it)"
        return None

    def switch(
        self, on: bool, session: str | None, by: str, person: str | None = None
    ) -> list[str]:
        """`POST /away`: switch a session named by the bridge's id or by its AEP session id
        (every source's session of that id), a person (the sessions they own), or every
        session with neither. Returns the bridge ids switched ([] for a person or
        everywhere); raises `KeyError` for a session or a person nobody knows."""
        if person is not None and session is None:
            if person not in self.people:
                raise KeyError(person)
            self.set(on, session_id=None, person=person, by=by)
            return []
        if session is None:
            self.set(on, session_id=None, by=by)
            return []
        known = self.sessions.get(session)
        records = [known] if known is not None else self.sessions.find_all(session)
        if not records:
            raise KeyError(session)
        for record in records:
            self.set(on, session_id=record.id, by=by)
        return [record.id for record in records]

    # -- events ----------------------------------------------------------------------------

    def on_event(self, event: Event, session: SessionRecord) -> None:
        """Note a prompt typed in the session's terminal (and the session's first event), in
        the event's own transaction, at the time the bridge handles it (an agent's clock may
        be off; an event seen before is not handled again): automatic away counts from it.
        Only when automatic away is on (nothing is written otherwise)."""
        if self.after_minutes is None or event.seq is None:
            return
        key = _prompt_key(session.id)
        if not is_terminal_prompt(event) and self.store.kv_get(NAMESPACE, key) is not None:
            return
        self.store.channel_kv_set(NAMESPACE, key, repr(round(self._clock(), 3)))
