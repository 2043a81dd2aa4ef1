"""Owners on Telegram, end to end (issue 34, item 3): the real bridge process with a named
token per person, a route whose `approvers` is "owner", the fake Bot API with Telegram's
limits. Ada's agent asks; Bob, an approver of the group, is refused with the reason and
nothing reaches the agent; Ada's heads-up reaches her private chat with the bot, linking to
the card; her tap answers the agent once."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

from aep_bridge.commands.tinyagent import TinyAgent
from aep_bridge.intake.principals import digest
from aep_bridge.store import Store
from tests.bridge_process import BridgeProcess, free_port, write_config

from .fake_bot_api import ALICE, BOB, FakeBotApi
from .test_telegram_end_to_end import AGENT, HOST, WAIT, Running, start_and_ask

ADA_TOKEN = "ada-token-" + "a" * 32
NOT_OWNER = "only the session's owner may answer"


@contextlib.asynccontextmanager
async def owned(tmp_path: Path) -> AsyncIterator[Running]:
    async with FakeBotApi() as fake:
        port = free_port()
        approvers = [str(ALICE["id"]), str(BOB["id"])]  # Bob approves in the group...
        block = fake.channel_block(approvers=approvers, poll_timeout=1)
        config = write_config(tmp_path, port, {"telegram": block})
        raw = json.loads(config.read_text())
        raw["people"] = {"ada": {"telegram": str(ALICE["id"])}, "bob": {"telegram": str(BOB["id"])}}
        raw["routes"] = [{"match": {}, "channels": ["telegram"], "approvers": "owner"}]
        config.write_text(json.dumps(raw))
        store = Store.open(tmp_path / "state")
        store.create_token("ada", "agent", digest(ADA_TOKEN), None)
        store.close()
        bridge = BridgeProcess(config, tmp_path / "bridge.log")
        base = f"http://127.0.0.1:{port}"
        await bridge.start(base)
        try:
            yield Running(fake, bridge, base, f"ws://127.0.0.1:{port}/socket", ADA_TOKEN)
        finally:
            await bridge.aclose()
        assert fake.violations == [], fake.violations


async def test_only_the_owner_answers_and_gets_the_heads_up_privately(tmp_path):
    async with owned(tmp_path) as r:
        agent = TinyAgent(r.url, ADA_TOKEN, agent=AGENT, session="s1", host=HOST)
        async with agent:
            _, card = await start_and_ask(r, agent)
            # ...but the session is Ada's: Bob's tap is refused, with the reason
            refused = r.press(card, 0, BOB)
            assert NOT_OWNER in (await r.toast(refused) or "")
            # Ada's heads-up is in her private chat with the bot, linking to the card
            private = int(str(ALICE["id"]))
            [dm] = await r.until(
                "Ada's private heads-up",
                lambda: [m for m in r.fake.messages(private, from_bot=True) if m.text],
            )
            links = [e["url"] for e in dm.entities if e["type"] == "text_link"]
            assert any(url.endswith(f"/{card.message_id}") for url in links), links
            # her tap answers the agent, once
            r.press(card, 0, ALICE)
            command = await asyncio.wait_for(agent.next_command(), WAIT)
            assert command.type == "control.attention.respond"
            assert command.data["answer"] == {"option": "allow"}
        log = (tmp_path / "bridge.log").read_text()
        refusals = [line for line in log.splitlines() if f"from {BOB['id']} (" in line]
        assert refusals
        assert all(NOT_OWNER in line for line in refusals)  # logged like any refusal
