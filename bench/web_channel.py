"""The web channel, end to end, in a real browser, against the same requests without it.

The product runs as a user runs it: `aep-bridge run --config` as a child process with the web
channel and a fresh state directory, on the core(s) this process does not use; the page is
open in Debian's chromium (headless, driven by Playwright; the browser on the bridge's core(s),
as a user's browser shares the machine with the bridge) after signing in through the URL the
bridge logs. The agent is a `TinyAgent` on the bridge's WebSocket, in this process, and so is
the baseline: an HTTP client (httpx) signed in with the bridge's token (the sign-in form's
POST) that reads `/channels/web/api/stream` as the page does and POSTs `/api/answer` as the
page does (the cookie and the page key, JSON). Times are `time.monotonic` (CLOCK_MONOTONIC,
one clock for the machine), read in this process, except where the page's clock is said.

One session, one request at a time. (1) From just before `agent.emit` of an
`attention.requested` to the card rendered in the page's queue: a MutationObserver in the page
stamps the card's arrival in the DOM, and a task queued from the next animation frame stamps
the end of the frame that shows it (the figure). Both stamps are the page's own clock
(`performance.timeOrigin + performance.now()`), mapped onto ours by the quickest of 20
`page.evaluate` round trips: the offset is known within half that trip, and is measured again
after the run for drift. The page then reports the card to this process through a function
Playwright exposes; that report's trip back (the DevTools protocol, Playwright's driver) is
shown apart, not counted. The same request's `card` event read off the stream by the HTTP
client is the baseline (the endpoint, the core, the channel and the SSE wire, without a
browser): every request gives both, and their difference, sample by sample, is what the browser
adds (its own copy of the stream, the page's script, the DOM, the wait for a frame and its
paint). (2) Requests alternate between two ways of answering: from the page's click on the
card's Allow button (`button.click()` run in the page through the DevTools protocol, no
pointer-movement waits; the click stamped with the page's clock just before it, the protocol's
trip there shown apart, not counted) to the agent being handed the `control.attention.respond`;
and, the baseline, from just before the HTTP client's `POST /api/answer` (the same body the
button sends) to the same. The agent then acks and reports `attention.answered` and
`attention.resolved`, and the next request follows once the card has left the page's queue.
Warm-up requests are not counted.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))  # for tests.*

import httpx
from playwright.async_api import Page, async_playwright
from tests.bridge_process import BridgeProcess, free_port, write_config
from tests.channels.web.test_browser import CHROMIUM, FLAGS

import results
from aep_bridge.commands.tinyagent import TinyAgent

HEADING = "## The web channel (a real browser)"
#: requests not counted, then requests counted: each gives a (1) sample and its baseline; they
#: alternate between the browser's click and the HTTP client's POST for (2)
WARMUP = 4
SAMPLES = 60
WAIT = 30.0
GOALS = {"request -> card": 100.0, "click -> command": 50.0}
BASELINES = {
    "request -> card": "request -> `card` event on the stream (httpx)",
    "click -> command": "`POST /api/answer` (httpx) -> command",
}
#: the rows between each figure and its baseline: a part of the figure
PARTS = {
    "request -> card": [("in the DOM", "of which: request -> card in the page's DOM")],
    "click -> command": [],
}
#: the rows under each figure: where its time goes, and the protocol trips left out of it
EXTRA = {
    "request -> card": [
        ("browser adds", "what the browser adds (card painted - `card` event read)"),
        ("report back", "not counted: the page's report of it, back to this process"),
    ],
    "click -> command": [
        ("click trip", "not counted: the DevTools trip that makes the page click"),
    ],
}
#: reports each card that enters the queue, once, by its id: when it was in the DOM, and when
#: the frame that shows it was painted (a task queued from the next animation frame runs once
#: that frame is done), both on the page's clock
WATCH = """() => {
  const seen = new Set();
  const clock = () => performance.timeOrigin + performance.now();
  const report = () => {
    for (const card of document.querySelectorAll('#queue article.card[data-card-id]')) {
      const id = card.dataset.cardId;
      if (!seen.has(id)) {
        seen.add(id);
        const inDom = clock();
        requestAnimationFrame(() => {
          const after = new MessageChannel();
          after.port1.onmessage = () => window.cardSeen(id, inDom, clock());
          after.port2.postMessage(null);
        });
      }
    }
  };
  new MutationObserver(report).observe(document.body, {childList: true, subtree: true});
  report();
}"""


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _summary(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "p50": statistics.median(values),
        "p99": _percentile(values, 0.99),
        "max": max(values),
    }


def _cores() -> tuple[set[int], set[int]]:
    """(this process's cores, the bridge's and the browser's): every core but ours."""
    if not hasattr(os, "sched_getaffinity"):
        return set(), set()
    mine = os.sched_getaffinity(0)
    others = set(range(os.cpu_count() or 1)) - mine
    return mine, others or mine


@contextmanager
def _on_their_cores() -> Iterator[None]:
    """Processes started inside run on the other core(s): a child inherits them at fork."""
    mine, theirs = _cores()
    if theirs != mine:
        os.sched_setaffinity(0, theirs)
    try:
        yield
    finally:
        if theirs != mine:
            os.sched_setaffinity(0, mine)


class Wire:
    """The HTTP client: signed in with the bridge's token, reading the page's stream."""

    def __init__(self, base: str, token: str) -> None:
        self.base = f"{base}/channels/web"
        self.token = token
        self.client = httpx.AsyncClient(timeout=WAIT)
        self.key = ""
        #: card id -> (when its first `card` event was read, the card)
        self.cards: dict[str, tuple[float, dict[str, Any]]] = {}
        self.arrived = asyncio.Event()
        self._reader: asyncio.Task[None] | None = None

    async def start(self) -> None:
        signin = await self.client.post(f"{self.base}/signin", data={"token": self.token})
        assert signin.status_code == 303, signin.text
        self.key = signin.headers["location"].partition("#key=")[2]
        assert self.key, "the sign-in gave no page key"
        self.client.headers["X-Page-Key"] = self.key  # every API request carries it
        opened = asyncio.Event()
        self._reader = asyncio.create_task(self._read(opened))
        await asyncio.wait_for(opened.wait(), WAIT)

    async def _read(self, opened: asyncio.Event) -> None:
        async with self.client.stream("GET", f"{self.base}/api/stream") as stream:
            assert stream.status_code == 200
            opened.set()
            event = ""
            async for line in stream.aiter_lines():
                if line.startswith("event: "):
                    event = line[7:]
                elif line.startswith("data: ") and event == "card":
                    at = time.monotonic()
                    card = json.loads(line[6:])
                    if card["outcome"] is None and card["id"] not in self.cards:
                        self.cards[card["id"]] = (at, card)
                        self.arrived.set()
                elif not line:
                    event = ""

    async def card(self, known: set[str]) -> tuple[float, dict[str, Any]]:
        """The first open card read that is not in `known`."""
        while True:
            new = [v for k, v in self.cards.items() if k not in known]
            if new:
                return new[0]
            self.arrived.clear()
            await asyncio.wait_for(self.arrived.wait(), WAIT)

    async def answer(self, card: dict[str, Any], option: int) -> dict[str, Any]:
        body = {"card_id": card["id"], "option": option, "token": card["options"][option]["token"]}
        reply = await self.client.post(f"{self.base}/api/answer", json=body)
        assert reply.status_code == 200, reply.text
        return dict(reply.json())

    async def aclose(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
        await self.client.aclose()


async def _clock(page: Page) -> tuple[float, float]:
    """The page's clock (ms since the epoch) minus ours (`time.monotonic`, in ms), from the
    quickest of 20 round trips, and that trip's half: the offset's uncertainty."""
    best = (0.0, float("inf"))
    for _ in range(20):
        before = time.monotonic() * 1000
        theirs = await page.evaluate("() => performance.timeOrigin + performance.now()")
        after = time.monotonic() * 1000
        half = (after - before) / 2
        if half < best[1]:
            best = (theirs - (before + half), half)
    return best


async def _press(page: Page, card_id: str) -> tuple[float, float]:
    """Click the card's first option (Allow) in the page: when it was told to (our clock),
    and when it clicked (the page's clock)."""
    button = page.locator(f'#queue article.card[data-card-id="{card_id}"] button.option').first
    handle = await button.element_handle()
    assert handle is not None
    told = time.monotonic()
    clicked = await handle.evaluate(
        "b => { const at = performance.timeOrigin + performance.now(); b.click(); return at; }"
    )
    return told, float(clicked)


async def _measure() -> dict[str, Any]:
    samples: dict[str, list[float]] = {
        "request -> card": [],
        "wire request -> card": [],
        "in the DOM": [],
        "browser adds": [],
        "report back": [],
        "click trip": [],
        "click -> command": [],
        "wire click -> command": [],
    }
    with tempfile.TemporaryDirectory() as folder:
        port = free_port()
        channels = {"web": {"approvers": ["local"], "capture": "redacted"}}
        bridge = BridgeProcess(write_config(Path(folder), port, channels), Path(folder) / "log")
        base = f"http://127.0.0.1:{port}"
        with _on_their_cores():
            await bridge.start(base)
        try:
            sign_in = await bridge.sign_in_url()
            token = await asyncio.to_thread(bridge.token)
            with _on_their_cores():  # Playwright's driver, and the browser it starts
                playwright = await async_playwright().start()
            try:
                browser = await playwright.chromium.launch(
                    executable_path=str(CHROMIUM), headless=True, args=FLAGS
                )
                page = await browser.new_page()
                seen: asyncio.Queue[tuple[float, str, float, float]] = asyncio.Queue()
                await page.expose_function(
                    "cardSeen",
                    lambda card_id, in_dom, painted: seen.put_nowait(
                        (time.monotonic(), card_id, in_dom, painted)
                    ),
                )
                await page.goto(sign_in)
                await page.wait_for_selector("#queue", state="attached")
                await page.evaluate(WATCH)
                offset, spread = await _clock(page)
                wire = Wire(base, token)
                await wire.start()
                socket = base.replace("http://", "ws://", 1) + "/socket"
                async with TinyAgent(socket, token, agent="bench-agent") as agent:
                    await agent.emit("session.started", {"label": "bench"}, capture="redacted")
                    agent.run = "r1"
                    await agent.emit("run.started", {"trigger": "user"})
                    for index in range(WARMUP + SAMPLES):
                        data = {
                            "kind": "permission",
                            "prompt": f"git push origin fix/{index}",
                            "options": [
                                {"id": "allow", "label": "Allow"},
                                {"id": "deny", "label": "Deny"},
                            ],
                            "respond_via": ["control"],
                        }
                        known = set(wire.cards)
                        start = time.monotonic()
                        await agent.emit(
                            "attention.requested", data, severity="notice", capture="redacted"
                        )
                        seen_at = await asyncio.wait_for(seen.get(), WAIT)
                        reported, card_id = seen_at[0], seen_at[1]
                        in_dom, at = ((stamp - offset) / 1000 for stamp in seen_at[2:])
                        on_wire, card = await wire.card(known)
                        assert card["id"] == card_id, (card["id"], card_id)
                        by_browser = index % 2 == 0
                        if by_browser:
                            told, clicked = await _press(page, card_id)
                            click = (clicked - offset) / 1000
                            command = await asyncio.wait_for(agent.next_command(), WAIT)
                            got = time.monotonic()
                        else:
                            click = time.monotonic()
                            post = asyncio.create_task(wire.answer(card, 0))
                            command = await asyncio.wait_for(agent.next_command(), WAIT)
                            got = time.monotonic()
                        await agent.report_answer(command)
                        if not by_browser:
                            reply = await post
                            assert reply["status"] == "accepted", reply
                        await page.wait_for_selector(
                            f'#queue article.card[data-card-id="{card_id}"]',
                            state="detached",
                            timeout=WAIT * 1000,
                        )
                        if index >= WARMUP:
                            samples["request -> card"].append((at - start) * 1000)
                            samples["wire request -> card"].append((on_wire - start) * 1000)
                            samples["in the DOM"].append((in_dom - start) * 1000)
                            samples["browser adds"].append((at - on_wire) * 1000)
                            samples["report back"].append((reported - at) * 1000)
                            arm = "click -> command" if by_browser else "wire click -> command"
                            samples[arm].append((got - click) * 1000)
                            if by_browser:
                                samples["click trip"].append((click - told) * 1000)
                after, spread_after = await _clock(page)
                await wire.aclose()
                await browser.close()
            finally:
                await playwright.stop()
        finally:
            await bridge.aclose()
    figures: dict[str, Any] = {name: _summary(values) for name, values in samples.items()}
    figures["clock"] = {"spread": max(spread, spread_after), "drift": abs(after - offset)}
    return figures


def main() -> dict[str, Any]:
    when = f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC"
    began = time.monotonic()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    figures = asyncio.run(_measure())
    figures["load"] = load
    figures["began"] = when
    figures["seconds"] = time.monotonic() - began
    for name, p in figures.items():
        if isinstance(p, dict) and "p50" in p:
            print(f"web {name}: p50 {p['p50']:.1f}, p99 {p['p99']:.1f}, max {p['max']:.1f} ms")
    return figures


def section(r: dict[str, Any]) -> list[str]:
    """The RESULTS.md section for these figures."""
    lines = [
        HEADING,
        "",
        " ".join(__doc__.strip().split("\n\n", 1)[1].split()) if __doc__ else "",
        "",
        f"{WARMUP} warm-up requests, then {SAMPLES}: every one for (1), half each for (2); "
        f"with {r['click -> command']['n']} samples, p99 is the slowest. The page's clock "
        f"was mapped onto ours within {r['clock']['spread']:.2f} ms, and had drifted "
        f"{r['clock']['drift']:.2f} ms from it by the end. The goal's verdict is given for "
        "the baseline too: a baseline that failed it would make the goal unreachable by the "
        "browser over this bridge.",
        "",
        "| attention latency | n | p50 ms | p99 ms | max ms | vs baseline p50 | vs baseline p99 "
        "| goal |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    verdicts: list[str] = []

    def row(what: str, text: str) -> str:
        x = r[what]
        return f"| {text} | {x['n']} | {x['p50']:.1f} | {x['p99']:.1f} | {x['max']:.1f} |  |  |  |"

    for name, goal in GOALS.items():
        p, base = r[name], r[f"wire {name}"]

        def met(x: dict[str, float], goal: float = goal) -> str:
            return "met" if x["p99"] <= goal else "NOT met"

        lines.append(
            f"| {name} (browser) | {p['n']} | {p['p50']:.1f} | {p['p99']:.1f} | {p['max']:.1f} "
            f"| {p['p50'] / base['p50']:.2f}x | {p['p99'] / base['p99']:.2f}x "
            f"| p99 <= {goal:g} ms: {met(p)} |"
        )
        lines += [row(what, text) for what, text in PARTS[name]]
        lines.append(
            f"| baseline: {BASELINES[name]} | {base['n']} | {base['p50']:.1f} | "
            f"{base['p99']:.1f} | {base['max']:.1f} |  |  | {met(base)} |"
        )
        lines += [row(what, text) for what, text in EXTRA[name]]
        verdicts.append(f"{name} p99 <= {goal:g} ms ({met(p)}: {p['p99']:.1f} ms)")
    lines += [
        "",
        f"Goals: {'; '.join(verdicts)}.",
        "",
        f"The web channel benchmark ran at {r['began']} and took {r['seconds']:.0f} s"
        + (
            f"; the machine's load average (1 min) was {r['load']:.1f} when it began."
            if r.get("load") is not None
            else "."
        ),
        "",
    ]
    return lines


if __name__ == "__main__":
    results.run_alone(HEADING, main, section)
