"""The heads-up a question rings with, as a person on a rate-limited platform sees it.

A question is shown as a card in its thread and announced by a heads-up outside it ("asks
permission", with notification on). On a platform that allows one call a second, the
heads-up waits a slot behind the card; a person who answers within that slot must not be
rung about a question already answered (issue 15, item 11). The whole bridge runs (`Rig`):
real hub, store, bridge and outbox, on a memory channel that declares Telegram's per-chat
limit and counts every call against one chat, as a Telegram forum group does.
"""

from __future__ import annotations

import asyncio

from aep_bridge import hookimpl
from aep_bridge.contract.adapter import ChannelRegistration
from aep_bridge.contract.types import RateLimit, RateLimits, ResolutionStatus
from aep_bridge.testing import MemoryChannel

from .rig import ALICE, Rig, memory_host

#: one call a second for everything the channel sends
SLOT = 1.0


class PacedChannel(MemoryChannel):
    """A memory channel with one chat for every call and one call a second in it."""

    name = "paced"
    capabilities = MemoryChannel.capabilities.model_copy(
        update={"rate_limits": RateLimits(per_chat=RateLimit(count=1, per_seconds=SLOT))}
    )

    def limit_keys(self, session_id: str | None) -> tuple[str, str]:
        return ("chat", "chat")


class _Paced:
    @hookimpl
    def register_channels(self) -> list[ChannelRegistration]:
        return [ChannelRegistration.of(PacedChannel)]


def heads_ups(channel: MemoryChannel) -> list[str]:
    """What was posted outside every thread: the heads-ups."""
    return [m.text for m in channel.messages if m.thread_id is None]


async def _until_card(channel: MemoryChannel, cards: int) -> None:
    async with asyncio.timeout(10 * SLOT):
        while len(channel.cards) < cards:
            await asyncio.sleep(0.005)


async def test_a_question_answered_before_its_heads_up_went_out_rings_nobody(tmp_path):
    channels = {"alpha": {"type": "paced", "approvers": ["alice"]}}
    async with Rig(tmp_path, channels=channels, host=memory_host(_Paced())) as rig:
        alpha = rig.channel("alpha")
        agent = rig.agent()
        agent.start()
        agent.ask("Run `make test`?")
        await _until_card(alpha, 1)  # the card went; its heads-up waits for the next slot
        answered = await alpha.press(rig.buttons("alpha")[0][1], ALICE)
        assert answered.status is ResolutionStatus.ACCEPTED
        await rig.settle()
        assert "Answered by Alice: Allow" in rig.card_text("alpha")
        assert heads_ups(alpha) == []  # never rung about a question already answered

        agent.ask("Push to main?")  # not answered: its heads-up goes as usual
        await rig.settle()
        assert heads_ups(alpha) == ["fix the tests: test-agent asks permission"]


class QuietChannel(PacedChannel):
    """A paced channel that edits its heads-ups, configured without a place for them (Slack
    or Discord without `notifications_channel_id`)."""

    name = "quiet"
    capabilities = PacedChannel.capabilities.model_copy(
        update={"heads_ups": False, "updates_heads_ups": True}
    )


class _Quiet:
    @hookimpl
    def register_channels(self) -> list[ChannelRegistration]:
        return [ChannelRegistration.of(QuietChannel)]


async def test_a_channel_without_heads_ups_is_never_sent_one_and_its_card_rings(tmp_path):
    """Issue 30, item 7: no heads-up is queued for a channel that has no place for them (none
    spends its slot), and the card, the question's only announcement there, rings."""
    channels = {"alpha": {"type": "quiet", "approvers": ["alice"]}}
    async with Rig(tmp_path, channels=channels, host=memory_host(_Quiet())) as rig:
        alpha = rig.channel("alpha")
        agent = rig.agent()
        agent.start()
        agent.ask("Run `make test`?")
        await _until_card(alpha, 1)
        await rig.settle()
        (_, request, _) = rig.card("alpha")
        assert request.notify is True  # rings: no heads-up will
        assert heads_ups(alpha) == []
        outbox = rig.bridge.channels["alpha"].outbox
        assert outbox.stats["declined"] == 1  # the heads-up, never queued
        answered = await alpha.press(rig.buttons("alpha")[0][1], ALICE)
        assert answered.status is ResolutionStatus.ACCEPTED
        await rig.settle()
        assert outbox.stats["declined"] == 2  # and its closing update
        assert heads_ups(alpha) == []


async def test_a_busy_agent_s_finished_runs_ring_once_for_the_latest(tmp_path):
    """Three runs finish while the heads-ups wait for their slots (one call a second): a
    person is rung once, about the latest, not once a run."""
    channels = {"alpha": {"type": "paced", "approvers": ["alice"]}}
    async with Rig(tmp_path, channels=channels, host=memory_host(_Paced())) as rig:
        alpha = rig.channel("alpha")
        agent = rig.agent()
        agent.start()
        for run in ("r1", "r2", "r3"):
            agent.emit("run.started", {"trigger": "user"}, run=run)
            agent.emit("run.finished", {"summary": f"Run {run} done."}, run=run, capture="full")
        await rig.settle()
        rung = heads_ups(alpha)
        assert len(rung) == 1, rung
        assert "r3" in rung[0]
