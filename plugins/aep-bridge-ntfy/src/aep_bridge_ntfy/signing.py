"""Signed presses: the body an action button POSTs back, and the check that the bridge made it.

Anyone who can reach the bridge's press route could POST to it, so a press counts only when it
carries an HMAC-SHA256, made with this instance's secret key, over the card id and the button
index. The option id never travels: the bridge looks it up from the card it stored.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass
from typing import Final

KEY_BYTES: Final = 32
#: presses larger than this are not ours (ours are about 100 bytes)
MAX_PRESS_BYTES: Final = 1024
_MAX_CARD_CHARS: Final = 128
_MAX_OPTION: Final = 64


def new_key() -> bytes:
    """A fresh signing key."""
    return secrets.token_bytes(KEY_BYTES)


@dataclass(frozen=True, slots=True)
class SignedPress:
    """A press the bridge signed: which card, which button."""

    card: str
    option: int


class Signer:
    """Signs and verifies press bodies with one instance's key."""

    def __init__(self, key: bytes) -> None:
        if len(key) < KEY_BYTES:
            raise ValueError("a signing key needs at least 32 bytes")
        self._key = key

    def signature(self, card: str, option: int) -> str:
        """base64url HMAC-SHA256 over the (card, option) pair, encoded unambiguously."""
        message = json.dumps(["press/v1", card, option], separators=(",", ":")).encode()
        digest = hmac.new(self._key, message, hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")

    def body(self, card: str, option: int) -> str:
        """The JSON body the phone POSTs when the button is tapped."""
        press = {"card": card, "option": option, "sig": self.signature(card, option)}
        return json.dumps(press, separators=(",", ":"))

    def verify(self, raw: bytes) -> SignedPress | None:
        """The press in `raw` if this key signed it; None for anything else, forged or malformed."""
        if len(raw) > MAX_PRESS_BYTES:
            return None
        try:
            data = json.loads(raw)
        except (UnicodeDecodeError, ValueError):
            return None
        if not isinstance(data, dict):
            return None
        card, option, sig = data.get("card"), data.get("option"), data.get("sig")
        if not (isinstance(card, str) and 0 < len(card) <= _MAX_CARD_CHARS):
            return None
        if not (type(option) is int and 0 <= option < _MAX_OPTION):
            return None
        if not isinstance(sig, str):
            return None
        expected = self.signature(card, option).encode("ascii")
        if not hmac.compare_digest(expected, sig.encode("utf-8")):
            return None
        return SignedPress(card, option)
