"""Benchmark inputs shared by the benchmarks: the official golden stream, repeated."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests.shared_data

from tests.shared_data import AEP_FIXTURES


def golden_repeated(n: int, tag: str = "", *, commands: bool = True) -> list[bytes]:
    """The golden stream repeated to `n` events, each repetition with fresh ids, causes and
    session names (`tag` tells runs apart), as compact JSON lines.

    Without `commands`, the golden commands (control.cancel, control.attention.respond) are
    left out: over a WebSocket they would be routed to a claimant (or refused), not ingested.
    """
    golden = [json.loads(line) for line in (AEP_FIXTURES / "golden" / "golden.jsonl").open()]
    if not commands:
        golden = [e for e in golden if not e["type"].startswith(("control.cancel", "control.att"))]
    out: list[bytes] = []
    rep = 0
    while len(out) < n:
        for event in golden:
            event = dict(event)
            event["id"] = f"{event['id']}-{tag}{rep}"
            for key in ("cause", "subject"):
                if key in event and event[key].endswith("GOLD"):
                    event[key] = f"{event[key]}-{tag}{rep}"
            if "session" in event:
                event["session"] = f"{event['session']}-{tag}{rep}"
            out.append(json.dumps(event, separators=(",", ":")).encode())
            if len(out) == n:
                break
        rep += 1
    return out
