"""The toolkit's card records (`aep_bridge.CardRecords`, `CardKeys`): a card's key and
records kept in the channel's state across a restart of the store, a press reaching the
core only for a card a key stands for, a card's update redrawing only a card posted here;
and the live sessions' threads (`SessionThreads`) across a restart, and the command menu
that lists them beside the core's chat commands (`command_menu`)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import pytest

from aep_bridge import (
    CardKeys,
    CardRecords,
    ChannelUser,
    IncomingMessage,
    Resolution,
    ResolutionStatus,
    SessionThreads,
    command_menu,
)
from aep_bridge.store import Store, StoreState
from aep_bridge.testing import FakeCore

KEYS = CardKeys(plain=lambda card_id: len(card_id) <= 20, digits=16)
ALICE = ChannelUser(id="u1", name="Alice")
ACCEPTED = Resolution(status=ResolutionStatus.ACCEPTED)


def _records(store: Store) -> CardRecords[dict[str, object]]:
    return CardRecords.plain(lambda: StoreState(store, "channel:chat"), KEYS.key)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store.open(tmp_path)
    yield opened
    opened.close()


def test_a_short_id_is_its_own_key_and_a_long_or_digest_like_one_is_digested():
    assert KEYS.key("c1") == "c1"
    long = "c" * 21
    assert KEYS.key(long).startswith("#")
    assert len(KEYS.key(long)) == 17
    assert KEYS.key("#abc") != "#abc", "an id that reads as a digest is digested too"
    assert KEYS.key(long) == KEYS.key(long), "the same id, the same key, after a restart too"


async def test_a_card_record_survives_a_restart_of_the_store(tmp_path: Path):
    long = "question-" + "x" * 40
    store = Store.open(tmp_path)
    records = _records(store)
    key = await records.sent(long, {"session": "s1", "message": 42}, message=42)
    await records.open_cards("s1", add=long)
    store.close()

    store = Store.open(tmp_path)  # a new process: only what the store kept
    try:
        records = _records(store)
        assert await records.of_key(key) == long
        assert await records.get(long) == {"session": "s1", "message": 42}
        assert await records.of_message(42) == long
        assert await records.only_open_card("s1") == long
    finally:
        store.close()


async def test_a_session_with_two_open_cards_has_no_only_one(store: Store):
    records = _records(store)
    await records.open_cards("s1", add="c1")
    await records.open_cards("s1", add="c2")
    assert await records.only_open_card("s1") is None
    assert await records.open_cards("s1", remove="c1") == ["c2"]
    assert await records.only_open_card("s1") == "c2"


async def test_a_press_reaches_the_core_by_the_card_its_key_stands_for(store: Store):
    long = "question-" + "y" * 40
    records = _records(store)
    key = await records.sent(long, {"session": "s1"})
    core = FakeCore()
    resolution = await records.press(core, key, 1, ALICE)
    assert resolution.accepted
    assert [(p.card_id, p.answer, p.via) for p in core.presses] == [(long, 1, "button")]


async def test_a_press_for_an_unknown_card_key_is_refused_before_the_core(store: Store):
    records = _records(store)
    core = FakeCore()
    for key, option in (("#0123456789abcdef", 0), ("", 0), ("c1", None)):
        resolution = await records.press(core, key, option, ALICE)
        assert resolution.status is ResolutionStatus.UNKNOWN, key
    assert core.presses == [], "nothing reached the core"


@dataclass
class _Record:
    session: str
    message: int


async def test_records_of_the_channels_own_type_round_trip(store: Store):
    state = StoreState(store, "channel:chat")
    records = CardRecords(lambda: state, KEYS.key, load=lambda raw: _Record(**raw), dump=asdict)
    await records.save("c1", _Record("s1", 7))
    assert await records.get("c1") == _Record("s1", 7)
    assert await records.get("nope") is None
    assert await records.get("") is None


async def test_words_answer_the_card_replied_to_else_the_only_open_one_else_go_to_the_core(
    store: Store,
):
    records, core = _records(store), FakeCore()

    def said(text: str) -> IncomingMessage:
        return IncomingMessage(
            channel="chat", session_id="s1", thread_id="t1", user=ALICE, text=text
        )

    await records.sent("c1", {}, message="m1")
    await records.open_cards("s1", add="c2")
    assert await records.words(core, said("deploy it"), replied="m1") == ("c1", ACCEPTED)
    assert await records.words(core, said("yes")) == ("c2", ACCEPTED), "the only open card"
    assert await records.words(core, said("/status")) is None, "a command answers no card"
    await records.open_cards("s1", add="c3")
    assert await records.words(core, said("which?")) is None, "two open cards: neither"
    assert [(p.card_id, p.answer) for p in core.presses] == [("c1", "deploy it"), ("c2", "yes")]
    assert [m.text for m in core.incoming] == ["/status", "which?"]


async def test_an_update_redraws_a_card_posted_here_and_a_closed_one_takes_no_words(store: Store):
    records = _records(store)
    await records.sent("c1", {"session": "s1", "message": 42}, message=42)
    await records.open_cards("s1", add="c1")
    redrawn: list[dict[str, object]] = []

    async def edit(card: dict[str, object]) -> None:
        redrawn.append(card)

    lock = asyncio.Lock()
    await records.update("s1", "c1", closed=False, lock=lock, edit=edit)
    assert await records.only_open_card("s1") == "c1", "an open card still takes words"
    await records.update("s1", "c1", closed=True, lock=lock, edit=edit)
    assert redrawn == [{"session": "s1", "message": 42}] * 2
    assert await records.open_cards("s1") == [], "a closed card takes no more words"

    await records.update("s1", "never-posted", closed=True, lock=lock, edit=edit)
    assert len(redrawn) == 2, "a card not posted here is not drawn"


async def test_a_sessions_thread_and_the_live_sessions_are_kept_across_a_restart(tmp_path: Path):
    store = Store.open(tmp_path)
    sessions = SessionThreads(lambda: StoreState(store, "channel:chat"))
    await sessions.made("s1", "100", "fix the tests")
    await sessions.made("s2", "200", "write docs")
    await sessions.remember("s1", "100", "fix the flaky tests")  # renamed
    store.close()

    store = Store.open(tmp_path)  # a new process: only what the store kept
    try:
        sessions = SessionThreads(lambda: StoreState(store, "channel:chat"))
        assert await sessions.live() == {
            "s1": ["100", "fix the flaky tests"],
            "s2": ["200", "write docs"],
        }
        await sessions.forget("s1")
        await sessions.forget("s-unknown")
        assert await sessions.live() == {"s2": ["200", "write docs"]}
        assert await sessions.session_of("100") == "s1", "words in its thread still name it"
        assert await sessions.session_of(200) == "s2"
        assert await sessions.session_of("300") is None
    finally:
        store.close()


def test_the_command_menu_is_sessions_then_the_cores_chat_commands_in_the_platforms_words():
    menu = dict(command_menu("topic"))
    assert list(menu) == ["sessions", "status", "cancel", "pause", "resume", "away", "back"]
    assert menu["sessions"] == "list the agent sessions and their topics"
    assert menu["pause"] == "in a session's topic: ask the agent to pause"
    assert dict(command_menu())["status"] == "in a session's thread: what the agent is doing"
