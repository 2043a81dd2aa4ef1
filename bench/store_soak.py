"""The store's disk use under a soak of short sessions: does it level off?

The real `aep-bridge run` process with the console channel and the web page on (as the soak
of issue 30 ran it), fed short demo-like sessions through `POST /events` at a steady 200
events a second for `DURATION` seconds: the demo session (`aep-bridge emit --demo`, 46
events from session.started to session.ended) with fresh ids and session names, eight
sessions at a time, interleaved, 20 events a POST. Every `SAMPLE` seconds `GET /status` is
read: the store's size on disk (state.db and its WAL) and the replay buffers' bytes.

Three runs, each on a fresh state directory. The baseline keeps every buffer (the byte
budget and the retention out of the way: `intake.max_replay_bytes` at 1 TB, the retention
at 30 years), which is what the bridge did before they existed: every event of every session
kept for replay, ended sessions included. "Retention" drops ended sessions' buffers
`RETENTION` seconds after their session.ended (the default is an hour: scaled down so that a
minute shows it); "budget" holds the buffers to `BUDGET` bytes (the default is 128 MB). The
rest of state.db grows on for a while with the other records of each event and session, each
bounded later than a minute shows: the dedupe window (200,000 event ids, as digests of some
36 bytes each with their order), the web page's sessions (500), the sessions' own records and
the channels' state about them (kept 30 days after they ended). The WAL beside it swings with
the writes between checkpoints; `bench/store_bounds.py` scales every bound down to show the
whole store level off.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests.bridge_process

import httpx
from tests.bridge_process import BridgeProcess, free_port

import results

HEADING = "## Store disk use (a soak of short sessions)"
DEMO = Path(__file__).resolve().parent.parent / "core" / "aep_bridge" / "demo" / "session.jsonl"
RATE = 200  # events a second
PER_POST = 20
CONCURRENT = 8  # sessions under way at once
DURATION = 40.0  # seconds a run
SAMPLE = 5.0  # seconds between samples
RETENTION = 10.0
BUDGET = 2 * 1024 * 1024
RUNS: dict[str, dict[str, object]] = {
    "baseline (everything kept)": {"max_replay_bytes": 1 << 40, "replay_retention": 1e9},
    f"retention {RETENTION:.0f} s": {"replay_retention": RETENTION},
    f"budget {BUDGET / 2**20:.0f} MB": {"max_replay_bytes": BUDGET},
}


def _sessions() -> Any:
    """Endless demo sessions, each its events' bytes with fresh ids and session name."""
    lines = DEMO.read_bytes().splitlines()
    for k in itertools.count():
        prefix = f"01K{k:08X}".encode()  # the demo's ids share an 11-character prefix
        name = f"s_{k:06d}".encode()
        yield [line.replace(b"01JDEMQ5D3M", prefix).replace(b"s_demo", name) for line in lines]


def _interleaved() -> Any:
    """Events of `CONCURRENT` sessions at a time, round robin; a session that ends is
    replaced by the next."""
    sessions = _sessions()
    running = [iter(next(sessions)) for _ in range(CONCURRENT)]
    for turn in itertools.count():
        slot = turn % CONCURRENT
        event = next(running[slot], None)
        if event is None:
            running[slot] = iter(next(sessions))
            event = next(running[slot])
        yield event


def _rows(folder: Path) -> dict[str, float]:
    """How many rows the store holds of what each event and session leaves, read beside the
    bridge (read-only: what it has committed)."""
    uri = f"file:{folder / 'state' / 'state.db'}?mode=ro"
    conn = sqlite3.connect(uri, uri=True, isolation_level=None)
    try:
        counts = {
            table: conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            for table in ("sessions", "requests", "seen")
        }
        counts["kv"] = conn.execute(
            "SELECT count(*) FROM kv WHERE namespace LIKE 'channel:%'"
        ).fetchone()[0]
        return {f"rows_{table}": float(count) for table, count in counts.items()}
    finally:
        conn.close()


async def _soak(
    folder: Path,
    intake: dict[str, object],
    store: dict[str, object] | None = None,
    duration: float = DURATION,
    every: float = SAMPLE,
) -> list[dict[str, float]]:
    """One run of `duration` seconds on a fresh state in `folder`, sampled every `every`."""
    port = free_port()
    config = folder / "bridge.json"
    config.write_text(
        json.dumps(
            {
                "state_dir": str(folder / "state"),
                "listen": {"host": "127.0.0.1", "port": port},
                "intake": intake,
                "store": store or {},
                "channels": {
                    "console": {"approvers": ["local"], "read_input": False},
                    "web": {"approvers": ["local"]},
                },
            }
        )
    )
    bridge = BridgeProcess(config, folder / "bridge.log")
    base = f"http://127.0.0.1:{port}"
    await bridge.start(base)
    samples: list[dict[str, float]] = []
    try:
        token = bridge.token()
        headers = {
            "Authorization": f"Bearer {token}",
            "AEP-Version": "0.1",
            "Content-Type": "application/x-ndjson",
        }
        events = _interleaved()
        sent = 0
        async with httpx.AsyncClient(timeout=60) as http:

            async def sample(at: float) -> None:
                reply = await http.get(f"{base}/status", headers=headers)
                status = reply.json()["store"]
                samples.append(
                    {
                        "t": at,
                        "events": sent,
                        "db": status["bytes"] - status["wal_bytes"],
                        "wal": status["wal_bytes"],
                        "replay": status["replay"]["bytes"],
                        "sessions": status["replay"]["sessions"],
                        **_rows(folder),
                    }
                )

            began = time.monotonic()
            next_sample = 0.0
            while (elapsed := time.monotonic() - began) < duration:
                if elapsed >= next_sample:
                    await sample(next_sample)
                    next_sample += every
                body = b"\n".join(next(events) for _ in range(PER_POST))
                posted = await http.post(f"{base}/events", content=body, headers=headers)
                assert posted.status_code == 202, posted.text
                sent += PER_POST
                due = began + sent / RATE
                await asyncio.sleep(max(0.0, due - time.monotonic()))
            await sample(duration)
    finally:
        await bridge.aclose()
    return samples


def main() -> dict[str, list[dict[str, float]]]:
    root = Path(tempfile.mkdtemp(prefix="aep-bench-soak-"))
    found: dict[str, list[dict[str, float]]] = {}
    try:
        for n, (name, intake) in enumerate(RUNS.items()):
            folder = root / str(n)
            folder.mkdir()
            found[name] = asyncio.run(_soak(folder, intake))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return found


def _mb(count: float) -> str:
    return f"{count / 2**20:.1f}"


def section(r: dict[str, list[dict[str, float]]]) -> list[str]:
    """The RESULTS.md section for these figures."""
    names = list(r)
    lines = [
        HEADING,
        "",
        " ".join(__doc__.strip().split("\n\n", 1)[1].split()) if __doc__ else "",
        "",
        "state.db on disk and, in brackets, the replay buffers' bytes, in MB (the WAL beside it "
        "is below):",
        "",
        "| s | events | " + " | ".join(names) + " |",
        "|---:|---:|" + "---:|" * len(names),
    ]
    rows = zip(*(r[name] for name in names), strict=False)
    for row in rows:
        cells = [f"{_mb(s['db'])} ({_mb(s['replay'])})" for s in row]
        lines.append(f"| {row[0]['t']:.0f} | {row[0]['events']:,} | " + " | ".join(cells) + " |")
    lines.append("")
    half = len(r[names[0]]) // 2
    for name in names:
        run = r[name]
        early = run[half]["db"] - run[0]["db"]
        late = run[-1]["db"] - run[half]["db"]
        lines.append(
            f"- {name}: state.db grew {_mb(early)} MB in the first half and {_mb(late)} MB in "
            f"the second; the replay buffers held {_mb(run[-1]['replay'])} MB in "
            f"{run[-1]['sessions']:.0f} session(s) at the end; the WAL was at most "
            f"{_mb(max(s['wal'] for s in run))} MB."
        )
    lines.append("")
    return lines


if __name__ == "__main__":
    results.run_alone(HEADING, main, section)
