"""discord.py's buckets and the outbox: a thread takes Discord's 5 messages per 5 s.

discord.py with a tiny `max_ratelimit_timeout` (the channel's: the outbox waits, discord.py
never does) refused any call to a bucket while the bucket's window was open, even with calls
left in it: a thread took one message per 5 s, and a card asked right after a message waited
for the window to pass (the Discord benchmark's request-to-card latency, 4.5 s)."""

from __future__ import annotations

import pytest

from aep_bridge import OutgoingMessage, RateLimited
from aep_bridge.testing import FakeCore

from .fake_discord import FakeDiscord
from .test_discord_channel import SESSION, started


async def test_a_thread_takes_five_messages_in_a_window_and_refuses_the_sixth() -> None:
    async with FakeDiscord() as fake:  # Discord's limits: 5 messages per 5 s a thread
        async with started(fake, FakeCore(approvers=[])) as (adapter, core):
            await core.create_thread(adapter, SESSION, "pacing")
            for n in range(5):  # as the outbox sends them: 5 within the window
                await adapter.send_message(SESSION, OutgoingMessage(type="text", text=f"m{n}"))
            with pytest.raises(RateLimited) as caught:  # the sixth: raised, not slept on
                await adapter.send_message(SESSION, OutgoingMessage(type="text", text="m5"))
            assert 0 < caught.value.retry_after <= 5.0
        sent = fake.calls_to("POST", "/channels/{channel_id}/messages", status=200)
        assert [c.json["content"] for c in sent] == [f"m{n}" for n in range(5)]
        assert fake.violations == []  # the sixth never reached Discord


async def test_the_calls_of_a_start_and_a_full_burst_fit_discord_s_global_limit() -> None:
    """Discord counts every request in the bot's 50 a second, the start's too (login, the
    slash commands), which never pass through the outbox: the outbox's global budget leaves
    room for them, so a burst right after a start (ten new sessions' threads and first
    messages) is not refused."""
    async with FakeDiscord() as fake:
        async with started(fake, FakeCore(approvers=[])) as (adapter, _):
            outside = len(fake.calls)  # the start's requests, none through the outbox
        budget = adapter.capabilities.rate_limits.global_
        assert budget is not None
        assert fake.limits.global_ is not None
        assert budget.per_seconds >= fake.limits.global_.seconds
        assert outside + budget.count <= fake.limits.global_.count
