"""What an adapter keeps in memory while it runs, beside its records: the background tasks it
started (`Tasks`) and what it already said (`Once`)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Hashable
from typing import Any, TypeVar

T = TypeVar("T")


class Tasks:
    """The tasks an adapter started beside the core's calls (its own event loop, a reaction
    after its card): held until they end, since asyncio keeps only a weak reference to a
    running task, and ended by `stop`."""

    def __init__(self) -> None:
        self._running: set[asyncio.Future[Any]] = set()

    def spawn(self, work: Awaitable[T]) -> asyncio.Future[T]:
        """Run `work` as one of the adapter's tasks."""
        task = asyncio.ensure_future(work)
        self._running.add(task)
        task.add_done_callback(self._running.discard)
        return task

    async def stop(self, *, drain: float = 0.0) -> None:
        """Let the tasks end for up to `drain` seconds, then cancel the rest and wait until
        each has: none runs on after the adapter stopped. A task's own failure is not raised
        here (it was the task's to handle). Tasks begun during the drain (an event the
        platform still delivered) are cancelled too."""
        if self._running and drain > 0:
            await asyncio.wait(list(self._running), timeout=drain)
        while self._running:
            tasks = list(self._running)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self._running.difference_update(tasks)


class Once:
    """What was said already, so each thing is said once (a refusal per card and person):
    up to `most` keys remembered, the oldest forgotten first, so memory stays bounded and at
    worst a thing long past is said again."""

    def __init__(self, most: int = 4096) -> None:
        self._most = most
        self._said: dict[Hashable, None] = {}

    def first(self, key: Hashable) -> bool:
        """Whether `key` is new; from now on it is not."""
        if key in self._said:
            return False
        self._said[key] = None
        if len(self._said) > self._most:
            self._said.pop(next(iter(self._said)))
        return True


__all__ = ["Once", "Tasks"]
