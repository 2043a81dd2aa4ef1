"""Steer from the chat (issue 33): the agent's stop to the card, the person's words to the answer.

The product runs as a user runs it: `aep-bridge run --config` as a child process (on the
core(s) this process does not use), its Slack channel (the real slack-bolt and slack-sdk,
Socket Mode) pointed at the fake Slack (tests/channels/slack/fake_slack.py, at Slack's real
limits), the session a thread in one channel, heads-ups in another, a fresh state directory;
the person, alice, is an approver. The agent is a `TinyAgent` on the bridge's WebSocket, in
this process, standing in for the agent daemon (the held Stop's question of issue 33's
interface 3, built here as the daemon builds it at the default attention ceiling,
`redacted`: `kind: "input"`, what Codex said last (its Stop payload's
`last_assistant_message`, through the redaction pipeline) above "codex finished: what
next?", one option, Done, over `control`, the envelope marked `aepbridgesteer: "stop"`), and
turns the answer into the hook's output with `aep_bridge.agents.codex.stop_output`
(`{"decision": "block", "reason": <the words>}`). Written against that interface: the
daemon's held Stop was being built on another branch. The daemon's own legs (the hook
process, its socket, the daemon's ack) are not in these figures: they are measured in "Agent
hooks" (the held loop's added latency).
All times are `time.monotonic` (CLOCK_MONOTONIC, one clock for the machine), read here.

(1) Stop -> card: from just before `agent.emit` of the question to the arrival, at the fake,
of the card's accepted `chat.postMessage` (with its Done button) in the session's thread.
(2) Words -> answer: the card arrived, 0.5 s later alice writes her instruction in the
session's thread (`fake.say`: a `message` envelope queued for the bridge's Socket Mode
connection); from just before that to the moment the agent holds the hook's answer: the
`control.attention.respond` read off its WebSocket, its `answer.text` the words as written,
and `stop_output` of it Codex's block with those words. The agent then acks, reports
`attention.answered` and `attention.resolved`, and the bridge closes the card (an update)
and its heads-up. Each sample waits until its posts and updates fit Slack's limits as the
channel counts them (1 post per 1.1 s a channel, 50 updates per 61 s), read off the fake's
record, so the pacing is not in the figures. Two warm-up samples, then 100 counted; p99 is
the slowest of them (`_percentiles`: index int(0.99 n) of the sorted samples).

The fake's own round trip, in the same run, after each sample, against a second fake of the
same code: a card POSTed straight to it (until its answer is read), and a person's message
in a thread to its arrival at a Socket Mode connection of this process's own (the fake's
dispatch alone: the bridge's figure adds slack-bolt reading the envelope, the core deciding and
recording the answer, and the command's way to the agent over the WebSocket, as a press does).
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))  # for tests.*

from tests.channels.slack.fake_slack import ALICE, FakeSlack

import results
from aep_bridge.agents.codex import AGENT, stop_output
from aep_bridge.agents.mapping import DEFAULT_CEILING, Verdict, gated
from discord_channel import _cores, _percentiles
from slack_channel import (
    CHANNEL,
    NOTIFY,
    POST,
    PRESS_DELAY,
    SAMPLE_EDITS,
    WAIT,
    WINDOW,
    Baseline,
    _budget_at,
    _card_post,
    _has_buttons_now,
    _posts,
    _text_of,
    running,
)

HEADING = "## Steer from the chat (the held Stop's question through the real bridge, Slack)"

SAMPLES = 100
WARMUP = 2
#: the held loop's goal, as for a press (Slack's and the agent hooks' attention latency)
GOALS = {"p99_ms": 50.0}
#: each figure and the fake's own round trip for the same hop, held side by side
AGAINST = {"stop -> card": "post round trip", "words -> answer": "message round trip"}


QUESTION = f"{AGENT} finished: what next?"


def _question(i: int) -> tuple[dict[str, Any], str]:
    """The held Stop's question for Codex's turn `i`, at the default ceiling, and its capture
    (what Codex said last is the prompt's first part at `redacted`, as the daemon does)."""
    said = f"Turn {i}: the invoice totals round half-even now and the tests pass. Anything else?"
    data = {
        "kind": "input",
        "prompt": f"{said}\n\n{QUESTION}",
        "options": [{"id": "done", "label": "Done"}],
        "respond_via": ["control"],
    }
    return gated("attention.requested", data, DEFAULT_CEILING)


class MessageTrip:
    """A person's message in a thread of the second fake, to its arrival at `baseline`'s
    Socket Mode connection (which acks it at once, as bolt does)."""

    def __init__(self, baseline: Baseline) -> None:
        self.baseline = baseline
        self.times: list[float] = []

    async def sample(self, i: int) -> None:
        fake = self.baseline.fake
        await asyncio.sleep(max(0.0, _budget_at(fake, (CHANNEL,), 0) - time.monotonic()))
        parent = await fake.say(ALICE, CHANNEL, f"thread {i}", wait=False)
        said = time.monotonic()
        envelope = await fake.say(
            ALICE, CHANNEL, f"step {i}: run the tests again", thread_ts=parent.ts, wait=False
        )
        while True:
            arrived, payload = await asyncio.wait_for(self.baseline.envelopes.get(), WAIT)
            if payload["envelope_id"] == envelope.envelope_id:
                break
        self.times.append(arrived - said)


async def _steer(root: Path) -> dict[str, Any]:
    async with (
        FakeSlack() as fake,
        FakeSlack() as other,  # the fake's own round trips, on a fake of their own
        # a shared channel takes instructions only where its config says so (issue 33)
        running(fake, root / "steer", allow_instructions=True) as r,
        r.agent("steer") as agent,
        Baseline(other) as baseline,
    ):
        trip = MessageTrip(baseline)
        await agent.emit(
            "session.started", {"label": "steer", "cwd": "/work/app"}, capture="redacted"
        )
        parent = await r.until("the session's parent message", lambda: r.parent("steer"))
        thread = parent.result["ts"]
        card_in: list[float] = []
        answer_in: list[float] = []
        starts: list[float] = []
        wrong: list[str] = []
        for i in range(WARMUP + SAMPLES):
            due = _budget_at(fake, (CHANNEL, NOTIFY), SAMPLE_EDITS)
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            data, capture = _question(i)
            agent.run = f"turn-{i}"
            seen = len(fake.calls)
            sent = time.monotonic()
            starts.append(sent)
            request = await agent.emit(
                "attention.requested",
                data,
                capture=capture,
                severity="notice",
                extensions={"aepbridgesteer": "stop"},
            )

            def card(seen: int = seen) -> Any:
                return _card_post(fake, seen, thread, QUESTION, buttons=True)

            shown = await r.until(f"card {i}", card)
            await asyncio.sleep(max(0.0, shown.time + PRESS_DELAY - time.monotonic()))
            words = f"step {i}: run the tests again, then open a PR"
            said = time.monotonic()
            await fake.say(ALICE, CHANNEL, words, thread_ts=thread, wait=False)
            command = await asyncio.wait_for(agent.next_command(), WAIT)
            answer = (command.data or {}).get("answer") or {}
            printed = stop_output(Verdict(option=answer.get("option"), text=answer.get("text")))
            held = time.monotonic()
            if command.type != "control.attention.respond" or command.subject != request.id:
                raise RuntimeError(f"sample {i}: unexpected command {command.type}")
            if printed != {"decision": "block", "reason": words}:
                wrong.append(f"sample {i}: {answer!r} -> {printed!r}")
            await agent.report_answer(command)

            def closed(ts: str = shown.result["ts"]) -> bool:
                return not _has_buttons_now(fake.message(CHANNEL, ts))

            await r.until("the card to close", closed, WAIT + WINDOW)
            link = "p" + shown.result["ts"].replace(".", "")  # the heads-up links to its card
            notes = [c for c in _posts(fake, NOTIFY, shown.time - 5.0) if link in _text_of(c)]
            if notes:

                def edited(ts: str = notes[0].result["ts"]) -> Any:
                    return fake.message(NOTIFY, ts).edits

                await r.until("the heads-up's update", edited, WAIT + WINDOW)
            if i >= WARMUP:
                card_in.append(shown.time - sent)
                answer_in.append(held - said)
                await baseline.send_once()
                await trip.sample(i)
        posts = [c for c in fake.calls if c.method == POST and c.ok]
        return {
            "stop -> card": _percentiles(card_in),
            "words -> answer": _percentiles(answer_in),
            "post round trip": _percentiles(baseline.send),
            "message round trip": _percentiles(trip.times),
            "span": starts[-1] - starts[0] if starts else 0.0,
            "posts": len(posts),
            "refused": len([c for c in fake.calls if c.status == 429]),
            "violations": [str(v) for v in fake.violations],
            "wrong": wrong,
        }


def main() -> dict[str, Any]:
    started = time.monotonic()
    mine, theirs = _cores()
    with tempfile.TemporaryDirectory(prefix="aep-bench-steer-") as tmp:
        figures = asyncio.run(_steer(Path(tmp)))
    figures["cores"] = (sorted(mine), sorted(theirs))
    figures["wall"] = time.monotonic() - started
    for name in ("stop -> card", "post round trip", "words -> answer", "message round trip"):
        p = figures[name]
        print(
            f"steer {name:<20} n={p['n']}  p50 {p['p50']:.1f} ms  p99 {p['p99']:.1f} ms  "
            f"max {p['max']:.1f} ms",
            flush=True,
        )
    print(
        f"steer: {figures['refused']} 429s, {len(figures['violations'])} violations, "
        f"{len(figures['wrong'])} wrong answers, {figures['wall']:.0f} s",
        flush=True,
    )
    return figures


def _meets(r: dict[str, Any], name: str) -> bool:
    return bool(r[name]["p99"] <= GOALS["p99_ms"])


def section(r: dict[str, Any]) -> list[str]:
    """The RESULTS.md section for these figures."""
    mine, theirs = r["cores"]
    lines = [
        HEADING,
        "",
        " ".join(__doc__.strip().split("\n\n", 1)[1].split()) if __doc__ else "",
        "",
        f"The bridge ran on core(s) {theirs}, the fakes and the agent on {mine}.",
        "",
        f"| {r['stop -> card']['n']} samples | p50 ms | p99 ms | max ms | the fake's round trip "
        f"p50 / p99 ms | p50 / p99 vs the fake's | goal p99 <= {GOALS['p99_ms']:g} ms |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for name, against in AGAINST.items():
        p, b = r[name], r[against]
        lines.append(
            f"| {name} | {p['p50']:.1f} | {p['p99']:.1f} | {p['max']:.1f} | "
            f"{b['p50']:.1f} / {b['p99']:.1f} ({against}) | {p['p50'] / b['p50']:.1f}x / "
            f"{p['p99'] / b['p99']:.1f}x | "
            f"{'PASS' if _meets(r, name) else 'FAIL'} |"
        )
    lines += [
        "",
        f"Every answer the agent held was Codex's block with the words as written: "
        f"{'yes' if not r['wrong'] else 'no, ' + '; '.join(r['wrong'][:5])}. Slack refused "
        f"{r['refused']} calls (429) and recorded {len(r['violations'])} violations; "
        f"{r['posts']} posts in {r['span']:.0f} s of samples.",
        "",
        f"The steer benchmark took {r['wall']:.0f} s.",
        "",
    ]
    return lines


if __name__ == "__main__":
    if "--quick" in sys.argv[1:]:  # a few samples, printed, not recorded (to try it out)
        SAMPLES = 5
        if hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
        print("\n".join(section(main())))
        sys.exit(0)
    results.run_alone(HEADING, main, section)
