"""Who may use the page: a one-time sign-in code, then a session cookie and its CSRF token.

Everything lives in memory: a restart of the bridge signs everyone out (the new start logs a
new sign-in URL). Nothing here is ever logged but the code's URL, once, at start.
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

#: the cookie that carries a signed-in browser's session id
COOKIE = "aep_web"


@dataclass(frozen=True, slots=True)
class PageSession:
    """A signed-in browser: its cookie value and the CSRF token its POSTs must carry."""

    id: str
    csrf: str


class SignIn:
    """The one-time code and the signed-in browsers of one web channel instance."""

    def __init__(self, ttl: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl = ttl
        self._clock = clock
        self._code: str | None = None
        self._expires = 0.0
        self._sessions: dict[str, PageSession] = {}

    def new_code(self) -> str:
        """A fresh code (the previous one stops working): good for `ttl` seconds, once."""
        self._code = secrets.token_urlsafe(24)
        self._expires = self._clock() + self.ttl
        return self._code

    def redeem(self, code: str) -> PageSession | None:
        """A new session for the current code, which is then spent; None if it is not the
        code, is spent or has expired."""
        current = self._code
        if current is None or not hmac.compare_digest(code.encode(), current.encode()):
            return None
        self._code = None
        if self._clock() > self._expires:
            return None
        return self.open()

    def open(self) -> PageSession:
        """A new signed-in browser (after a code, or the bridge's token, was checked)."""
        session = PageSession(secrets.token_urlsafe(32), secrets.token_urlsafe(32))
        self._sessions[session.id] = session
        return session

    def session(self, cookie: str | None) -> PageSession | None:
        """The session a cookie stands for, if it is one of ours."""
        return self._sessions.get(cookie) if cookie else None

    def clear(self) -> None:
        """Sign everyone out and spend the code (the channel stopped)."""
        self._sessions.clear()
        self._code = None
