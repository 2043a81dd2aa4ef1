"""A model of what a person reads in a thread (issue 34: "0 duplicated", "0 lost"): the real
`Outbox` on a channel that shows a card's context (`card_context`, a declared limit, as
Discord's), merging what waits at a slot's head (`merge_waiting`), driven by a Hypothesis state
machine on simulated time (`VirtualTime`) with plain and keyed replies, their later edits
(a footer or the calls under a reply), long replies split, cards and their answers, calls
refused (429), failed and slow, restarts, and a session whose thread is made while its jobs
wait (its header then shown by editing the thread's parent, as Slack shows it).

The invariant is the bench's (`bench/team_load.py`): every reply carries a mark, and a mark is
found in at most one message of the platform, counting every version of every message (a
card's with its context); after the last call every mark is found in one (nothing lost).
"""

from __future__ import annotations

import asyncio
import random
import re
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from aep_bridge.contract.types import (
    CallKind,
    ChannelError,
    OutcomeStatus,
    OutgoingMessage,
    PermissionOption,
    PermissionOutcome,
    PermissionRequest,
    RateLimit,
    RateLimited,
    RateLimits,
)
from aep_bridge.outbox import Job, Outbox, Priority
from aep_bridge.store import Store
from tests.core.doubles import VirtualTime
from tests.core.rig import machine_settings
from tests.core.test_outbox import HANG, Call, Recorder

SESSIONS = ("s1", "s2")
#: the session that starts with its thread still to make (`hold`, then `make_thread`)
NEW = "s2"
MARK = re.compile(r"\[m(\d+)\]")
WORDS = "the invoice totals were off by a cent because line_total rounded a float "


def words(size: int) -> str:
    return (WORDS * (size // len(WORDS) + 1))[:size].strip() or "ok"


class Versions(Recorder):
    """A recording channel that shows a card's context and keeps every version of every
    message it shows (the bench counts marks in all of them)."""

    def __init__(self, vt: VirtualTime) -> None:
        super().__init__(vt, forum=True, max_length=400)
        self.capabilities = self.capabilities.model_copy(update={"card_context": True})
        self.versions: dict[str, set[str]] = {}
        #: what the next attempts do: "429", "error" (nothing posted) or "slow"
        self.plans: list[str] = []
        self.fail = self._planned_failure
        self.block = self._planned_block
        self.made: set[str] = set()  # the sessions whose thread exists

    def call_kind(self, op: str, args: tuple[Any, ...]) -> CallKind | None:
        """A session's header edits its thread's parent once the thread exists (Slack)."""
        header = op == "send_message" and (args[1].key or "").startswith("session:")
        return "edit" if header and args[0] in self.made else super().call_kind(op, args)

    async def create_session_thread(self, session_id: str, name: str) -> str:
        thread = await super().create_session_thread(session_id, name)
        self.made.add(session_id)
        return thread

    def _planned_failure(self, call: Call) -> BaseException | None:
        if self.plans and self.plans[0] in ("429", "error"):
            plan = self.plans.pop(0)
            if plan == "429":
                return RateLimited(2.0)
            return ChannelError("timed out")
        return None

    def _planned_block(self, call: Call) -> Any:
        if self.plans and self.plans[0] == "slow":
            self.plans.pop(0)
            return self.vt.sleep(7.0)
        return None

    def _snapshot(self) -> None:
        for stored in self.messages:
            self.versions.setdefault(stored.id, set()).add(stored.text)

    async def send_message(self, session_id: str, content: OutgoingMessage) -> None:
        await super().send_message(session_id, content)
        self._snapshot()

    async def send_permission_request(self, session_id: str, request: PermissionRequest) -> None:
        await super().send_permission_request(session_id, request)
        self._snapshot()

    async def update_permission_request(
        self, session_id: str, request: PermissionRequest, outcome: PermissionOutcome
    ) -> None:
        await super().update_permission_request(session_id, request, outcome)
        self._snapshot()

    def marks(self) -> dict[int, set[str]]:
        """Each mark: the messages that showed it, in any version."""
        found: dict[int, set[str]] = {}
        for message_id, texts in self.versions.items():
            for text in texts:
                for mark in MARK.findall(text):
                    found.setdefault(int(mark), set()).add(message_id)
        return found


class EditsApart(Versions):
    """Slack's shape: a keyed message shown before is edited in place (`chat.update`), and
    edits count apart from posts, two in ten seconds for the whole channel (Tier 3): posts
    may then go ahead of the edits waiting for that budget (`Outbox._posts_first`)."""

    def __init__(self, vt: VirtualTime) -> None:
        super().__init__(vt)
        self.capabilities = self.capabilities.model_copy(
            update={"edit_rate_limits": RateLimits(global_=RateLimit(count=2, per_seconds=10))}
        )

    def call_kind(self, op: str, args: tuple[Any, ...]) -> CallKind | None:
        if op == "send_message" and args[1].key and (args[0], args[1].key) in self._by_key:
            return "edit"
        return super().call_kind(op, args)


class OutboxMachine(RuleBasedStateMachine):
    #: the channel the outbox drives
    channel: type[Versions] = Versions

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.tmp = tempfile.TemporaryDirectory(prefix="aep-outbox-model-")
        self.store = Store.open(Path(self.tmp.name) / "state")
        self.vt = VirtualTime()
        self.adapter = self.channel(self.vt)
        self.marks = 0
        self.cards = 0
        #: keyed replies: (session, key) -> (mark, text so far)
        self.keyed: dict[tuple[str, str], tuple[int, str]] = {}
        self.asked: list[tuple[str, PermissionRequest]] = []
        #: whether `NEW`'s thread is still to make (its jobs wait until it is)
        self.held = True
        self.outbox = self._outbox()
        header = f"[m{self._mark()}] {NEW} · claude-code"
        self.outbox.submit(
            Job.message(NEW, OutgoingMessage(type="text", text=header, key=f"session:{NEW}"))
        )

    def _outbox(self) -> Outbox:
        outbox = Outbox(
            self.adapter,
            self.store,
            clock=self.vt.clock,
            sleep=self.vt.sleep,
            merge_waiting=True,
            rng=random.Random(7),
        )
        if self.held:  # the bridge holds a session still "creating" before its outbox starts
            outbox.hold(NEW)
        self._run(outbox.start())
        return outbox

    def _run(self, coroutine: Any) -> Any:
        return self.loop.run_until_complete(coroutine)

    def _mark(self) -> int:
        self.marks += 1
        return self.marks

    @rule(session=st.sampled_from(SESSIONS), size=st.integers(1, 700), thought=st.booleans())
    def reply(self, session: str, size: int, thought: bool) -> None:
        """A plain reply (long ones are split at the limit)."""
        text = f"[m{self._mark()}] {words(size)}"
        content = OutgoingMessage(type="thought" if thought else "text", text=text)
        self.outbox.submit(Job.message(session, content))

    @rule(
        session=st.sampled_from(SESSIONS), size=st.one_of(st.integers(1, 60), st.integers(1, 250))
    )
    def keyed_reply(self, session: str, size: int) -> None:
        """A reply a footer may join later: keyed, shown by editing its message."""
        mark = self._mark()
        key = f"reply:{mark}"
        text = f"[m{mark}] {words(size)}"
        self.keyed[(session, key)] = (mark, text)
        self.outbox.submit(Job.message(session, OutgoingMessage(type="text", text=text, key=key)))

    @precondition(lambda self: bool(self.keyed))
    @rule(data=st.data(), size=st.one_of(st.integers(1, 40), st.integers(1, 400)))
    def grow(self, data: st.DataObject, size: int) -> None:
        """A keyed reply edited: a footer or the calls of an activity join it."""
        session, key = data.draw(st.sampled_from(sorted(self.keyed)))
        mark, text = self.keyed[(session, key)]
        text = f"{text}\n\n_{words(size)}_"
        self.keyed[(session, key)] = (mark, text)
        self.outbox.submit(Job.message(session, OutgoingMessage(type="text", text=text, key=key)))

    @rule(session=st.sampled_from(SESSIONS))
    def ask(self, session: str) -> None:
        self.cards += 1
        request = PermissionRequest(
            id=f"c{self.cards}",
            title=f"Run make test {self.cards}?",
            options=(PermissionOption(id="yes", label="Yes", is_allow=True),),
        )
        self.asked.append((session, request))
        self.outbox.submit(Job.permission(session, request))

    @precondition(lambda self: bool(self.asked))
    @rule(data=st.data())
    def answer(self, data: st.DataObject) -> None:
        session, request = data.draw(st.sampled_from(self.asked))
        outcome = PermissionOutcome(status=OutcomeStatus.ANSWERED, option_label="Yes", by="alice")
        self.outbox.submit(Job.permission_update(session, request, outcome))

    @precondition(lambda self: self.held)
    @rule()
    def make_thread(self) -> None:
        """`NEW`'s thread is made (a call, as the bridge makes it), and its jobs go."""
        name = f"{NEW} · claude-code"
        call = self.outbox.call(
            "create_session_thread", NEW, name, priority=Priority.FINAL, session_id=NEW
        )
        try:
            self._run(asyncio.wait_for(call, HANG))
        except ChannelError:
            return  # refused too often: the bridge tries again later
        self.held = False
        self.outbox.release(NEW)

    @rule(plan=st.sampled_from(["429", "error", "slow"]))
    def trouble(self, plan: str) -> None:
        """The next attempt is refused, fails without posting, or hangs for a while."""
        self.adapter.plans.append(plan)

    @rule(seconds=st.sampled_from([0.0, 0.5, 1.0, 3.0, 10.0]))
    def wait(self, seconds: float) -> None:
        self._run(self.vt.sleep(seconds))

    @rule()
    def restart(self) -> None:
        """Stopped with calls queued (and maybe one in flight), started again on its rows."""
        self._run(self.outbox.stop(0))
        self.outbox = self._outbox()

    @invariant()
    def each_reply_is_shown_at_most_once(self) -> None:
        twice = {mark: ids for mark, ids in self.adapter.marks().items() if len(ids) > 1}
        assert not twice, (
            twice,
            {i: self.adapter.versions[i] for ids in twice.values() for i in ids},
        )

    def each_keyed_reply_shows_its_last_edit(self) -> None:
        """What a person reads at the end: each keyed reply as last edited, in the message
        that shows it (merged with others or alone), or cut at its end with "…" where it
        outgrew the limit; a card's context shows an edit only with the card's next update,
        so a reply a card still carries is not looked for."""
        carried = {message_id for _, _, message_id in self.adapter.cards.values()}
        for (session, _key), (mark, text) in self.keyed.items():
            tag = f"[m{mark}]"
            shown = [m for m in self.adapter.messages if tag in m.text]
            if any(m.id in carried for m in shown):
                continue
            assert len(shown) == 1, (session, mark, [m.text for m in shown])
            part = shown[0].text.split(tag, 1)[1].split("\n\n[m", 1)[0]
            part = tag + part
            if part == text:
                continue
            assert part.endswith("…"), (session, mark, part, text)
            assert text.startswith(part[:-1].rstrip(" _\n")), (session, mark, part, text)

    def teardown(self) -> None:
        try:
            self.adapter.plans.clear()
            if self.held:
                self.make_thread()
            self._run(asyncio.wait_for(self.outbox.idle(), HANG))
            self._run(self.outbox.stop())
            self.each_reply_is_shown_at_most_once()
            lost = set(range(1, self.marks + 1)) - set(self.adapter.marks())
            assert not lost, f"replies never shown: {sorted(lost)}"
            self.each_keyed_reply_shows_its_last_edit()
        finally:
            self._run(self.vt.close())
            for task in asyncio.all_tasks(self.loop):
                task.cancel()
            self._run(asyncio.sleep(0))
            self.loop.close()
            self.store.close()
            self.tmp.cleanup()


OutboxMachine.TestCase.settings = machine_settings(150, 40)
TestOutboxModel = OutboxMachine.TestCase


class EditsApartMachine(OutboxMachine):
    """The same model where edits count apart from posts (Slack's Tier 3)."""

    channel = EditsApart


EditsApartMachine.TestCase.settings = machine_settings(150, 40)
TestOutboxModelEditsApart = EditsApartMachine.TestCase
