"""Card records: what a channel keeps about the cards it posted, and a press on the way to
the core.

A button carries a card key (the card's id, or a digest of an id too long or too odd for
the platform's button data) and the option's index; the core resolves a press from the
card id alone (contract 1.2). The records kept here are the channel's own, for display and
for placing words: which card a key stands for, which message shows which card, and a
session's open cards that take words. They live in the channel's state (`ChannelState`),
so they survive a restart, under keys the core's retention recognises: `card:{card id}`,
`cardkey:{key}` (its value a card id), `cardmsg:{message}` and `open:{session id}`.

Also here, `SessionThreads`: which session a thread is (`thread:{thread}`), for words written
in it, and the live sessions' threads and names (`sessions`), for a command that lists them;
and `command_menu`, that command and the core's chat commands as a platform's menu lists them.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar

from ..contract.adapter import BridgeCore, ChannelState
from ..contract.types import ChannelUser, IncomingMessage, Resolution, ResolutionStatus

#: a card record as the channel's code uses it (a dict, or a dataclass of its own)
R = TypeVar("R")

#: what a digest key starts with (a plain key never does)
DIGEST_MARK = "#"


@dataclass(frozen=True)
class CardKeys:
    """How a platform's buttons name a card: the id itself when `plain` says the platform
    carries it as it is, else `#` and the first `digits` hex digits of its SHA-256. A plain
    key never starts with `#`, so a key is read back without a guess."""

    plain: Callable[[str], bool]
    digits: int = 20

    def key(self, card_id: str) -> str:
        if self.plain(card_id) and not card_id.startswith(DIGEST_MARK):
            return card_id
        return DIGEST_MARK + hashlib.sha256(card_id.encode()).hexdigest()[: self.digits]


def _identity(record: dict[str, Any]) -> dict[str, Any]:
    return record


class CardRecords(Generic[R]):
    """The channel's card records in its state (`state()`: the core's key-value state of
    this channel instance, asked for on each use). `key` is what stands for a card in a
    button (`CardKeys.key`, or the channel's own: a digest must start with `#`, a plain key
    never). `load` and `dump` turn a record into JSON's dict and back
    (`CardRecords.plain` keeps dicts as they are)."""

    def __init__(
        self,
        state: Callable[[], ChannelState],
        key: Callable[[str], str],
        *,
        load: Callable[[dict[str, Any]], R],
        dump: Callable[[R], Mapping[str, Any]],
    ) -> None:
        self._state = state
        self.key = key
        self._load = load
        self._dump = dump

    @staticmethod
    def plain(
        state: Callable[[], ChannelState], key: Callable[[str], str]
    ) -> CardRecords[dict[str, Any]]:
        """Records kept as the dicts the channel writes."""
        return CardRecords(state, key, load=_identity, dump=_identity)

    async def get(self, card_id: str) -> R | None:
        """The card's record, or None (an unknown card, or no id at all)."""
        if not card_id:
            return None
        raw = await self._state().get(f"card:{card_id}")
        return None if raw is None else self._load(dict(json.loads(raw)))

    async def save(self, card_id: str, record: R) -> None:
        await self._state().set(f"card:{card_id}", json.dumps(self._dump(record)))

    async def sent(self, card_id: str, record: R, *, message: str | int | None = None) -> str:
        """Remember a card just posted: its record, the key its buttons carry (a digest is
        written down, to be read back on a press) and, given one, the message that shows it
        (to place a reply). Returns the key."""
        state = self._state()
        await self.save(card_id, record)
        if message is not None:
            await state.set(f"cardmsg:{message}", card_id)
        key = self.key(card_id)
        if key != card_id:
            await state.set(f"cardkey:{key}", card_id)
        return key

    async def of_key(self, key: str) -> str | None:
        """The card a button's key stands for: a digest looked up, a plain key is the id
        itself; None for no key or a digest never written here."""
        if not key:
            return None
        if not key.startswith(DIGEST_MARK):
            return key
        card_id: str | None = await self._state().get(f"cardkey:{key}")
        return card_id

    async def of_message(self, message: str | int) -> str | None:
        """The card shown by `message`, if it is one."""
        card_id: str | None = await self._state().get(f"cardmsg:{message}")
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
        """The card words in a session's thread are for when they reply to no card: its one
        open card that takes words, if it has exactly one."""
        cards = await self.open_cards(session_id)
        return cards[0] if len(cards) == 1 else None

    async def update(
        self,
        session_id: str,
        card_id: str,
        *,
        closed: bool,
        lock: asyncio.Lock,
        edit: Callable[[R], Awaitable[None]],
    ) -> None:
        """Show what became of a card (`update_permission_request`): its record, read under
        `lock` (a press or a form's step may be changing it), handed to `edit`, which
        redraws the card; nothing for a card not posted here. A `closed` card no longer
        takes words (`open_cards`)."""
        async with lock:
            card = await self.get(card_id)
            if card is None:
                return
            await edit(card)
        if closed:
            await self.open_cards(session_id, remove=card_id)

    async def press(
        self, core: BridgeCore, key: str, option: int | None, user: ChannelUser
    ) -> Resolution:
        """A button's press, handed to the core: the card its key stands for and the
        option's index. A key that stands for no card, or no option, is refused here as
        unknown without asking the core; the core checks the presser and everything else."""
        card_id = await self.of_key(key)
        if not card_id or option is None:
            return Resolution(status=ResolutionStatus.UNKNOWN)
        return await core.resolve_permission(card_id, option, user)

    async def words(
        self, core: BridgeCore, said: IncomingMessage, *, replied: str | int | None = None
    ) -> tuple[str, Resolution] | None:
        """Words a person wrote in a session's thread: the answer to the card shown by the
        message they reply to (`replied`), else, unless they are a `/command`, to the
        session's one open card that takes words; else they go to the core as they are (a
        chat command, words for the agent). The card answered and the core's resolution
        (show a refusal), or None when they were no answer."""
        card_id = await self.of_message(replied) if replied is not None else None
        if card_id is None and said.session_id and not said.text.startswith("/"):
            card_id = await self.only_open_card(said.session_id)
        if card_id is not None:
            return card_id, await core.answer_text(card_id, said.text, said.user)
        await core.handle_incoming_message(said)
        return None


class SessionThreads:
    """The sessions' threads, in the channel's state (`state()`, as for `CardRecords`):
    which session a thread is (`thread:{thread}`, kept with the session's records), and the
    live sessions, each with its thread and name (`sessions`), what a command listing them
    (`/sessions`) shows. A session is remembered when its thread is made or renamed,
    forgotten when it ends."""

    def __init__(self, state: Callable[[], ChannelState]) -> None:
        self._state = state

    async def made(self, session_id: str, thread: str, name: str) -> None:
        """A session's new thread: the session it is, and the session remembered."""
        await self._state().set(f"thread:{thread}", session_id)
        await self.remember(session_id, thread, name)

    async def session_of(self, thread: str | int) -> str | None:
        """The session whose thread `thread` is, if one is."""
        session: str | None = await self._state().get(f"thread:{thread}")
        return session

    async def live(self) -> dict[str, list[str]]:
        """Session id to [thread, name], in the order the sessions began."""
        return dict(json.loads(await self._state().get("sessions") or "{}"))

    async def remember(self, session_id: str, thread: str, name: str) -> None:
        live = await self.live()
        live[session_id] = [thread, name]
        await self._state().set("sessions", json.dumps(live))

    async def forget(self, session_id: str) -> None:
        live = await self.live()
        if live.pop(session_id, None) is not None:
            await self._state().set("sessions", json.dumps(live))


#: the core's chat commands in a session's thread (`loop/chat.py`), each with what it does
_CHAT_COMMANDS: Final = (
    ("status", "what the agent is doing"),
    ("cancel", "ask the agent to stop"),
    ("pause", "ask the agent to pause"),
    ("resume", "ask the agent to go on"),
    ("away", "when the agent finishes, it asks here what next"),
    ("back", "the agent stops as usual when it finishes"),
)


def command_menu(thread: str = "thread") -> tuple[tuple[str, str], ...]:
    """The commands a platform's menu offers, as (name, description): `sessions`, which the
    channel answers itself from `SessionThreads.live`, then the core's chat commands, each
    for a session's `thread` (what the platform calls it: "topic"), which the channel hands
    to the core (`ChannelAdapter.pass_on`)."""
    own = ("sessions", f"list the agent sessions and their {thread}s")
    return (own, *((name, f"in a session's {thread}: {does}") for name, does in _CHAT_COMMANDS))


__all__ = ["DIGEST_MARK", "CardKeys", "CardRecords", "SessionThreads", "command_menu"]
