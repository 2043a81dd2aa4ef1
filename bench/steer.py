"""Steer from the chat (issue 33): the agent's stop to the card, the person's words to the answer.

The product runs as a user runs it: `aep-bridge run --config` as a child process (on the
core(s) this process does not use), its Slack channel (the real slack-bolt and slack-sdk,
Socket Mode) pointed at the fake Slack (tests/channels/slack/fake_slack.py, at Slack's real
limits), the session a thread in one channel, heads-ups in another, a fresh state directory;
the person, alice, is an approver. The agent's side is real too: a real
`aep-bridge agentd` (its own process, connected to the bridge's WebSocket with the bridge's
token), away mode switched on through the bridge's `/away` as `aep-bridge away on` does, and
for each sample a real Claude Code Stop hook invocation: `aep-bridge hook claude-code` as a
process, the documented Stop payload on stdin (tests/agents/payloads/claude_code/Stop.json,
its `last_assistant_message` made per sample, `stop_hook_active` true after the first), with
`CLAUDE_CODE_STOP_HOOK_BLOCK_CAP=1000` in its environment (`install` writes 100: these are
102 blocks in a row with no tool call between them). The daemon asks the bridge whether the
session is away, holds the hook and emits the held Stop's question ("claude-code finished:
what next?", one option, Done); the hook prints what the daemon answers.
All times are `time.monotonic` (CLOCK_MONOTONIC, one clock for the machine), read here.

(1) Stop -> card: from just before the hook process is spawned (Claude Code runs its Stop
hook) to the arrival, at the fake, of the card's accepted `chat.postMessage` (with its Done
button) in the session's thread: the hook's start-up, its socket to the daemon, the daemon's
away question, its event over the WebSocket, the core and Slack's post.
(2) Words -> answer: the card arrived, 0.5 s later alice writes her instruction in the
session's thread (`fake.say`: a `message` envelope queued for the bridge's Socket Mode
connection); from just before that to the hook process's exit with what it printed read:
Claude Code's `{"decision": "block", "reason": <the words>}`. The daemon acks and reports the
answer, and the bridge closes the card (an update) and its heads-up. Each sample waits until
its posts and updates fit Slack's limits as the channel counts them (1 post per 1.1 s a
channel, 50 updates per 61 s), read off the fake's record, so the pacing of the samples is
not in the figures. Two warm-up samples, then 100 counted; p99 is
the slowest of them (`_percentiles`: index int(0.99 n) of the sorted samples).

The fake's own round trip, in the same run, after each sample, against a second fake of the
same code: a card POSTed straight to it (until its answer is read), and a person's message
in a thread to its arrival at a Socket Mode connection of this process's own (the fake's
dispatch alone: the bridge's figure adds slack-bolt reading the envelope, the core deciding and
recording the answer, the command's way to the daemon over the WebSocket, and the daemon's
answer to the hook process and that process's exit).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))  # for tests.*

import httpx
from tests.agents.live import payload
from tests.agents.real import Daemon
from tests.channels.slack.fake_slack import ALICE, FakeSlack

import results
from aep_bridge.agents.paths import DIR_VARIABLE
from aep_bridge.testing.flood import other_cores as _cores
from aep_bridge.testing.flood import percentiles as _percentiles
from slack_channel import (
    CHANNEL,
    NOTIFY,
    POST,
    PRESS_DELAY,
    SAMPLE_EDITS,
    WAIT,
    WINDOW,
    Baseline,
    Running,
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
#: Claude Code's cap on Stop blocks in a row, as the benchmark's hooks see it: above its
#: samples, which are blocks in a row (`install` writes 100)
BLOCK_CAP = "1000"

QUESTION = "claude-code finished: what next?"


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


def _base(r: Running) -> str:
    """The bridge's HTTP address, beside its WebSocket."""
    return r.url.replace("ws://", "http://", 1).removesuffix("/socket")


async def _daemon(r: Running, root: Path) -> Daemon:
    """A real `aep-bridge agentd` in its own directory, connected to the bridge."""
    directory = root / "agent"
    directory.mkdir(mode=0o700)
    env = {
        **r.process.env(),
        DIR_VARIABLE: os.fspath(directory),
        "AEP_BRIDGE_URL": _base(r),
        "AEP_BRIDGE_TOKEN": r.token,
        "CLAUDE_CODE_STOP_HOOK_BLOCK_CAP": BLOCK_CAP,
    }
    daemon = Daemon(directory, env, root / "agentd.err")
    await daemon.start()
    return daemon


async def _hook(daemon: Daemon, body: dict[str, Any]) -> str:
    """`aep-bridge hook claude-code` as Claude Code runs it: what it printed (it exits 0)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "aep_bridge",
        "hook",
        "claude-code",
        env=daemon.env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    out, _ = await process.communicate(json.dumps(body).encode())
    if process.returncode != 0:
        raise RuntimeError(f"the hook exited {process.returncode}: {out!r}")
    return out.decode()


async def _away_on(r: Running) -> None:
    """`aep-bridge away on`, as the CLI asks the running bridge (its `/away`)."""
    async with httpx.AsyncClient(timeout=WAIT) as client:
        reply = await client.post(
            f"{_base(r)}/away",
            json={"on": True, "session": None},
            headers={"Authorization": f"Bearer {r.token}"},
        )
    if reply.status_code != 200:
        raise RuntimeError(f"away on: {reply.status_code} {reply.text}")


def _parent(r: Running) -> Any:
    """The session's parent message in the sessions channel (the only session)."""
    return next((c for c in _posts(r.fake, CHANNEL) if not c.args.get("thread_ts")), None)


async def _steer(root: Path) -> dict[str, Any]:
    async with (
        FakeSlack() as fake,
        FakeSlack() as other,  # the fake's own round trips, on a fake of their own
        # a shared channel takes instructions only where its config says so (issue 33)
        running(fake, root / "steer", allow_instructions=True) as r,
        Baseline(other) as baseline,
    ):
        trip = MessageTrip(baseline)
        daemon = await _daemon(r, root)
        try:
            await _away_on(r)
            for name in ("SessionStart", "UserPromptSubmit"):
                if (await _hook(daemon, payload("claude-code", name))).strip():
                    raise RuntimeError(f"{name} printed something")
            parent = await r.until("the session's parent message", lambda: _parent(r))
            thread = parent.result["ts"]
            figures = await _samples(r, daemon, thread, baseline, trip)
        finally:
            await daemon.stop()
        posts = [c for c in fake.calls if c.method == POST and c.ok]
        return {
            **figures,
            "post round trip": _percentiles(baseline.send),
            "message round trip": _percentiles(trip.times),
            "posts": len(posts),
            "refused": len([c for c in fake.calls if c.status == 429]),
            "violations": [str(v) for v in fake.violations],
        }


async def _samples(
    r: Running, daemon: Daemon, thread: str, baseline: Baseline, trip: MessageTrip
) -> dict[str, Any]:
    fake = r.fake
    card_in: list[float] = []
    first_in: list[float] = []
    card_first = 0  # samples whose thread's first post after the stop was the card itself
    answer_in: list[float] = []
    starts: list[float] = []
    wrong: list[str] = []
    for i in range(WARMUP + SAMPLES):
        due = _budget_at(fake, (CHANNEL, NOTIFY), SAMPLE_EDITS)
        await asyncio.sleep(max(0.0, due - time.monotonic()))
        said_last = f"Turn {i}: the invoice totals round half-even now and the tests pass."
        body = payload(
            "claude-code", "Stop", last_assistant_message=said_last, stop_hook_active=i > 0
        )
        seen = len(fake.calls)
        sent = time.monotonic()
        starts.append(sent)
        held = asyncio.create_task(_hook(daemon, body))

        def card(seen: int = seen, held: asyncio.Task[str] = held, i: int = i) -> Any:
            if held.done():  # let go without a question: the error says why
                raise RuntimeError(f"sample {i}: the Stop was not held: {held.result()!r}")
            return _card_post(fake, seen, thread, QUESTION, buttons=True)

        shown = await r.until(f"card {i}", card)
        # the thread's first post since the stop: the card itself, since the daemon holds the
        # turn's end ("Finished") until the agent does stop (before, it took the free slot)
        first = next(c for c in _posts(fake, CHANNEL, sent) if c.args.get("thread_ts") == thread)
        await asyncio.sleep(max(0.0, shown.time + PRESS_DELAY - time.monotonic()))
        words = f"step {i}: run the tests again, then open a PR"
        said = time.monotonic()
        await fake.say(ALICE, CHANNEL, words, thread_ts=thread, wait=False)
        printed = await asyncio.wait_for(held, WAIT)
        answered = time.monotonic()
        if json.loads(printed or "null") != {"decision": "block", "reason": words}:
            wrong.append(f"sample {i}: {printed!r}")

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
            first_in.append(first.time - sent)
            card_first += first.result["ts"] == shown.result["ts"]
            answer_in.append(answered - said)
            await baseline.send_once()
            await trip.sample(i)
    return {
        "stop -> card": _percentiles(card_in),
        "stop -> first post": _percentiles(first_in),
        "card first": card_first,
        "words -> answer": _percentiles(answer_in),
        "span": starts[-1] - starts[0] if starts else 0.0,
        "wrong": wrong,
    }


def main() -> dict[str, Any]:
    started = time.monotonic()
    mine, theirs = _cores()
    with tempfile.TemporaryDirectory(prefix="aep-bench-steer-") as tmp:
        figures = asyncio.run(_steer(Path(tmp)))
    figures["cores"] = (sorted(mine), sorted(theirs))
    figures["wall"] = time.monotonic() - started
    names = ("stop -> card", "stop -> first post", "post round trip", "words -> answer")
    for name in (*names, "message round trip"):
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
        f"The bridge ran on core(s) {theirs}, the fakes, the daemon and the hooks on {mine}.",
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
        f"The thread's first post after the stop was the card itself in {r['card first']} of "
        f'{r["stop -> card"]["n"]} samples: the daemon holds the turn\'s end ("Finished") '
        f"until the agent does stop, so the card takes the thread's free slot (before, the "
        f"turn's end took it and the card waited Slack's pace of one post per 1.1 s a "
        f"channel). Stop -> card is the hook's start-up, its socket to the daemon, the "
        f"daemon's away question, the WebSocket, the core and one post; the words -> answer "
        f"leg has no post at all.",
        "",
        f"Every hook printed Claude Code's block with the words as written: "
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
