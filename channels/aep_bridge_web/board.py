"""What the page shows, in memory: sessions, their timelines, the cards; and who is watching.

The adapter writes here what the core sends it; the HTTP routes read snapshots and stream the
changes (`session`, `item`, `card`) to every open page. The channel saves each changed session
(`dump`) and loads them at its next start (`load`).
"""

from __future__ import annotations

import asyncio
import html
import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

from aep_bridge import (
    OutgoingMessage,
    PermissionOutcome,
    PermissionRequest,
    blocks_html,
)

JSON = dict[str, Any]

#: an item's kind on the page, by the message's type
_KINDS: dict[str, str] = {
    "text": "message",
    "thought": "message",
    "plan": "message",
    "tool_call": "tool",
    "tool_update": "tool",
}
#: how many changes a slow page may fall behind before its stream is ended (it reconnects
#: and fetches the state again)
QUEUE_LIMIT = 1000
#: the most items kept per session (the oldest go first)
ITEM_LIMIT = 2000
#: the most sessions kept; past it the ended session changed longest ago goes, with its
#: items and cards
SESSION_LIMIT = 500
#: the items of a session kept across a restart of the bridge (its latest)
SAVED_ITEMS = 300


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _arrival(entry: JSON) -> int:
    """An item's or a card's arrival position on the board (`Board.seq`)."""
    return int(entry.get("seq", 0))


def plain_html(text: str) -> str:
    """Plain text as a paragraph, escaped (the page keeps its line breaks)."""
    return f'<p class="plain">{html.escape(text)}</p>' if text else ""


class Board:
    """Sessions, items and cards as the page's JSON shapes, and the streams that watch them."""

    def __init__(
        self,
        sign: Callable[[str, str], str],
        changed: Callable[[str], None] = lambda session_id: None,
    ) -> None:
        #: told the id of every session that changed (the channel saves it)
        self.changed = changed
        #: the press token of a card's option (`BridgeCore.sign`): a button carries it
        self.sign = sign
        self.sessions: dict[str, JSON] = {}
        self.items: dict[str, dict[str, JSON]] = {}
        self.cards: dict[str, JSON] = {}
        self._watchers: set[asyncio.Queue[tuple[str, JSON] | None]] = set()
        #: the arrival position of the latest item or card: a session's entries are drawn in
        #: this order, never by their clock times (two within a millisecond tie, and an
        #: update's time is later than what arrived after the entry it updates)
        self.seq = 0
        #: the number of the latest change: every entity carries the `rev` it last changed at,
        #: so a page drops a snapshot's older copy of what the stream already gave it
        self.rev = 0
        self.closed = False

    # -- changes -----------------------------------------------------------------------

    def session(self, session_id: str, **changes: Any) -> JSON:
        """Create or change a session, and tell the pages."""
        session = self.sessions.get(session_id)
        if session is None:
            session = {
                "id": session_id,
                "title": session_id,
                "agent": None,
                "state": "active",
                "pending": 0,
                "updated": now(),
                "usage": None,
            }
            self.sessions[session_id] = session
            self.items[session_id] = {}
            self._forget_old()
        session.update(changes)
        session["pending"] = sum(1 for c in self.open_cards() if c["session_id"] == session_id)
        session["updated"] = now()
        self._publish("session", session)
        return session

    def message(self, session_id: str, content: OutgoingMessage, *, key: str | None = None) -> JSON:
        """One message in a session's timeline (the same key replaces the earlier one)."""
        self.session(session_id, **self._facts(content, self.sessions.get(session_id)))
        body = blocks_html(content.blocks) if content.blocks else plain_html(content.text)
        return self.item(
            session_id, key or content.key, _KINDS.get(content.type, "notice"), content.type, body
        )

    def item(self, session_id: str, key: str | None, kind: str, type_: str, body: str) -> JSON:
        """An entry of a session's timeline, as safe HTML (the same key replaces)."""
        if session_id not in self.sessions:
            self.session(session_id)
        timeline = self.items.setdefault(session_id, {})
        known = timeline.get(key) if key else None
        # a keyless message is named by its arrival position, which outlasts a restart (a
        # count from 1 again would replace the saved items it named before)
        seq = known["seq"] if known and "seq" in known else self._next_seq()
        key = key or f"m{seq}"
        item = {
            "key": key,
            "session_id": session_id,
            "kind": kind,
            "type": type_,
            "html": body,
            "time": now(),
            "seq": seq,
        }
        timeline[key] = item
        while len(timeline) > ITEM_LIMIT:
            del timeline[next(iter(timeline))]
        self._publish("item", item)
        return item

    def card(
        self, session_id: str, request: PermissionRequest, outcome: PermissionOutcome | None
    ) -> JSON:
        """A card, new or changed (an outcome replaces the card as it was)."""
        if session_id not in self.sessions:
            self.session(session_id)
        known = self.cards.get(request.id)
        details = blocks_html(request.details) if request.details else ""
        card = {
            "id": request.id,
            "session_id": session_id,
            "kind": request.kind,
            "title": request.title,
            "description_html": details or plain_html(request.description),
            "options": [
                {
                    "index": i,
                    "label": o.label,
                    "is_allow": o.is_allow,
                    "token": self.sign(request.id, str(i)),
                }
                for i, o in enumerate(request.options)
            ],
            "accepts_text": request.accepts_text,
            "fields": [f.model_dump(mode="json") for f in request.fields],
            "informational": request.informational,
            "outcome": None if outcome is None else self._outcome(outcome, known),
            "time": known["time"] if known else now(),
            "seq": known["seq"] if known and "seq" in known else self._next_seq(),
        }
        self.cards[request.id] = card
        self._publish("card", card)
        self.session(session_id)  # its pending count
        return card

    def _next_seq(self) -> int:
        self.seq += 1
        return self.seq

    @staticmethod
    def _outcome(outcome: PermissionOutcome, known: JSON | None) -> JSON:
        """The card's outcome, with the time it was first said (sending the same outcome
        again, or a restart, keeps it: the page shows when the question was answered)."""
        said = {"closed": outcome.closed, "summary": outcome.summary(), "by": outcome.by}
        before = known["outcome"] if known else None
        same = before is not None and all(before.get(k) == v for k, v in said.items())
        said["time"] = before.get("time") if same and before is not None else None
        said["time"] = said["time"] or now()
        return said

    def _forget_old(self) -> None:
        """Keep memory bounded on a bridge that runs for months."""
        while len(self.sessions) > SESSION_LIMIT:
            ended = [s for s in self.sessions.values() if s["state"] == "ended"]
            if not ended:
                return
            oldest = min(ended, key=lambda s: int(s["rev"]))["id"]
            del self.sessions[oldest]
            self.items.pop(oldest, None)
            for card in [c for c in self.cards.values() if c["session_id"] == oldest]:
                del self.cards[card["id"]]
            self.changed(oldest)

    @staticmethod
    def _facts(content: OutgoingMessage, session: JSON | None) -> JSON:
        """What a message says about its session: the agent, the usage, the end."""
        facts: JSON = {}
        agent = content.metadata.get("agent")
        if isinstance(agent, str) and agent:
            facts["agent"] = agent
        if content.type == "usage":
            usage = dict((session or {}).get("usage") or {})
            usage.update({k: v for k, v in content.metadata.items() if v is not None})
            usage["text"] = content.text
            facts["usage"] = usage
        if content.type == "session_end":
            facts["state"] = "ended"
        return facts

    # -- reading ----------------------------------------------------------------------

    def open_cards(self) -> Iterator[JSON]:
        """Cards a person can still answer, oldest first."""
        for card in sorted(self.cards.values(), key=_arrival):
            outcome = card["outcome"]
            if not card["informational"] and (outcome is None or not outcome["closed"]):
                yield card

    def state(self) -> JSON:
        """`GET /api/state`: every session (pending first, then the latest) and the queue."""
        sessions = sorted(self.sessions.values(), key=lambda s: int(s["rev"]), reverse=True)
        sessions.sort(key=lambda s: s["pending"] == 0)
        return {"sessions": sessions, "queue": list(self.open_cards()), "rev": self.rev}

    def timeline(self, session_id: str) -> JSON | None:
        """`GET /api/sessions/{id}`: the session, its items and cards, oldest first."""
        session = self.sessions.get(session_id)
        if session is None:
            return None
        cards = [c for c in self.cards.values() if c["session_id"] == session_id]
        return {
            "session": session,
            "items": sorted(self.items.get(session_id, {}).values(), key=_arrival),
            "cards": sorted(cards, key=_arrival),
        }

    # -- saved and loaded ---------------------------------------------------------------

    def dump(self, session_id: str) -> str | None:
        """One session, its latest items and its cards as JSON, to be kept across restarts;
        None once it is forgotten."""
        session = self.sessions.get(session_id)
        if session is None:
            return None
        items = list(self.items.get(session_id, {}).values())[-SAVED_ITEMS:]
        cards = [c for c in self.cards.values() if c["session_id"] == session_id]
        return json.dumps({"session": session, "items": items, "cards": cards})

    def load(self, saved: str) -> None:
        """A session `dump` made (before a restart)."""
        data = json.loads(saved)
        session = data["session"]
        self.sessions[session["id"]] = session
        self.items[session["id"]] = {item["key"]: item for item in data["items"]}
        for card in data["cards"]:
            self.cards[card["id"]] = card
        revs = [session, *data["items"], *data["cards"]]
        self.rev = max([self.rev, *(int(x.get("rev", 0)) for x in revs)])
        entries = [*data["items"], *data["cards"]]
        self.seq = max([self.seq, *(int(x.get("seq", 0)) for x in entries)])
        # keyless items saved before then were named `m1`, `m2`...: new names start above
        named = [int(k[1:]) for k in self.items[session["id"]] if k[:1] == "m" and k[1:].isdigit()]
        self.seq = max([self.seq, *named])
        # saved before entries had their arrival position: they take one now, by their time
        for entry in sorted(entries, key=lambda x: str(x["time"])):
            entry.setdefault("seq", self._next_seq())

    # -- streams ----------------------------------------------------------------------

    def watch(self) -> asyncio.Queue[tuple[str, JSON] | None]:
        """A new page's stream of changes; `unwatch` it when the page goes."""
        queue: asyncio.Queue[tuple[str, JSON] | None] = asyncio.Queue(QUEUE_LIMIT)
        if self.closed:  # the bridge is stopping: the stream ends at once
            queue.put_nowait(None)
        else:
            self._watchers.add(queue)
        return queue

    def unwatch(self, queue: asyncio.Queue[tuple[str, JSON] | None]) -> None:
        self._watchers.discard(queue)

    def end(self, queue: asyncio.Queue[tuple[str, JSON] | None]) -> None:
        """End one page's stream (its sign-in ended)."""
        self._end(queue)

    def close(self) -> None:
        """End every stream, and any opened from now on (the bridge stops)."""
        self.closed = True
        for queue in list(self._watchers):
            self._end(queue)

    def _end(self, queue: asyncio.Queue[tuple[str, JSON] | None]) -> None:
        self._watchers.discard(queue)
        while True:  # room for the end mark
            try:
                queue.put_nowait(None)
                return
            except asyncio.QueueFull:
                queue.get_nowait()

    @property
    def watched(self) -> bool:
        """Whether a page has its stream open (nothing to push otherwise)."""
        return bool(self._watchers)

    def notice(self, event: str, data: JSON) -> None:
        """A change to every open page as it is: as such, one that belongs to no session (away
        mode: no revision, nothing to save); `_publish` sends a session's change by it."""
        snapshot = dict(data)
        for queue in list(self._watchers):
            try:
                queue.put_nowait((event, snapshot))
            except asyncio.QueueFull:  # too slow: it reconnects and fetches the state
                self._end(queue)

    def _publish(self, event: str, data: JSON) -> None:
        self.rev += 1
        data["rev"] = self.rev
        self.changed(str(data["session_id"] if event != "session" else data["id"]))
        self.notice(event, data)
