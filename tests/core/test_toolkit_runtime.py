"""The toolkit's run-time bookkeeping (`aep_bridge.Tasks`, `Once`): a channel's background
tasks all ended when it stops, and each thing said once, in bounded memory."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from aep_bridge import Once, Tasks


def waiting_forever(ended: list[str]) -> Callable[[str], Coroutine[Any, Any, None]]:
    """A task's work that waits until cancelled, then says it ended."""

    async def forever(name: str) -> None:
        try:
            await asyncio.Event().wait()
        finally:
            ended.append(name)

    return forever


async def test_stop_cancels_every_task_still_running_and_waits_for_it() -> None:
    tasks, ended = Tasks(), []
    forever = waiting_forever(ended)

    first, second = tasks.spawn(forever("sync")), tasks.spawn(forever("reaction"))
    await asyncio.sleep(0)
    await tasks.stop()
    assert sorted(ended) == ["reaction", "sync"], "no task runs on after stop"
    assert first.cancelled()
    assert second.cancelled()


async def test_stop_lets_a_task_finish_within_the_drain_and_hides_its_failure() -> None:
    tasks, done = Tasks(), []

    async def quick() -> None:
        await asyncio.sleep(0.01)
        done.append("posted")

    async def failing() -> None:
        raise RuntimeError("the platform said no")

    tasks.spawn(quick())
    tasks.spawn(failing())
    await tasks.stop(drain=5)
    assert done == ["posted"]
    await tasks.stop()  # a second stop has nothing left to do


async def test_a_task_begun_during_the_drain_is_cancelled_too() -> None:
    tasks, ended = Tasks(), []
    forever = waiting_forever(ended)

    async def delivered_late() -> None:  # an event the platform still sent while draining
        await asyncio.sleep(0.01)
        tasks.spawn(forever("late"))

    tasks.spawn(delivered_late())
    await tasks.stop(drain=0.05)
    assert ended == ["late"], "nothing runs on after stop, not even what began meanwhile"


def test_each_key_is_new_once_and_the_oldest_is_forgotten_past_the_bound() -> None:
    told = Once(most=2)
    assert told.first(("c1", "bob"))
    assert not told.first(("c1", "bob")), "said once per card and person"
    assert told.first(("c1", "eve"))
    assert told.first(("c2", "bob"))
    assert told.first(("c1", "bob")), "the oldest was forgotten: memory stays bounded"
    assert not told.first(("c2", "bob"))
