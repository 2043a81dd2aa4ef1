"""Where a card is, for the audit trail (issue 34, item 5): the Telegram adapter against the
fake Bot API returns the card's chat and the message id Telegram gave it, with the message's
link where Telegram has one (a supergroup's `t.me/c/...`, with the topic in a forum; none in a
basic group), and the same for a card sent again (a retry after a restart), which posts
nothing."""

from __future__ import annotations

import pytest

from .fake_bot_api import FORUM_ID, GROUP_ID, SUPERGROUP_ID, FakeBotApi
from .test_telegram_cards import SESSION, ask, fake, open_chat  # noqa: F401 (a fixture)


@pytest.mark.parametrize("chat", [FORUM_ID, SUPERGROUP_ID, GROUP_ID])
async def test_a_card_says_where_it_is_and_a_retry_names_the_same_message(
    fake: FakeBotApi,  # noqa: F811
    chat: int,
) -> None:
    opened = await open_chat(fake, chat=chat, topics=chat == FORUM_ID)
    try:
        request = ask()
        first = await opened.adapter.send_permission_request(SESSION, request)
        again = await opened.adapter.send_permission_request(SESSION, request)
        card = opened.card()
    finally:
        await opened.adapter.stop()
    assert [m.message_id for m in opened.sent() if m.callback_data] == [card.message_id]
    assert (first.chat, first.message) == (str(chat), str(card.message_id))
    internal = str(chat)[4:]
    expected = {
        FORUM_ID: f"https://t.me/c/{internal}/{card.message_thread_id}/{card.message_id}",
        SUPERGROUP_ID: f"https://t.me/c/{internal}/{card.message_id}",
        GROUP_ID: None,
    }[chat]
    assert chat != FORUM_ID or card.message_thread_id is not None  # a topic of the forum
    assert first.link == expected
    assert again == first
