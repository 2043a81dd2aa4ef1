"""The Slack adapter measures its own card (`SlackChannel.measure_card`, issue 32): the core
folds a session's messages into a card only while the card measures within
`max_message_length`, and what it folds is posted nowhere else. So a card the adapter
measures within the limit must show every message of its context, with no "left out"
line, as posted and in every update (an outcome line added), and Slack must accept it;
and the measure must not be much more than the drawing (a realistic card takes its few
short messages, and one message more than fits really would be cut)."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from aep_bridge import OutgoingMessage, PermissionOption, PermissionOutcome, PermissionRequest
from aep_bridge.commands.simtime import VirtualTime
from aep_bridge.contract.types import OutcomeStatus
from aep_bridge.markup import Code, Diff, Paragraph, Span, parse_markdown
from aep_bridge.outbox import Job, Outbox
from aep_bridge.store import Store
from aep_bridge.testing import FakeCore
from aep_bridge_slack import SlackChannel, look

from .fake_slack import ALICE, C0AGENTS, FakeMessage, FakeSlack, Limits
from .probe import make_adapter, shown

SESSION = "s-measure"
CUT_WORDS = "left out"
BASE = PermissionRequest(
    id="cMeasure",
    title="claude-code asks permission: Bash",
    description="pip install -r requirements.txt",
    details=parse_markdown(
        "```\npip install -r requirements.txt\n```\n\nInstall the project's dependencies."
    ),
    session_name="Set up the project",
    options=(
        PermissionOption(id="allow", label="Allow", is_allow=True),
        PermissionOption(id="always", label="Always allow"),
        PermissionOption(id="deny", label="Deny"),
    ),
)
ANSWERED = PermissionOutcome(status=OutcomeStatus.ANSWERED, option_label="Allow", by="Alice")
#: the longest line an outcome draws (its words cut at 1,000), on a card that keeps buttons
REFUSED = PermissionOutcome(
    status=OutcomeStatus.REFUSED, option_label="Allow", by="Alice", detail="x" * 2000
)


def _short(n: int) -> OutgoingMessage:
    return OutgoingMessage(type="text", text=f"note{n:03d}: checked the lockfile.")


def _long_reply(n: int) -> OutgoingMessage:
    body = " ".join(f"**w{i}** `c{i}`" for i in range(500))
    return OutgoingMessage(
        type="text", text=f"reply{n:03d}", blocks=parse_markdown(f"reply{n:03d} {body} end{n:03d}")
    )


def _tool_update(n: int) -> OutgoingMessage:
    unified = "@@ -1,60 +1,60 @@\n" + "\n".join(f"-old line {i}\n+new line {i}" for i in range(60))
    return OutgoingMessage(
        type="tool_update",
        key=f"tool-{n}",
        metadata={"tool": "Edit", "call_id": f"tool-{n}", "status": "completed"},
        blocks=(
            Paragraph(spans=(Span(text=f"✅ Edit tool{n:03d} "), Span(text="app.py", code=True))),
            Diff(path="app.py", unified=unified + f"\n+diffend{n:03d}", added=61, removed=60),
            Code(code="\n".join(f"output {i}" for i in range(40)) + f"\noutend{n:03d}"),
        ),
    )


def _thought(n: int) -> OutgoingMessage:
    return OutgoingMessage(type="thought", text=f"step{n:03d} looked at the next file.")


LONG_COMMAND = BASE.model_copy(
    update={
        "description": "pip install " + " ".join(f"package-{i}==1.{i}.0" for i in range(250)),
        "details": None,
    }
)
#: (the card, the messages queued before it, the words that show each one was drawn whole)
CASES = {
    "short messages": (BASE, [_short(n) for n in range(8)], ["note{n:03d}"]),
    "a long reply": (BASE, [_long_reply(n) for n in range(5)], ["reply{n:03d}", "end{n:03d}"]),
    "tool updates with a diff and output": (
        BASE,
        [_tool_update(n) for n in range(8)],
        ["tool{n:03d}", "diffend{n:03d}", "outend{n:03d}"],
    ),
    "many messages": (BASE, [_thought(n) for n in range(70)], ["step{n:03d}"]),
    "a long command in the card": (
        LONG_COMMAND,
        [_long_reply(n) for n in range(4)] + [_short(n) for n in range(4, 8)],
        ["{n:03d}"],
    ),
}


@asynccontextmanager
async def started(fake: FakeSlack) -> AsyncIterator[tuple[SlackChannel, FakeCore]]:
    core = FakeCore(approvers=[ALICE["id"]])
    adapter = make_adapter(fake, core)
    core.attach(adapter)
    await adapter.start()
    try:
        await core.create_thread(adapter, SESSION, "Set up the project")
        yield adapter, core
    finally:
        await adapter.stop()


def _with(request: PermissionRequest, context: list[OutgoingMessage], n: int) -> PermissionRequest:
    """The card carrying the newest `n` messages of `context` (the core folds the newest)."""
    return request.model_copy(
        update={"id": f"{request.id}{n}", "context": tuple(context[len(context) - n :])}
    )


async def _post_and_update(
    adapter: SlackChannel, fake: FakeSlack, request: PermissionRequest
) -> list[FakeMessage]:
    """The card as posted, then as each update leaves it (reopened with the longest
    outcome line, then answered): a snapshot of the card's message after each."""
    before = {m.ts for m in fake.messages(C0AGENTS)}
    await adapter.send_permission_request(SESSION, request)
    (ts,) = [m.ts for m in fake.messages(C0AGENTS) if m.ts not in before]
    snapshots = [_at(fake, ts)]
    for outcome in (REFUSED, ANSWERED):
        await adapter.update_permission_request(SESSION, request, outcome)
        snapshots.append(_at(fake, ts))
    return snapshots


def _at(fake: FakeSlack, ts: str) -> FakeMessage:
    (message,) = [m for m in fake.messages(C0AGENTS) if m.ts == ts]
    return copy.deepcopy(message)


@pytest.mark.parametrize("case", list(CASES))
async def test_a_card_measured_within_the_limit_shows_its_whole_context(case: str) -> None:
    request, context, marks = CASES[case]
    async with FakeSlack(limits=Limits.loose()) as fake:
        async with started(fake) as (adapter, _):
            limit = adapter.capabilities.max_message_length
            sizes = [
                adapter.measure_card(_with(request, context, n)) for n in range(len(context) + 1)
            ]
            assert sizes == sorted(sizes), "a card measures shorter with more context"
            fits = max(n for n, size in enumerate(sizes) if size <= limit)
            assert fits >= 1, f"{case}: not even one message fits: {sizes}"
            kept = context[len(context) - fits :]
            snapshots = await _post_and_update(adapter, fake, _with(request, context, fits))
            over = None
            if fits < len(context):  # one message more: the longest update would cut it
                over = await _post_and_update(adapter, fake, _with(request, context, fits + 1))
        assert fake.violations == []  # Slack accepted every post and update

    for card in snapshots:
        words = shown(card)
        assert CUT_WORDS not in words, f"{case}: {words[:300]}"
        question = words.index("❓ claude-code asks permission: Bash")
        for n in range(len(context) - fits, len(context)):
            for mark in marks:
                token = mark.format(n=n)
                assert token in words[:question], f"{case}: {token} is not in the card"
        drawn = [b for m in kept for b in look.message_look(m).blocks]
        assert card.blocks[: len(drawn)] == drawn  # each message as the thread draws it
    assert snapshots[1].buttons
    assert snapshots[1].blocks[-1]["type"] == "context"
    assert not snapshots[2].buttons
    if over is not None:  # the measure is exact, not just safe: one more is really cut
        assert CUT_WORDS in shown(over[1])


async def test_a_realistic_card_takes_its_few_short_messages() -> None:
    context = (
        OutgoingMessage(type="thought", text="The project has no virtualenv yet."),
        OutgoingMessage(
            type="text",
            text="I will install the dependencies first.",
            blocks=parse_markdown("I will install the **dependencies** first."),
        ),
        OutgoingMessage(type="text", text="Then run `pytest -q`."),
    )
    request = BASE.model_copy(update={"context": context})
    async with FakeSlack(limits=Limits.loose()) as fake:
        async with started(fake) as (adapter, _):
            assert adapter.measure_card(request) <= adapter.capabilities.max_message_length
            snapshots = await _post_and_update(adapter, fake, request)
        assert fake.violations == []
    for card in snapshots:
        words = shown(card)
        assert "The project has no virtualenv yet." in words
        assert "I will install the dependencies first." in words
        assert "Then run `pytest -q`." in words
        assert CUT_WORDS not in words


async def test_through_the_outbox_every_queued_message_shows_exactly_once() -> None:
    """A session queues more than one card holds: the core folds what the adapter measures
    as fitting, and sends the rest before the card; each message shows once, none is lost."""
    said = [
        OutgoingMessage(type="thought", text=f"step{n:03d} looked at the next file " + "x" * 150)
        for n in range(60)
    ]
    request = BASE.model_copy(update={"id": "cOutbox"})
    async with FakeSlack(limits=Limits.loose()) as fake:
        async with started(fake) as (adapter, core):
            vt, store = VirtualTime(), Store.memory()
            outbox = Outbox(adapter, store, clock=vt.clock, sleep=vt.sleep)
            await outbox.start()
            try:
                for message in said:
                    outbox.submit(Job.message(SESSION, message))
                outbox.submit(Job.permission(SESSION, request))
                await asyncio.wait_for(outbox.idle(), 60)
                outbox.submit(Job.permission_update(SESSION, request, ANSWERED))
                await asyncio.wait_for(outbox.idle(), 60)
            finally:
                await outbox.stop(0)
                await vt.close()
                store.close()
            thread = core.thread_id(adapter.instance_name, SESSION)
            assert thread is not None
            replies = fake.thread(C0AGENTS, thread)
        assert fake.violations == []

    (card,) = [m for m in replies if m.text.startswith("❓")]
    in_card = shown(card)
    assert CUT_WORDS not in in_card
    assert "Answered by Alice: Allow" in in_card
    everything = "\n".join(shown(m) for m in replies)
    carried = [n for n in range(60) if f"step{n:03d}" in in_card]
    assert carried, "the card carries none of what was said just before it"
    assert carried == list(range(60 - len(carried), 60))  # the newest, in the card
    assert len(carried) < 60  # more was said than one card holds
    for n in range(60):
        assert everything.count(f"step{n:03d}") == 1, (
            f"step{n:03d} shows {everything.count(f'step{n:03d}')} times"
        )
