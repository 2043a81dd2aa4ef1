"""A full disk loses no press and repeats no message.

SQLite is made to refuse what a full disk refuses, through SQLite itself: `max_page_count`
stops the database from growing by a page (SQLITE_FULL, "database or disk is full"), and
`query_only` refuses every write, deletes included (a full disk refuses the WAL frames a
delete needs, which `max_page_count` cannot simulate: a delete never grows the file).
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from typing import Any

from aep_bridge.contract.types import ResolutionStatus
from aep_bridge.store import Store

from .rig import ALICE, BOB, Rig, memory_host

#: a question long enough that recording an answer to it needs a page of its own
LONG_PROMPT = "Run this script?\n" + "echo checking the build step by step\n" * 130


def _fill_disk(store: Store) -> None:
    """No page more: the free pages are taken, and the file may not grow."""
    pages = int(store.execute("PRAGMA page_count")[0][0])  # type: ignore[call-overload]
    store.execute(f"PRAGMA max_page_count = {pages}")
    with store.transaction():
        store.execute("CREATE TABLE filler (blob BLOB)")
    for size in (512, 64, 1):  # smaller and smaller, until not a byte more fits a page
        while _fits(store, f"INSERT INTO filler VALUES (randomblob({size}))"):
            pass
        # a page may be left that no new row can take (a split needs two): a row in the
        # last leaf is given one overflow page instead
        while _free_pages(store) and _fits(
            store,
            "DELETE FROM filler WHERE rowid = (SELECT max(rowid) FROM filler)",
            "INSERT INTO filler VALUES (randomblob(4500))",
        ):
            pass
    assert _free_pages(store) == 0


def _fits(store: Store, *statements: str) -> bool:
    """Run `statements` in one transaction; False when the disk is full."""
    try:
        with store.transaction():
            for statement in statements:
                store.execute(statement)
    except sqlite3.OperationalError as exc:
        if "database or disk is full" not in str(exc):
            raise
        return False
    return True


def _free_pages(store: Store) -> int:
    return int(store.execute("PRAGMA freelist_count")[0][0])  # type: ignore[call-overload]


def _free_disk(store: Store) -> None:
    store.execute("PRAGMA max_page_count = 1073741823")
    with store.transaction():
        store.execute("DROP TABLE filler")


def _errors(caplog: Any) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


async def test_a_press_while_the_disk_is_full_changes_nothing_and_says_so(tmp_path, caplog):
    state = tmp_path / "state"
    host = memory_host()
    rig = Rig(state, host=host)
    await rig.__aenter__()
    agent = rig.agent()
    agent.start()
    agent.ask(LONG_PROMPT)
    await rig.settle()
    allow = rig.buttons("alpha")[0][1]
    card_before = rig.card_text("alpha")

    _fill_disk(rig.store)
    caplog.clear()
    results = [
        await rig.channel("alpha").press(allow, ALICE),
        await rig.channel("beta").press(f"{rig.card('beta')[1].id}:1", BOB),
    ]
    await rig.settle()
    for result in results:
        assert result.status is ResolutionStatus.REJECTED
        assert "cannot record the answer" in result.message  # the person's toast
        assert "database or disk is full" in result.message
    # nothing changed: the question is open, its cards untouched, the agent told nothing
    assert rig.card_text("alpha") == card_before
    assert len(rig.buttons("alpha")) == len(rig.buttons("beta")) == 2
    assert agent.commands == []
    [request] = rig.bridge.attention.pending()
    assert (request.status, request.answered_by) == ("open", None)
    # the log says why, once for both presses
    errors = _errors(caplog)
    assert len(errors) == 1, errors
    assert "cannot record answers" in errors[0]
    assert "database or disk is full" in errors[0]

    _free_disk(rig.store)
    result = await rig.channel("alpha").press(allow, ALICE)
    await rig.settle()
    assert result.status is ResolutionStatus.ACCEPTED
    assert agent.answers == [{"option": "allow"}]
    assert "Answered by Alice: Allow" in rig.card_text("beta")
    shown = [m.text for m in rig.channel("alpha").messages]
    await rig.stop()

    async with Rig(state, host=host) as again:
        again.hub.join(agent.participant)
        agent.hub = again.hub
        await again.settle()
        await asyncio.sleep(0.2)
        await again.settle()
        assert [m.text for m in again.channel("alpha").messages] == shown  # nothing repeats
        assert "Answered by Alice: Allow" in again.card_text("alpha")
        assert len(agent.commands) == 1


async def test_messages_sent_while_the_store_cannot_write_are_not_sent_again(tmp_path, caplog):
    """The calls are made while no delete can be written; the disk frees before the stop,
    and the next start sends none of them again."""
    state = tmp_path / "state"
    host = memory_host()
    rig = Rig(state, host=host, channels={"alpha": {"type": "memory", "approvers": ["alice"]}})
    await rig.__aenter__()
    memory = rig.channel("alpha")
    gate = asyncio.Event()
    waiting: list[str] = []
    post = memory.send_message

    async def slow_platform(session_id: str, content: Any) -> None:
        waiting.append(content.text or "")
        await gate.wait()
        await post(session_id, content)

    memory.send_message = slow_platform  # type: ignore[method-assign]
    agent = rig.agent()
    agent.start()
    for n in range(3):
        agent.emit("message.agent.replied", {"text": f"reply {n}"}, capture="full")
    await _until_true(lambda: waiting)
    await asyncio.sleep(0.1)  # the events' group, jobs included, commits meanwhile
    queued = sqlite3.connect(state / "state.db")  # what a restart would find
    assert queued.execute("SELECT count(*) FROM outbox").fetchone()[0] >= 4  # all on disk

    rig.store.execute("PRAGMA query_only = ON")  # no write goes through now
    caplog.clear()
    gate.set()
    await _until_true(lambda: sum("reply 2" in m.text for m in memory.messages))
    await asyncio.sleep(0.1)
    errors = _errors(caplog)
    rig.store.execute("PRAGMA query_only = OFF")  # the disk frees
    # the next call sent takes the kept rows with its own: a crash now repeats nothing
    agent.emit("message.agent.replied", {"text": "reply 3"}, capture="full")
    await rig.settle()
    assert queued.execute("SELECT count(*) FROM outbox").fetchone()[0] == 0
    queued.close()
    shown = [m.text for m in memory.messages]
    await rig.stop()

    async with Rig(state, host=host, channels=rig.config.channels) as again:
        await again.settle()
        await asyncio.sleep(0.2)
        await again.settle()
        assert [m.text for m in again.channel("alpha").messages] == shown  # nothing repeats
    assert len(errors) == 1, errors  # said once
    assert "could not be deleted" in errors[0]


async def _until_true(check: Any, seconds: float = 5.0) -> None:
    for _ in range(int(seconds / 0.02)):
        if check():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("it did not happen in time")
