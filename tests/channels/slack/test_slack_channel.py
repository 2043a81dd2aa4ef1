"""The Slack adapter against the fake Slack, beyond the conformance kit: acks within Slack's
3 s while the core is slow, forms as a modal (through the real core), `/aep`, what start
says when a token or the channel is wrong (never the token itself), what Slack's refusals
become for the core's outbox (never a wait inside slack-sdk), a dropped Socket Mode
connection, the permalinks of heads-ups, and the hooks to the doctor and the preview."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from aep_bridge import (
    ChannelError,
    ChannelUser,
    NotificationMessage,
    OutgoingMessage,
    PermissionOption,
    PermissionRequest,
    RateLimited,
    Resolution,
    ResolutionStatus,
)
from aep_bridge.testing import FakeCore
from aep_bridge.testing.fixture import BridgeFixture
from aep_bridge_slack import SlackChannel
from tests import permission_card

from .fake_slack import (
    ALICE,
    APP_TOKEN,
    BOB,
    BOT_TOKEN,
    C0AGENTS,
    C0NOTIFY,
    C0OTHER,
    MALLORY,
    S0OPS,
    TEAM_URL,
    FakeSlack,
    Limits,
    make_config,
)
from .probe import make_adapter, shown

SESSION = "s-chan"
REFUSED = Resolution(status=ResolutionStatus.NOT_ALLOWED).message
CARD = PermissionRequest(
    id="cA1",
    title="claude-code asks permission: Bash",
    description="rm -rf build/",
    options=(
        PermissionOption(id="allow", label="Allow", is_allow=True),
        PermissionOption(id="deny", label="Deny"),
    ),
)


class SlowCore(FakeCore):
    """A core that takes its time over a press (a busy store, a slow agent): it answers
    only once the test opens `gate`."""

    def __init__(self) -> None:
        super().__init__(approvers=None)
        self.gate = asyncio.Event()
        self.waiting = 0

    async def resolve_permission(
        self, card_id: str, option: int | str, user: ChannelUser
    ) -> Resolution:
        self.waiting += 1
        await self.gate.wait()
        return await super().resolve_permission(card_id, option, user)


@asynccontextmanager
async def started(
    fake: FakeSlack, core: FakeCore | None = None, **config: Any
) -> AsyncIterator[tuple[SlackChannel, FakeCore]]:
    core = core or FakeCore(approvers=[ALICE["id"]])
    adapter = make_adapter(fake, core, **config)
    core.attach(adapter)
    await adapter.start()
    try:
        yield adapter, core
    finally:
        await adapter.stop()


async def test_a_press_is_acked_at_once_while_the_core_is_still_deciding() -> None:
    async with FakeSlack(limits=Limits.loose()) as fake:
        core = SlowCore()
        async with started(fake, core) as (adapter, core):
            await core.create_thread(adapter, SESSION, "slow")
            await adapter.send_permission_request(SESSION, CARD)
            (card,) = [m for m in fake.messages(C0AGENTS) if m.buttons]
            envelopes = await asyncio.gather(
                fake.press(ALICE, card, "aep_answer_0"), fake.press(BOB, card, "aep_answer_1")
            )
            assert all(e.acked for e in envelopes)  # acked ...
            await fake.wait_until(lambda: core.waiting == 2, what="both presses at the core")
            assert core.presses == []  # ... while the core is still deciding
            core.gate.set()
            await fake.wait_until(lambda: len(core.presses) == 2, what="both presses")
        assert fake.unanswered() == []
        assert fake.violations == []


async def test_an_approver_s_modal_answers_the_agent_and_a_stranger_opens_nothing(
    bridge: BridgeFixture,
) -> None:
    fields = [
        {
            "id": "env",
            "type": "select",
            "label": "Environment",
            "required": True,
            "other": True,
            "choices": [{"id": "stg", "label": "Staging"}, {"id": "prod", "label": "Production"}],
        },
        {"id": "note", "type": "string", "label": "Release note"},
    ]
    async with FakeSlack(limits=Limits.loose()) as fake:
        block = make_config(fake, approver_roles=[S0OPS], approvers=[])
        running = await bridge.start(SlackChannel, block, name="slack")
        try:
            agent = running.agent()
            agent.start("deploy")
            agent.ask("Deploy where?", options=(), kind="form", fields=fields)
            await running.settle()
            (card,) = [m for m in fake.messages(C0AGENTS) if m.buttons]
            assert card.action_ids == ["aep_form"]

            await fake.press(MALLORY, card, "aep_form")  # a stranger: refused, no modal
            await fake.wait_until(lambda: fake.ephemeral(MALLORY), what="the refusal")
            assert fake.ephemeral(MALLORY)[-1].text == REFUSED
            assert fake.views == []
            assert fake.message(C0AGENTS, card.ts).edits == []

            await fake.press(ALICE, card, "aep_form")  # in S0OPS
            (view,) = await fake.wait_until(lambda: fake.views, what="Alice's modal")
            assert view.user == ALICE["id"]
            # nothing chosen and no words: the modal says so under the field, stays open
            errors = await fake.submit(ALICE, view, {})
            assert errors is not None
            assert errors["response_action"] == "errors"
            assert set(errors["errors"]) == {"f0"}
            assert agent.answers == []
            await fake.submit(ALICE, view, {"f0": "1", "f1": "ships it"})
            await fake.wait_until(lambda: agent.answers, what="the answer at the agent")
            await running.settle()
            assert agent.answers == [{"values": {"env": "prod", "note": "ships it"}}]
            assert fake.message(C0AGENTS, card.ts).buttons == []  # answered: the button goes
        finally:
            await running.stop()
        assert fake.violations == []
        assert fake.unanswered() == []


async def test_a_form_submitted_by_a_stranger_is_refused_privately() -> None:
    """A modal can be passed on (an approver opened it; someone else submits): the core
    checks who submits, and the refusal goes to them alone, in the card's thread."""
    form = PermissionRequest(
        id="cF1",
        kind="form",
        title="Deploy?",
        fields=({"id": "note", "type": "string", "label": "Note", "required": True},),  # type: ignore[arg-type]
    )
    async with FakeSlack(limits=Limits.loose()) as fake:
        async with started(fake) as (adapter, core):
            thread = await core.create_thread(adapter, SESSION, "forms")
            await adapter.send_permission_request(SESSION, form)
            (card,) = [m for m in fake.messages(C0AGENTS) if m.buttons]
            await fake.press(ALICE, card, "aep_form")
            (view,) = await fake.wait_until(lambda: fake.views, what="the modal")
            await fake.submit(MALLORY, view, {"f0": "mine now"})
            (note,) = await fake.wait_until(lambda: fake.ephemeral(MALLORY), what="refusal")
            assert (note.text, note.thread_ts) == (REFUSED, thread)
            assert [p.user.id for p in core.refused] == [MALLORY["id"]]
        assert fake.violations == []


async def test_aep_names_a_session_and_says_how_when_it_cannot() -> None:
    async with FakeSlack(limits=Limits.loose()) as fake:
        async with started(fake) as (adapter, core):
            empty = await fake.slash(ALICE, "/aep", "sessions")
            assert empty is not None
            assert empty["text"] == "No agent session is running."
            one = await core.create_thread(adapter, "s-one", "fix the login")
            two = await core.create_thread(adapter, "s-two", "deploy <prod>")
            listed = await fake.slash(ALICE, "/aep", "")
            assert listed is not None
            assert f"<{TEAM_URL}archives/{C0AGENTS}/p{one.replace('.', '')}|" in listed["text"]
            assert "deploy &lt;prod&gt;" in listed["text"]  # a name never links or pings
            unsure = await fake.slash(ALICE, "/aep", "pause")  # two live: which?
            assert unsure is not None
            assert unsure["text"].startswith("Which session?")
            wrong = await fake.slash(ALICE, "/aep", "explode")
            assert wrong is not None
            assert wrong["text"].startswith("Usage: /aep sessions|status")
            assert core.incoming == []
            elsewhere = await fake.slash(MALLORY, "/aep", "sessions", channel=C0OTHER)
            assert elsewhere is not None  # another channel: not even the sessions' names
            assert elsewhere["text"] == f"/aep answers in the agents' channel, <#{C0AGENTS}>."
            await fake.slash(MALLORY, "/aep", "pause deploy", channel=C0OTHER)
            await fake.slash(BOB, "/aep", "pause deploy")
            await fake.slash(BOB, "/aep", "resume s-o")  # the start of its id
            await fake.slash(BOB, "/aep", "away deploy")  # away mode, for one session
            await fake.wait_until(lambda: len(core.incoming) == 3, what="the commands")
            assert [(m.session_id, m.thread_id, m.text, m.user.id) for m in core.incoming] == [
                ("s-two", two, "/pause", BOB["id"]),
                ("s-one", one, "/resume", BOB["id"]),
                ("s-two", two, "/away", BOB["id"]),
            ]
        assert fake.unanswered() == []


async def test_words_in_a_thread_with_two_open_questions_go_to_the_core_as_chat() -> None:
    async with FakeSlack(limits=Limits.loose()) as fake, started(fake) as (adapter, core):
        thread = await core.create_thread(adapter, SESSION, "words")
        for card_id in ("cW1", "cW2"):
            await adapter.send_permission_request(
                SESSION, PermissionRequest(id=card_id, title="Which?", accepts_text=True)
            )
        await fake.say(ALICE, C0AGENTS, "both, please", thread_ts=thread)
        await fake.say(ALICE, C0AGENTS, "not in a thread")  # nothing
        await fake.wait_until(lambda: core.incoming, what="the words")
        assert [(m.text, m.thread_id, m.session_id) for m in core.incoming] == [
            ("both, please", thread, SESSION)
        ]
        assert core.presses == []


async def test_a_refused_token_or_channel_is_a_permanent_error_with_its_fix() -> None:
    async with FakeSlack(limits=Limits.loose()) as fake:
        cases = [
            ({"bot_token": "xoxb-not-the-one"}, "bot_token", "Bot User OAuth Token"),
            ({"app_token": "xapp-not-the-one"}, "app_token", "App-Level Tokens"),
            ({"channel_id": C0OTHER}, "/invite @app", "C0OTHER"),
            ({"channel_id": "C0GONE"}, "channel_not_found", "Channel ID"),
        ]
        for config, *words in cases:
            adapter = make_adapter(fake, FakeCore(), **config)
            with pytest.raises(ChannelError) as caught:
                await adapter.start()
            assert caught.value.permanent, config
            for word in words:
                assert word in str(caught.value), (config, str(caught.value))
            for token in (BOT_TOKEN, APP_TOKEN, "xoxb-not-the-one", "xapp-not-the-one"):
                assert token not in str(caught.value)
            await adapter.stop()
        assert fake.connected == []  # nothing left open


async def test_a_429_is_the_core_s_rate_limited_at_once_with_slack_s_retry_after() -> None:
    async with FakeSlack(limits=Limits.loose()) as fake:
        async with started(fake) as (adapter, core):
            await core.create_thread(adapter, SESSION, "storm")
            fake.fail_next("chat.postMessage", "ratelimited", status=429, retry_after=7)
            with pytest.raises(RateLimited) as caught:
                await adapter.send_message(SESSION, OutgoingMessage(type="text", text="hi"))
            assert caught.value.retry_after == 7.0
            fake.fail_next("chat.update", "internal_error", status=500)
            with pytest.raises(ChannelError) as failed:
                await adapter.rename_session_thread(SESSION, "storm, renamed")
            assert not failed.value.permanent  # Slack's failure: the outbox tries again
            # the outbox's retries go through
            await adapter.send_message(SESSION, OutgoingMessage(type="text", text="hi"))
            await adapter.rename_session_thread(SESSION, "storm, renamed")
        assert len(fake.calls_to("chat.postMessage")) == 3  # the parent, the 429, the retry
        assert "storm, renamed" in shown(fake.parents(C0AGENTS)[0])


async def test_a_dropped_socket_reconnects_and_old_buttons_still_answer() -> None:
    async with FakeSlack(limits=Limits.loose()) as fake:
        async with started(fake) as (adapter, core):
            await core.create_thread(adapter, SESSION, "flaky network")
            await adapter.send_permission_request(SESSION, CARD)
            (card,) = [m for m in fake.messages(C0AGENTS) if m.buttons]
            await fake.drop_socket()
            await fake.wait_until(lambda: fake.connected, timeout=30, what="a new connection")
            await fake.press(ALICE, card, "aep_answer_1")
            await fake.wait_until(lambda: core.presses, what="the press")
            assert (core.presses[0].card_id, core.presses[0].answer) == ("cA1", 1)
        assert fake.unanswered() == []


async def test_a_heads_up_links_to_its_card_and_its_closing_update_edits_it() -> None:
    async with FakeSlack(limits=Limits.loose()) as fake:
        async with started(fake) as (adapter, core):
            thread = await core.create_thread(adapter, SESSION, "heads-up")
            await adapter.send_permission_request(SESSION, CARD)
            (card,) = [m for m in fake.messages(C0AGENTS) if m.buttons]
            asked = NotificationMessage(
                session_id=SESSION,
                session_name="heads-up",
                type="permission",
                summary="claude-code is waiting for you",
                request_id=CARD.id,
            )
            await adapter.send_notification(asked)
            await adapter.send_notification(asked)  # a retry after a restart: once
            (heads_up,) = [m for m in fake.messages(C0NOTIFY) if m.from_bot]
            link = f"archives/{C0AGENTS}/p{card.ts.replace('.', '')}?thread_ts={thread}"
            assert link in heads_up.text
            assert not heads_up.reply_broadcast
            assert heads_up.thread_ts is None
            closing = asked.model_copy(
                update={"outcome": "Allow, by alice", "outcome_status": "answered"}
            )
            await adapter.send_notification(closing)
            now = fake.message(C0NOTIFY, heads_up.ts)
            assert "Allow, by alice" in shown(now)
            assert len(now.edits) == 1
            assert [m.ts for m in fake.messages(C0NOTIFY) if m.from_bot] == [heads_up.ts]
        assert fake.violations == []


async def test_every_session_counts_against_the_one_channel_slack_paces() -> None:
    async with FakeSlack(limits=Limits.loose()) as fake, started(fake) as (adapter, core):
        await core.create_thread(adapter, "a", "one")
        await core.create_thread(adapter, "b", "two")
        assert adapter.limit_keys("a") == adapter.limit_keys("b") == (C0AGENTS, C0AGENTS)
        assert adapter.limit_keys(None) == (C0NOTIFY, C0NOTIFY)


async def test_doctor_checks_the_workspace_and_preview_draws_slack() -> None:
    async with FakeSlack(limits=Limits.loose()) as fake:
        adapter = make_adapter(fake, FakeCore(), approver_roles=[S0OPS])
        checks = await adapter.doctor()  # never started: the doctor needs no socket
        assert checks
        assert [c for c in checks if not c.ok] == []
        assert fake.connected == []
    assert type(SlackChannel.preview_dialect()).__name__ == "SlackDialect"


def test_the_plugin_registers_the_channel_and_its_setup() -> None:
    import aep_bridge_slack

    assert aep_bridge_slack.register_channels() == [SlackChannel]
    (wizard,) = aep_bridge_slack.register_setup_wizards()
    assert type(wizard).__name__ == "SlackSetup"


async def test_the_session_s_header_is_its_parent_message_not_a_reply(
    bridge: BridgeFixture,
) -> None:
    """The channel's list says what each session is (who, where, the first prompt), and the
    thread does not open with a reply repeating it; the header stays through the end."""
    async with FakeSlack(limits=Limits.loose()) as fake:
        running = await bridge.start(SlackChannel, make_config(fake), name="slack")
        try:
            agent = running.agent()
            agent.start("fix the flaky login test", cwd="/srv/shop")
            agent.say("Looking at tests/test_login.py now.")
            await running.settle()
            (parent,) = fake.parents(C0AGENTS)
            replies = fake.thread(C0AGENTS, parent.ts)
            assert "Session started: fix the flaky login test" in shown(parent)
            assert "/srv/shop" in shown(parent)
            assert "Running" in shown(parent)
            assert [shown(m) for m in replies] == ["Looking at tests/test_login.py now."]

            agent.end()
            await running.settle()
            ended = fake.message(C0AGENTS, parent.ts)
            assert "Ended" in shown(ended)
            assert "Session started: fix the flaky login test" in shown(ended)
            assert len(fake.parents(C0AGENTS)) == 1
        finally:
            await running.stop()
        assert fake.violations == []


# -- the card a person judges, in the order they read it (issue 32) ------------------------


def _mrkdwn(blocks: list[dict[str, Any]]) -> str:
    """The card's blocks' text in order, as Slack gets it (header, sections, context)."""
    out = []
    for block in blocks:
        text = block.get("text")
        if isinstance(text, dict):
            out.append(text["text"])
        out.extend(e["text"] for e in block.get("elements", ()) if "text" in e)
    return "\n".join(str(t if isinstance(t, str) else t.get("text", "")) for t in out)


async def test_a_real_bash_card_reads_session_folder_command_reason_then_options() -> None:
    """Claude Code's permission, through the real mapping and renderer, as Slack gets it:
    the session, the folder under home, the whole long command in a code block, the reason
    as mrkdwn (inline code and bold, no doubled markers), then the buttons."""
    request = permission_card.bash_card()
    async with FakeSlack(limits=Limits.loose()) as fake:
        async with started(fake) as (adapter, core):
            await core.create_thread(adapter, SESSION, "card")
            await adapter.send_permission_request(SESSION, request)
            await adapter.send_permission_request(SESSION, permission_card.edit_card())
        bash, edit = [m for m in fake.messages(C0AGENTS) if m.buttons]
        assert fake.violations == []
    drawn = _mrkdwn(bash.blocks)
    assert permission_card.in_order(
        drawn,
        "claude-code asks permission: Bash",
        f"Session: {permission_card.SESSION_NAME}",
        f"Folder: `{permission_card.FOLDER}`",
        "```\n" + permission_card.COMMAND.replace("&", "&amp;") + "\n```",  # whole, in code
        "Install the package with its `test` extras, then run *every* part",
        "Allow",
    )
    assert "Permission requested" not in drawn
    edited = _mrkdwn(edit.blocks)
    assert permission_card.in_order(edited, "Folder: `~/proj`", "src/app.py", "-x = 1")
