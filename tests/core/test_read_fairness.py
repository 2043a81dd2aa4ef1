"""The core's read loop shares the event loop under a backlog (issue 34, the team load).

With thousands of events queued at once, `Bridge._read` used to handle them all before any
other task ran: the outboxes made no call, a platform SDK's heartbeat was held up for
minutes, and a question asked before the burst showed its card only after the whole burst.
A real bridge in process (`Rig`: hub, store, memory channels through their outboxes).
"""

from __future__ import annotations

import asyncio

from aep_bridge.intake.subscription import Delivery

from .rig import Rig

BACKLOG = 1500  # fewer than an unlimited outbox holds before the reader waits for it


def still_queued(rig: Rig, event_id: str) -> bool:
    """Whether the event `event_id` still waits in the bridge's subscription (not handled)."""
    owner = rig.source._participant
    return any(
        isinstance(item, Delivery) and item.event.id == event_id
        for subscription in rig.hub.subscriptions
        if subscription.owner is owner
        for item in subscription.queue
    )


async def test_a_card_asked_before_a_burst_shows_before_the_burst_is_handled(tmp_path):
    async with Rig(tmp_path) as rig:
        alpha = rig.channel("alpha")
        agent = rig.agent()
        agent.start()
        await rig.settle()
        agent.ask("Run `make test`?")
        for n in range(BACKLOG):  # queued at once: nothing here gives the loop away
            last = agent.emit(
                "message.agent.replied",
                {"message_id": f"m{n}", "text": f"step {n}"},
                capture="redacted",
            )
        assert still_queued(rig, last.id)

        still_queued_at_card: list[bool] = []

        async def watch() -> None:
            while not alpha.cards:
                await asyncio.sleep(0)
            still_queued_at_card.append(still_queued(rig, last.id))

        watcher = asyncio.create_task(watch())
        await rig.settle()
        await watcher
        # the card reached the channel before the burst's last event was handled
        assert still_queued_at_card == [True]
        assert any("step 1499" in text for text in rig.thread_texts("alpha"))  # none lost


async def test_another_task_runs_while_a_backlog_is_handled(tmp_path):
    async with Rig(tmp_path) as rig:
        agent = rig.agent()
        agent.start()
        await rig.settle()
        for n in range(BACKLOG):
            last = agent.emit(
                "message.agent.replied",
                {"message_id": f"m{n}", "text": f"step {n}"},
                capture="redacted",
            )
        turns: list[bool] = []

        async def heartbeat() -> None:  # what discord.py's gateway keep-alive does
            for _ in range(3):
                await asyncio.sleep(0)
                turns.append(still_queued(rig, last.id))

        beat = asyncio.create_task(heartbeat())
        await rig.settle()
        await beat
        assert turns[-1] is True  # its third turn came before the backlog was taken
