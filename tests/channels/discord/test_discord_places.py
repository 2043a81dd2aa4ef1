"""A team's sessions in a Discord channel of their own (`routes[].places`), end to end: the real
bridge process and the real discord.py against the fake Discord and its limits. Session `b1` is
routed to the text channel "team-b", `s1` stays in the channel's own "agents": each thread, and
the card in it, is under its session's channel, and a press there answers the agent."""

from __future__ import annotations

import asyncio

import pytest

from aep_bridge.testing import PERMISSION_ASK, end_to_end
from tests.bridge_process import ROOT

from .fake_discord import (
    APPROVER_ROLE_ID,
    BOB,
    DEFAULT_TOKEN,
    GUILD_TEXT,
    TEXT_CHANNEL_ID,
    FakeChannel,
    FakeDiscord,
    default_channels,
)
from .probe import channel_block
from .test_discord_end_to_end import WAIT, Running

TEAM_B = 1000000000000000299
ROUTES = [
    {"match": {"session": "b1"}, "channels": ["discord"], "places": {"discord": str(TEAM_B)}},
    {"match": {}, "channels": ["discord"]},
]


def names(fake: FakeDiscord, channel: int) -> list[str]:
    return [t.name for t in fake.threads(channel)]


async def test_a_routed_session_s_thread_is_made_in_its_own_channel(tmp_path):
    channels = [*default_channels(), FakeChannel(TEAM_B, GUILD_TEXT, "team-b", position=3)]
    async with FakeDiscord(channels=channels) as fake:
        block = channel_block(fake, approver_roles=[str(APPROVER_ROLE_ID)])
        async with (
            end_to_end(
                Running,
                fake,
                tmp_path,
                {"discord": block},
                plugins="aep_bridge_discord",
                secrets=[DEFAULT_TOKEN],
                root=ROOT,
                settings={"routes": ROUTES},
            ) as r,
            r.agent("s1") as ours,
            r.agent("b1") as theirs,
        ):
            await ours.emit("session.started", {"label": "ours"}, capture="redacted")
            await theirs.emit("session.started", {"label": "theirs"}, capture="redacted")
            await r.until(
                "both threads", lambda: names(fake, TEXT_CHANNEL_ID) and names(fake, TEAM_B)
            )
            assert names(fake, TEXT_CHANNEL_ID) == ["ours"]
            assert names(fake, TEAM_B) == ["theirs"]

            await theirs.emit(
                "attention.requested", PERMISSION_ASK, capture="full", severity="notice"
            )
            thread = fake.threads(TEAM_B)[0]
            card = await r.until(
                "the card in team-b's thread", lambda: next(iter(r.cards(thread)), None)
            )
            r.press(card, 0, BOB)
            command = await asyncio.wait_for(theirs.next_command(), WAIT)
            assert command.type == "control.attention.respond"
            await theirs.report_answer(command)
            with pytest.raises(TimeoutError):  # the other session was asked nothing
                await asyncio.wait_for(ours.next_command(), 1.5)
        assert fake.violations == [], fake.violations
