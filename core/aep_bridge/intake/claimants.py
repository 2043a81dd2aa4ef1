"""Who emitted on each session last: the identity (`agent`, `instance` of its `hello`) of the
duplex connection that claimed it, kept in the store across restarts.

A claim is learned from a session's own events (`Hub.admit`), and a restart of the bridge
forgets every live one: an agent that reconnects, says `hello` and then waits quietly for an
answer would get none until it spoke again. With this memory, the `hello` of the connection
whose identity last claimed a session gives it that claim back (`Hub.said_hello`), so the
answers waiting for the session go at once.

Only an identity that names one process can be remembered: an authenticated emitter that
declares commands it accepts and says both `agent` and `instance` (AEP-0003 §4: `instance`
disambiguates processes). Two processes of one agent without an `instance` look alike, and an
answer must never go to the other one.

Bounded: at most `limit` sessions (the least recently claimed forgotten first), identities of
at most `MAX_IDENTITY` characters a part; the store holds what memory holds (kv namespace
`relay:claimants`), written with the hub's flush.
"""

from __future__ import annotations

import json
import logging
from collections import OrderedDict
from typing import TYPE_CHECKING, Final

from .replay_buffer import SessionKey
from .subscription import Participant

if TYPE_CHECKING:
    from ..store import Store

log = logging.getLogger("aep_bridge.intake")

#: the kv namespace of the remembered claimants: key `[source, session]`, value
#: `[agent, instance]`, both JSON
NAMESPACE: Final = "relay:claimants"
#: the longest `agent` or `instance` remembered (a longer one is not: it falls back to a claim
#: by the session's next event)
MAX_IDENTITY: Final = 256

Identity = tuple[str, str]


def identity_of(participant: Participant) -> Identity | None:
    """The identity a claim by `participant` is remembered under, or None when it names no
    one process that may take commands: unauthenticated, not an emitter, no way to push to
    it, no command accepted, or `agent` or `instance` missing or too long."""
    agent, instance = participant.agent, participant.instance
    if not (participant.authenticated and participant.emits and participant.push is not None):
        return None
    if not participant.accepts:
        return None
    if not agent or not instance or len(agent) > MAX_IDENTITY or len(instance) > MAX_IDENTITY:
        return None
    return agent, instance


class Claimants:
    """Per `(source, session)`, the identity that claimed it last; persisted, bounded."""

    def __init__(self, store: Store | None, limit: int) -> None:
        self.store = store
        self.limit = limit
        self._by_key: OrderedDict[SessionKey, Identity] = OrderedDict()
        #: changes not yet in the store: an identity, or None for a key forgotten
        self._changed: dict[SessionKey, Identity | None] = {}
        if store is not None:
            self._load(store)

    def __len__(self) -> int:
        return len(self._by_key)

    def _load(self, store: Store) -> None:
        unreadable: list[str] = []
        for key, value in store.kv_items(NAMESPACE):
            try:
                source, session = json.loads(key)
                agent, instance = json.loads(value)
            except (ValueError, TypeError):
                unreadable.append(key)
                continue
            if all(isinstance(p, str) for p in (source, session, agent, instance)):
                self._by_key[(source, session)] = (agent, instance)
            else:
                unreadable.append(key)
        if unreadable:
            log.warning("%d remembered claimant(s) could not be read: forgotten", len(unreadable))
            with store.transaction():
                for key in unreadable:
                    store.kv_delete(NAMESPACE, key)
        while len(self._by_key) > self.limit:
            self.forget(next(iter(self._by_key)))

    def note(self, key: SessionKey, identity: Identity) -> None:
        """`identity` claimed `key` by an event of it (called for every such event: the
        usual case, the same identity again, is one dictionary look-up)."""
        known = self._by_key
        if known.get(key) == identity:
            return
        known[key] = identity
        known.move_to_end(key)
        self._changed[key] = identity
        if len(known) > self.limit:
            self.forget(next(iter(known)))

    def forget(self, key: SessionKey) -> None:
        """`key` has no claimant to remember any more (its session ended, or its buffer went)."""
        if self._by_key.pop(key, None) is not None:
            self._changed[key] = None

    def of(self, identity: Identity) -> list[SessionKey]:
        """The sessions `identity` claimed last, least recently first."""
        return [key for key, who in self._by_key.items() if who == identity]

    def flush(self) -> None:
        """Write the changes since the last flush (kept for the next one if that fails)."""
        store = self.store
        if store is None or not self._changed:
            return
        changed, self._changed = self._changed, {}
        try:
            with store.transaction():
                for key, identity in changed.items():
                    stored = json.dumps(list(key))
                    if identity is None:
                        store.kv_delete(NAMESPACE, stored)
                    else:
                        store.kv_set(NAMESPACE, stored, json.dumps(list(identity)))
        except BaseException:
            self._changed = {**changed, **self._changed}
            raise


__all__ = ["MAX_IDENTITY", "NAMESPACE", "Claimants", "Identity", "identity_of"]
