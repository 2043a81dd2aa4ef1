"""Talking to the bot, end to end: commands in a topic, words as answers, forms one field at a
time, and a group without topics. The same set-up as test_telegram_end_to_end.py: the real
bridge process, an agent on its WebSocket, the fake Bot API with Telegram's limits."""

from __future__ import annotations

import asyncio

import httpx

from .fake_bot_api import ALICE, BOB, FORUM_ID, SUPERGROUP_ID
from .test_telegram_end_to_end import WAIT, running, start_and_ask


def bot_texts(r, thread: int | None, chat: int = FORUM_ID) -> list[str]:
    return [m.text for m in r.fake.messages(chat, thread, from_bot=True)]


async def test_commands_in_a_topic_reach_the_agent_and_answer_in_the_topic(tmp_path):
    async with running(tmp_path) as r, r.agent() as agent:
        await agent.emit("session.started", {"label": "deploy"}, capture="redacted")
        topic = await r.until("the topic", lambda: r.topic("deploy"))
        thread = topic.message_thread_id
        # /sessions, anywhere: a link to each session's topic
        r.fake.say(FORUM_ID, "/sessions", ALICE)
        listing = await r.until(
            "the session list",
            lambda: [
                m for m in r.fake.messages(FORUM_ID, None, from_bot=True) if "Sessions" in m.text
            ],
        )
        assert f"/{thread}" in (listing[-1].html or "")
        # /status in the topic
        r.fake.say(FORUM_ID, "/status", ALICE, message_thread_id=thread)
        await r.until("the status", lambda: any("running" in t for t in bot_texts(r, thread)))
        # /cancel from a stranger: refused, nothing sent
        r.fake.say(FORUM_ID, "/cancel", BOB, message_thread_id=thread)
        await r.until(
            "the refusal", lambda: any("not an approver" in t for t in bot_texts(r, thread))
        )
        # /cancel from an approver: the agent gets control.cancel, the topic its answer
        r.fake.say(FORUM_ID, "/cancel", ALICE, message_thread_id=thread)
        command = await asyncio.wait_for(agent.next_command(), WAIT)
        assert command.type == "control.cancel"
        await agent.ack(command)
        await r.until("the outcome", lambda: any("accepted" in t for t in bot_texts(r, thread)))


async def test_away_and_back_in_a_topic_switch_what_the_agent_daemon_is_told(tmp_path):
    async with running(tmp_path) as r, r.agent() as agent:
        await agent.emit("session.started", {"label": "deploy"}, capture="redacted")
        topic = await r.until("the topic", lambda: r.topic("deploy"))
        thread = topic.message_thread_id
        menu = [c["command"] for commands in r.fake.commands.values() for c in commands]
        assert {"away", "back"} <= set(menu)  # in the bot's command menu
        headers = {"Authorization": f"Bearer {r.token}"}

        async def away() -> bool:
            async with httpx.AsyncClient() as http:
                reply = await http.get(f"{r.base}/away", params={"session": "s1"}, headers=headers)
            return bool(reply.json()["away"])

        r.fake.say(FORUM_ID, "/away", BOB, message_thread_id=thread)  # not an approver
        await r.until(
            "the refusal", lambda: any("/away: refused" in t for t in bot_texts(r, thread))
        )
        assert await away() is False
        r.fake.say(FORUM_ID, "/away", ALICE, message_thread_id=thread)
        await r.until(
            "the switch", lambda: any("this session is away" in t for t in bot_texts(r, thread))
        )
        assert await away() is True
        r.fake.say(FORUM_ID, "/back@aep_test_bot", ALICE, message_thread_id=thread)
        await r.until(
            "the switch back",
            lambda: any("this session is back" in t for t in bot_texts(r, thread)),
        )
        assert await away() is False


async def test_words_in_the_topic_answer_the_one_open_question(tmp_path):
    async with running(tmp_path) as r, r.agent() as agent:
        request, card = await start_and_ask(
            r, agent, kind="input", prompt="Which branch?", options=[]
        )
        r.fake.say(FORUM_ID, "main, please", ALICE, message_thread_id=card.message_thread_id)
        command = await asyncio.wait_for(agent.next_command(), WAIT)
        assert command.subject == request.id
        assert command.data["answer"] == {"text": "main, please"}  # words, never an option
        await agent.report_answer(command)
        await r.until(
            "the card to show the words",
            lambda: "main, please" in r.fake.message(FORUM_ID, card.message_id).text,
        )


async def test_a_form_is_filled_one_field_at_a_time(tmp_path):
    fields = [
        {
            "id": "env",
            "type": "select",
            "label": "Environment",
            "required": True,
            "choices": [{"id": "stg", "label": "Staging"}, {"id": "prod", "label": "Production"}],
        },
        {"id": "notify", "type": "boolean", "label": "Tell the team?"},
        {"id": "note", "type": "string", "label": "Release note", "required": True},
    ]
    async with running(tmp_path) as r, r.agent() as agent:
        request, card = await start_and_ask(
            r, agent, kind="form", prompt="Deploy settings", options=[], fields=fields
        )

        def buttons() -> list[str]:
            return [b["text"] for b in r.fake.message(FORUM_ID, card.message_id).buttons]

        def press(label: str) -> None:
            message = r.fake.message(FORUM_ID, card.message_id)
            data = next(b["callback_data"] for b in message.buttons if b["text"] == label)
            r.fake.press(FORUM_ID, card.message_id, data, ALICE)

        assert buttons() == ["Fill in ✏️"]
        press("Fill in ✏️")
        await r.until("the first field", lambda: buttons() == ["Staging", "Production"])
        press("Production")
        await r.until("the second field", lambda: "Yes" in buttons())
        assert "Skip" in buttons()  # not required
        press("Yes")
        await r.until(
            "the text field",
            lambda: "Release note" in r.fake.message(FORUM_ID, card.message_id).text,
        )
        r.fake.say(FORUM_ID, "ships the new login", ALICE, reply_to_message_id=card.message_id)
        command = await asyncio.wait_for(agent.next_command(), WAIT)
        assert command.subject == request.id
        assert command.data["answer"] == {
            "values": {"env": "prod", "notify": True, "note": "ships the new login"}
        }


async def test_without_topics_a_session_is_a_reply_chain(tmp_path):
    async with running(tmp_path, chat_id=SUPERGROUP_ID) as r, r.agent() as agent:
        await agent.emit("session.started", {"label": "chain"}, capture="redacted")
        await agent.emit(
            "attention.requested",
            {
                "kind": "permission",
                "prompt": "Push?",
                "options": [{"id": "yes", "label": "Yes"}, {"id": "no", "label": "No"}],
                "respond_via": ["control"],
            },
            capture="full",
        )

        def card():
            return next(
                (m for m in r.fake.messages(SUPERGROUP_ID, from_bot=True) if m.callback_data),
                None,
            )

        shown = await r.until("the card", card)
        root = next(m for m in r.fake.messages(SUPERGROUP_ID, from_bot=True) if "chain" in m.text)
        assert shown.reply_to_message_id == root.message_id  # in the session's chain
        assert r.fake.topics(SUPERGROUP_ID) == []
        r.fake.press(SUPERGROUP_ID, shown.message_id, shown.callback_data[0], ALICE)
        command = await asyncio.wait_for(agent.next_command(), WAIT)
        assert command.data["answer"] == {"option": "yes"}
