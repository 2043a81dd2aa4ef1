"""The audit trail survives a kill (issue 34, item 5): `aep-bridge run` as a process, the
Telegram channel against the fake Bot API, a real agent on the WebSocket. A stranger's press
is refused, Alice's answer is acknowledged by the agent, the bridge is SIGKILLed the moment
the card says so, and `aep-bridge audit` (another process, reading the store it left) finds
who answered, with what, the command's id and the agent's acknowledgement.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

from tests.bridge_process import ROOT

from .fake_bot_api import ALICE, BOB, FORUM_ID
from .test_telegram_end_to_end import WAIT, running, start_and_ask


def _audit(r, *args: str) -> list[dict]:
    out = subprocess.run(
        [sys.executable, "-m", "aep_bridge", "audit", "--config", str(r.bridge.config), *args],
        cwd=ROOT,
        env=r.bridge.env(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines()]


async def test_an_acknowledged_answer_is_on_the_trail_after_a_sigkill(tmp_path):
    async with running(tmp_path) as r, r.agent() as agent:
        request, card = await start_and_ask(r, agent)
        r.press(card, 0, BOB)  # not an approver
        await r.until("the stranger's refusal", lambda: r.fake.answers)
        r.press(card, 0, ALICE)
        command = await asyncio.wait_for(agent.next_command(), WAIT)
        await agent.report_answer(command)
        await r.until(
            "the card to show the answer",
            lambda: "Answered by Alice" in r.fake.message(FORUM_ID, card.message_id).text,
        )
        r.bridge.kill()

        records = _audit(r)
        [asked] = [x for x in records if x["kind"] == "question.asked"]
        assert asked["envelope"]["id"] == request.id
        assert asked["session"] == "s1"
        [refused] = [x for x in records if x["kind"] == "press.refused"]
        assert refused["actor"]["id"] == str(BOB["id"])
        [answered] = [x for x in records if x["kind"] == "question.answered"]
        assert answered["actor"]["id"] == str(ALICE["id"])
        assert answered["channel"] == "telegram"
        assert answered["command_id"] == command.id
        assert answered["answer"]["option_index"] == 0
        [ack] = [x for x in records if x["kind"] == "question.acknowledged"]
        assert (ack["ack"], ack["command_id"]) == ("accepted", command.id)

        findings = _audit(r, "--format", "ocsf", "--session", "s1")
        assert findings[0]["finding_info"]["uid"] == request.id
        assert all(f["class_uid"] == 2004 for f in findings)
