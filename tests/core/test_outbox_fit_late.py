"""Where the platform's pace binds, a message is measured and split when its slot comes, not
when it is queued: what an agent rewrites ten times while it waits is drawn in the platform's
format once, and a long message still arrives whole, in order, across a restart."""

from __future__ import annotations

import asyncio

import pytest

from aep_bridge import markup
from aep_bridge.contract.types import OutgoingMessage, RateLimit, RateLimits
from aep_bridge.outbox import Job
from aep_bridge.store import Store
from aep_bridge.text.text import measure
from tests.core.doubles import VirtualTime
from tests.core.test_outbox import (
    HANG,
    Recorder,
    _until,
    drain,
    message,
    outbox_for,
    rows,
    store,
    vt,
)

__all__ = ["store", "vt"]  # the fixtures


def lines(*texts: str) -> list[str]:
    """The lines of `texts` that say something, in order: what a split must keep."""
    return [line.strip() for text in texts for line in text.split("\n") if line.strip()]


PACE = RateLimits(per_chat=RateLimit(count=1, per_seconds=1.1))


class Measuring(Recorder):
    """A `Recorder` that keeps the first words of every message it is asked to measure, as
    a platform channel draws it in its own format to do so (Discord's markdown, Slack's
    mrkdwn): the cost this saves."""

    def __init__(self, vt: VirtualTime, limits: RateLimits, **options: object) -> None:
        super().__init__(vt, limits, **options)  # type: ignore[arg-type]
        self.measured: list[str] = []

    def measure(self, blocks: markup.Blocks) -> int:
        self.measured.append(markup.plain(blocks)[:12])
        return super().measure(blocks)


def streamed(session: str, text: str) -> Job:
    """A streamed reply with blocks, edited in place (its key) as the agent writes on."""
    blocks = (markup.Paragraph(spans=(markup.Span(text=text),)),)
    content = OutgoingMessage(type="text", text=text, blocks=blocks, key="reply-1")
    return Job.message(session, content, droppable=True)


async def test_a_message_rewritten_while_it_waits_for_its_slot_is_measured_only_as_sent(
    vt: VirtualTime, store: Store
) -> None:
    adapter = Measuring(vt, PACE, max_length=4_000)
    outbox = outbox_for(adapter, store, merge_waiting=True)
    await outbox.start()
    outbox.submit(message("g/s", "Looking at the failing test."))
    await drain(outbox)  # the chat's slot is taken for 1.1 s
    for n in range(10):
        outbox.submit(streamed("g/s", f"version {n}: " + "words " * n))
    await drain(outbox)
    await outbox.stop()
    assert adapter.texts()[-1].startswith("version 9")
    assert adapter.measured == ["version 9: w"]  # not the nine it replaced


async def test_a_long_message_is_split_when_its_slot_comes_and_arrives_whole_in_order(
    vt: VirtualTime, store: Store
) -> None:
    adapter = Recorder(vt, PACE, max_length=100)
    outbox = outbox_for(adapter, store, merge_waiting=True)
    long = "\n\n".join(f"Paragraph {n}: the totals are rounded per line." for n in range(8))
    outbox.submit(message("g/s", long))
    assert rows(store) == 1  # queued whole: nothing measured yet
    outbox.submit(message("g/s", "Done.", type="thought"))
    await outbox.start()
    await drain(outbox)
    await outbox.stop()
    *pieces, last = adapter.texts()
    assert len(pieces) > 2
    assert outbox.stats["split"] == 1
    assert all(measure(p, "chars") <= 100 for p in pieces)
    assert lines(*pieces) == lines(long)
    assert last == "Done."


async def test_a_split_killed_on_its_first_piece_sends_the_rest_once_in_order_after_a_restart(
    vt: VirtualTime, store: Store
) -> None:
    """The pieces are written before the first goes, the lane's later rows after them: a
    process killed mid-call sends the first piece again, then each other piece once, then
    what came after, never the whole message as well."""
    first = Recorder(vt, PACE, max_length=100)
    hang = asyncio.Event()
    first.block = lambda call: hang.wait()
    outbox = outbox_for(first, store, merge_waiting=True)
    long = "\n\n".join(f"Paragraph {n}: the totals are rounded per line." for n in range(8))
    outbox.submit(message("g/s", long))
    outbox.submit(message("g/s", "Done.", type="thought"))
    await outbox.start()
    await asyncio.wait_for(_until(lambda: len(first.attempts) == 1), HANG)
    await outbox.stop(flush_timeout=0)
    second = Recorder(vt, PACE, max_length=100)
    restarted = outbox_for(second, store, merge_waiting=True)
    await restarted.start()
    await drain(restarted)
    await restarted.stop()
    *pieces, last = second.texts()
    assert pieces[0] == first.attempts[0].text  # the piece cut off, again
    assert lines(*pieces) == lines(long)
    assert last == "Done."
    assert rows(store) == 0


class Broken(Recorder):
    """A channel whose `measure` has a bug: it raises on every message."""

    def measure(self, blocks: markup.Blocks) -> int:
        raise ValueError("no such block kind")


async def test_a_measure_that_raises_costs_its_channel_one_log_line_not_its_messages(
    vt: VirtualTime, store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    """Measured when its slot comes, a message whose measure raised would be picked, fail
    and be picked again, and nothing after it would go: the plain text measures it instead."""
    adapter = Broken(vt, PACE, max_length=100)
    outbox = outbox_for(adapter, store, merge_waiting=True)
    long = "\n\n".join(f"Paragraph {n}: the totals are rounded per line." for n in range(8))
    blocks = tuple(markup.Paragraph(spans=(markup.Span(text=p),)) for p in long.split("\n\n"))
    outbox.submit(Job.message("g/s", OutgoingMessage(type="text", text=long, blocks=blocks)))
    outbox.submit(streamed("g/s", "Done."))
    await outbox.start()
    await asyncio.wait_for(drain(outbox), HANG)
    await outbox.stop()
    *pieces, last = adapter.texts()
    assert len(pieces) > 2
    assert all(measure(p, "chars") <= 100 for p in pieces)
    assert lines(*pieces) == lines(long)
    assert last == "Done."
    failed = [r for r in caplog.records if "measure failed" in r.getMessage()]
    assert len(failed) == 1
