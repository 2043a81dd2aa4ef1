"""A session's thread reads as a conversation (issue 16, items 3 to 6).

The renderer, fed events in order as the core feeds it, one look at a time: a stretch of tool
calls is one message edited in place, the first prompt joins the session's header, the run's
footer and the session's end go under the reply they close, the prompt is shown once, only
what needs a person rings, and each verbosity shows what docs/rendering.md says. Then the
whole bridge (`Rig`): a card whose question closed before it went out lands where it happened,
and a question's heads-up names its card.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

from aep_bridge import hookimpl
from aep_bridge.aep.envelope import Event
from aep_bridge.aep.redaction import Redactor
from aep_bridge.aep.validation import validate_event
from aep_bridge.contract.adapter import ChannelRegistration
from aep_bridge.contract.types import NotificationMessage, OutgoingMessage, ResolutionStatus
from aep_bridge.markup import Code, plain
from aep_bridge.render import Renderer
from aep_bridge.testing import MemoryChannel

from .rig import ALICE, Rig, memory_host
from .test_heads_up import PacedChannel, _Paced, heads_ups

_seq = itertools.count(1)
CWD = "/home/dev/src/app"


def ev(type_: str, data: dict[str, Any] | None = None, **attrs: Any) -> Event:
    """An event of the session `s1`, its data at capture `redacted`."""
    n = next(_seq)
    wire: dict[str, Any] = {
        "aep": "0.1",
        "id": f"C{n:04d}",
        "type": type_,
        "time": "2026-11-30T10:00:00Z",
        "source": "aep://host/agent/claude-code/session/s1",
        "agent": "claude-code",
        "session": "s1",
        "seq": n,
        "capture": "redacted",
    }
    if data is not None:
        wire["data"] = data
    wire.update(attrs)
    return validate_event(wire)


class Thread:
    """What a channel that edits in place ends up showing: bubbles in the order first sent,
    each at its latest version; and what rang."""

    def __init__(self, verbosity: str = "normal", **look: Any) -> None:
        self.renderer = Renderer(Redactor())
        self.verbosity = verbosity
        self.look = look
        self.bubbles: list[OutgoingMessage] = []
        self.rang: list[str] = []  # messages sent with notify, by first line
        self.heads_ups: list[str] = []

    def feed(self, *events: Event) -> Thread:
        for event in events:
            rendered = self.renderer.render(
                event, ceiling="redacted", verbosity=self.verbosity, **self.look
            )
            for message in rendered.messages:
                keys = [b.key for b in self.bubbles]
                if message.key is not None and message.key in keys:
                    self.bubbles[keys.index(message.key)] = message
                else:
                    self.bubbles.append(message)
                if message.notify:
                    self.rang.append(message.text.splitlines()[0])
            if rendered.notification is not None:
                self.heads_ups.append(rendered.notification.summary)
        return self

    @property
    def texts(self) -> list[str]:
        return [m.text for m in self.bubbles]


def started() -> Event:
    return ev(
        "session.started",
        {"label": "Fix it", "cwd": CWD, "client": {"name": "claude-code", "version": "2.1"}},
    )


def prompt(text: str = "Fix the flaky test, please.") -> Event:
    return ev("message.user.submitted", {"message_id": "u1", "role": "user", "text": text})


def call(n: int, name: str = "Bash", **args: Any) -> Event:
    return ev("tool.requested", {"tool": {"name": name, "call_id": f"c{n}"}, "args_redacted": args})


def done(n: int, result: str = "ok", name: str = "Bash") -> Event:
    return ev(
        "tool.completed",
        {
            "tool": {"name": name, "call_id": f"c{n}"},
            "status": "success",
            "result_redacted": result,
        },
    )


def reply(text: str) -> Event:
    return ev("message.agent.replied", {"message_id": f"m{next(_seq)}", "text": text})


def finished() -> Event:
    return ev(
        "run.finished",
        {
            "duration_ms": 83000,
            "gen_ai.usage.input_tokens": 1200,
            "cost": {"currency": "USD", "total": 0.25},
        },
    )


def ended() -> Event:
    return ev("session.ended", {"reason": "normal", "duration_ms": 96000, "runs": 1})


def a_run() -> list[Event]:
    """A session: a prompt, three calls, a reply, two more calls, the last reply, the end."""
    return [
        started(),
        prompt(),
        ev("run.started", {"trigger": "user", "prompt": "Fix the flaky test, please."}),
        call(1, command="pytest -q"),
        done(1, "1 failed, 3 passed in 0.4s"),
        call(2, "Read", file_path=f"{CWD}/src/app/flaky.py"),
        done(2, "1\tx = 1\n2\ty = 2", "Read"),
        reply("**Found it:** the test sleeps."),
        call(3, "Edit", file_path=f"{CWD}/src/app/flaky.py", old_string="a\n", new_string="b\n"),
        done(3, "", "Edit"),
        call(4, command="pytest -q"),
        done(4, "4 passed in 0.3s"),
        reply("## Fixed\n\nThe test no longer sleeps."),
        finished(),
        ended(),
    ]


# -- the thread, bubble by bubble ------------------------------------------------------------


def test_a_session_reads_as_a_conversation_in_the_order_things_happened():
    thread = Thread().feed(*a_run())
    assert [m.type for m in thread.bubbles] == [
        "system_message",  # the header, with the prompt
        "tool_update",  # pytest, Read
        "text",  # Found it, with the Edit and pytest it announces under it
        "text",  # Fixed, with the run's footer and the session's end
    ]
    header, first, found, fixed = thread.texts
    found, second = found.split("\n\n", 1)
    assert header.startswith("Session started: Fix it")
    assert "User: Fix the flaky test, please." in header
    assert first.splitlines()[0] == "✅ Bash pytest -q — 1 failed, 3 passed in 0.4s"
    assert "✅ Read src/app/flaky.py" in first  # relative to the session's folder
    assert found == "Found it: the test sleeps."
    assert second.splitlines()[0] == "✅ Edit src/app/flaky.py — +1 −1"
    assert "-a" in second  # the change itself, under its line
    assert "+b" in second
    assert fixed.startswith("Fixed\n\nThe test no longer sleeps.")
    assert fixed.endswith(
        "Finished in 1m 23s · 1,200 tokens in · $0.2500\n\n"
        "Session ended (normal) after 1m 36s, 1 run."
    )


def test_the_prompt_is_shown_once():
    thread = Thread().feed(*a_run())
    shown = "\n".join(thread.texts)
    assert shown.count("Fix the flaky test, please.") == 1
    assert "Run started" not in shown


def test_a_run_started_with_a_prompt_nobody_typed_in_the_thread_shows_it():
    thread = Thread().feed(
        started(), ev("run.started", {"trigger": "schedule", "prompt": "Nightly"})
    )
    assert thread.texts[-1].endswith("\n\nRun started (schedule): Nightly")  # in the header


def test_a_second_prompt_is_a_bubble_of_its_own_below_what_came_before():
    thread = Thread().feed(*a_run()[:-2], prompt("Now the docs."))
    assert thread.texts[-1] == "User: Now the docs."
    assert "Now the docs." not in thread.texts[0]


def test_an_activity_that_fills_up_continues_in_a_new_message():
    events = [started(), prompt()]
    for n in range(40):
        events += [call(n, command=f"echo {n}"), done(n, f"{n}")]
    thread = Thread().feed(*events)
    activities = [m for m in thread.bubbles if m.type == "tool_update"]
    assert len(activities) == 2  # 30 calls at most in one
    assert sum(t.count("✅ Bash echo") for t in (m.text for m in activities)) == 40


def test_a_card_closes_the_activity_and_what_follows_goes_below_it():
    ask = ev(
        "attention.requested",
        {"kind": "permission", "prompt": "Allow?", "options": [{"id": "allow", "label": "Allow"}]},
        severity="notice",
    )
    thread = Thread().feed(started(), prompt(), call(1, command="make"), ask, call(2, command="ls"))
    first, second = [m for m in thread.bubbles if m.type == "tool_update"]
    assert "make" in first.text
    assert "ls" not in first.text
    assert "ls" in second.text


def test_a_reply_heads_the_calls_it_announces_in_one_message_edited_in_place():
    thread = Thread().feed(
        started(),
        prompt(),
        reply("I'll run the tests, then read the **failing** one."),
        call(1, command="pytest -q"),
        done(1, "1 failed"),
        call(2, "Read", file_path=f"{CWD}/src/app/flaky.py"),
        done(2, "x = 1", "Read"),
        reply("Fixed."),
        finished(),
    )
    assert len(thread.bubbles) == 3  # the header, the reply with its calls, the answer
    _, work, answer = thread.bubbles
    assert work.key is not None
    assert work.key.startswith("reply:")  # the reply's own message
    assert work.type == "text"
    assert work.text.splitlines() == [
        "I'll run the tests, then read the failing one.",
        "",
        "✅ Bash pytest -q — 1 failed",
        "✅ Read src/app/flaky.py — 1 line",
    ]
    assert [t["status"] for t in work.metadata["tools"]] == ["success", "success"]
    assert answer.text.startswith("Fixed.\n\nFinished in 1m 23s")  # the last reply: its own


def test_a_run_without_a_last_reply_puts_its_footer_apart_not_over_the_calls():
    thread = Thread().feed(
        started(), reply("Running the tests."), call(1, command="pytest"), done(1), finished()
    )
    work, footer = thread.texts[-2:]
    assert work.endswith("✅ Bash pytest — ok")  # the footer did not replace the calls
    assert footer.startswith("Finished in 1m 23s")


def test_the_next_runs_calls_do_not_go_under_the_last_runs_answer():
    thread = Thread().feed(
        started(), reply("Done."), finished(), call(1, command="make"), done(1, "built")
    )
    answer, work = thread.texts[-2:]
    assert answer.startswith("Done.\n\nFinished in 1m 23s")
    assert "make" not in answer
    assert work == "✅ Bash make — built"


def test_a_card_closes_a_replys_calls_and_what_follows_goes_below_it():
    ask = ev(
        "attention.requested",
        {"kind": "permission", "prompt": "Allow?", "options": [{"id": "allow", "label": "Allow"}]},
        severity="notice",
    )
    thread = Thread().feed(
        started(),
        reply("Installing, then testing."),
        call(1, command="pip install x"),
        ask,
        done(1, "installed"),
        call(2, command="pytest"),
    )
    work, after = thread.bubbles[-2:]  # the card, which the core sends, is between them
    assert work.text.startswith("Installing, then testing.")
    assert "✅ Bash pip install x — installed" in work.text  # its line, updated above the card
    assert after.type == "tool_update"
    assert "pytest" in after.text
    assert "pytest" not in work.text


def test_a_reply_too_long_to_take_calls_stands_alone_and_a_full_one_closes():
    from aep_bridge.render.activity import COMBINED_ROOM

    long = reply("word " * (COMBINED_ROOM // 5))
    thread = Thread().feed(started(), long, call(1, command="ls"), done(1))
    assert [m.type for m in thread.bubbles][-2:] == ["text", "tool_update"]
    events = [started(), reply("Many small steps.")]
    for n in range(40):
        events += [call(n, command=f"echo {'x' * 60} {n}"), done(n, "y" * 60)]
    thread = Thread().feed(*events)
    headed = thread.bubbles[1]
    assert headed.text.startswith("Many small steps.")
    assert len(headed.text) <= COMBINED_ROOM
    assert sum(m.text.count("✅ Bash echo") for m in thread.bubbles) == 40


def test_a_reply_with_its_calls_fits_each_platforms_message():
    """The outbox cuts an edit that outgrows a platform's message: a reply never is."""
    from aep_bridge.render.activity import COMBINED_ROOM
    from aep_bridge_discord.channel import MAX_TEXT as DISCORD
    from aep_bridge_discord.embeds import measure as discord_measure
    from aep_bridge_slack.look import MAX_TEXT as SLACK
    from aep_bridge_slack.look import measure as slack_measure
    from aep_bridge_telegram.format import MAX_TEXT as TELEGRAM
    from aep_bridge_telegram.format import visible_length

    words = "A *reply* with `code`, _names_ and [a link](https://example.com) & <tags>. "
    events = [started(), reply(words * (COMBINED_ROOM // 2 // len(words)))]
    for n in range(40):
        events += [
            call(n, "Edit", file_path=f"{CWD}/src/a_{n}.py", old_string="a\n", new_string="b_c\n"),
            done(n, "", "Edit"),
        ]
    headed = Thread().feed(*events).bubbles[1]
    assert headed.metadata.get("activity")
    assert headed.type == "text"
    assert discord_measure(headed.blocks) <= DISCORD
    assert slack_measure(headed.blocks) <= SLACK
    assert visible_length(headed.blocks) <= TELEGRAM


def test_a_long_reply_that_takes_the_runs_footer_fits_each_platforms_message():
    """A reply that may be extended (the run's footer, the session's end) is keyed: one
    message, which the outbox cuts at the platform's limit instead of splitting. So a keyed
    reply must fit the smallest limit (Discord's): a longer one goes unkeyed, split whole,
    with its footer apart. A 2,500-character answer was cut on Discord."""
    from aep_bridge_discord.channel import MAX_TEXT as DISCORD
    from aep_bridge_discord.embeds import measure as discord_measure
    from aep_bridge_slack.look import MAX_TEXT as SLACK
    from aep_bridge_slack.look import measure as slack_measure
    from aep_bridge_telegram.format import MAX_TEXT as TELEGRAM
    from aep_bridge_telegram.format import visible_length

    words = "The *answer* with `code`, _names_ and [a link](https://example.com) & <tags>. "
    for size in (1_000, 1_800, 2_500, 3_000):
        thread = Thread().feed(started(), prompt(), reply(words * (size // len(words))))
        thread.feed(finished(), ended())
        for bubble in thread.bubbles:
            if bubble.key is None:
                continue  # split whole on its way out
            assert discord_measure(bubble.blocks) <= DISCORD, (size, bubble.key)
            assert slack_measure(bubble.blocks) <= SLACK, (size, bubble.key)
            assert visible_length(bubble.blocks) <= TELEGRAM, (size, bubble.key)
        assert sum(m.text.count("The answer with") for m in thread.bubbles) == size // len(words)


# -- what rings ------------------------------------------------------------------------------


def test_by_default_only_an_open_question_and_the_runs_end_ring():
    ask = ev(
        "attention.requested",
        {"kind": "permission", "prompt": "Allow?", "options": [{"id": "allow", "label": "Allow"}]},
        severity="notice",
        subject="Bash",
    )
    thread = Thread().feed(*a_run()[:-3], ask, *a_run()[-3:])
    assert thread.rang == []  # nothing in the thread rings: the heads-ups do
    assert thread.heads_ups == [
        "claude-code asks permission: Bash",
        "claude-code finished: Fixed",
    ]


def test_notify_can_ring_every_reply_and_the_sessions_end_and_nothing_else():
    loud = Thread(notify=["replies", "session_end"]).feed(*a_run())
    assert loud.rang == ["Found it: the test sleeps.", "Fixed"]
    assert loud.heads_ups == ["claude-code: session ended (normal)"]
    silent = Thread(notify=[]).feed(*a_run())
    assert silent.rang == []
    assert silent.heads_ups == []


def test_a_failed_run_rings_as_its_end():
    thread = Thread().feed(started(), ev("run.failed", {"reason": "error"}))
    assert thread.heads_ups == ["claude-code: run failed (error)"]


# -- verbosity -------------------------------------------------------------------------------


def test_quiet_shows_the_header_the_last_reply_with_its_cost_and_nothing_between():
    thread = Thread("quiet").feed(*a_run())
    assert [m.type for m in thread.bubbles] == ["system_message", "text"]
    assert thread.texts[1].startswith("Fixed\n\nThe test no longer sleeps.")
    assert "$0.25" in thread.texts[1]
    assert "Found it" not in "\n".join(thread.texts)  # a reply followed by more work


def test_quiet_shows_the_reply_that_comes_before_a_question():
    ask = ev(
        "attention.requested",
        {"kind": "permission", "prompt": "Push?", "options": [{"id": "allow", "label": "Allow"}]},
        severity="notice",
    )
    thread = Thread("quiet").feed(started(), reply("I will push now."), ask)
    assert thread.texts[-1] == "I will push now."


def test_verbose_adds_durations_and_output_never_json():
    thread = Thread("verbose").feed(
        started(), call(1, "mcp__github__get_issue", owner="acme", number=7), done(1, '{"a": 1}')
    )
    shown = "\n".join(thread.texts)
    assert "github › get_issue" in shown
    assert '{"' not in shown


# -- channels that cannot edit --------------------------------------------------------------


def test_a_channel_that_cannot_edit_gets_one_line_per_call_and_its_footer_apart():
    thread = Thread(edits=False).feed(*a_run())
    assert all(m.key is None or not m.key.startswith("activity:") for m in thread.bubbles)
    lines = [m.text.splitlines()[0] for m in thread.bubbles if m.type.startswith("tool")]
    assert lines[:2] == ["⏳ Bash pytest -q", "✅ Bash pytest -q — 1 failed, 3 passed in 0.4s"]
    assert thread.texts[-1] == "Session ended (normal) after 1m 36s, 1 run."
    assert thread.texts[-2].startswith("Finished in 1m 23s")


# -- cards -----------------------------------------------------------------------------------


def test_a_permission_card_says_exactly_what_is_approved():
    renderer = Renderer(Redactor())
    bash = call(1, command="git push -u origin fix", description="Push the branch")
    for event in (started(), bash):
        renderer.render(event, ceiling="redacted", verbosity="normal")
    ask = ev(
        "attention.requested",
        {
            "kind": "permission",
            "prompt": "Permission requested: Bash",
            "options": [{"id": "allow", "label": "Allow"}, {"id": "deny", "label": "Deny"}],
        },
        subject="Bash",
        cause=bash.id,
        severity="notice",
    )
    card, _ = renderer.permission_request(ask, "k1", ceiling="redacted")
    assert card.title == "claude-code asks permission: Bash"
    assert Code(code="git push -u origin fix", language="bash") in card.details
    assert "Push the branch" in plain(card.details)
    shown = plain(card.details)
    # the working folder, then the command, then the agent's reason
    assert shown.index("Folder: ~/src/app") < shown.index("git push") < shown.index("Push the")
    assert "Permission requested" not in shown  # the title says it
    assert card.description == shown  # what text-only channels show


def test_a_card_for_an_edit_shows_the_file_and_its_change():
    renderer = Renderer(Redactor())
    edit = call(1, "Edit", file_path=f"{CWD}/a.py", old_string="x = 1\n", new_string="x = 2\n")
    for event in (started(), edit):
        renderer.render(event, ceiling="redacted", verbosity="normal")
    ask = ev(
        "attention.requested",
        {"kind": "permission", "prompt": "Edit?", "options": [{"id": "allow", "label": "Allow"}]},
        cause=edit.id,
        severity="notice",
    )
    card, _ = renderer.permission_request(ask, "k1", ceiling="redacted")
    shown = plain(card.details)
    assert "a.py" in shown
    assert "-x = 1" in shown
    assert "+x = 2" in shown


def test_a_card_whose_call_was_not_seen_shows_the_agents_prompt():
    ask = ev(
        "attention.requested",
        {
            "kind": "permission",
            "prompt": "Run rm -rf build?",
            "options": [{"id": "a", "label": "A"}],
        },
        cause="unknown",
        severity="notice",
    )
    card, _ = Renderer(Redactor()).permission_request(ask, "k1", ceiling="redacted")
    assert plain(card.details) == "Run rm -rf build?"
    assert card.description == "Run rm -rf build?"


def test_a_card_never_shows_a_secret_in_the_command():
    renderer = Renderer(Redactor())
    bash = call(1, command="curl -H 'Authorization: Bearer sk-ant-api03-" + "a" * 40 + "' x")
    renderer.render(bash, ceiling="redacted", verbosity="normal")
    ask = ev(
        "attention.requested",
        {"kind": "permission", "prompt": "Allow?", "options": [{"id": "allow", "label": "Allow"}]},
        cause=bash.id,
        severity="notice",
    )
    card, _ = renderer.permission_request(ask, "k1", ceiling="redacted")
    assert "sk-ant-api03" not in plain(card.details) + card.description


# -- the whole bridge ------------------------------------------------------------------------


async def test_a_card_answered_before_it_went_out_lands_where_it_happened(tmp_path):
    """A burst on a slow channel (one call a second): the agent's permission was answered in
    its own terminal before the card's slot came, so the card is no longer urgent and goes in
    the thread's order, below what came before it (an open card would go first)."""
    channels = {"alpha": {"type": "paced", "approvers": ["alice"]}}
    async with Rig(tmp_path, channels=channels, host=memory_host(_Paced())) as rig:
        alpha = rig.channel("alpha")
        agent = rig.agent()
        agent.start()
        for n in range(3):
            agent.emit(
                "message.agent.replied",
                {"message_id": f"m{n}", "text": f"step {n}"},
                capture="redacted",
            )
        asked = agent.ask("Run `make test`?")
        answer = {"answer": {"option": "allow"}, "via": "oob"}
        agent.emit("attention.answered", answer, subject=asked.id, cause=asked.id)
        agent.emit("attention.resolved", {"resolution": "answered"}, subject=asked.id)
        agent.emit(
            "message.agent.replied", {"message_id": "m9", "text": "after"}, capture="redacted"
        )
        await rig.settle()
        texts = rig.thread_texts("alpha")
        card = next(i for i, t in enumerate(texts) if "make test" in t)
        assert [t for t in texts[:card] if t.startswith("step")] == ["step 0", "step 1", "step 2"]
        assert texts[card + 1 :] == ["after"]
        assert heads_ups(alpha) == []  # answered before it rang


async def test_an_open_card_goes_below_what_its_session_said_before_it(tmp_path):
    """Issue 32: the card no longer jumps its own thread's queue (on a paced channel, two of
    four earlier messages landed below it); they go first, merged where they fit."""
    channels = {"alpha": {"type": "paced", "approvers": ["alice"]}}
    async with Rig(tmp_path, channels=channels, host=memory_host(_Paced())) as rig:
        agent = rig.agent()
        agent.start()
        for n in range(3):
            agent.emit(
                "message.agent.replied",
                {"message_id": f"m{n}", "text": f"step {n}"},
                capture="redacted",
            )
        agent.ask("Run `make test`?")
        await rig.settle()
        texts = rig.thread_texts("alpha")
        card = next(i for i, t in enumerate(texts) if "make test" in t)
        for n in range(3):
            assert any(f"step {n}" in t for t in texts[:card]), (n, texts)
        assert not any("step" in t for t in texts[card + 1 :]), texts
        assert PacedChannel.name == "paced"


# -- bounds -----------------------------------------------------------------------------------


def test_a_huge_call_is_kept_bounded_and_its_change_still_shows_when_it_finishes():
    """An event is up to a megabyte and the renderer keeps thousands of calls (for their
    updates and cards): what it keeps of one is bounded, and the change the call showed when
    it started stays under its line when it finishes."""
    thread = Thread()
    big = "x = 1\n" * 150_000  # 900 kB
    edit = call(1, "Edit", file_path=f"{CWD}/a.py", old_string=big, new_string=big + "y = 2\n")
    thread.feed(started(), edit)
    kept = [c for key, c in thread.renderer._calls.items() if key[3] == f"event:{edit.id}"]
    assert len(json.dumps(kept[0].args)) < 20_000
    assert kept[0].args["file_path"] == f"{CWD}/a.py"  # what it does is kept
    started_text = thread.texts[-1]
    assert "+y = 2" in started_text
    thread.feed(done(1, "", "Edit"))
    assert "+y = 2" in thread.texts[-1]
    assert thread.texts[-1].startswith("✅ Edit a.py")
    assert started_text.startswith("⏳ Edit a.py")


class EditsHeadsUps(MemoryChannel):
    """A memory channel that edits a question's heads-up when the question closes."""

    name = "edits-heads-ups"
    capabilities = MemoryChannel.capabilities.model_copy(update={"updates_heads_ups": True})

    def __init__(self, core: Any, config: Any = None) -> None:
        super().__init__(core, config)
        self.notifications: list[NotificationMessage] = []

    async def send_notification(self, notification: NotificationMessage) -> None:
        self.notifications.append(notification)
        await super().send_notification(notification)


class _EditsHeadsUps:
    @hookimpl
    def register_channels(self) -> list[ChannelRegistration]:
        return [ChannelRegistration.of(EditsHeadsUps)]


async def test_a_questions_heads_up_names_its_card_and_learns_the_answer(tmp_path):
    channels = {
        "alpha": {"type": "edits-heads-ups", "approvers": ["alice"]},
        "beta": {"type": "memory", "approvers": ["alice"]},
    }
    async with Rig(tmp_path, channels=channels, host=memory_host(_EditsHeadsUps())) as rig:
        alpha = rig.channel("alpha")
        assert isinstance(alpha, EditsHeadsUps)
        agent = rig.agent()
        agent.start()
        agent.ask("Run `make test`?")
        await rig.settle()
        [heads_up] = alpha.notifications
        [card_id] = list(alpha.cards)
        assert heads_up.request_id == card_id  # a channel can link to the card itself
        assert heads_up.outcome is None
        _, request, _ = alpha.cards[card_id]
        assert request.notify is False  # the heads-up rings; the card does not ring again
        answered = await alpha.press(rig.buttons("alpha")[0][1], ALICE)
        assert answered.status is ResolutionStatus.ACCEPTED
        await rig.settle()
        closing = alpha.notifications[-1]
        assert (closing.request_id, closing.outcome) == (card_id, "Answered by Alice: Allow")
        assert closing.session_name == "fix the tests"  # it still names its session (issue 32)
        # a channel that does not say it edits heads-ups is never sent the closing update
        beta = rig.channel("beta")
        assert [m.text for m in beta.messages if m.thread_id is None] == [
            "fix the tests: test-agent asks permission"
        ]
