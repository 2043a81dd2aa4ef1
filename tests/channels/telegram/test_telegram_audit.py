"""The audit trail survives a kill (issue 34, item 5): `aep-bridge run` as a process, the
Telegram channel against the fake Bot API, a real agent on the WebSocket. A stranger's press
is refused, Alice's answer is acknowledged by the agent, the bridge is SIGKILLed the moment
the card says so, and `aep-bridge audit` (another process, reading the store it left) finds
who answered, with what, the command's id and the agent's acknowledgement.
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

from tests.bridge_process import ROOT

from .fake_bot_api import ALICE, BOB, FORUM_ID
from .test_telegram_end_to_end import WAIT, running, start_and_ask


async def _audit(r, *args: str) -> list[dict]:
    return [json.loads(line) for line in (await _audit_text(r, *args)).splitlines()]


async def _audit_text(r, *args: str) -> str:
    # in a thread: the fake platform serves in this event loop, and a blocked loop would
    # hold its answers back, then take the bridge's calls in a burst
    out = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "aep_bridge", "audit", "--config", str(r.bridge.config), *args],
        cwd=ROOT,
        env=r.bridge.env(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def _kinds(tmp_path: Path) -> list[str]:
    """The kinds of record the running bridge committed (its store read-only)."""
    db = tmp_path / "state" / "state.db"
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return [kind for (kind,) in conn.execute("SELECT kind FROM audit ORDER BY id")]
    finally:
        conn.close()


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

        records = await _audit(r)
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

        findings = await _audit(r, "--format", "ocsf", "--session", "s1")
        assert findings[0]["finding_info"]["uid"] == request.id
        assert all(f["class_uid"] == 2004 for f in findings)


async def test_the_trail_names_the_message_the_card_is_in(tmp_path):
    """Issue 34, item 5: `question.posted` says in which chat and message the card was shown,
    as the platform numbered it, in every export format."""
    async with running(tmp_path) as r, r.agent() as agent:
        _, card = await start_and_ask(r, agent)
        await r.until("the card's record", lambda: "question.posted" in _kinds(tmp_path))
        link = f"https://t.me/c/{str(FORUM_ID)[4:]}/{card.message_thread_id}/{card.message_id}"

        [posted] = [x for x in await _audit(r) if x["kind"] == "question.posted"]
        assert posted["channel"] == "telegram"
        assert posted["message_id"] == str(card.message_id)  # the fake's own number
        assert (posted["chat"], posted["link"]) == (str(FORUM_ID), link)
        assert posted["data"]["message"] == str(card.message_id)

        rows = csv.DictReader(io.StringIO(await _audit_text(r, "--format", "csv")))
        [row] = [x for x in rows if x["kind"] == "question.posted"]
        # the chat id starts with "-": kept from a spreadsheet's formulas, as every cell
        assert (row["message_id"], row["chat"], row["link"]) == (
            str(card.message_id),
            "'" + str(FORUM_ID),
            link,
        )

        [created] = [f for f in await _audit(r, "--format", "ocsf") if f["activity_id"] == 1]
        assert created["unmapped"]["aep_bridge"]["posted"] == [
            {
                "channel": "telegram",
                "chat": str(FORUM_ID),
                "message": str(card.message_id),
                "link": link,
            }
        ]
