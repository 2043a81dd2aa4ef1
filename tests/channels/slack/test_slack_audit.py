"""The audit trail names the card's message on Slack (issue 34, item 5): `aep-bridge run` as a
process, the real slack-sdk and slack-bolt against the fake Slack, a real agent on the
WebSocket; `aep-bridge audit` (another process, reading the store the bridge writes) says in
which channel and message the card was shown, as Slack numbered it (its `ts`), and the
permalink that opens it, in every export format."""

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

from .fake_slack import C0AGENTS, TEAM_URL, FakeSlack, Limits
from .test_slack_channel import CARD, SESSION, started
from .test_slack_end_to_end import Running, running, start_and_ask


async def _audit_text(r: Running, *args: str) -> str:
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


async def _audit(r: Running, *args: str) -> list[dict]:
    return [json.loads(line) for line in (await _audit_text(r, *args)).splitlines()]


def _kinds(tmp_path: Path) -> list[str]:
    """The kinds of record the running bridge committed (its store read-only)."""
    db = tmp_path / "state" / "state.db"
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return [kind for (kind,) in conn.execute("SELECT kind FROM audit ORDER BY id")]
    finally:
        conn.close()


async def test_the_trail_names_the_message_the_card_is_in(tmp_path):
    async with running(tmp_path) as r, r.agent() as agent:
        _, card = await start_and_ask(r, agent)
        await r.until("the card's record", lambda: "question.posted" in _kinds(tmp_path))
        assert card.thread_ts is not None  # a reply in the session's thread
        link = (
            f"{TEAM_URL}archives/{C0AGENTS}/p{card.ts.replace('.', '')}"
            f"?thread_ts={card.thread_ts}&cid={C0AGENTS}"
        )

        [posted] = [x for x in await _audit(r) if x["kind"] == "question.posted"]
        assert posted["channel"] == "slack"
        assert posted["message_id"] == card.ts  # the fake's own ts for the card
        assert (posted["chat"], posted["link"]) == (C0AGENTS, link)
        assert posted["data"]["message"] == card.ts

        rows = csv.DictReader(io.StringIO(await _audit_text(r, "--format", "csv")))
        [row] = [x for x in rows if x["kind"] == "question.posted"]
        assert (row["message_id"], row["chat"], row["link"]) == (card.ts, C0AGENTS, link)

        [created] = [f for f in await _audit(r, "--format", "ocsf") if f["activity_id"] == 1]
        assert created["unmapped"]["aep_bridge"]["posted"] == [
            {"channel": "slack", "chat": C0AGENTS, "message": card.ts, "link": link}
        ]


async def test_a_card_sent_again_says_where_it_already_is() -> None:
    """A retry of a card the channel has already posted (the outbox's row outlived a restart)
    posts nothing and names the same message, so its record still says where the card is."""
    async with FakeSlack(limits=Limits.loose()) as fake, started(fake) as (adapter, core):
        await core.create_thread(adapter, SESSION, "retried")
        first = await adapter.send_permission_request(SESSION, CARD)
        again = await adapter.send_permission_request(SESSION, CARD)
        (card,) = [m for m in fake.messages(C0AGENTS) if m.buttons]
    assert first == again
    assert (again.chat, again.message) == (C0AGENTS, card.ts)
    assert len(fake.calls_to("chat.postMessage")) == 2  # the thread's parent, the card once
