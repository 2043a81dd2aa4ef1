"""The line that tells a thread why it shows tool names only.

An agent at the `metadata` capture (the agent daemon's default, `agents.capture`) sends tool
names and digests, never a command, a path or the agent's words, so its thread reads
"Bash", "Read", "Edit" and nothing more. Once per session, at its start, every channel that
could show more (a ceiling above `metadata`) gets one line saying that details are withheld
and the one setting that shows them.

The session is judged by its first event that is not `attention.*` (those carry the
attention ceiling, `redacted` by default, whatever the rest of the session is at): usually
`session.started`. A session whose first event is a prompt waits, recorded in the store (its
key goes with the session's records), so a restart neither forgets nor repeats it; a session
the store knew before the bridge started is never judged again.
"""

from __future__ import annotations

from typing import Final

from ..aep.envelope import Event
from ..aep.registry import CAPTURE_RANK
from ..contract.types import OutgoingMessage
from ..store import Store

#: What the thread says. One line, the same in every channel (adapters escape it).
NOTICE: Final = (
    "Details withheld: the agent sends tool names only. To see commands and text (secrets, "
    "home paths and contacts redacted), set agents.capture to redacted "
    "(docs/agents.md#what-leaves-the-machine)."
)
#: The store's namespace for the sessions still to be judged (`waiting:{session id}`).
NAMESPACE: Final = "bridge:withheld"
_METADATA: Final = CAPTURE_RANK["metadata"]


def notice(session_id: str) -> OutgoingMessage:
    """The notice as a message of the session's thread (keyed: sent once, even if queued
    twice)."""
    return OutgoingMessage(
        type="system_message",
        text=NOTICE,
        key=f"withheld:{session_id}",
        metadata={"withheld": "metadata"},
    )


def shows_more(ceiling: str) -> bool:
    """Whether a channel at `ceiling` would show more if the agent sent more."""
    return CAPTURE_RANK.get(ceiling, 0) > _METADATA


class Withheld:
    """Which sessions are still to be judged: the new ones (in memory until they are, and in
    the store while their first event was a prompt)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._waiting: set[str] = {
            key.removeprefix("waiting:") for key, _ in store.kv_items(NAMESPACE)
        }

    def created(self, session_id: str) -> None:
        """A session the bridge has just seen begin: judge it by its first events."""
        self._waiting.add(session_id)

    def judge(self, session_id: str, event: Event) -> bool:
        """Whether `event` shows its session is at `metadata` and the notice is due now.

        Called inside the event's transaction, so what it records commits with the event."""
        if session_id not in self._waiting:
            return False
        if event.seq is None:
            return False  # not the agent's own event
        key = f"waiting:{session_id}"
        if event.type.startswith("attention."):
            self.store.channel_kv_set(NAMESPACE, key, "1")  # judged by a later event
            return False
        self._waiting.discard(session_id)
        self.store.kv_delete(NAMESPACE, key)
        return event.capture == "metadata"

    def forget(self, session_id: str) -> None:
        """The session ended: nothing more to judge."""
        if session_id in self._waiting:
            self._waiting.discard(session_id)
            self.store.kv_delete(NAMESPACE, f"waiting:{session_id}")
