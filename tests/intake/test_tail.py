"""Following session logs on disk as an agent writes them: appends, new files, half-written
lines, truncation, rotation, restarts and bad lines."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from aep_bridge.aep import Event
from aep_bridge.intake.tail import LogTailer
from aep_bridge.store import Store
from tests.shared_data import AEP_FIXTURES

#: the golden events, each with its "\n"
LINES = (AEP_FIXTURES / "golden" / "golden.jsonl").read_bytes().splitlines(keepends=True)
IDS = [json.loads(line)["id"] for line in LINES]
POLL = 0.02
WAIT = 5.0


@pytest.fixture
def store(tmp_path: Path):
    opened = Store.open(tmp_path / "state")
    yield opened
    opened.close()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "logs"
    (path / "claude-code").mkdir(parents=True)
    return path


def tailer(root: Path, store: Store, **kwargs) -> LogTailer:
    return LogTailer(root, store, poll_interval=POLL, **kwargs)


def append(path: Path, data: bytes) -> None:
    with path.open("ab") as file:
        file.write(data)


def ids(events: list[Event]) -> list[str]:
    return [e.id for e in events]


class Following:
    """A consumer task that takes every event as it comes, as the bridge would."""

    def __init__(self, tail: LogTailer) -> None:
        self.tail = tail
        self.queue: asyncio.Queue[Event] = asyncio.Queue()
        self.task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        async for event in self.tail.follow():
            self.queue.put_nowait(event)

    async def take(self, n: int) -> list[Event]:
        async with asyncio.timeout(WAIT):
            return [await self.queue.get() for _ in range(n)]

    async def nothing_for(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
        assert self.queue.empty(), f"unexpected {self.queue.get_nowait().id}"


@contextlib.asynccontextmanager
async def following(tail: LogTailer) -> AsyncIterator[Following]:
    consumer = Following(tail)
    try:
        yield consumer
    finally:
        tail.stop()
        async with asyncio.timeout(WAIT):
            await consumer.task


async def next_event(events: AsyncIterator[Event]) -> Event:
    async with asyncio.timeout(WAIT):
        return await anext(events)


# -- following ---------------------------------------------------------------------------------


async def test_existing_and_appended_events_arrive_in_order(root, store):
    log = root / "claude-code" / "s_8f2c.jsonl"
    log.write_bytes(b"".join(LINES[:3]))
    async with following(tailer(root, store)) as got:
        first = await got.take(3)
        for line in LINES[3:10]:
            append(log, line)
            await asyncio.sleep(POLL / 3)
        append(log, b"".join(LINES[10:]))
        rest = await got.take(len(LINES) - 3)
        await got.nothing_for(3 * POLL)
    events = first + rest
    assert ids(events) == IDS
    assert [e.raw + b"\n" for e in events] == LINES  # the bytes as written, for relaying


async def test_a_file_in_another_agent_folder_is_picked_up(root, store):
    (root / "claude-code" / "s_1.jsonl").write_bytes(b"".join(LINES[:2]))
    async with following(tailer(root, store)) as got:
        assert ids(await got.take(2)) == IDS[:2]
        other = root / "codex" / "s_2.jsonl"
        other.parent.mkdir()
        other.write_bytes(b"".join(LINES[2:5]))
        assert ids(await got.take(3)) == IDS[2:5]
        append(root / "claude-code" / "s_1.jsonl", LINES[5])
        append(other, LINES[6])
        assert sorted(ids(await got.take(2))) == sorted(IDS[5:7])


async def test_files_outside_the_layout_are_ignored(root, store):
    (root / "top-level.jsonl").write_bytes(LINES[0])
    (root / "claude-code" / "notes.txt").write_bytes(LINES[1])
    (root / "claude-code" / "s.jsonl").write_bytes(LINES[2])
    async with following(tailer(root, store)) as got:
        assert ids(await got.take(1)) == IDS[2:3]
        await got.nothing_for(5 * POLL)


async def test_a_root_that_does_not_exist_yet_is_waited_for(tmp_path, store):
    root = tmp_path / "later"
    async with following(tailer(root, store)) as got:
        await got.nothing_for(3 * POLL)
        (root / "agent").mkdir(parents=True)
        (root / "agent" / "s.jsonl").write_bytes(LINES[0])
        assert ids(await got.take(1)) == IDS[:1]


async def test_a_half_written_line_waits_for_its_end(root, store):
    log = root / "claude-code" / "s.jsonl"
    log.write_bytes(LINES[0])
    tail = tailer(root, store)
    async with following(tail) as got:
        assert ids(await got.take(1)) == IDS[:1]
        line = LINES[1]
        append(log, line[:40])
        await got.nothing_for(6 * POLL)
        append(log, line[40:-1])  # all but the "\n"
        await got.nothing_for(6 * POLL)
        append(log, b"\n")
        [event] = await got.take(1)
    assert event.raw + b"\n" == line
    assert tail.problems == []
    assert store.file_offset(str(log))[1] == len(LINES[0]) + len(line)


async def test_truncation_starts_again_from_zero(root, store):
    log = root / "claude-code" / "s.jsonl"
    log.write_bytes(b"".join(LINES[:6]))
    async with following(tailer(root, store)) as got:
        assert ids(await got.take(6)) == IDS[:6]
        shorter = LINES[40] + LINES[41]
        assert len(shorter) < len(b"".join(LINES[:6]))
        log.write_bytes(shorter)  # truncate and rewrite, as `: > log` then new events
        assert ids(await got.take(2)) == IDS[40:42]
        await got.nothing_for(3 * POLL)


async def test_rotation_finishes_the_old_file_then_reads_the_new(root, store):
    log = root / "claude-code" / "s.jsonl"
    log.write_bytes(b"".join(LINES[:3]))
    tail = tailer(root, store)
    events = tail.follow()
    try:
        taken = [await next_event(events) for _ in range(3)]
        # while the consumer still holds event 3 the tailer is paused: rotate behind its back
        append(log, LINES[3] + LINES[4])  # the writer's last lines before rotating
        log.rename(log.with_name("s.jsonl.1"))
        log.write_bytes(LINES[5] + LINES[6])
        taken += [await next_event(events) for _ in range(4)]
        append(log, LINES[7])
        taken.append(await next_event(events))
    finally:
        await events.aclose()
    assert ids(taken) == IDS[:8]
    assert store.file_offset(str(log)) == (log.stat().st_ino, len(LINES[5] + LINES[6]))


# -- restarts ----------------------------------------------------------------------------------


async def test_a_restart_resumes_after_the_last_consumed_event(root, store):
    log = root / "claude-code" / "s.jsonl"
    log.write_bytes(b"".join(LINES[:8]))
    events = tailer(root, store).follow()
    try:
        for _ in range(5):
            await next_event(events)
        # event 5 is in flight: only the four before it are committed
        assert store.file_offset(str(log))[1] == len(b"".join(LINES[:4]))
    finally:
        await events.aclose()  # the consumer died holding event 5
    append(log, b"".join(LINES[8:12]))
    async with following(tailer(root, store)) as got:
        again = await got.take(8)
        await got.nothing_for(3 * POLL)
    assert ids(again) == IDS[4:12]  # the in-flight event once more, then the rest


async def test_stop_commits_what_was_consumed(root, store):
    log = root / "claude-code" / "s.jsonl"
    log.write_bytes(b"".join(LINES[:8]))
    tail = tailer(root, store)
    taken: list[Event] = []
    async with asyncio.timeout(WAIT):
        async for event in tail.follow():
            taken.append(event)
            if len(taken) == 5:
                tail.stop()  # the loop ends cleanly: event 5 counts as handled
    assert ids(taken) == IDS[:5]
    async with following(tailer(root, store)) as got:
        assert ids(await got.take(3)) == IDS[5:8]
        await got.nothing_for(3 * POLL)


async def test_a_log_replaced_while_stopped_is_read_from_the_start(root, store):
    log = root / "claude-code" / "s.jsonl"
    log.write_bytes(b"".join(LINES[:4]))
    async with following(tailer(root, store)) as got:
        await got.take(4)
    log.rename(log.with_name("s.jsonl.1"))
    log.write_bytes(b"".join(LINES[30:36]))  # a new file, longer than the old offset
    async with following(tailer(root, store)) as got:
        assert ids(await got.take(6)) == IDS[30:36]


async def test_a_log_truncated_while_stopped_is_read_from_the_start(root, store):
    log = root / "claude-code" / "s.jsonl"
    log.write_bytes(b"".join(LINES[:6]))
    async with following(tailer(root, store)) as got:
        await got.take(6)
    with log.open("r+b") as file:  # same inode, shorter than the committed offset
        file.truncate(0)
        file.write(LINES[50])
    async with following(tailer(root, store)) as got:
        assert ids(await got.take(1)) == IDS[50:51]


# -- bad lines ---------------------------------------------------------------------------------


def foreign_major(line: bytes) -> bytes:
    return line.replace(b'"aep":"0.1"', b'"aep":"1.0"', 1)


def without_seq(line: bytes) -> bytes:
    event = json.loads(line)
    del event["seq"]
    return json.dumps(event, separators=(",", ":")).encode() + b"\n"


async def test_bad_lines_are_reported_once_with_file_and_line_and_skipped(root, store, caplog):
    log = root / "claude-code" / "s.jsonl"
    content = [
        LINES[0],  # 1
        b"this is not json\n",  # 2
        LINES[1],  # 3
        without_seq(LINES[2]),  # 4: a session event without its seq
        b'{"aep":"0.1","id":"' + b"x" * 1100 + b'"}\n',  # 5: over the 1000-byte cap
        foreign_major(LINES[3]),  # 6: another major version: reported once
        foreign_major(LINES[4]),  # 7: ... and then skipped without a word
        b"\n",  # 8: a blank line
        LINES[5],  # 9
        b"trailing garbage\n",  # 10: after the last event
    ]
    log.write_bytes(b"".join(content))
    tail = tailer(root, store, max_event_bytes=1000)
    caplog.set_level(logging.WARNING, logger="aep_bridge.intake.tail")
    async with following(tail) as got:
        assert ids(await got.take(3)) == [IDS[0], IDS[1], IDS[5]]
        await got.nothing_for(3 * POLL)
    lines = sorted({f.line for f in tail.problems})
    assert lines == [2, 4, 5, 6, 8, 10]
    assert {f.file for f in tail.problems} == {str(log)}
    by_line = {f.line: f.violation for f in tail.problems}
    assert by_line[2].rule == "RFC 8259"
    assert by_line[4].rule == "AEP-0001 §5.2"
    assert "over the 1000-byte" in by_line[5].message
    assert by_line[6].rule == "AEP-0003 §3.1"
    assert "major version" in by_line[6].message
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 6
    for line in (2, 4, 5, 6, 8, 10):
        assert any(f"{log}:{line}:" in message for message in warned)
    # a restart does not report them again: the offset moved past them
    append(log, LINES[6])
    again = tailer(root, store)
    async with following(again) as got:
        assert ids(await got.take(1)) == IDS[6:7]
    assert again.problems == []
    assert len(caplog.records) == 6


async def test_line_numbers_count_lines_consumed_before_a_restart(root, store):
    log = root / "claude-code" / "s.jsonl"
    log.write_bytes(b"".join(LINES[:3]))
    async with following(tailer(root, store)) as got:
        await got.take(3)
    append(log, b"{broken\n" + LINES[3])
    tail = tailer(root, store)
    async with following(tail) as got:
        assert ids(await got.take(1)) == IDS[3:4]
    assert [(f.file, f.line) for f in tail.problems] == [(str(log), 4)]


async def test_an_oversized_line_written_in_pieces_is_skipped_once(root, store):
    log = root / "claude-code" / "s.jsonl"
    tail = tailer(root, store, max_event_bytes=1000)
    async with following(tail) as got:
        append(log, b"[" + b"1," * 800)
        await got.nothing_for(4 * POLL)
        append(log, b"1" * 500)
        await got.nothing_for(4 * POLL)
        append(log, b"1]\n" + LINES[0])
        assert ids(await got.take(1)) == IDS[:1]
    [finding] = tail.problems
    assert finding.line == 1
    assert f"line is {1 + 1600 + 500 + 2} bytes" in finding.violation.message


async def test_stop_ends_follow_promptly(root, store):
    tail = LogTailer(root, store, poll_interval=60)
    task = asyncio.create_task(anext(tail.follow(), None))
    await asyncio.sleep(0.05)
    tail.stop()
    async with asyncio.timeout(1):
        assert await task is None


async def test_a_log_rewritten_in_place_while_stopped_is_read_from_the_start(root, store):
    log = root / "claude-code" / "s.jsonl"
    log.write_bytes(LINES[0] + LINES[1])
    async with following(tailer(root, store)) as got:
        await got.take(2)
    offset = len(LINES[0] + LINES[1])
    rewritten = b"".join(LINES[30:36])
    assert rewritten[offset - 1 : offset] != b"\n"  # the old offset falls inside a line
    with log.open("r+b") as file:  # same inode, and longer than before: only content tells
        file.truncate(0)
        file.write(rewritten)
    tail = tailer(root, store)
    async with following(tail) as got:
        assert ids(await got.take(6)) == IDS[30:36]
        await got.nothing_for(3 * POLL)
    assert tail.problems == []


async def test_leaving_the_loop_and_following_again_redelivers_only_the_held_event(root, store):
    log = root / "claude-code" / "s.jsonl"
    log.write_bytes(b"".join(LINES[:6]))
    tail = tailer(root, store)
    events = tail.follow()
    try:
        held = [await next_event(events) for _ in range(3)]
    finally:
        await events.aclose()  # the consumer broke out while handling event 3
    async with following(tail) as got:
        assert ids(await got.take(4)) == IDS[2:6]
        await got.nothing_for(3 * POLL)
    assert ids(held) == IDS[:3]


async def test_an_idle_log_lets_go_of_its_handle_and_is_reopened_when_it_grows(root, store):
    log = root / "claude-code" / "s.jsonl"
    log.write_bytes(LINES[0])
    tail = tailer(root, store)
    tail.idle_close_after = 0.0
    async with following(tail) as got:
        await got.take(1)
        await got.nothing_for(3 * POLL)
        assert [t.file for t in tail._tracked.values()] == [None]
        append(log, LINES[1])
        assert ids(await got.take(1)) == IDS[1:2]


async def test_the_offsets_of_logs_deleted_while_stopped_are_forgotten(root, store, tmp_path):
    """One row a log ever followed would stay in the store for good: a log deleted (an
    agent's old session cleaned up) loses its offset when the folder is followed again;
    a log still there keeps its own, and another folder's offsets are not touched."""
    kept = root / "claude-code" / "kept.jsonl"
    kept.write_bytes(b"".join(LINES[:4]))
    gone = root / "claude-code" / "gone.jsonl"
    elsewhere = str(tmp_path / "other-logs" / "claude-code" / "x.jsonl")
    with store.transaction():
        store.set_file_offset(str(gone), 1234, 99)
        store.set_file_offset(elsewhere, 5678, 7)
        store.set_file_offset(str(kept), kept.stat().st_ino, len(b"".join(LINES[:2])))
    async with following(tailer(root, store)) as got:
        assert ids(await got.take(2)) == IDS[2:4]  # from its own offset
    assert store.file_offset(str(gone)) is None
    assert store.file_offset(elsewhere) == (5678, 7)
    assert store.file_offset(str(kept)) is not None
