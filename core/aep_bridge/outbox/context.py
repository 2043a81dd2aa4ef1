"""A card's context: its session's messages still queued ahead of it, sent in the card's own
message (`PermissionRequest.context`), so the card goes out in the first free slot.

On a busy platform every message a card waits for costs a slot of the chat's budget (on a
Telegram group at 20 a minute, 3 s each): a question whose agent said three things just
before it would reach a person 9 s late. For a channel that declares
`ChannelCapabilities.card_context`, the outbox instead folds those messages into the card:
the person reads what led to the question above it, in the one message that asks it.

What is folded, and why (`fold`): the messages at the end of the card's thread lane, oldest
first, that nothing has been tried for yet: plain posts, and keyed posts whose key was never
posted before (a first post; `FirstPosts` remembers the keys each session posted). An edit
of a message already shown stays queued but goes *after* the card, wherever it waits in the
card's thread (`follows`; the fold only skips those at the end): it changes a message above,
so it moves nothing a person reads. So does a first post the channel shows by editing
a message it has (Slack's header, in its thread's parent), asked again once the thread is
made where it did not exist yet as the card was queued (`Outbox.release`). The fold stops
at anything else (a call in flight or being retried, another card, a rename, an attachment,
which a card cannot carry) and at the platform's one-message limit, as the channel measures
its card (`ChannelAdapter.measure_card`): what it could not take is sent ahead of the card as
before.

What becomes of a folded message's later edits (`CardContexts`): its key now lives in the
card. A later message with that key replaces it in the card's context: in the queued card,
or, once the card went, in the card's next update (at once if the card has an outcome
already; with its outcome otherwise). One that grew past what the card can show is cut at its
end to fit (`cut_into`), ending with "…", as any edit of one message is cut: its words stay
where the person read them, never posted a second time below the card (a reply and then its
footer would show the reply twice). Every update of the card carries its context, so
redrawing the card never drops it. What each card carries is kept in the store
(`kv`, namespace `outbox:<channel>`, one key per card, going with its session's records), in
the same transaction as the rows it replaced, so a restart keeps both.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final

from .. import markup
from ..contract.types import OutgoingMessage, PermissionOutcome, PermissionRequest
from ..store import Store
from ..text.text import LengthUnit
from .jobs import Priority, longest_cut, message_key
from .lanes import Entry

#: sessions whose posted keys `FirstPosts` remembers (the least recently posting forgotten
#: first: a session that never ends must not grow the set for good)
SESSIONS_KEPT: Final = 512
#: the cards whose context is kept in memory (the least recently used read back from the
#: store when needed)
CARDS_KEPT: Final = 512
#: the key prefix of a session's header (`render.session`): the thread's first message, which
#: the first prompt joins; never carried by a card
HEADER_KEY: Final = "session:"


class FirstPosts:
    """The keys each session has posted (or queued) on this channel: a keyed message whose
    key is not among them is a first post, which a card may carry; any later one is an edit
    of a message already shown (or on its way), which it may not.

    Which keys a session posted is known only for what this run saw: after a restart (or
    once a session was forgotten here), a key may be one shown before, and a card that
    carried its edit would show that message a second time. So the store keeps one row per
    session that posted a keyed message (`posted:<session>`, going with its records): a
    session it names that this run did not see from its start is unsure (`first` None), and
    a card neither carries nor overtakes its keyed messages."""

    def __init__(self, store: Store | None = None, channel: str = "") -> None:
        self._store = store
        self._namespace = f"outbox:{channel}"
        #: session -> (whether keys it posted before this run may be unknown, its keys)
        self._keys: OrderedDict[str | None, tuple[bool, set[str]]] = OrderedDict()

    def first(self, session_id: str | None, key: str) -> bool | None:
        """Whether `key` is new in `session_id` (None: it may have been posted before this
        run saw the session); remembers it either way. Inside the submit's transaction."""
        known = self._keys.get(session_id)
        if known is None:
            known = self._keys[session_id] = (self._posted_before(session_id), set())
            if len(self._keys) > SESSIONS_KEPT:
                self._keys.popitem(last=False)
        else:
            self._keys.move_to_end(session_id)
        unsure, keys = known
        if key in keys:
            return False
        keys.add(key)
        return None if unsure else True

    def _posted_before(self, session_id: str | None) -> bool:
        """Whether the session posted a keyed message before this run (or before it was
        forgotten here); notes that it has now."""
        if self._store is None or session_id is None:
            return False
        name = f"posted:{session_id}"
        if self._store.kv_get(self._namespace, name) is not None:
            return True
        self._store.channel_kv_set(self._namespace, name, "1")
        return False

    def forget(self, session_id: str | None) -> None:
        """The session's thread is closed: its keys no longer matter."""
        self._keys.pop(session_id, None)


@dataclass(frozen=True, slots=True)
class Fold:
    """What a card takes with it: `taken` (their messages, oldest first, `messages`), and
    `before`, the first of the edits it goes ahead of (None: it goes at the lane's end)."""

    taken: tuple[Entry, ...]
    messages: tuple[OutgoingMessage, ...]
    before: Entry | None


#: the messages a card may take, at most (each is measured with all the others it takes)
TAKES_AT_MOST: Final = 64


def fold(
    entries: Iterable[Entry],
    fits: Callable[[tuple[OutgoingMessage, ...]], bool],
    edits_in_place: Callable[[Entry], bool] = lambda entry: False,
) -> Fold | None:
    """What a card takes of its lane's `entries` (in order): the newest that `fits` the
    card's message together (`ChannelAdapter.measure_card`). `edits_in_place` tells a
    keyed first post the channel shows by editing a message it has (Slack's session header
    is its thread's parent): it may follow the card too."""
    taken: list[tuple[Entry, OutgoingMessage]] = []
    edits: list[Entry] = []
    for entry in reversed([e for e in entries if not e.dead]):
        message = _message(entry)
        if message is None:
            break
        if entry.job is not None and entry.job.coalesce is not None:
            if entry.first is None:
                break  # perhaps shown before a restart: neither carried nor overtaken
            if follows(entry, edits_in_place):
                edits.append(entry)  # it changes a message shown above: it may follow the card
                continue
            if (message.key or "").startswith(HEADER_KEY):
                break  # the thread's header stays its first message
        if len(taken) >= TAKES_AT_MOST:
            break
        if not fits((message, *(m for _, m in reversed(taken)))):
            break
        taken.append((entry, message))
    if not taken and not edits:
        return None
    taken.reverse()
    return Fold(
        tuple(e for e, _ in taken),
        tuple(m for _, m in taken),
        edits[-1] if edits else None,
    )


def follows(entry: Entry, edits_in_place: Callable[[Entry], bool]) -> bool:
    """Whether a card may go ahead of this queued message: an edit of a message shown above
    (a keyed message whose key its session posted before), or a first post the channel shows
    by editing a message it has (`edits_in_place`); neither moves what a person reads below.
    Not one nothing was tried for yet, nor one perhaps shown before a restart (`first`
    None)."""
    if _message(entry) is None or entry.job is None or entry.job.coalesce is None:
        return False
    if entry.first is None:
        return False
    return not entry.first or edits_in_place(entry)


def _message(entry: Entry) -> OutgoingMessage | None:
    """The message of a queued post that may go into a card (or follow it, an edit)."""
    if (
        entry.op != "send_message"
        or entry.in_flight
        or entry.attempts
        or entry.priority is Priority.QUESTION
        or len(entry.args) != 2
    ):
        return None
    content = entry.args[1]
    if not isinstance(content, OutgoingMessage) or content.attachment is not None:
        return None
    return content


@dataclass(slots=True)
class Carried:
    """A card with a context, as last queued: its request (the context in it) and its last
    outcome (None: still open, or never updated)."""

    session_id: str
    request: PermissionRequest
    outcome: PermissionOutcome | None = None

    def dump(self) -> str:
        outcome = None if self.outcome is None else self.outcome.model_dump(mode="json")
        return json.dumps(
            {
                "session": self.session_id,
                "request": self.request.model_dump(mode="json"),
                "outcome": outcome,
            },
            ensure_ascii=False,
            separators=(",", ":"),
        )

    @classmethod
    def load(cls, text: str) -> Carried:
        data = json.loads(text)
        outcome = data.get("outcome")
        return cls(
            data["session"],
            PermissionRequest.model_validate(data["request"]),
            None if outcome is None else PermissionOutcome.model_validate(outcome),
        )


class CardContexts:
    """The cards of one channel that carry a context, and the keys folded into each."""

    def __init__(self, store: Store, channel: str) -> None:
        self._store = store
        self._namespace = f"outbox:{channel}"
        #: (session, outbox key) -> the card its message went into
        self._keys: dict[tuple[str | None, str], str] = {}
        #: the cards read or written in this run (the rest are read when needed)
        self._cards: OrderedDict[str, Carried] = OrderedDict()

    @staticmethod
    def _key(session_id: str, card_id: str) -> str:
        # the session's id after the first ":": the key goes with the session's records
        return f"card:{session_id}:{card_id}"

    def load(self) -> int:
        """Read back which keys went into which cards (at start); how many cards."""
        self._keys.clear()
        self._cards.clear()
        count = 0
        for name, text in self._store.kv_items(self._namespace):
            if not name.startswith("card:"):
                continue  # a session's `posted:` mark (`FirstPosts`)
            try:
                carried = Carried.load(text)
            except (ValueError, KeyError, TypeError):
                continue  # unreadable: its card redraws without a context, nothing else
            count += 1
            self._remember(carried, cache=False)
        return count

    def _remember(self, carried: Carried, *, cache: bool = True) -> None:
        card_id = carried.request.id
        for message in carried.request.context:
            if message.key is not None:
                self._keys[(carried.session_id, message_key(message.key))] = card_id
        if cache:
            self._cards[card_id] = carried
            self._cards.move_to_end(card_id)
            while len(self._cards) > CARDS_KEPT:
                self._cards.popitem(last=False)

    def save(self, carried: Carried) -> None:
        """Keep what the card carries (in the caller's transaction)."""
        self._store.channel_kv_set(
            self._namespace, self._key(carried.session_id, carried.request.id), carried.dump()
        )
        self._remember(carried)

    def card_of(self, session_id: str | None, coalesce: str) -> str | None:
        """The card a message with this key went into, if one did."""
        return self._keys.get((session_id, coalesce))

    def get(self, session_id: str, card_id: str) -> Carried | None:
        """What the card carries, if it carries a context."""
        carried = self._cards.get(card_id)
        if carried is not None:
            return carried
        text = self._store.kv_get(self._namespace, self._key(session_id, card_id))
        if text is None:
            return None
        try:
            carried = Carried.load(text)
        except (ValueError, KeyError, TypeError):
            return None
        self._remember(carried)
        return carried

    def forget_key(self, session_id: str | None, coalesce: str) -> None:
        self._keys.pop((session_id, coalesce), None)

    def forget_session(self, session_id: str | None) -> None:
        """Its thread is closed: later edits of its messages are not looked for (what the
        store keeps goes with the session's records)."""
        for key in [k for k in self._keys if k[0] == session_id]:
            del self._keys[key]


def with_context(
    request: PermissionRequest, context: tuple[OutgoingMessage, ...]
) -> PermissionRequest:
    """`request` carrying `context`."""
    return request.model_copy(update={"context": context})


def replaced(
    context: tuple[OutgoingMessage, ...], message: OutgoingMessage
) -> tuple[OutgoingMessage, ...]:
    """`context` with the message of `message`'s key replaced by `message`."""
    return tuple(message if m.key == message.key else m for m in context)


def cut_into(
    request: PermissionRequest,
    message: OutgoingMessage,
    fits: Callable[[PermissionRequest], bool],
    limit: int,
    unit: LengthUnit,
    size: markup.Measure,
) -> PermissionRequest | None:
    """`request` with `message` in place of its key's message, cut at its end (as the outbox
    cuts any edit of one message: `jobs.fit`) to the most of it that the card `fits`; None
    when not even its first words do (the card then keeps what it showed)."""

    def accepts(cut: OutgoingMessage) -> bool:
        return fits(with_context(request, replaced(request.context, cut)))

    cut = longest_cut(message, accepts, limit, unit, size)
    return None if cut is None else with_context(request, replaced(request.context, cut))


__all__ = [
    "CARDS_KEPT",
    "SESSIONS_KEPT",
    "CardContexts",
    "Carried",
    "FirstPosts",
    "Fold",
    "cut_into",
    "fold",
    "follows",
    "replaced",
    "with_context",
]
