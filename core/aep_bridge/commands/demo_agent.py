"""`aep-bridge demo`: a scripted coding agent against the running bridge, answered in any channel.

A newcomer with no agent installed still sees the whole product: one realistic session (a
run, a plan, tool calls with their output, a permission question, an AEP-0006 form, a reply
in markdown, the end) goes to the bridge over its WebSocket as a real agent's would, and the
agent waits for each answer given in whatever channel shows it (the web page, the console,
Telegram...). It takes each answer as a real agent does (`control.accepted`,
`attention.answered`, `attention.resolved`, through `TinyAgent`), prints it, and carries on
with what the answer says.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ..aep.envelope import Event
from ..aep.form_values import form_problem
from ..aep.ids import new_id
from .tinyagent import REFUSING_WORDS, Cancelled, TinyAgent

AGENT: Final = "aep-bridge-demo"
LABEL: Final = "Fix the flaky checkout test"
#: the default seconds each question waits for its answer
DEFAULT_TIMEOUT: Final = 300.0
#: the default pause between steps, so a person watching sees the session unfold
DEFAULT_PACE: Final = 0.3

BRANCH: Final = "fix/checkout"
PUSH: Final = f"git push origin {BRANCH}"
TEST: Final = "pytest -x tests/test_checkout.py"
TEST_FILE: Final = "/home/you/src/shop/tests/test_checkout.py"

PERMISSION: Final = {
    "kind": "permission",
    "prompt": f"Permission requested: Bash \u2014 {PUSH} (Push the fix for review)",
    "options": [{"id": "allow", "label": "Allow"}, {"id": "deny", "label": "Deny"}],
    "respond_via": ["control"],
}
CHANNELS: Final = (("stable", "Stable"), ("beta", "Beta"), ("nightly", "Nightly"))
FORM: Final = {
    "kind": "form",
    "prompt": "Where should the fix be released?",
    "fields": [
        {
            "id": "channel",
            "type": "select",
            "label": "Release channel",
            "required": True,
            "choices": [{"id": i, "label": label} for i, label in CHANNELS],
        },
        {"id": "notes", "type": "string", "label": "Release notes"},
    ],
    "respond_via": ["control"],
}

_FAILED_RUN: Final = (
    "F\n"
    "=================================== FAILURES ===================================\n"
    "_____________________________ test_checkout_total _____________________________\n"
    "\n"
    "    def test_checkout_total(cart):\n"
    ">       assert checkout(cart).total == Decimal('23.50')\n"
    "E       AssertionError: assert Decimal('0.00') == Decimal('23.50')\n"
    "\n"
    "tests/test_checkout.py:18: AssertionError\n"
    "=========================== short test summary info ============================\n"
    "FAILED tests/test_checkout.py::test_checkout_total - AssertionError\n"
    "!!!!!!!!!!!!!!!!!!!!!!!!!! stopping after 1 failures !!!!!!!!!!!!!!!!!!!!!!!!!!!\n"
    "1 failed in 0.38s"
)
_OLD: Final = (
    "@pytest.fixture\n"
    "def cart(prices):\n"
    "    asyncio.ensure_future(prices.load())\n"
    "    return Cart(prices)\n"
)
_NEW: Final = (
    "@pytest.fixture\nasync def cart(prices):\n    await prices.load()\n    return Cart(prices)\n"
)
_DIFF: Final = (
    "--- a/tests/test_checkout.py\n"
    "+++ b/tests/test_checkout.py\n"
    "@@ -9,4 +9,4 @@\n"
    " @pytest.fixture\n"
    "-def cart(prices):\n"
    "-    asyncio.ensure_future(prices.load())\n"
    "+async def cart(prices):\n"
    "+    await prices.load()\n"
    "     return Cart(prices)\n"
)


@dataclass(frozen=True, slots=True)
class Given:
    """One answer the demo received: to which question, what, and from whom."""

    question: str
    answer: dict[str, Any]
    by: str

    def __str__(self) -> str:
        values = self.answer.get("values")
        if isinstance(values, dict):
            shown = ", ".join(f"{k}: {v}" for k, v in values.items())
        else:
            shown = str(self.answer.get("option") or self.answer.get("text") or "")
        return f"{self.question}: {shown} ({self.by})"


def answerer(command: Event) -> str:
    """Who answered, in words: the person when the command names one, else who sent it."""
    by = (command.data or {}).get("by")
    return f"by {by}" if isinstance(by, str) and by else f"via {command.agent}"


class _Recording(TinyAgent):
    """A `TinyAgent` that keeps every event it sends, acks and answers included."""

    sent: list[Event]

    async def emit(self, type_: str, data: dict[str, Any] | None = None, **envelope: Any) -> Event:
        event = await super().emit(type_, data, **envelope)
        self.sent.append(event)
        return event


class DemoAgent:
    """The scripted session; `run()` plays it and returns the answers it got."""

    def __init__(
        self,
        url: str,
        token: str | None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        pace: float = DEFAULT_PACE,
        say: Callable[[str], None] = print,
    ) -> None:
        self.url = url
        self.token = token
        self.timeout = timeout
        self.pace = pace
        self.say = say
        self.session = f"demo-{new_id().lower()}"
        #: every event the demo sent, in order (what a test validates)
        self.sent: list[Event] = []
        self.given: list[Given] = []
        self._agent: TinyAgent | None = None
        self._calls = 0
        #: the `tool.requested` event id of each call, by call id
        self._requested: dict[str, str] = {}

    async def run(self) -> list[Given]:
        """Play the session. Raises `TimeoutError` when a question waits in vain, `Cancelled`
        on `control.cancel` (the session is ended properly first) and `AgentError` when the
        bridge is not there or goes away."""
        agent = _Recording(self.url, self.token, agent=AGENT, session=self.session)
        agent.sent = self.sent
        async with agent:
            self._agent = agent
            try:
                await self._play()
            except TimeoutError:
                await self._end("timeout")
                raise
            except Cancelled:
                await self._end("killed", cancelled="control")
                raise
            except asyncio.CancelledError:  # Ctrl-C: the session ends, not left running
                await asyncio.wait_for(self._end("killed", cancelled="user"), 5)
                raise
        return self.given

    # -- the script ----------------------------------------------------------------------

    async def _play(self) -> None:
        prompt = (
            "tests/test_checkout.py fails about one run in five on CI. Find out why, fix it, "
            "and push the fix."
        )
        await self._emit(
            "session.started",
            {"label": LABEL, "client": {"name": AGENT}, "cwd": "/home/you/src/shop"},
            capture="redacted",
        )
        self.say(f"demo session {self.session} started: watch it in your channels")
        await self._emit(
            "message.user.submitted",
            {"message_id": "m1", "role": "user", "text": prompt, "chars": len(prompt)},
            capture="redacted",
        )
        self._run("r1")
        await self._emit("run.started", {"trigger": "user"})
        plan = (
            ("t1", "Reproduce the flaky failure"),
            ("t2", "Await the price load in the cart fixture"),
            ("t3", "Push the fix and pick a release channel"),
        )
        for task_id, title in plan:
            task = {"task": {"id": task_id, "title": title}}
            await self._emit("progress.task.planned", task, pace=False, capture="redacted")
        await self._bash(TEST, "Run the checkout tests", error=_FAILED_RUN)
        await self._done(plan[0])
        await self._tool(
            "Edit",
            {"file_path": TEST_FILE, "old_string": _OLD, "new_string": _NEW},
            result=_DIFF,
        )
        await self._bash(TEST, "Run the checkout tests again", result="5 passed in 0.41s")
        await self._done(plan[1])

        call = await self._tool("Bash", {"command": PUSH, "description": "Push the fix for review"})
        push = await self._ask(
            "push", PERMISSION, subject="Bash", cause=self._requested[call["call_id"]]
        )
        pushed = push.get("option") == "allow"
        if pushed:
            await self._finish_tool(
                call,
                result="To github.com:you/shop.git\n * [new branch]  fix/checkout -> fix/checkout",
            )
        else:
            denied = "You denied the push; the fix stays on the local branch."
            await self._finish_tool(call, error=denied, kind="denied")

        release = await self._ask("release", FORM)
        values = release.get("values") or {}
        await self._done(plan[2])
        await self._emit(
            "message.agent.replied",
            _reply(pushed, str(values.get("channel", "")), str(values.get("notes") or "")),
            capture="redacted",
        )
        await self._emit(
            "run.finished",
            {
                "duration_ms": 48_200,
                "gen_ai.usage.input_tokens": 18_412,
                "gen_ai.usage.output_tokens": 1_906,
                "cost": {"currency": "USD", "total": 0.0838},
            },
        )
        self._run(None)
        await self._emit("session.ended", {"reason": "normal", "runs": 1})

    # -- steps ---------------------------------------------------------------------------

    def _run(self, run: str | None) -> None:
        assert self._agent is not None
        self._agent.run = run

    async def _emit(
        self, type_: str, data: dict[str, Any], *, pace: bool = True, **envelope: Any
    ) -> Event:
        assert self._agent is not None
        if pace and self.pace:
            await asyncio.sleep(self.pace)
        return await self._agent.emit(type_, data, **envelope)

    async def _tool(
        self, name: str, args: dict[str, Any], *, result: str | None = None
    ) -> dict[str, str]:
        """A tool call; it completes at once when `result` is given."""
        self._calls += 1
        call = {"name": name, "call_id": f"call_{self._calls:02d}"}
        requested = await self._emit(
            "tool.requested",
            {"tool": call, "args_redacted": args},
            subject=name,
            capture="redacted",
        )
        self._requested[call["call_id"]] = requested.id  # a question it causes names it
        if result is not None:
            await self._finish_tool(call, result=result)
        return call

    async def _finish_tool(
        self,
        call: dict[str, str],
        *,
        result: str | None = None,
        error: str | None = None,
        kind: str = "exit 1",
    ) -> None:
        if error is None:
            data: dict[str, Any] = {"tool": call, "status": "success", "result_redacted": result}
            await self._emit("tool.completed", data, subject=call["name"], capture="redacted")
            return
        await self._emit(
            "tool.failed",
            {"tool": call, "error": {"type": kind, "message": error}},
            subject=call["name"],
            severity="warning",
            capture="redacted",
        )

    async def _bash(
        self, command: str, description: str, *, result: str | None = None, error: str | None = None
    ) -> None:
        call = await self._tool("Bash", {"command": command, "description": description})
        await self._finish_tool(call, result=result, error=error)

    async def _done(self, task: tuple[str, str]) -> None:
        await self._emit(
            "progress.task.completed",
            {"task": {"id": task[0], "title": task[1]}, "status": "completed"},
            capture="redacted",  # the titles are words
        )

    async def _ask(self, question: str, data: dict[str, Any], **envelope: Any) -> dict[str, Any]:
        """Ask, wait for an answer the request accepts, take it as an agent does, print it."""
        assert self._agent is not None
        request = await self._emit(
            "attention.requested", data, severity="notice", capture="redacted", **envelope
        )
        self.say(f"waiting for your answer ({question}): answer it in any channel")
        try:
            async with asyncio.timeout(self.timeout):
                command, answer = await self._answer_to(request)
        except TimeoutError:
            await self._emit(
                "attention.timeout",
                {"after_ms": int(self.timeout * 1000)},
                subject=request.id,
                cause=request.id,
                pace=False,
            )
            raise
        await self._report(command, answer)
        given = Given(question, answer, answerer(command))
        self.given.append(given)
        self.say(str(given))
        return answer

    async def _answer_to(self, request: Event) -> tuple[Event, dict[str, Any]]:
        """The first `control.attention.respond` for `request` with an answer it accepts, and
        that answer as the demo takes it; anything else is acknowledged as a real agent
        would (a redelivered command gets its recorded ack again: `TinyAgent.ack`)."""
        assert self._agent is not None
        agent = self._agent
        while True:
            command = await agent.next_command()
            if command.type == "control.cancel":
                await agent.ack(command)
                raise Cancelled()
            if command.type != "control.attention.respond":
                await agent.ack(command, "unsupported", f"{command.type} is not accepted here")
                continue
            if command.subject != request.id:
                await agent.ack(command, "invalid", "no open request has that subject")
                continue
            taken = take(request.data or {}, (command.data or {}).get("answer"))
            if isinstance(taken, str):
                await agent.ack(command, "invalid", taken)
                continue
            return command, taken

    async def _report(self, command: Event, answer: dict[str, Any]) -> None:
        """Accept the command, then report `attention.answered` (the answer as taken) and
        `attention.resolved`, as a real agent does. Typed words travel at `redacted`."""
        assert self._agent is not None
        ack = await self._agent.ack(command)
        values = answer.get("values") or {}
        words = "text" in answer or any(isinstance(v, str) for v in values.values())
        await self._emit(
            "attention.answered",
            {"answer": answer, "via": "control", "by": command.agent},
            subject=command.subject,
            cause=command.id,
            capture="redacted" if words else "metadata",
            pace=False,
        )
        await self._emit(
            "attention.resolved",
            {"resolution": "answered"},
            subject=command.subject,
            cause=ack.id,
            pace=False,
        )

    async def _end(self, reason: str, *, cancelled: str | None = None) -> None:
        """Close the run and the session after a timeout or a cancel (by `control`, or by
        the `user` at the demo's terminal), as an agent does."""
        assert self._agent is not None
        if self._agent.run is not None:
            if cancelled:
                await self._emit("run.cancelled", {"by": cancelled}, pace=False)
            else:
                await self._emit("run.failed", {"reason": reason}, pace=False)
            self._run(None)
        await self._emit("session.ended", {"reason": reason}, pace=False)


def take(request: dict[str, Any], answer: Any) -> dict[str, Any] | str:
    """The answer as the demo takes it, or why it refuses it (`control.rejected` `invalid`).

    Every channel can answer: a channel without forms or buttons sends words (AEP-0008),
    which the demo reads as a real agent would. Words to a permission pick the option they
    name (its id or label), and any other words deny: unmatched text never grants. Words to
    the release form name the channel first, then the notes (`beta ship it`)."""
    answer = answer if isinstance(answer, dict) else {}
    text = answer.get("text")
    words = text.strip() if isinstance(text, str) else ""
    fields = request.get("fields")
    if isinstance(fields, list):
        values = answer.get("values")
        if isinstance(values, dict):
            return form_problem(fields, values) or {"values": values}
        if not words:
            return "this form is answered with values, or in words"
        first, _, rest = words.partition(" ")
        chosen = _named(first, CHANNELS)
        if chosen is None:
            names = ", ".join(i for i, _ in CHANNELS)
            return f"name the release channel first ({names}), then any notes"
        values = {"channel": chosen, **({"notes": rest.strip()} if rest.strip() else {})}
        return {"text": text, "values": values}
    options = [(o["id"], o["label"]) for o in request.get("options") or []]
    option = answer.get("option")
    if isinstance(option, str):
        return {"option": option} if option in dict(options) else "no such option"
    if not words:
        return "the answer names no option of this request"
    named = _named(words, options)
    if named is not None:
        return {"option": named}
    refusing = [i for i, _ in options if i in REFUSING_WORDS]
    return {"option": refusing[0], "text": text} if refusing else "no option has that name"


def _named(word: str, choices: Sequence[tuple[str, str]]) -> str | None:
    """The id of the choice `word` names by its id or label, in any case."""
    wanted = word.casefold()
    return next((i for i, label in choices if wanted in (i.casefold(), label.casefold())), None)


def _reply(pushed: bool, channel: str, notes: str) -> dict[str, Any]:
    """The agent's closing message, in markdown, saying what the answers decided."""
    label = dict(CHANNELS).get(channel, channel)
    pushed_line = (
        "- pushed `fix/checkout` to `origin`"
        if pushed
        else "- **not pushed**: you denied `git push`, so `fix/checkout` stays local"
    )
    text = (
        "## Fixed: the flaky checkout test\n\n"
        "**Root cause:** the `cart` fixture started `prices.load()` without awaiting it, so "
        "about one run in five checked out an empty cart.\n\n"
        "| file | change |\n|---|---|\n"
        "| `tests/test_checkout.py` | the fixture awaits the price load |\n\n"
        f"{pushed_line}\n"
        f"- release channel: **{label}**\n"
        + (f"- notes: {notes}\n" if notes else "")
        + f"\n`{TEST}`: 5 passed."
    )
    return {"message_id": "m2", "role": "assistant", "text": text, "chars": len(text)}


__all__ = [
    "AGENT",
    "DEFAULT_PACE",
    "DEFAULT_TIMEOUT",
    "LABEL",
    "DemoAgent",
    "Given",
    "answerer",
    "take",
]
