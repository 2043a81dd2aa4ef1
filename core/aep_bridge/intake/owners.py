"""Which principal each session belongs to: the one whose connection emitted on it first.

A team's bridge takes agents from many people, each with a token of their own (`intake.
principals`). A session is its first emitter's: another principal's events on it are refused
(unless that one is an admin), so no daemon can take over someone else's session and be
sent the answers meant for it (commands go to the connection that emits on a session). Kept
in the store (`session_owners`) across restarts; memory holds the most recently used, at
most `limit`, and asks the store for the rest.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING

from .principals import Principal

if TYPE_CHECKING:
    from ..store import Store


class Owners:
    """Per AEP session id, the name of the principal it belongs to; persisted, bounded."""

    def __init__(self, store: Store | None, limit: int) -> None:
        self.store = store
        self.limit = limit
        self._known: OrderedDict[str, str] = OrderedDict()
        #: owners not yet in the store (written with the hub's flush)
        self._unwritten: dict[str, str] = {}

    def of(self, session: str) -> str | None:
        """The name of the principal `session` belongs to, or None if no one emitted on it."""
        owner = self._known.get(session)
        if owner is None and self.store is not None:
            owner = self._unwritten.get(session) or self.store.session_owner(session)
            if owner is not None:
                self._remember(session, owner)
        return owner

    def refusal(self, session: str | None, principal: Principal) -> str | None:
        """Why `principal` may not emit on `session` (it is another's), or None if it may:
        its own, no one's yet, or `principal` is an admin."""
        if session is None or principal.role == "admin":
            return None
        owner = self.of(session)
        if owner is None or owner == principal.name:
            return None
        return f"session {session!r} belongs to another principal; a token may emit only on its own"

    def note(self, session: str, principal: Principal) -> None:
        """`principal` emitted on `session`: it is its owner if it had none."""
        if session in self._known:
            self._known.move_to_end(session)
            return
        if self.of(session) is not None:
            return
        self._remember(session, principal.name)
        if self.store is not None:
            self._unwritten[session] = principal.name

    def _remember(self, session: str, owner: str) -> None:
        self._known[session] = owner
        self._known.move_to_end(session)
        if len(self._known) > self.limit:
            self._known.popitem(last=False)

    def flush(self) -> None:
        """Write the owners learnt since the last flush (kept for the next if that fails)."""
        if self.store is None or not self._unwritten:
            return
        unwritten, self._unwritten = self._unwritten, {}
        try:
            self.store.set_session_owners(unwritten)
        except BaseException:
            self._unwritten = {**unwritten, **self._unwritten}
            raise


__all__ = ["Owners"]
