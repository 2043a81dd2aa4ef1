"""Owners on Discord, end to end (issue 34, item 3): the real bridge process with a named token
for Ada, a route whose `approvers` is "owner", real discord.py against the fake Discord with
its limits. Ada's agent asks; Bob, who has the approver role, presses and is told privately
that only the session's owner may answer, and nothing reaches the agent; Ada's press answers
the agent once."""

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

from .fake_discord import ALICE, APPROVER_ROLE_ID, BOB, FakeDiscord
from .probe import channel_block
from .test_discord_end_to_end import AGENT, HOST, WAIT, Running, start_and_ask

ADA_TOKEN = "ada-token-" + "a" * 32
NOT_OWNER = "only the session's owner may answer"


@contextlib.asynccontextmanager
async def owned(tmp_path: Path) -> AsyncIterator[Running]:
    async with FakeDiscord() as fake:
        port = free_port()
        block = channel_block(fake, approver_roles=[str(APPROVER_ROLE_ID)])  # Bob has it...
        config = write_config(tmp_path, port, {"discord": block})
        raw = json.loads(config.read_text())
        raw["people"] = {"ada": {"discord": str(ALICE["id"])}, "bob": {"discord": str(BOB["id"])}}
        raw["routes"] = [{"match": {}, "channels": ["discord"], "approvers": "owner"}]
        config.write_text(json.dumps(raw))
        store = Store.open(tmp_path / "state")
        store.create_token("ada", "agent", digest(ADA_TOKEN), None)
        store.close()
        bridge = BridgeProcess(config, tmp_path / "bridge.log", plugins="aep_bridge_discord")
        base = f"http://127.0.0.1:{port}"
        await bridge.start(base)
        try:
            yield Running(fake, bridge, base, f"ws://127.0.0.1:{port}/socket", ADA_TOKEN)
        finally:
            await bridge.aclose()
        assert fake.violations == [], fake.violations
        assert fake.unanswered() == []


async def no_command(agent: TinyAgent, seconds: float = 1.5) -> None:
    try:
        command = await asyncio.wait_for(agent.next_command(), seconds)
    except TimeoutError:
        return
    raise AssertionError(f"the agent was sent {command.type}")


async def test_only_the_owner_answers_and_another_approver_is_told_why(tmp_path):
    async with owned(tmp_path) as r:
        agent = TinyAgent(r.url, ADA_TOKEN, agent=AGENT, session="s1", host=HOST)
        async with agent:
            _, card = await start_and_ask(r, agent)
            # ...but the session is Ada's: Bob's press is refused, privately, with the reason
            r.press(card, 0, BOB)
            assert await r.private_note(BOB) == f"Refused: {NOT_OWNER}"
            await no_command(agent)  # nothing reached the agent
            untouched = r.card(card)
            assert (untouched.custom_ids, untouched.edits) == (card.custom_ids, [])
            # Ada's press answers the agent, once
            r.press(card, 0, ALICE)
            command = await asyncio.wait_for(agent.next_command(), WAIT)
            assert command.type == "control.attention.respond"
            assert command.data["answer"] == {"option": "allow"}
            await no_command(agent)
        log = (tmp_path / "bridge.log").read_text()
        lines = log.splitlines()
        refusals = [x for x in lines if str(BOB["id"]) in x and "refused" in x]
        assert refusals
        assert all(NOT_OWNER in line for line in refusals)
