"""`ChannelAdapter.pass_on`: what a person wrote in a session's thread reaches the core as
this channel instance's message, with the card it replies to."""

from __future__ import annotations

from aep_bridge import ChannelConfig, ChannelUser
from aep_bridge.testing import FakeCore, MemoryChannel

ALICE = ChannelUser(id="u1", name="Alice")


async def test_words_in_a_thread_reach_the_core_as_this_instances() -> None:
    core = FakeCore()
    channel = MemoryChannel(core, ChannelConfig(name="team-chat"))
    await channel.pass_on("s1", "t1", ALICE, "/status")
    await channel.pass_on("s1", "t1", ALICE, "use the other file", reply_to="card-7")
    assert [
        (m.channel, m.session_id, m.thread_id, m.user.id, m.text, m.reply_to) for m in core.incoming
    ] == [
        ("team-chat", "s1", "t1", "u1", "/status", None),
        ("team-chat", "s1", "t1", "u1", "use the other file", "card-7"),
    ]
