"""A card's button data, and what the channel keeps about its cards.

Button data is `{card key}:{action}` (`look._keyboard` builds it): the card key is the card's
id, or a digest of a long one, and the action names an option or a form's control by
position. The core resolves a press from those alone (contract 1.2). The card records kept
in the channel's state (`Cards`: the toolkit's `CardRecords`) are for display only: which
message is which card, to edit it with its outcome or a form's next field and to recognise
a reply to it; which cards of a session take words; a form's progress per person. They
survive a restart.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Final, TypeAlias

from aep_bridge import CardKeys, CardRecords, ChannelState, PermissionRequest

MAX_CARD_KEY: Final = 40  # bytes of button data for the card; the action follows it

#: the card's id, or a digest of a long one (the core's ids are short; a plugin's may not
#: be, and Telegram carries 64 bytes at most)
KEYS: Final = CardKeys(plain=lambda card_id: len(card_id.encode()) <= MAX_CARD_KEY, digits=20)
card_key: Final = KEYS.key


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


#: the card records in the channel's state (the toolkit's `CardRecords`)
Cards: TypeAlias = CardRecords[CardRecord]


def cards(state: Callable[[], ChannelState]) -> Cards:
    """The channel's card records, kept as `CardRecord`s."""
    return CardRecords(state, card_key, load=lambda raw: CardRecord(**raw), dump=asdict)
