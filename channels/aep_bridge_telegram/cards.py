"""A card's button data, and what the channel keeps about its cards.

Button data is `{card key}:{action}` (`look._keyboard` builds it): the card key is the card's
id, or a digest of a long one, and the action names an option or a form's control by
position. The core resolves a press from those alone (contract 1.2). The card records kept
in the channel's state (`Cards`) are for display only: which message is which card, to edit
it with its outcome or a form's next field and to recognise a reply to it; which cards of a
session take words; a form's progress per person. They survive a restart.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Final

from aep_bridge import PermissionRequest

MAX_CARD_KEY: Final = 40  # bytes of button data for the card; the action follows it


def card_key(card_id: str) -> str:
    """What stands for the card in button data: its id, or a digest of a long one (the core's
    ids are short; a plugin's may not be, and Telegram carries 64 bytes at most)."""
    if len(card_id.encode()) <= MAX_CARD_KEY and not card_id.startswith("#"):
        return card_id
    return "#" + hashlib.sha256(card_id.encode()).hexdigest()[:20]


def parse_button(data: str | None) -> tuple[str, str]:
    """A button's data as (card key, action); either may be empty (a foreign button)."""
    key, _, action = (data or "").partition(":")
    return key, action


@dataclass
class CardRecord:
    """A card on the platform, for display: enough to edit it (its outcome, a form's next
    field) and to place a reply to it in its session. Never needed to answer a press."""

    session: str
    message: int
    html: str
    request: dict[str, Any]
    closed: bool = False
    #: form progress per person: user id -> {"field": index, "values": {...}}
    forms: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: the form field the card shows now (None: its "Fill in" button), so words replied to
    #: it fill only the field that was on show
    showing: int | None = None

    @property
    def permission(self) -> PermissionRequest:
        return PermissionRequest.model_validate(self.request)


class Cards:
    """The card records in the channel's state (`state()`: the core's key-value state of this
    channel instance), under `card:{id}`, `cardmsg:{message}`, `cardkey:{key}` and
    `open:{session}`."""

    def __init__(self, state: Callable[[], Any]) -> None:
        self._state = state

    async def get(self, card_id: str) -> CardRecord | None:
        if not card_id:
            return None
        raw = await self._state().get(f"card:{card_id}")
        return None if raw is None else CardRecord(**json.loads(raw))

    async def save(self, card_id: str, card: CardRecord) -> None:
        await self._state().set(f"card:{card_id}", json.dumps(asdict(card)))

    async def sent(self, card_id: str, card: CardRecord) -> None:
        """Remember a card just sent: its record, its message, the key its buttons carry."""
        state = self._state()
        await self.save(card_id, card)
        await state.set(f"cardmsg:{card.message}", card_id)
        if card_key(card_id) != card_id:
            await state.set(f"cardkey:{card_key(card_id)}", card_id)

    async def of_message(self, message_id: int) -> str | None:
        """The card shown by message `message_id`, if it is one."""
        card_id: str | None = await self._state().get(f"cardmsg:{message_id}")
        return card_id

    async def of_key(self, key: str) -> str | None:
        """The card a button's key stands for (a digest is looked up, an id is itself)."""
        if not key.startswith("#"):
            return key
        card_id: str | None = await self._state().get(f"cardkey:{key}")
        return card_id

    async def open_cards(
        self, session_id: str, *, add: str | None = None, remove: str | None = None
    ) -> list[str]:
        """The session's open cards that take words (a text answer, a form), after adding
        `add` or removing `remove`."""
        state = self._state()
        cards: list[str] = json.loads(await state.get(f"open:{session_id}") or "[]")
        if add is not None and add not in cards:
            cards.append(add)
        if remove is not None and remove in cards:
            cards.remove(remove)
        if add is not None or remove is not None:
            await state.set(f"open:{session_id}", json.dumps(cards))
        return cards

    async def only_open_card(self, session_id: str) -> str | None:
        """The card words in the session's topic are for when they reply to no card: the
        session's one open card that takes words, if it has exactly one."""
        cards = await self.open_cards(session_id)
        return cards[0] if len(cards) == 1 else None
