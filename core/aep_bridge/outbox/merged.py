"""Merged messages that hold keyed parts, and the later edits of those parts.

A keyed message is one platform message the core edits later by its key: a reply that a
run's footer joins, a stretch of tool calls whose lines change as they finish. On a busy
platform a thread's backlog is mostly such messages, and each would cost a slot of the
chat's budget (Slack's one post a second for a whole channel): a card queued behind them
waited for all of them, one slot each. So they merge as plain messages do (`merge`), and
this module keeps what that takes: which parts each merged message holds, in order, each
with its own key (or none), under the merged message's own key (`merge.merged_key`).

A later message with a part's key (`redraw`) becomes the whole merged message drawn again
with that part replaced, under the merged key: while the merged message waits, it takes its
place (the queue's coalescing by key); once it was sent, it is an edit of it. A part that
grew past what the merged message can show is cut at its end to fit (`jobs.longest_cut`),
as any edit of one message is cut; the other parts stay as they were read.

Kept in the store (`kv`, namespace `outbox:<channel>`, one key per merged message) in the
transaction that wrote the merge or the edit, so a restart keeps both; a restart reads them
back (`load`). A session keeps its last `PER_SESSION`, and none once its thread is closed
(`forget_session`).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from ..contract.types import OutgoingMessage
from ..store import Store
from .jobs import Job
from .merge import MERGED, joined

#: the merged messages kept in memory (the least recently used read back from the store)
KEPT: Final = 512
#: the merged messages kept per session, the oldest forgotten first (in the store too): the
#: renderer edits only the last 256 keys of a thread (`render.activity.KEYS_KEPT`), and a
#: merged message holds two or more
PER_SESSION: Final = 256


@dataclass(frozen=True, slots=True)
class Merged:
    """A merged message with keyed parts: its session, its key, and its parts in order."""

    session_id: str
    key: str
    parts: tuple[OutgoingMessage, ...]
    #: whether every part was chatter that may be dropped (its redraws may be, then)
    droppable: bool
    #: its place among its session's merged messages (the oldest are forgotten first)
    seq: int = 0

    def message(self) -> OutgoingMessage:
        """The merged message as it is shown."""
        return joined(self.parts)

    def dump(self) -> str:
        return json.dumps(
            {
                "session": self.session_id,
                "key": self.key,
                "parts": [part.model_dump(mode="json") for part in self.parts],
                "droppable": self.droppable,
                "seq": self.seq,
            },
            ensure_ascii=False,
            separators=(",", ":"),
        )

    @classmethod
    def load(cls, text: str) -> Merged:
        data = json.loads(text)
        parts = tuple(OutgoingMessage.model_validate(part) for part in data["parts"])
        return cls(data["session"], data["key"], parts, bool(data["droppable"]), int(data["seq"]))


class MergedPosts:
    """The merged messages of one channel that hold keyed parts, and the key of each part."""

    def __init__(self, store: Store, channel: str) -> None:
        self._store = store
        self._namespace = f"outbox:{channel}"
        #: (session, a part's key) -> the key of the merged message holding it
        self._keys: dict[tuple[str, str], str] = {}
        #: the merged messages read or written in this run (the rest are read when needed)
        self._posts: OrderedDict[tuple[str, str], Merged] = OrderedDict()
        #: session -> its merged messages' keys by their `seq` (`PER_SESSION` at most)
        self._order: dict[str, dict[str, int]] = {}

    @staticmethod
    def _name(session_id: str, key: str) -> str:
        # the session's id after the first ":": the row goes with the session's records
        return f"merged:{session_id}:{key}"

    def load(self) -> int:
        """Read back which parts each merged message holds (at start); how many messages."""
        self._keys.clear()
        self._posts.clear()
        self._order.clear()
        count = 0
        for name, text in self._store.kv_items(self._namespace):
            if not name.startswith("merged:"):
                continue
            try:
                merged = Merged.load(text)
            except (ValueError, KeyError, TypeError):
                continue  # unreadable: its parts' edits are posted as their own messages
            count += 1
            self._remember(merged, cache=False)
        return count

    def _remember(self, merged: Merged, *, cache: bool = True) -> None:
        self._order.setdefault(merged.session_id, {})[merged.key] = merged.seq
        for part in merged.parts:
            if part.key is not None:
                self._keys[(merged.session_id, part.key)] = merged.key
        if cache:
            name = (merged.session_id, merged.key)
            self._posts[name] = merged
            self._posts.move_to_end(name)
            while len(self._posts) > KEPT:
                self._posts.popitem(last=False)

    def parts(self, session_id: str, message: OutgoingMessage) -> tuple[OutgoingMessage, ...]:
        """The parts of `message` as queued: a merged message's, else itself."""
        if message.key is None or not message.key.startswith(MERGED):
            return (message,)
        merged = self.get(session_id, message.key)
        return (message,) if merged is None else merged.parts

    def save(self, merged: Merged) -> None:
        """Keep what the merged message holds (in the caller's transaction)."""
        name = self._name(merged.session_id, merged.key)
        self._store.channel_kv_set(self._namespace, name, merged.dump())
        self._remember(merged)

    def _drop(self, session_id: str, key: str) -> None:
        """Forget a merged message, here and in the store (in the caller's transaction)."""
        merged = self.get(session_id, key)  # read before its row goes: a restart caches none
        self._store.kv_delete(self._namespace, self._name(session_id, key))
        self._posts.pop((session_id, key), None)
        self._order.get(session_id, {}).pop(key, None)
        if merged is not None:
            for part in merged.parts:
                if part.key is not None and self._keys.get((session_id, part.key)) == key:
                    del self._keys[(session_id, part.key)]

    def get(self, session_id: str, key: str) -> Merged | None:
        merged = self._posts.get((session_id, key))
        if merged is not None:
            return merged
        text = self._store.kv_get(self._namespace, self._name(session_id, key))
        if text is None:
            return None
        try:
            merged = Merged.load(text)
        except (ValueError, KeyError, TypeError):
            return None
        self._remember(merged)
        return merged

    def holder(self, session_id: str | None, key: str | None) -> str | None:
        """The key of the merged message holding the part keyed `key`, if one does."""
        if session_id is None or key is None:
            return None
        return self._keys.get((session_id, key))

    def redraw(
        self,
        job: Job,
        message: OutgoingMessage,
        fits: Callable[[OutgoingMessage], bool],
        cut: Callable[[OutgoingMessage, Callable[[OutgoingMessage], bool]], OutgoingMessage | None],
    ) -> Job | None:
        """`job` (`message`, with a part's key) as the merged message holding that part,
        drawn again with it; None when it changes nothing shown (not even its first words
        fit). In the caller's transaction. `fits` tells whether the channel shows a message
        whole; `cut`, the longest cut of a part for which the merged message `fits`."""
        assert job.session_id is not None
        assert message.key is not None
        session = job.session_id
        key = self._keys[(session, message.key)]
        merged = self.get(session, key)
        if merged is None:  # its record is gone: the part goes as its own message
            del self._keys[(session, message.key)]
            return job
        if message.attachment is not None:  # a merged message carries no attachment
            message = message.model_copy(update={"attachment": None})

        def with_part(part: OutgoingMessage) -> Merged:
            parts = tuple(part if p.key == message.key else p for p in merged.parts)
            return Merged(session, key, parts, merged.droppable, merged.seq)

        redrawn = with_part(message)
        if not fits(redrawn.message()):
            shorter = cut(message, lambda part: fits(with_part(part).message()))
            if shorter is None:
                return None
            redrawn = with_part(shorter)
        self.save(redrawn)
        return Job.message(
            session,
            redrawn.message(),
            priority=job.priority,
            droppable=job.droppable and merged.droppable,
        )

    def merge(self, session_id: str, parts: tuple[OutgoingMessage, ...], droppable: bool) -> None:
        """Keep the merged message of `parts` (each a message as queued: a merged one's parts
        go in its place), in the caller's transaction."""
        flat = tuple(p for part in parts for p in self.parts(session_id, part))
        message = joined(flat)
        assert message.key is not None
        for part in parts:  # merged messages absorbed under another key are gone
            if part.key is not None and part.key.startswith(MERGED) and part.key != message.key:
                self._drop(session_id, part.key)
        order = self._order.setdefault(session_id, {})
        seq = order.get(message.key, max(order.values(), default=0) + 1)
        self.save(Merged(session_id, message.key, flat, droppable, seq))
        while len(order) > PER_SESSION:  # the oldest: its parts' edits are past
            self._drop(session_id, min(order, key=order.__getitem__))

    def forget_session(self, session_id: str | None) -> None:
        """Its thread is closed: later edits of its messages are not looked for, and what
        the store kept of them goes now (in the caller's transaction), not with the
        session's records days later: a busy session may have merged hundreds."""
        for name in [k for k in self._keys if k[0] == session_id]:
            del self._keys[name]
        for name in [k for k in self._posts if k[0] == session_id]:
            del self._posts[name]
        if session_id is not None:
            for key in self._order.pop(session_id, {}):
                self._store.kv_delete(self._namespace, self._name(session_id, key))


__all__ = ["KEPT", "PER_SESSION", "Merged", "MergedPosts"]
