"""The conformance kit against the in-memory channel (the reference the kit is written to)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from aep_bridge.contract.types import ChannelConfig, ChannelUser, RateLimit, RateLimits
from aep_bridge.testing import ChannelConformance, FakeCore, Harness, MemoryChannel, MemoryProbe


class TestMemoryChannel(ChannelConformance):
    @pytest.fixture
    async def harness(self) -> AsyncIterator[Harness]:
        core = FakeCore()
        channel = MemoryChannel(core, ChannelConfig(name="memory", approvers=["alice"]))
        await channel.start()
        probe = MemoryProbe(channel)

        async def restart() -> MemoryChannel:
            await probe.channel.stop()
            probe.channel = probe.channel.restarted()
            await probe.channel.start()
            return probe.channel

        yield Harness(channel, core, probe, approver=ChannelUser(id="alice"), restart=restart)
        await channel.stop()


class TestMemoryChannelCarryingContext(ChannelConformance):
    """The kit against the in-memory channel where it shows a card's context, on Telegram's
    pace of one call a second in a chat: the card must not wait a second per message."""

    @pytest.fixture
    async def harness(self) -> AsyncIterator[Harness]:
        core = FakeCore()
        channel = MemoryChannel(core, ChannelConfig(name="memory", approvers=["alice"]))
        channel.capabilities = channel.capabilities.model_copy(
            update={
                "card_context": True,
                "rate_limits": RateLimits(per_chat=RateLimit(count=1, per_seconds=1)),
            }
        )
        await channel.start()
        probe = MemoryProbe(channel)
        yield Harness(channel, core, probe, approver=ChannelUser(id="alice"))
        await channel.stop()
