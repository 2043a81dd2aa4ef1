"""Who may use the page: a one-time sign-in code, then a sign-in held in two halves.

A sign-in is a cookie (`aep_web`, HttpOnly) *and* a page key that the sign-in's redirect hands
to the tab in the URL's fragment; the page keeps the key in `sessionStorage` and sends it as
`X-Page-Key` on every API request. Browsers send a cookie to every port of a host, so a server
on another loopback port can receive the cookie (or overwrite it); it cannot read the key
(storage belongs to one origin, port included), and nothing the cookie alone can fetch carries
the key. Either half alone is refused.

Every sign-in ends: unused for `idle` seconds, `lifetime` seconds after it began, on sign-out,
or pushed out by newer ones past `limit`. Everything lives in memory: a restart ends them all,
and the cookie's run id lets the page say that this is why. Nothing here is ever logged but the
code's URL, once, at start.
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

#: the cookie that carries a signed-in browser's sign-in id
COOKIE = "aep_web"
#: the request header that carries the tab's page key
KEY_HEADER = "x-page-key"
#: how many ended sign-ins are remembered, to say why a browser is signed out
ENDED_KEPT = 256


class Ended(StrEnum):
    """Why a request is not signed in (the `reason` of a `401`)."""

    MISSING = "missing"  # no cookie, or no page key
    RESTARTED = "restarted"  # a cookie of an earlier run of the bridge
    EXPIRED = "expired"
    SIGNED_OUT = "signed-out"
    REPLACED = "replaced"  # pushed out by newer sign-ins, or by a new one in this browser
    UNKNOWN = "unknown"  # no sign-in of ours: mistyped, or overwritten by another page
    WRONG_KEY = "wrong-key"  # the cookie is a sign-in, the key is not its key


@dataclass(slots=True)
class PageSession:
    """A signed-in browser: its cookie value, the key its tabs send, and its times."""

    id: str
    key: str
    created: float
    used: float


class SignIn:
    """The one-time code and the signed-in browsers of one web channel instance."""

    def __init__(
        self,
        ttl: float,
        *,
        idle: float = 12 * 3600.0,
        lifetime: float = 7 * 86_400.0,
        limit: int = 20,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ttl = ttl
        self.idle = idle
        self.lifetime = lifetime
        self.limit = limit
        #: the time source (a test sets its own)
        self.clock = clock
        #: this run's id, the prefix of every cookie it sets: a cookie of another run means
        #: the bridge restarted since that sign-in
        self.run = secrets.token_urlsafe(6)
        self._code: str | None = None
        self._expires = 0.0
        #: live sign-ins by cookie value, least recently used first
        self._sessions: OrderedDict[str, PageSession] = OrderedDict()
        self._ended: OrderedDict[str, Ended] = OrderedDict()

    # -- the one-time code --------------------------------------------------------------

    def new_code(self) -> str:
        """A fresh code (the previous one stops working): good for `ttl` seconds, once."""
        self._code = secrets.token_urlsafe(24)
        self._expires = self.clock() + self.ttl
        return self._code

    def redeem(self, code: str) -> PageSession | None:
        """A new sign-in for the current code, which is then spent; None if it is not the
        code, is spent or has expired."""
        current = self._code
        if current is None or not hmac.compare_digest(code.encode(), current.encode()):
            return None
        self._code = None
        if self.clock() > self._expires:
            return None
        return self.open()

    # -- sign-ins -----------------------------------------------------------------------

    def open(self) -> PageSession:
        """A new signed-in browser (after a code, or the bridge's token, was checked); the
        least recently used sign-in ends when there are `limit` already."""
        now = self.clock()
        for session in list(self._sessions.values()):
            if self._expired(session, now):
                self.end(session.id, Ended.EXPIRED)
        while len(self._sessions) >= self.limit:
            self.end(next(iter(self._sessions)), Ended.REPLACED)
        session = PageSession(
            f"{self.run}.{secrets.token_urlsafe(32)}", secrets.token_urlsafe(32), now, now
        )
        self._sessions[session.id] = session
        return session

    def peek(self, cookie: str | None) -> PageSession | Ended:
        """The live sign-in a cookie stands for, or why there is none; it does not count as
        a use (a cookie alone must not keep a sign-in alive)."""
        if not cookie:
            return Ended.MISSING
        session = self._sessions.get(cookie)
        if session is None:
            return self._why(cookie)
        if self._expired(session, self.clock()):
            self.end(session.id, Ended.EXPIRED)
            return Ended.EXPIRED
        return session

    def check(self, cookie: str | None, key: str | None) -> PageSession | Ended:
        """The sign-in a request stands for when it carries both halves, its cookie and the
        key of that cookie's sign-in (compared in constant time); that is a use."""
        found = self.peek(cookie)
        if isinstance(found, Ended):
            return found
        if not key:
            return Ended.MISSING
        if not hmac.compare_digest(key.encode(), found.key.encode()):
            return Ended.WRONG_KEY
        self.touch(found)
        return found

    def touch(self, session: PageSession) -> None:
        """A use of `session` (a request, or an open page's stream staying open); an ended
        sign-in stays ended."""
        if self._sessions.get(session.id) is session:
            session.used = self.clock()
            self._sessions.move_to_end(session.id)

    def alive(self, session: PageSession) -> bool:
        """Whether `session` is still a live sign-in (an open stream asks now and then)."""
        if self._sessions.get(session.id) is not session:
            return False
        if self._expired(session, self.clock()):
            self.end(session.id, Ended.EXPIRED)
            return False
        return True

    def end(self, cookie: str, reason: Ended) -> None:
        """End one sign-in (a sign-out, an expiry, or a newer sign-in in its place)."""
        if self._sessions.pop(cookie, None) is None:
            return
        self._ended[cookie] = reason
        while len(self._ended) > ENDED_KEPT:
            self._ended.popitem(last=False)

    def __len__(self) -> int:
        return len(self._sessions)

    def clear(self) -> None:
        """Sign everyone out and spend the code (the channel stopped)."""
        self._sessions.clear()
        self._ended.clear()
        self._code = None

    def _expired(self, session: PageSession, now: float) -> bool:
        return now - session.used > self.idle or now - session.created > self.lifetime

    def _why(self, cookie: str) -> Ended:
        ended = self._ended.get(cookie)
        if ended is not None:
            return ended
        run, dot, _ = cookie.partition(".")
        if dot and run != self.run and len(run) == len(self.run):
            return Ended.RESTARTED
        return Ended.UNKNOWN
