"""The base of a fake chat platform: an HTTP/WebSocket server in the test's own event loop.

A channel's integration tests run its real SDK against a fake of the platform. What every
such fake needs is here, so a plugin's fake is its routes and its platform's rules:

- `InLoopServer`: a Starlette app served by uvicorn on 127.0.0.1, on a port the system picks,
  inside the running loop (the fake's state is then plain Python the test reads without
  locks); `async with` starts it, gives its `url`, and stops it at the end, releasing the
  port. A subclass closes what it holds open (sockets, pollers) in `closing()`.
- `FakePlatform`: an `InLoopServer` that records each call (`calls`, `calls_to(route)`) and
  enforces the platform's limits: `admit(buckets)` answers the platform's own 429 (its
  `too_many_requests(wait)` shape, with the retry-after the platform would give) once a
  window is used up; `check_message` and `check_button_data` refuse what the platform
  refuses (`message_limit` in the platform's measure, `button_data_limit` in UTF-8 bytes).
- `FixedWindow` (a bucket the first call opens and that resets all at once: Discord, Slack)
  and `SlidingWindow` (at most N calls in any span: Telegram), both of a `Window`.
- `ManualClock`: a clock that moves only when told, for limits tested without waiting.

It runs no platform SDK; a fake built on it is for tests and benches, never the bridge. Its
names are imported from `aep_bridge.testing`, whose `_LAZY` lists them (this module is read
when one is first used: it imports uvicorn); it has no `__all__` to say them again.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import socket
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Protocol, Self

import uvicorn
from starlette.responses import JSONResponse, Response


class ManualClock:
    """A clock for a fake's limits that only moves when told: `clock.advance(1.5)`."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


# -- limits ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Window:
    """At most `count` accepted calls per `seconds` (fixed or sliding: see the buckets)."""

    count: int
    seconds: float


@dataclass
class FixedWindow:
    """A bucket the first call opens and that resets all at once `window.seconds` later."""

    window: Window
    started: float | None = None
    used: int = 0

    def _roll(self, now: float) -> None:
        if self.started is not None and now >= self.started + self.window.seconds:
            self.started, self.used = None, 0

    def wait(self, now: float) -> float:
        """Seconds until one more call would be accepted (0: now)."""
        self._roll(now)
        if self.started is None or self.used < self.window.count:
            return 0.0
        return self.started + self.window.seconds - now

    def take(self, now: float) -> None:
        """Count an accepted call."""
        self._roll(now)
        if self.started is None:
            self.started = now
        self.used += 1

    def reset_after(self, now: float) -> float:
        """Seconds until the bucket resets (0: not open)."""
        self._roll(now)
        return 0.0 if self.started is None else self.started + self.window.seconds - now


@dataclass
class SlidingWindow:
    """At most `window.count` accepted calls in any `window.seconds`-long span."""

    window: Window
    times: deque[float] = field(default_factory=deque)

    def wait(self, now: float) -> float:
        """Seconds until one more call would be accepted (0: now)."""
        return sliding_wait(self.times, self.window, now)

    def take(self, now: float) -> None:
        """Count an accepted call; forget those older than the window (a flood's calls would
        otherwise be kept, and scanned at every call, for as long as the fake runs)."""
        while self.times and self.times[0] <= now - self.window.seconds:
            self.times.popleft()
        self.times.append(now)


def sliding_wait(times: deque[float], window: Window, now: float) -> float:
    """Seconds until a call fits `window` over the accepted call `times` (0: now)."""
    recent = [t for t in times if t > now - window.seconds]
    if len(recent) < window.count:
        return 0.0
    return recent[-window.count] + window.seconds - now


class Bucket(Protocol):
    """What `FakePlatform.admit` needs of a limit (`FixedWindow`, `SlidingWindow`)."""

    def wait(self, now: float) -> float: ...

    def take(self, now: float) -> None: ...


def retry_after_seconds(wait: float) -> int:
    """A retry-after in whole seconds, as Telegram and Slack give it: rounded up, at least 1."""
    return max(1, math.ceil(wait))


# -- the server -----------------------------------------------------------------------------


class _Uvicorn(uvicorn.Server):
    """uvicorn in the test's event loop, leaving the test runner's signals alone."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class InLoopServer:
    """An ASGI app on 127.0.0.1 in the running loop, from `async with` to its end.

    `self.app` must be set (by the subclass's `__init__`) before the server starts. `port`:
    serve on that one (a server started again where its clients expect it), else on one the
    system picks; `options`: uvicorn's own, over the kit's (`ws_max_size=32_000`).
    """

    #: named in the error if the server stops while starting
    platform_name = "the fake platform"

    def __init__(self, app: Any = None, *, port: int = 0, **options: Any) -> None:
        self.app: Any = app
        self.port = port
        self.options = options
        self._listener: socket.socket | None = None
        self._uvicorn: _Uvicorn | None = None
        self._serving: asyncio.Task[None] | None = None

    def url(self, path: str = "") -> str:
        """`http://127.0.0.1:PORT` followed by `path` (which starts with "/")."""
        return f"http://127.0.0.1:{self.port}{path}"

    def ws_url(self, path: str = "") -> str:
        """`ws://127.0.0.1:PORT` followed by `path`."""
        return f"ws://127.0.0.1:{self.port}{path}"

    async def start(self) -> None:
        """Serve on a free loopback port; return once the server accepts connections."""
        # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY on accepted connections only when
        # the listening socket says TCP, and without it every answer waits ~40 ms (Nagle +
        # delayed ACK on uvicorn's separate header and body writes).
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        # as uvicorn does: a port given again binds while the last one's connections linger
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", self.port))
        self.port = self._listener.getsockname()[1]
        options: dict[str, Any] = {
            "log_config": None,
            "log_level": "warning",
            "lifespan": "off",
            "timeout_graceful_shutdown": 2,
            "ws": "websockets-sansio",
            **self.options,
        }
        config = uvicorn.Config(self.app, **options)
        self._uvicorn = _Uvicorn(config)
        self._serving = asyncio.create_task(self._uvicorn.serve(sockets=[self._listener]))
        async with asyncio.timeout(10):
            while not self._uvicorn.started:
                if self._serving.done():
                    self._serving.result()
                    raise RuntimeError(f"{self.platform_name} stopped while starting")
                await asyncio.sleep(0.005)

    async def closing(self) -> None:
        """Called first when stopping: end what the fake holds open (long polls, sockets)."""

    async def stop(self) -> None:
        """Stop serving and release the port (after `closing()`)."""
        await self.closing()
        if self._uvicorn is not None:
            self._uvicorn.should_exit = True
        if self._serving is not None:
            try:
                await asyncio.wait_for(self._serving, 10)
            except TimeoutError:
                if self._uvicorn is not None:
                    self._uvicorn.force_exit = True
                await asyncio.wait_for(self._serving, 5)
        if self._listener is not None:
            self._listener.close()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        await self.stop()


# -- the fake platform ----------------------------------------------------------------------


@dataclass
class RecordedCall:
    """One call the fake received: its route, what it carried, and how it was answered."""

    route: str
    body: Mapping[str, Any]
    time: float
    status: int = 200


class FakePlatform(InLoopServer):
    """An `InLoopServer` that records calls and enforces a platform's limits.

    Override `too_many_requests` to answer a 429 in the platform's shape, and set
    `message_limit` (with `measure_text`, the platform's measure) and `button_data_limit`.
    """

    #: the longest message text, in `measure_text`'s unit; None: no limit
    message_limit: int | None = None
    #: the most bytes (UTF-8) a button's data may carry; None: no limit
    button_data_limit: int | None = None

    def __init__(self, app: Any = None, *, clock: Callable[[], float] | None = None) -> None:
        super().__init__(app)
        loop_time: Callable[[], float] = lambda: asyncio.get_running_loop().time()  # noqa: E731
        self.clock: Callable[[], float] = clock or loop_time
        self.calls: list[RecordedCall] = []

    def record(self, route: str, body: Mapping[str, Any], status: int = 200) -> RecordedCall:
        """Record a call (its `status` may be set later, once answered)."""
        call = RecordedCall(route, dict(body), self.clock(), status)
        self.calls.append(call)
        return call

    def calls_to(self, route: str, status: int | None = None) -> list[RecordedCall]:
        """The recorded calls to `route` (answered with `status`, if given), oldest first."""
        return [c for c in self.calls if c.route == route and status in (None, c.status)]

    def admit(self, buckets: Mapping[str, Bucket]) -> Response | None:
        """Count the call in every bucket and return None, or, if one is used up, count it in
        none and return the platform's 429 (`too_many_requests`). Call it once every other
        check passed, right before the call takes effect."""
        now = self.clock()
        wait, kind = max(((b.wait(now), k) for k, b in buckets.items()), default=(0.0, ""))
        if wait > 0:
            return self.too_many_requests(wait, kind)
        for bucket in buckets.values():
            bucket.take(now)
        return None

    def too_many_requests(self, wait: float, kind: str) -> Response:
        """The platform's 429 for a call `wait` seconds early (`kind`: the bucket's name).
        The default is a JSON body and a `Retry-After` header in whole seconds."""
        retry_after = retry_after_seconds(wait)
        return JSONResponse(
            {"error": "rate_limited", "limit": kind, "retry_after": retry_after},
            status_code=429,
            headers={"Retry-After": str(retry_after)},
        )

    def measure_text(self, text: str) -> int:
        """A text's size in the platform's unit (characters by default)."""
        return len(text)

    def check_message(self, text: str) -> str | None:
        """Why the platform refuses this message text, or None."""
        if self.message_limit is not None and self.measure_text(text) > self.message_limit:
            return f"message is too long ({self.measure_text(text)} > {self.message_limit})"
        return None

    def check_button_data(self, data: str) -> str | None:
        """Why the platform refuses this button data, or None."""
        size = len(data.encode())
        if self.button_data_limit is not None and size > self.button_data_limit:
            return f"button data is too long ({size} bytes > {self.button_data_limit})"
        return None
