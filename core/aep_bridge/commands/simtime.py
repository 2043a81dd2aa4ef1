"""Simulated time: a clock and a sleep on which time passes only when every task waits.

The outbox takes its clock and sleep as arguments, so minutes of a platform's rate limits can
run in milliseconds: in the tests and benchmarks (the core's get it from `tests/core/doubles.py`,
a plugin's from `aep_bridge.testing`), and in `aep-bridge preview`, which replays a recorded
session at its recorded pace: that is why it lives here, not with the tests.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable


class VirtualTime:
    """A clock and a sleep on which time passes only when every task is waiting.

    For testing what an `Outbox` does over minutes of rate limits in milliseconds:
    `Outbox(adapter, store, clock=vt.clock, sleep=vt.sleep)`.

    `sleep` registers a timer; a driver task lets the loop run until it is quiet, then jumps
    the clock to the earliest timer and fires it. Cancelled sleeps are skipped.
    """

    SETTLE = 100  # loop iterations that count as "quiet"

    def __init__(self) -> None:
        self.now = 0.0
        self._timers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._order = itertools.count()
        self._driver: asyncio.Task[None] | None = None

    def clock(self) -> float:
        return self.now

    async def sleep(self, delay: float) -> None:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        heapq.heappush(self._timers, (self.now + max(0.0, delay), next(self._order), future))
        if self._driver is None or self._driver.done():
            self._driver = loop.create_task(self._drive())
        await future

    async def close(self) -> None:
        """Cancel the sleeps still waiting (a run that ends before its timers)."""
        for _, _, future in self._timers:
            future.cancel()

    async def _drive(self) -> None:
        while True:
            for _ in range(self.SETTLE):
                await asyncio.sleep(0)
            while self._timers and self._timers[0][2].done():
                heapq.heappop(self._timers)
            if not self._timers:
                return
            when, _, future = heapq.heappop(self._timers)
            self.now = max(self.now, when)
            future.set_result(None)

    def at(self, when: float, action: Callable[[], object]) -> asyncio.Task[None]:
        """Run `action` at simulated time `when`."""

        async def later() -> None:
            await self.sleep(when - self.now)
            action()

        return asyncio.get_running_loop().create_task(later())


__all__ = ["VirtualTime"]
