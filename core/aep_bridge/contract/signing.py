"""Signed press tokens: how a channel that takes presses over HTTP proves a URL is its own.

Channel routes under `/channels/{name}/` are not authenticated by the bridge (a platform
calls them), so a press URL carries a token: the card id, the option and an expiry, with an
HMAC-SHA256 over them and the channel's name, keyed with the bridge's secret. A token made
for one channel does not verify on another, and an altered or expired one verifies as None.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from typing import Final

from .types import SignedPress

#: The MAC is cut to 128 bits: short enough for a URL, far beyond guessing.
MAC_BYTES: Final = 16
_SEP: Final = "\x1f"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    """Decode, refusing every form but the one `_b64` makes: base64 lets the last character
    of a group carry unused bits, so two texts can decode alike, and a token must have one
    spelling."""
    data = base64.urlsafe_b64decode(text.encode("ascii") + b"=" * (-len(text) % 4))
    if _b64(data) != text:
        raise ValueError("not the canonical encoding")
    return data


def _mac(secret: bytes, channel: str, body: str) -> bytes:
    message = f"{channel}{_SEP}{body}".encode()
    return hmac.new(secret, message, hashlib.sha256).digest()[:MAC_BYTES]


def sign(
    secret: bytes, channel: str, card_id: str, option: str, *, ttl: float, now: float | None = None
) -> str:
    """A URL-safe token for pressing `option` on `card_id` in `channel`, good for `ttl` s."""
    if _SEP in card_id or _SEP in option:
        raise ValueError("a card id or option cannot contain the unit separator")
    expires = int((time.time() if now is None else now) + ttl)
    body = f"{card_id}{_SEP}{option}{_SEP}{expires}"
    return f"{_b64(body.encode())}.{_b64(_mac(secret, channel, body))}"


def verify(
    secret: bytes, channel: str, token: str, *, now: float | None = None
) -> SignedPress | None:
    """The press `token` stands for, or None: forged, altered, another channel's, expired."""
    encoded, _, mac = token.partition(".")
    try:
        body = _unb64(encoded).decode()
        given = _unb64(mac)
    except (ValueError, UnicodeDecodeError):
        return None
    if not hmac.compare_digest(given, _mac(secret, channel, body)):
        return None
    parts = body.split(_SEP)
    if len(parts) != 3 or not parts[2].isdigit():
        return None
    card_id, option, expires = parts
    if int(expires) <= (time.time() if now is None else now):
        return None
    return SignedPress(card_id=card_id, option=option)
