"""Where a card is, for the audit trail (issue 34, item 5): the Discord adapter against the
fake Discord returns the card's thread, the message id Discord gave it and the link that opens
it, and the same for a card sent again (a retry after a restart), which posts nothing."""

from __future__ import annotations

from .fake_discord import GUILD_ID, FakeDiscord, Limits
from .test_discord_channel import CARD, SESSION, started


async def test_a_card_says_where_it_is_and_a_retry_names_the_same_message() -> None:
    async with FakeDiscord(limits=Limits.loose()) as fake:
        async with started(fake) as (adapter, core):
            thread = await core.create_thread(adapter, SESSION, "where")
            first = await adapter.send_permission_request(SESSION, CARD)
            again = await adapter.send_permission_request(SESSION, CARD)
        (card,) = fake.messages(int(thread), from_bot=True)  # the card, once
    assert (first.chat, first.message) == (thread, str(card.id))
    assert first.link == f"https://discord.com/channels/{GUILD_ID}/{thread}/{card.id}"
    assert again == first
