"""The two-person rule (issue 34) end to end on Slack: `aep-bridge run` as a process, an agent
on its WebSocket, and the Slack channel (real slack-bolt and slack-sdk over Socket Mode)
against the fake Slack. A `require_approvals` rule asks two approvers for `git push
--force*`: the card shows the progress, the same person's second press counts once and is
told so privately, a stranger is refused, the command goes only at the second distinct
allow (the narrowest of the two), and a partial approval outlives a restart of the bridge.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from aep_bridge.testing import end_to_end
from tests.bridge_process import ROOT

from .fake_slack import ALICE, BOB, MALLORY, S0OPS, FakeSlack, make_config
from .probe import shown
from .test_slack_end_to_end import REFUSED, WAIT, Running, no_command, start_and_ask

FORCE = {
    "prompt": "Run `git push --force origin main`?",
    "options": [
        {"id": "allow", "label": "Allow"},
        {"id": "allow_session", "label": "Allow for this session"},
        {"id": "deny", "label": "Deny"},
    ],
    "context": {"tool_name": "Bash", "tool_input": {"command": "git push --force origin main"}},
}
RULE = {"tool": "Bash", "command": "git push --force*", "approvals": 2}


@contextlib.asynccontextmanager
async def running(tmp_path: Path) -> AsyncIterator[Running]:
    async with FakeSlack() as fake:
        block = make_config(fake, approvers=[BOB["id"]], approver_roles=[S0OPS])
        async with end_to_end(
            Running,
            fake,
            tmp_path,
            {"slack": block},
            plugins="aep_bridge_slack",
            root=ROOT,
            settings={"attention": {"require_approvals": [RULE]}},
        ) as r:
            yield r
        assert fake.violations == [], fake.violations


async def test_a_force_push_goes_only_at_the_second_distinct_approval(tmp_path):
    async with running(tmp_path) as r, r.agent() as agent:
        request, card = await start_and_ask(r, agent, **FORCE)
        await r.press(card, 1, ALICE)  # allow for the session
        await r.until(
            "the card to show the progress",
            lambda: "1 of 2 approvals, by alice" in shown(r.now(card)),
        )
        assert await r.private_note(ALICE) == "Your approval is counted: 1 of 2 approvals"
        assert r.now(card).buttons  # still open
        await no_command(agent)

        await r.press(card, 1, ALICE)  # the same person again: counted once, and told so
        await r.until("a second note", lambda: len(r.fake.ephemeral(ALICE)) == 2)
        assert "you approved this already (1 of 2 approvals)" in await r.private_note(ALICE)
        await r.press(card, 0, MALLORY)
        assert await r.private_note(MALLORY) == REFUSED
        await no_command(agent)

        await r.press(card, 0, BOB)  # allow once: the narrower of the two goes
        command = await asyncio.wait_for(agent.next_command(), WAIT)
        assert command.subject == request.id
        assert command.data["answer"] == {"option": "allow"}
        await agent.report_answer(command)
        await r.until(
            "the card to close with both approvers",
            lambda: "Answered by alice and bob" in shown(r.now(card)),
        )
        assert "the narrowest went" in shown(r.now(card))
        assert r.now(card).buttons == []
        await no_command(agent)


async def test_one_deny_ends_it_and_a_partial_approval_outlives_a_restart(tmp_path):
    async with running(tmp_path) as r:
        async with r.agent() as agent:
            _, card = await start_and_ask(r, agent, **FORCE)
            await r.press(card, 0, ALICE)
            await r.until(
                "the progress", lambda: "1 of 2 approvals, by alice" in shown(r.now(card))
            )
            seq = agent._seq
        assert await r.bridge.aclose() == 0
        await r.bridge.start(r.base)
        async with r.agent(seq=seq) as agent:
            await agent.emit("progress.status", {"message": "waiting for an answer"})
            await r.until("the new Socket Mode connection", lambda: len(r.fake.connected) == 1)
            await r.press(card, 0, ALICE)  # her approval was kept: counted once
            await r.until("a second note", lambda: len(r.fake.ephemeral(ALICE)) == 2)
            assert "you approved this already" in await r.private_note(ALICE)
            await no_command(agent)
            await r.press(card, 2, BOB)  # one deny ends it at once
            command = await asyncio.wait_for(agent.next_command(), WAIT)
            assert command.data["answer"] == {"option": "deny"}
            await agent.report_answer(command)
            await r.until("the card to close", lambda: r.now(card).buttons == [])
            await no_command(agent)
