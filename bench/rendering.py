"""Rendering: the reference session as the Telegram topic shows it, against issue 16's goals.

The demo stream (`aep-bridge emit --demo`: a Claude Code session with a prompt, 15 tool
calls, a failing then passing test, edits, a plan, a `git push` permission request, markdown
replies, usage and cost) is emitted to the real `aep-bridge run` process, its Telegram
channel at the default verbosity (`normal`) and pointed at the fake Bot API with Telegram's
limits, and read off the fake's record once the outbox is idle (the session's end shown,
then 5 s without a call). Bubbles: the bot's messages in the session's topic (an edit is not
a new one). Notifications: the bot's messages sent without `disable_notification`, anywhere
in the chat. Raw markers: the texts shown in the topic (each version of an edited message)
with `**`, a heading's `## `, `](http`, a table row (`| a | b`), `{"` or `[{`, `exit_code:`
or `structuredPatch`. The failing assertion: pytest's `FAILED ... - assert 10.0 == 10.01`
line. An edit's change is visible when every non-blank line of its new text is (each
MultiEdit change counts once, a Write's content as one). The events go as one burst, so the
`git push` question is answered in the agent's terminal before its card's turn comes: its
heads-up never rings and its card goes in the thread's order; at the recorded pace
(`aep-bridge preview --demo --channel telegram`) the heads-up rings too, 2 notifications.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))  # for tests.*

from tests.reference_session import (
    FAILING_ASSERTION,
    Seen,
    demo_edits,
    demo_tools,
    run_reference,
)

import results

HEADING = "## Rendering (the reference session in a Telegram topic)"
GOALS = {"bubbles": 8, "notifications": 2, "markers": 0}
QUIET = 5.0  # seconds without a call after the session's end: the outbox is idle
TIMEOUT = 300.0


def main() -> dict[str, Any]:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="aep-bench-rendering-") as tmp:
        seen, _ = asyncio.run(run_reference(Path(tmp), quiet=QUIET, timeout=TIMEOUT))
    return figures(seen, started)


def figures(seen: Seen, started: float) -> dict[str, Any]:
    """The issue's figures from what a channel showed of the reference session (shared by
    every channel's rendering benchmark)."""
    edits = demo_edits()
    found: dict[str, Any] = {
        "bubbles": len(seen.bubbles),
        "notifications": len(seen.notifications),
        "rang": seen.notifications,
        "markers": sum(seen.markers.values()),
        "by_marker": {name: n for name, n in seen.markers.items() if n},
        "texts": len(seen.texts),
        "failing": seen.shows(FAILING_ASSERTION),
        "edits": [(e, seen.shows_edit(e)) for e in edits],
        "first_lines": seen.first_lines(),
        "tools": len(demo_tools()),
        "wall": time.monotonic() - started,
    }
    print(f"rendering benchmark: {found['wall']:.0f} s", flush=True)
    return found


def _met(ok: bool) -> str:
    return "met" if ok else "NOT met"


def section(
    r: dict[str, Any], heading: str = HEADING, doc: str | None = __doc__, place: str = "topic"
) -> list[str]:
    """The RESULTS.md section for these figures (another channel's: its `heading`, the
    `doc` that says how it was measured, and what it calls a session's `place`)."""
    edits = r["edits"]
    shown = sum(1 for _, ok in edits if ok)
    markers = ", ".join(f"`{name}` in {n}" for name, n in r["by_marker"].items()) or "none"
    lines = [
        heading,
        "",
        " ".join(doc.strip().split("\n\n", 1)[1].split()) if doc else "",
        "",
        "| figure | measured | goal | |",
        "|---|---:|---|---|",
        f"| bubbles in the session's {place} | {r['bubbles']} | <= {GOALS['bubbles']} "
        f"| {_met(r['bubbles'] <= GOALS['bubbles'])} |",
        f"| notifications | {r['notifications']} | <= {GOALS['notifications']} "
        f"| {_met(r['notifications'] <= GOALS['notifications'])} |",
        f"| texts with raw markdown markers or JSON (of {r['texts']}) | {r['markers']} "
        f"| {GOALS['markers']} | {_met(r['markers'] <= GOALS['markers'])} |",
        f"| the failing assertion visible | {'yes' if r['failing'] else 'no'} | yes "
        f"| {_met(r['failing'])} |",
        f"| edits whose change is visible | {shown} of {len(edits)} | all "
        f"| {_met(shown == len(edits))} |",
        "",
        f"Markers found: {markers}. Edits: "
        + "; ".join(f"{e.tool} {e.path} {'shown' if ok else 'not shown'}" for e, ok in edits)
        + f". The session has {r['tools']} tool calls.",
        "",
        "Notifications, first lines: "
        + "; ".join(f"`{line[:80].replace('`', '')}`" for line in r["rang"])
        + ".",
        "",
        f"The {place}'s bubbles, first lines:",
        "",
        *(f"{i}. {line[:100]}" for i, line in enumerate(r["first_lines"], 1)),
        "",
        f"The rendering benchmark took {r['wall']:.0f} s.",
        "",
    ]
    return lines


if __name__ == "__main__":
    results.run_alone(HEADING, main, section)
