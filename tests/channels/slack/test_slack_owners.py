"""Owners on Slack, end to end (issue 34, item 3): the real bridge process with a named token
for Ada, a route whose `approvers` is "owner", the real slack-bolt and slack-sdk against the
fake Slack with its limits. Ada's agent asks; Bob, an approver of the channel, presses and is
told privately that only the session's owner may answer, and nothing reaches the agent; Ada's
press answers the agent once."""

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

from .fake_slack import ALICE, BOB, FakeSlack, make_config
from .test_slack_end_to_end import AGENT, HOST, WAIT, Running, no_command, start_and_ask

ADA_TOKEN = "ada-token-" + "a" * 32
NOT_OWNER = "only the session's owner may answer"


@contextlib.asynccontextmanager
async def owned(tmp_path: Path) -> AsyncIterator[Running]:
    async with FakeSlack() as fake:
        port = free_port()
        block = make_config(fake, approvers=[ALICE["id"], BOB["id"]])  # both approve here...
        config = write_config(tmp_path, port, {"slack": block})
        raw = json.loads(config.read_text())
        raw["people"] = {"ada": {"slack": ALICE["id"]}, "bob": {"slack": BOB["id"]}}
        raw["routes"] = [{"match": {}, "channels": ["slack"], "approvers": "owner"}]
        config.write_text(json.dumps(raw))
        store = Store.open(tmp_path / "state")
        store.create_token("ada", "agent", digest(ADA_TOKEN), None)
        store.close()
        bridge = BridgeProcess(config, tmp_path / "bridge.log", plugins="aep_bridge_slack")
        base = f"http://127.0.0.1:{port}"
        await bridge.start(base)
        try:
            yield Running(fake, bridge, base, f"ws://127.0.0.1:{port}/socket", ADA_TOKEN)
        finally:
            await bridge.aclose()
        assert fake.violations == [], fake.violations
        assert fake.unanswered() == []


async def test_only_the_owner_answers_and_another_approver_is_told_why(tmp_path):
    async with owned(tmp_path) as r:
        agent = TinyAgent(r.url, ADA_TOKEN, agent=AGENT, session="s1", host=HOST)
        async with agent:
            _, card = await start_and_ask(r, agent)
            # ...but the session is Ada's: Bob's press is refused, privately, with the reason
            await r.press(card, 0, BOB)
            assert await r.private_note(BOB) == f"Refused: {NOT_OWNER}"
            await no_command(agent)  # nothing reached the agent
            assert r.now(card).buttons  # the card still asks
            # Ada's press answers the agent, once
            await r.press(card, 0, ALICE)
            command = await asyncio.wait_for(agent.next_command(), WAIT)
            assert command.type == "control.attention.respond"
            assert command.data["answer"] == {"option": "allow"}
            await no_command(agent)
        log = (tmp_path / "bridge.log").read_text()
        refusals = [line for line in log.splitlines() if BOB["id"] in line and "refused" in line]
        assert refusals
        assert all(NOT_OWNER in line for line in refusals)
