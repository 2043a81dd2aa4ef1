"""The outbox against Telegram's real limits, on a simulated clock.

Telegram allows a bot 1 message/s per chat, 20 messages/min per group (a forum supergroup is
one group, all its topics together) and 30 messages/s overall. The run floods one forum
supergroup with 1,000 chatter messages spread over 10 topics, all submitted at once, and
submits a permission card 100.5 s later, when the group's minute is used up. The outbox runs
unchanged (the real `Outbox`, a SQLite store, a `MemoryChannel` that records what it is
called with) on simulated time: it takes a clock and a sleep, and time moves on only when
every task waits, so the ~50 simulated minutes take about a second and every call's time is
exact. The baseline is a sender at a fixed 3 s interval, one FIFO queue, as OpenACP sends
(a model of its approach, not its code). Both are checked by the same counter: a limit
violation is a call that makes some chat, group or the whole bot exceed its limit within one
sliding window. "Rate used" is the share of the binding limit's allowance used over the
whole windows of the backlog; "card slot" is which free slot after its submission the card
took (1: the next one). A second scenario does the same in a private chat with topics, where
only the 1 message/s per chat and 30/s limits apply.

Cards first, several at once: the same flood into the forum supergroup, and 100.5 s in, three
of the topics ask five, three and one questions at once (nine cards, each followed by its
"asks permission" heads-up, as the bridge queues them). Each platform call takes `latency` to
return (0.2 s, and a slow network's 1.5 s, longer than the chat's 1 s slot: a topic's second
card can only go when its first has returned). "Cards in slots" counts the group's calls from
the questions to the last card: 12 means the nine cards and the three asking topics' queued
chatter (merged, one message each, above their cards) took the first twelve free slots;
"overtaken" is how many heads-ups or other topics' chatter calls went out before the last
card (an asking topic's own chatter queued before its cards goes first, merged).

A card after its own burst (issue 32): the same flood; 100.5 s in, a lone card in a topic
with nothing queued (the baseline, in the same run); 100 s later, a topic says four things
in quick succession and asks ("alike": four replies, which merge into one message); 100 s
after that, another does with four unlike messages (a thought, a tool call, a reply, a
plan: each its own message). For each card: the calls that went between its submission and
it (the free slots it waited more than the lone card), its delay from its submission and
from the first free slot after it (the group's window decides when that is, so delays at
different moments differ by it), and whether every message of its burst arrived above it
(in a message before the card, or in the card's own message above its title). The bursts run
twice in the same run: on a channel that shows a card's context (`card_context`, as the
Telegram, Discord and Slack channels do: the burst goes in the card's own message), and on
one that does not (the baseline: the burst goes ahead of the card, alike messages merged).
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aep_bridge.commands.simtime import VirtualTime
from aep_bridge.contract.types import (
    ChannelConfig,
    NotificationMessage,
    OutgoingMessage,
    PermissionOption,
    PermissionRequest,
    RateLimit,
    RateLimits,
)
from aep_bridge.outbox import Job, Outbox
from aep_bridge.store import Store
from aep_bridge.testing import FakeCore, MemoryChannel

TELEGRAM = RateLimits(
    per_chat=RateLimit(count=1, per_seconds=1),
    per_group=RateLimit(count=20, per_seconds=60),
    global_=RateLimit(count=30, per_seconds=1),
)
FLOOD = 1000
TOPICS = 10
CARD_AT = 100.5
INTERVAL = 3.0
#: Telegram's limits where there is no group: a private chat (its topics are one chat)
PRIVATE = RateLimits(per_chat=TELEGRAM.per_chat, global_=TELEGRAM.global_)
#: scenario -> the limits that apply, and the one that binds a flood into one chat
SCENARIOS: dict[str, tuple[RateLimits, RateLimit]] = {
    "forum supergroup (20/min per group)": (TELEGRAM, RateLimit(count=20, per_seconds=60)),
    "private chat with topics (1/s per chat)": (PRIVATE, RateLimit(count=1, per_seconds=1)),
}
CARD = "permission card"
SEVERAL = "several cards at once"
#: the cards-first scenario: who asks, how many questions each, and how long a call takes
ASKING = {"topic-1": 5, "topic-4": 3, "topic-7": 1}
LATENCIES = (0.2, 1.5)


@dataclass(frozen=True)
class Sent:
    at: float
    text: str
    chat: str
    group: str
    session: str | None = None


class TelegramLike(MemoryChannel):
    """A memory channel with Telegram's limits that records when each call was made."""

    name = "telegram-like"

    def __init__(
        self,
        clock: VirtualTime,
        limits: RateLimits,
        latency: float = 0.0,
        *,
        card_context: bool = False,
    ) -> None:
        super().__init__(FakeCore(), ChannelConfig(name="telegram-like"))
        self.capabilities = MemoryChannel.capabilities.model_copy(
            update={
                "rate_limits": limits,
                "max_message_length": 4096,
                "length_unit": "utf16",
                "card_context": card_context,
            }
        )
        self.clock = clock
        self.latency = latency  # how long a call takes to return (recorded when it is made)
        self.sent: list[Sent] = []

    def limit_keys(self, session_id: str | None) -> tuple[str, str]:
        return ("-1001", "-1001")  # every topic of the chat: one chat (and one group)

    async def _record(self, session_id: str | None, text: str) -> None:
        chat, group = self.limit_keys(session_id)
        self.sent.append(Sent(self.clock.now, text, chat, group, session_id))
        if self.latency:
            await self.clock.sleep(self.latency)

    async def send_message(self, session_id: str, content: OutgoingMessage) -> None:
        await self._record(session_id, content.text)
        await super().send_message(session_id, content)

    async def send_permission_request(self, session_id: str, request: PermissionRequest) -> None:
        # what the card's message says: its context (if it carries one) above its title
        said = [m.text for m in request.context]
        await self._record(session_id, "\n\n".join([*said, request.title]))
        await super().send_permission_request(session_id, request)

    async def send_notification(self, notification: NotificationMessage) -> None:
        await self._record(None, notification.summary)
        await super().send_notification(notification)


def _flood() -> list[Job]:
    return [
        Job.message(f"topic-{n % TOPICS}", OutgoingMessage(type="tool_update", text=f"step {n}"))
        for n in range(FLOOD)
    ]


def _card() -> Job:
    request = PermissionRequest(
        id="r1", title=CARD, options=(PermissionOption(id="y", label="Yes", is_allow=True),)
    )
    return Job.permission("topic-3", request)


#: the same-session bursts: topic, when (seconds), and its messages' (type, text)
BURSTS: dict[str, tuple[str, float, list[tuple[str, str]]]] = {
    "lone card": ("topic-lone", CARD_AT, []),
    "alike burst (4 replies)": (
        "topic-alike",
        CARD_AT + 100,
        [("text", f"reply {n}: looking at the tests") for n in range(4)],
    ),
    "unlike burst (4 kinds)": (
        "topic-unlike",
        CARD_AT + 200,
        [
            ("thought", "reading the failing test"),
            ("tool_call", "Bash: pytest -x"),
            ("text", "the fixture leaks a connection"),
            ("plan", "1. fix the fixture 2. run the suite"),
        ],
    ),
}
BURST = "a card after its own burst"
#: the same bursts on a channel that does not show a card's context (the baseline)
WITHOUT = "(without card_context)"


async def _burst_run(card_context: bool) -> list[Sent]:
    """The flood, and the `BURSTS` at their times: each topic's messages, then its card; on a
    channel that shows a card's context (as Telegram does), or one that does not."""
    vt = VirtualTime()
    adapter = TelegramLike(vt, TELEGRAM, card_context=card_context)
    with tempfile.TemporaryDirectory() as state, Store.open(Path(state)) as store:
        outbox = Outbox(adapter, store, clock=vt.clock, sleep=vt.sleep)
        for job in _flood():
            outbox.submit(job)
        await outbox.start()
        for name, (topic, at, messages) in BURSTS.items():
            await vt.sleep(at - vt.now)
            for kind, text in messages:
                outbox.submit(Job.message(topic, OutgoingMessage(type=kind, text=text)))
            request = PermissionRequest(
                id=topic, title=f"{CARD} {name}", options=(PermissionOption(id="y", label="Y"),)
            )
            outbox.submit(Job.permission(topic, request))
        await outbox.idle()
        await outbox.stop()
        return adapter.sent


def burst_figures(sent: list[Sent]) -> dict[str, dict[str, Any]]:
    """For each card of `BURSTS`: the calls before it since its submission, its delay, its
    delay in free slots more than the lone card's, and whether its burst came above it."""
    out: dict[str, dict[str, Any]] = {}
    for name, (_, at, messages) in BURSTS.items():
        index = next(n for n, s in enumerate(sent) if s.text.endswith(f"{CARD} {name}"))
        before = [s for s in sent[:index] if s.at >= at]
        # above the card: the messages before it, and the context in its own message
        shown_above = {part for s in sent[: index + 1] for part in s.text.split("\n\n")}
        free = before[0].at if before else sent[index].at  # the first free slot after `at`
        out[name] = {
            "calls_before": len(before),
            "delay": sent[index].at - at,
            "after_free": sent[index].at - free,
            "in_order": all(text in shown_above for _, text in messages),
        }
    lone = out["lone card"]
    for f in out.values():
        f["slots_more"] = f["calls_before"] - lone["calls_before"]
    return out


def _questions() -> list[Job]:
    """The questions of `ASKING`, all at once: each card, then its heads-up."""
    jobs = []
    for session, cards in ASKING.items():
        for n in range(cards):
            request = PermissionRequest(
                id=f"{session}-{n}",
                title=f"{CARD} {session} #{n}",
                options=(PermissionOption(id="y", label="Yes", is_allow=True),),
            )
            heads_up = NotificationMessage(
                session_id=session, type="permission", summary=f"heads-up {session} #{n}"
            )
            jobs += [Job.permission(session, request), Job.notification(heads_up)]
    return jobs


async def _outbox_run(
    limits: RateLimits, later: list[Job] | None = None, latency: float = 0.0
) -> tuple[list[Sent], float]:
    later = [_card()] if later is None else later
    vt = VirtualTime()
    adapter = TelegramLike(vt, limits, latency)
    with tempfile.TemporaryDirectory() as state, Store.open(Path(state)) as store:
        outbox = Outbox(adapter, store, clock=vt.clock, sleep=vt.sleep)
        for job in _flood():
            outbox.submit(job)
        started = time.perf_counter()
        await outbox.start()

        async def card_later() -> None:
            await vt.sleep(CARD_AT)
            for job in later:
                outbox.submit(job)

        card = asyncio.create_task(card_later())
        await card
        await outbox.idle()
        await outbox.stop()
        stats = outbox.stats  # a card's thread ahead of it may go merged (`coalesced`)
        assert stats["sent"] + stats["coalesced"] == FLOOD + len(later), stats
        return adapter.sent, time.perf_counter() - started


def cards_first(sent: list[Sent]) -> dict[str, Any]:
    """Where the nine cards went among the group's calls after the questions."""
    after = [s for s in sent if s.at >= CARD_AT]
    cards = [n for n, s in enumerate(after) if s.text.startswith(CARD)]
    last = cards[-1]
    return {
        "cards": len(cards),
        "slots": last + 1,
        "overtaken": sum(
            1 for s in after[:last] if not s.text.startswith(CARD) and s.session not in ASKING
        ),
        "last_card": after[last].at - CARD_AT,
    }


def _fixed_interval_run() -> list[Sent]:
    """One FIFO queue, one message every `INTERVAL` seconds while it is not empty."""
    chat = "-1001"
    arrivals = [(0.0, f"step {n}") for n in range(FLOOD)] + [(CARD_AT, CARD)]
    queue: deque[tuple[float, str]] = deque()
    sent: list[Sent] = []
    now, pending = 0.0, deque(arrivals)
    while pending or queue:
        while pending and pending[0][0] <= now:
            queue.append(pending.popleft())
        if not queue:
            now = pending[0][0]
            continue
        _, text = queue.popleft()
        sent.append(Sent(now, text, chat, chat))
        now += INTERVAL
    return sent


def violations(sent: list[Sent], limits: RateLimits) -> int:
    """Calls that put a chat, a group or the bot over a declared limit in a sliding window."""
    count = 0
    for limit, key in (
        (limits.per_chat, lambda s: s.chat),
        (limits.per_group, lambda s: s.group),
        (limits.global_, lambda s: "bot"),
    ):
        if limit is None:
            continue
        by_key: dict[str, list[float]] = {}
        for s in sent:
            by_key.setdefault(key(s), []).append(s.at)
        for times in by_key.values():
            times.sort()
            start = 0
            for end, t in enumerate(times):  # the calls in (t - window, t]
                while not times[start] > t - limit.per_seconds:
                    start += 1
                if end - start + 1 > limit.count:
                    count += 1
    return count


def figures(
    sent: list[Sent], limits: RateLimits, binding: RateLimit, wall: float | None = None
) -> dict[str, Any]:
    times = [s.at for s in sent]
    first, last = min(times), max(times)
    windows = int((last - first) // binding.per_seconds)
    used = sum(1 for t in times if t < first + windows * binding.per_seconds)
    card = next(s for s in sent if s.text.endswith(CARD))
    slot = 1 + sum(1 for s in sent if CARD_AT <= s.at < card.at)
    return {
        "violations": violations(sent, limits),
        "rate_used": used / (binding.count * windows),
        "card_slot": slot,
        "card_latency": card.at - CARD_AT,
        "drained": last - first,
        "wall": wall,
    }


def main() -> dict[str, Any]:
    results: dict[str, Any] = {}
    for scenario, (limits, binding) in SCENARIOS.items():
        sent, wall = asyncio.run(_outbox_run(limits))
        results[scenario] = {
            "aep-bridge outbox": figures(sent, limits, binding, wall),
            f"fixed {INTERVAL:g} s interval": figures(_fixed_interval_run(), limits, binding),
        }
        for sender, f in results[scenario].items():
            print(
                f"{scenario:<42} {sender:<20} violations {f['violations']:>3}  rate used "
                f"{f['rate_used']:7.1%}  card slot {f['card_slot']:>4}  card latency "
                f"{f['card_latency']:8,.1f} s",
                flush=True,
            )
    several: dict[float, dict[str, Any]] = {}
    for latency in LATENCIES:
        sent, wall = asyncio.run(_outbox_run(TELEGRAM, _questions(), latency))
        f = several[latency] = {
            **cards_first(sent),
            "violations": violations(sent, TELEGRAM),
            "wall": wall,
        }
        print(
            f"nine cards in three topics, {latency:g} s a call: cards in slots {f['slots']}, "
            f"overtaken {f['overtaken']}, last card after {f['last_card']:.1f} s, "
            f"violations {f['violations']}",
            flush=True,
        )
    results[SEVERAL] = several
    bursts = results[BURST] = burst_figures(asyncio.run(_burst_run(card_context=True)))
    results[WITHOUT] = burst_figures(asyncio.run(_burst_run(card_context=False)))
    for name, f in [*bursts.items(), *((f"{n} {WITHOUT}", f) for n, f in results[WITHOUT].items())]:
        print(
            f"{name:<24} calls before the card {f['calls_before']} ({f['slots_more']:+d} "
            f"slots against the lone card), card after {f['delay']:.1f} s "
            f"({f['after_free']:.1f} s after the first free slot), its burst above it: "
            f"{'yes' if f['in_order'] else 'NO'}",
            flush=True,
        )
    return results


def section(results: dict[str, Any]) -> list[str]:
    """The RESULTS.md section for these figures."""
    lines = [
        "## Outbox against Telegram's real limits (simulated clock)",
        "",
        " ".join(__doc__.strip().split("\n\n", 1)[1].split()) if __doc__ else "",
        "",
        "| scenario | sender | limit violations | rate used | card slot | card latency "
        "| backlog drained in |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for scenario, senders in results.items():
        if scenario in (SEVERAL, BURST, WITHOUT):
            continue
        for sender, f in senders.items():
            lines.append(
                f"| {scenario} | {sender} | {f['violations']} | {f['rate_used']:.1%} | "
                f"{f['card_slot']:,} | {f['card_latency']:,.1f} s | {f['drained']:,.0f} s |"
            )
    several = results[SEVERAL]
    lines += [
        "",
        f"| {SEVERAL} | call latency | cards in slots | overtaken | last card after "
        "| limit violations |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for latency, f in several.items():
        lines.append(
            f"| forum supergroup, 5 + 3 + 1 cards in 3 topics | {latency:g} s | "
            f"{f['slots']} (of {f['cards']} cards) | {f['overtaken']} | "
            f"{f['last_card']:.1f} s | {f['violations']} |"
        )
    bursts = results[BURST]
    lines += [
        "",
        f"| {BURST} | calls between its submission and the card | slots more than the lone "
        "card | card after | after the first free slot | its burst above the card |",
        "|---|---:|---:|---:|---:|---|",
    ]
    rows = [*bursts.items(), *((f"{n} {WITHOUT}", f) for n, f in results[WITHOUT].items())]
    for name, f in rows:
        lines.append(
            f"| {name} | {f['calls_before']} | {f['slots_more']:+d} | {f['delay']:.1f} s | "
            f"{f['after_free']:.1f} s | {'yes' if f['in_order'] else 'NO'} |"
        )
    ours = results[next(iter(SCENARIOS))]["aep-bridge outbox"]
    cards_ok = all(f["overtaken"] == 0 and f["violations"] == 0 for f in several.values())
    # the card in the first free slot but for its topic's queued chatter, merged, before it
    ok = ours["violations"] == 0 and ours["rate_used"] >= 0.95 and ours["card_slot"] <= 2
    # where the channel shows a card's context, a burst costs its card no slot at all
    burst_ok = all(f["in_order"] and f["slots_more"] <= 0 for f in bursts.values())
    walls = ", ".join(
        f"{senders['aep-bridge outbox']['wall']:.1f} s"
        for scenario, senders in results.items()
        if scenario not in (SEVERAL, BURST, WITHOUT)
    )
    lines += [
        "",
        f"Goals (forum supergroup): zero limit violations, at least 95% of the allowed rate, "
        f"the card within one free slot of the first, after its topic's queued messages: "
        f"{'met' if ok else 'NOT met'} "
        f"({ours['violations']} violations, {ours['rate_used']:.1%} of 20/min, slot "
        f"{ours['card_slot']}). Several cards at once: every card before any heads-up or "
        f"other topic's chatter: {'met' if cards_ok else 'NOT met'}. A card after its own "
        f"burst, on a channel that shows a card's context: the burst above it (in the card's "
        f"own message) and no slot more than a lone card, alike or unlike: "
        f"{'met' if burst_ok else 'NOT met'}. Real time for the simulated "
        f"outbox runs: {walls}.",
        "",
    ]
    return lines


if __name__ == "__main__":
    import results

    results.run_alone("## Outbox against Telegram's real limits", main, section)
