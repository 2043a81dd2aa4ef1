"""The channel measures its own card (issue 32): the core folds a session's last messages
into a card only while `measure_card` says the card's message holds them, and what it folds
is posted nowhere else. So whenever `measure_card(request) <= max_message_length`, the card
as sent, answered and filled in shows every one of them, with no "left out" line, within
Telegram's limit; one message more, and the adapter would have to cut. The real adapter and
python-telegram-bot against the fake Bot API, which refuses a message over 4096 units."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest

from aep_bridge import FormField, OutgoingMessage, PermissionRequest
from aep_bridge.commands.simtime import VirtualTime
from aep_bridge.markup import Code, Diff, Paragraph, Span, plain
from aep_bridge.outbox import Job, Outbox
from aep_bridge.store import Store
from aep_bridge.testing.conformance import sample_message

from .fake_bot_api import ALICE, FakeBotApi, FakeMessage, Limits, utf16_len
from .test_telegram_cards import (
    DETAILS,
    SESSION,
    Chat,
    activity,
    answered,
    ask,
    open_chat,
    reply,
    with_context,
)

LEFT_OUT = "earlier message"  # of the line "… N earlier messages left out"
LIMIT = 4000  # the channel's `max_message_length`


@pytest.fixture
async def fake() -> AsyncIterator[FakeBotApi]:
    async with FakeBotApi(limits=Limits.no_rate_limits()) as api:
        yield api
        assert api.violations == []


@pytest.fixture
async def forum(fake: FakeBotApi) -> AsyncIterator[Chat]:
    chat = await open_chat(fake)
    try:
        yield chat
    finally:
        await chat.adapter.stop()


def text(n: int, body: str) -> OutgoingMessage:
    return OutgoingMessage(type="text", text=f"m{n:03}: {body}".strip())


def thought(n: int) -> OutgoingMessage:
    return OutgoingMessage(type="thought", text=f"m{n:03}: checking step {n}")


def diff_update() -> OutgoingMessage:
    """A finished edit with a long diff and its output, as the core sends it."""
    unified = "@@ -1,40 +1,40 @@\n" + "".join(f"-old line {i}\n+new line {i}\n" for i in range(40))
    blocks = (
        Paragraph(spans=(Span(text="✅ Edit "), Span(text="totals.py", code=True))),
        Diff(path="totals.py", unified=unified, added=40, removed=40),
        Code(code="\n".join(f"test_{i} PASSED" for i in range(30))),
    )
    return OutgoingMessage(
        type="tool_update",
        text=plain(blocks),
        blocks=blocks,
        key="activity-9",
        metadata={"activity": True, "status": "completed"},
    )


def long_command() -> PermissionRequest:
    command = " && ".join(f"python -m tool --step {n} --verbose" for n in range(60))  # ~2.3k
    details = (DETAILS[0], Code(code=command, language="bash"), DETAILS[2])
    return ask(details=details, description=plain(details))


def form() -> PermissionRequest:
    field = FormField(id="note", type="string", label="Release note", required=True)
    return ask(kind="form", options=(), fields=(field,))


#: (the card, the session's messages before it, oldest first)
CASES: dict[str, tuple[Callable[[], PermissionRequest], Callable[[], list[OutgoingMessage]]]] = {
    "short messages": (ask, lambda: [sample_message("thought"), reply(), activity()]),
    "a long reply": (ask, lambda: [text(n, "all tests pass. " * 120) for n in range(4)]),
    "a tool update with a diff": (ask, lambda: [reply(), diff_update(), diff_update()]),
    "many messages": (ask, lambda: [thought(n) for n in range(300)]),
    "a long command": (
        long_command,
        lambda: [text(n, "the build is clean. " * 20) for n in range(8)],
    ),
    "a form": (form, lambda: [text(n, "release notes drafted. " * 10) for n in range(30)]),
}


async def alone(forum: Chat, message: OutgoingMessage) -> str:
    """The message's visible text as the topic shows it on its own."""
    await forum.adapter.send_message(SESSION, message)
    return forum.sent()[-1].text


async def send(forum: Chat, request: PermissionRequest) -> FakeMessage:
    await forum.adapter.send_permission_request(SESSION, request)
    return forum.sent()[-1]


@pytest.mark.parametrize("case", CASES)
async def test_a_card_measured_within_the_limit_shows_all_its_context_in_every_version(
    forum: Chat, case: str
) -> None:
    make, history = CASES[case]
    messages = history()

    # the core folds the newest messages while the card measures within the limit
    def newest(k: int, card: str) -> PermissionRequest:
        return with_context(make().model_copy(update={"id": card}), *messages[len(messages) - k :])

    sizes = [forum.adapter.measure_card(newest(k, "c")) for k in range(len(messages) + 1)]
    assert sizes == sorted(sizes), "a card measured shorter with more context"
    taken = max(k for k, size in enumerate(sizes) if size <= LIMIT)
    assert taken >= 1, f"the card takes none of its context: {sizes[:3]}"
    shown = [await alone(forum, m) for m in messages[len(messages) - taken :]]

    request = newest(taken, "c-fits")
    card = await send(forum, request)
    assert LEFT_OUT not in card.text
    assert all(m in card.text for m in shown), "the card does not show all it was given"
    if request.fields:  # a form's step shows on the card with its context
        fill_in = next(b["callback_data"] for b in card.buttons if b["text"] == "Fill in ✏️")
        forum.fake.press(forum.chat, card.message_id, fill_in, ALICE)
        step = await forum.fake.wait_until(
            lambda: (m := forum.fake.message(forum.chat, card.message_id)).edits and m,
            what="the form's first field on the card",
        )
        assert "1/1: Release note" in step.text
        assert LEFT_OUT not in step.text
        assert all(m in step.text for m in shown), "the form's step lost some of the context"
    await forum.adapter.update_permission_request(SESSION, request, answered())
    closed = forum.fake.message(forum.chat, card.message_id)
    assert closed.text.endswith("✅ Answered by Alice: Allow")
    assert utf16_len(closed.text) <= 4096
    assert LEFT_OUT not in closed.text
    assert all(m in closed.text for m in shown), "the answered card lost some of the context"

    if taken < len(messages):  # one more and the card could not show it all: exact, not absurd
        assert sizes[taken + 1] > LIMIT
        over = await send(forum, newest(taken + 1, "c-over"))
        assert LEFT_OUT in over.text  # its line takes room too: one or two go


async def test_a_realistic_card_takes_its_few_short_messages(forum: Chat) -> None:
    command = "pip install -r requirements.txt && pip install -e '.[dev]'"
    details = (
        Paragraph(spans=(Span(text="claude-code wants to run "), Span(text="Bash", bold=True))),
        Code(code=command, language="bash"),
        Paragraph(spans=(Span(text="to install the project's dependencies before the tests"),)),
    )
    request = ask(details=details, description=plain(details))
    said = [
        sample_message("thought"),
        OutgoingMessage(type="text", text="The tests need the dev extras; installing them."),
        sample_message("tool_call"),
    ]
    request = with_context(request, *said)
    assert forum.adapter.measure_card(request) <= LIMIT
    card = await send(forum, request)
    assert all([await alone(forum, m) in card.text for m in said])


async def test_through_the_outbox_a_long_burst_is_all_shown_once_none_left_out(
    fake: FakeBotApi, forum: Chat
) -> None:
    """The session queued more than a card holds: the core folds what the card measures
    it can show and sends the rest ahead of it, so every message appears exactly once on
    the platform, and no card says some were left out."""
    burst = [text(n, "the suite is green again after the fixture fix. " * 6) for n in range(30)]
    request = ask("c-burst")
    vt, store = VirtualTime(), Store.memory()
    outbox = Outbox(forum.adapter, store, clock=vt.clock, sleep=vt.sleep)
    await outbox.start()
    try:
        for message in burst:
            outbox.submit(Job.message(SESSION, message))
        outbox.submit(Job.permission(SESSION, request))
        await asyncio.wait_for(outbox.idle(), 20)
    finally:
        await outbox.stop(0)
        await vt.close()
        store.close()
    posted = forum.sent()
    assert not any(LEFT_OUT in m.text for m in posted), "a card left messages out"
    card = forum.card()
    assert card is posted[-1]
    assert len(posted) > 1, "the burst was meant to be more than one card holds"
    for message in burst:
        where = [m for m in posted if message.text.split(":")[0] + ":" in m.text]
        assert len(where) == 1, f"{message.text[:5]} shows {len(where)} times"
        assert message.text in where[0].text
    assert burst[-1].text in card.text, "the card took none of the burst"
