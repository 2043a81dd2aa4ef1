"""What the channel keeps in the core's per-channel state, so it survives a restart.

ntfy keeps nothing the bridge could look up later, so the signing key, each card's option ids
and each session's name live in `core.state(instance_name)`: a button tapped after the bridge
restarted still verifies and still maps to the right option.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Final

from aep_bridge import ChannelState

from .signing import new_key

_KEY: Final = "signing-key"


@dataclass(frozen=True, slots=True)
class Card:
    """A card's buttons, by index: what a signed press maps to."""

    session_id: str
    request_id: str
    options: tuple[str, ...]


class ChannelStore:
    """Typed access to one instance's state."""

    def __init__(self, state: ChannelState) -> None:
        self._state = state
        self._index_lock = asyncio.Lock()

    async def signing_key(self) -> bytes:
        """The instance's key, made on first use and kept, so old buttons keep working."""
        stored = await self._state.get(_KEY)
        if stored is not None:
            try:
                return bytes.fromhex(stored)
            except ValueError:
                pass  # damaged: replace it (buttons sent before stop working, nothing worse)
        key = new_key()
        await self._state.set(_KEY, key.hex())
        return key

    async def save_card(self, card_id: str, card: Card) -> None:
        value = {"session": card.session_id, "request": card.request_id, "options": card.options}
        await self._state.set(f"card:{card_id}", json.dumps(value))
        async with self._index_lock:
            cards = await self._session_cards(card.session_id)
            if card_id not in cards:
                cards.append(card_id)
                await self._state.set(f"cards:{card.session_id}", json.dumps(cards))

    async def card(self, card_id: str) -> Card | None:
        stored = await self._state.get(f"card:{card_id}")
        if stored is None:
            return None
        try:
            value = json.loads(stored)
            return Card(str(value["session"]), str(value["request"]), tuple(value["options"]))
        except (ValueError, KeyError, TypeError):
            return None

    async def session_name(self, session_id: str) -> str | None:
        return await self._state.get(f"session:{session_id}")

    async def set_session_name(self, session_id: str, name: str) -> None:
        await self._state.set(f"session:{session_id}", name)

    async def forget_session(self, session_id: str) -> None:
        """Drop a session's name and cards: its buttons answer "no longer known" from now on."""
        async with self._index_lock:
            for card_id in await self._session_cards(session_id):
                await self._state.delete(f"card:{card_id}")
            await self._state.delete(f"cards:{session_id}")
        await self._state.delete(f"session:{session_id}")

    async def _session_cards(self, session_id: str) -> list[str]:
        stored = await self._state.get(f"cards:{session_id}")
        try:
            cards = json.loads(stored) if stored else []
        except ValueError:
            return []
        return [str(c) for c in cards] if isinstance(cards, list) else []
