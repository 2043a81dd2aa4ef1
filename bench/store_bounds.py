"""The whole store under a long soak with every bound on: does state.db with its WAL level off?

`store_soak.py`'s soak (the real `aep-bridge run` with the console channel and the web page,
fed the demo session with fresh ids, eight at a time, at a steady 200 events a second; each
session asks one question, which the demo answers), run longer and with every bound of the
store scaled down so that minutes show what days do at the defaults: the dedupe window
(`store.dedupe_window`, at its least, 1,000 ids: five seconds of events), the records of
ended sessions, the channels' state about them included (`store.session_retention_days`,
20 s), the replay buffers (`intake.max_replay_bytes`, 1 MB, and
`intake.replay_retention`, 10 s). Beside it, the same soak with the defaults, which no
bound reaches in a few minutes: what the store did before the bounds, for the ratio. Four
minutes a run; every 20 s: state.db and its WAL on disk (`GET /status`), and the rows the store
holds (read beside it).
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path

import results
import store_soak

HEADING = "## Store disk use with every bound on (a long soak)"
DURATION = 240.0  # seconds a run
SAMPLE = 20.0  # seconds between samples
RETENTION = 20.0  # seconds an ended session's records are kept
RUNS: dict[str, tuple[dict[str, object], dict[str, object]]] = {  # (intake, store)
    "defaults": ({}, {}),
    "scaled-down bounds": (
        {"max_replay_bytes": 1024 * 1024, "replay_retention": 10.0},
        {"dedupe_window": 1000, "session_retention_days": RETENTION / 86_400},
    ),
}


def main() -> dict[str, list[dict[str, float]]]:
    root = Path(tempfile.mkdtemp(prefix="aep-bench-bounds-"))
    found: dict[str, list[dict[str, float]]] = {}
    try:
        for n, (name, (intake, store)) in enumerate(RUNS.items()):
            folder = root / str(n)
            folder.mkdir()
            found[name] = asyncio.run(store_soak._soak(folder, intake, store, DURATION, SAMPLE))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return found


def _mb(count: float) -> str:
    return f"{count / 2**20:.1f}"


def _total(sample: dict[str, float]) -> float:
    return sample["db"] + sample["wal"]


def section(r: dict[str, list[dict[str, float]]]) -> list[str]:
    """The RESULTS.md section for these figures."""
    names = list(r)
    bounded = r[names[-1]]
    lines = [
        HEADING,
        "",
        " ".join(__doc__.strip().split("\n\n", 1)[1].split()) if __doc__ else "",
        "",
        "state.db with its WAL on disk, in MB (the WAL's part in brackets), and the rows the "
        "bounded run's store held: sessions (with their threads, requests and cards), "
        "dedupe window ids, the channels' keys:",
        "",
        "| s | events | "
        + " | ".join(names)
        + " | sessions | requests | dedupe ids | channel keys |",
        "|---:|---:|" + "---:|" * (len(names) + 4),
    ]
    for row in zip(*(r[name] for name in names), strict=False):
        cells = [f"{_mb(_total(s))} ({_mb(s['wal'])})" for s in row]
        last = row[-1]
        counts = [
            f"{last[key]:,.0f}"
            for key in ("rows_sessions", "rows_requests", "rows_seen", "rows_kv")
        ]
        lines.append(
            f"| {row[0]['t']:.0f} | {row[0]['events']:,} | " + " | ".join(cells + counts) + " |"
        )
    lines.append("")
    half = len(bounded) // 2
    for name in names:
        run = r[name]
        early = run[half]["db"] - run[0]["db"]
        late = run[-1]["db"] - run[half]["db"]
        lines.append(
            f"- {name}: state.db itself grew {_mb(early)} MB in the first half and "
            f"{_mb(late)} MB in the second, to {_mb(run[-1]['db'])} MB; with its WAL at most "
            f"{_mb(max(_total(s) for s in run))} MB; the store held "
            f"{run[-1]['rows_sessions']:,.0f} sessions and {run[-1]['rows_kv']:,.0f} channel "
            "keys at the end."
        )
    steady = bounded[half:]
    kept = sum(s["rows_sessions"] for s in steady) / len(steady)
    records = sum(s["db"] - s["replay"] for s in steady) / len(steady)
    everything = r[names[0]][-1]["db"]
    lines += [
        f"- steady state of the bounded run (its second half): state.db itself between "
        f"{_mb(min(s['db'] for s in steady))} and {_mb(max(s['db'] for s in steady))} MB, "
        f"its WAL between {_mb(min(s['wal'] for s in steady))} and "
        f"{_mb(max(s['wal'] for s in steady))} MB (cut back to 4 MB after a burst), the two "
        f"between {_mb(min(_total(s) for s in steady))} and "
        f"{_mb(max(_total(s) for s in steady))} MB. With the defaults state.db was "
        f"{_mb(everything)} MB at the end and growing, {everything / bounded[-1]['db']:.1f}x "
        f"the bounded run's. Some {kept:,.0f} sessions kept; state.db less the replay buffers "
        f"is {records / max(kept, 1) / 1024:.0f} kB a session kept (the dedupe window, free "
        "pages and the web page's copy of each session included).",
        "",
    ]
    return lines


if __name__ == "__main__":
    results.run_alone(HEADING, main, section)
