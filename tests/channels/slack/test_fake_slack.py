"""The fake Slack, driven by the real slack-sdk and slack-bolt over loopback HTTP and WebSocket.

These tests prove the fake speaks Slack's wire format (slack-sdk parses every answer, bolt's
Socket Mode handler connects, receives each kind of envelope and acks it) and enforces Slack's
limits with Slack's errors, so channel tests written against it mean something.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from .fake_slack import (
    ALICE,
    APP_TOKEN,
    BOB,
    BOT_ID,
    BOT_SCOPES,
    BOT_TOKEN,
    BOT_USER_ID,
    C0AGENTS,
    C0NOTIFY,
    C0OTHER,
    MALLORY,
    S0OPS,
    TEAM_URL,
    FakeSlack,
    Limits,
    Window,
    make_config,
)

LOOSE = Limits.loose()


def web(fake: FakeSlack, token: str = BOT_TOKEN) -> AsyncWebClient:
    return AsyncWebClient(token=token, base_url=fake.api_base_url)


def button(action_id: str, value: str, text: str = "Allow", **extra: Any) -> dict[str, Any]:
    return {
        "type": "button",
        "action_id": action_id,
        "text": {"type": "plain_text", "text": text},
        "value": value,
        **extra,
    }


def card(*buttons: dict[str, Any], text: str = "Run the tests?") -> list[dict[str, Any]]:
    return [
        {"type": "section", "text": {"type": "mrkdwn", "text": text}},
        {"type": "actions", "block_id": "answers", "elements": list(buttons)},
    ]


FORM_VIEW: dict[str, Any] = {
    "type": "modal",
    "callback_id": "aep_form",
    "private_metadata": "card-1",
    "title": {"type": "plain_text", "text": "Deploy"},
    "submit": {"type": "plain_text", "text": "Send"},
    "blocks": [
        {
            "type": "input",
            "block_id": "f0",
            "label": {"type": "plain_text", "text": "Where"},
            "element": {
                "type": "static_select",
                "action_id": "v",
                "options": [
                    {"text": {"type": "plain_text", "text": "Staging"}, "value": "staging"},
                    {"text": {"type": "plain_text", "text": "Prod"}, "value": "prod"},
                ],
            },
        },
        {
            "type": "input",
            "block_id": "f1",
            "label": {"type": "plain_text", "text": "Replicas"},
            "element": {"type": "number_input", "action_id": "v", "is_decimal_allowed": False},
        },
        {
            "type": "input",
            "block_id": "f2",
            "optional": True,
            "label": {"type": "plain_text", "text": "Note"},
            "element": {"type": "plain_text_input", "action_id": "v", "max_length": 20},
        },
    ],
}


@asynccontextmanager
async def bolt(
    fake: FakeSlack, setup: Callable[[AsyncApp], None], **options: Any
) -> AsyncIterator[AsyncWebClient]:
    """A real bolt AsyncApp with its listeners, connected over Socket Mode, closed after."""
    client = web(fake)
    app = AsyncApp(client=client, **options)
    setup(app)
    handler = AsyncSocketModeHandler(app, APP_TOKEN)
    await handler.connect_async()
    try:
        await fake.wait_until(lambda: fake.connected, what="a Socket Mode connection")
        yield client
    finally:
        await handler.close_async()


async def expect_error(call: Any, error: str) -> SlackApiError:
    with pytest.raises(SlackApiError) as caught:
        await call
    assert caught.value.response["error"] == error
    return caught.value


# -- Web API ---------------------------------------------------------------------------------


async def test_auth_test_names_the_bot_and_announces_its_scopes() -> None:
    async with FakeSlack() as fake:
        answer = await web(fake).auth_test()
        assert answer["user_id"] == BOT_USER_ID
        assert answer["bot_id"] == BOT_ID
        assert answer["url"] == TEAM_URL
        assert set(answer.headers["x-oauth-scopes"].split(",")) == set(BOT_SCOPES)
        assert fake.violations == []


async def test_tokens_are_checked_like_slack_checks_them() -> None:
    async with FakeSlack() as fake:
        await expect_error(web(fake, "xoxb-wrong").auth_test(), "invalid_auth")
        await expect_error(web(fake, APP_TOKEN).auth_test(), "not_allowed_token_type")
        await expect_error(
            web(fake).apps_connections_open(app_token=BOT_TOKEN), "not_allowed_token_type"
        )
        opened = await web(fake).apps_connections_open(app_token=APP_TOKEN)
        assert opened["url"].startswith(f"ws://127.0.0.1:{fake.port}/socket?ticket=")
        assert fake.violations == []  # a wrong token is the test's doing, not a violation
        await expect_error(web(fake).api_call("chat.frobnicate"), "unknown_method")
        assert [v.kind for v in fake.violations] == ["unknown_method"]


async def test_a_missing_scope_is_refused_with_the_scope_needed() -> None:
    async with FakeSlack() as fake:
        fake.scopes.discard("chat:write")
        error = await expect_error(
            web(fake).chat_postMessage(channel=C0AGENTS, text="hi"), "missing_scope"
        )
        assert error.response["needed"] == "chat:write"
        assert "chat:write" not in error.response.headers["x-oauth-scopes"]


async def test_the_workspace_reads_back_as_slack_answers() -> None:
    async with FakeSlack(LOOSE) as fake:
        client = web(fake)
        info = await client.conversations_info(channel=C0AGENTS)
        assert info["channel"]["is_member"] is True
        assert (await client.conversations_info(channel=C0OTHER))["channel"]["is_member"] is False
        await expect_error(client.conversations_info(channel="C0NOPE"), "channel_not_found")
        mine = await client.users_conversations(types="public_channel,private_channel")
        assert [c["id"] for c in mine["channels"]] == [C0AGENTS, C0NOTIFY]
        first = await client.conversations_list(limit=2)
        rest = await client.conversations_list(
            limit=2, cursor=first["response_metadata"]["next_cursor"]
        )
        assert [c["id"] for c in first["channels"] + rest["channels"]] == [
            C0AGENTS,
            C0NOTIFY,
            C0OTHER,
        ]
        members = await client.conversations_members(channel=C0NOTIFY)
        assert set(members["members"]) == {ALICE["id"], BOB["id"], BOT_USER_ID}
        assert (await client.users_info(user=ALICE["id"]))["user"]["name"] == "alice"
        await expect_error(client.users_info(user="U0NOBODY"), "user_not_found")
        group = await client.usergroups_users_list(usergroup=S0OPS)
        assert group["users"] == [ALICE["id"]]
        await expect_error(client.usergroups_users_list(usergroup="S0NONE"), "no_such_subteam")
        assert fake.violations == [
            v
            for v in fake.violations
            if v.kind in ("channel_not_found", "user_not_found", "no_such_subteam")
        ]


async def test_messages_threads_edits_and_permalinks() -> None:
    async with FakeSlack(LOOSE) as fake:
        client = web(fake)
        parent = await client.chat_postMessage(channel=C0AGENTS, text="session s1")
        reply = await client.chat_postMessage(
            channel=C0AGENTS, text="hello", thread_ts=parent["ts"]
        )
        assert parent["ts"] < reply["ts"]
        assert reply["message"]["thread_ts"] == parent["ts"]
        assert [m.text for m in fake.thread(C0AGENTS, parent["ts"])] == ["hello"]
        assert [m.text for m in fake.parents(C0AGENTS)] == ["session s1"]
        await client.chat_update(channel=C0AGENTS, ts=parent["ts"], text="session s1 (ended)")
        edited = fake.message(C0AGENTS, parent["ts"])
        assert edited.text == "session s1 (ended)"
        assert [v.text for v in edited.edits] == ["session s1"]
        link = await client.chat_getPermalink(channel=C0AGENTS, message_ts=reply["ts"])
        assert link["permalink"] == (
            f"{TEAM_URL}archives/{C0AGENTS}/p{reply['ts'].replace('.', '')}"
            f"?thread_ts={parent['ts']}&cid={C0AGENTS}"
        )
        assert fake.violations == []


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda c, ts: c.chat_postMessage(channel=C0OTHER, text="x"), "not_in_channel"),
        (lambda c, ts: c.chat_postMessage(channel="C0NOPE", text="x"), "channel_not_found"),
        pytest.param(
            lambda c, ts: c.chat_postMessage(channel=C0AGENTS, text=""),
            "no_text",
            marks=pytest.mark.filterwarnings("ignore:The top-level `text`:UserWarning"),
        ),
        (
            lambda c, ts: c.chat_postMessage(channel=C0AGENTS, text="x", thread_ts="1.000001"),
            "thread_not_found",
        ),
        (
            lambda c, ts: c.chat_update(channel=C0AGENTS, ts="1.000001", text="x"),
            "message_not_found",
        ),
        (lambda c, ts: c.chat_update(channel=C0AGENTS, ts=ts, text="x"), "cant_update_message"),
        (
            lambda c, ts: c.chat_postEphemeral(channel=C0NOTIFY, user=MALLORY["id"], text="x"),
            "user_not_in_channel",
        ),
    ],
)
async def test_wrong_posts_are_refused_and_recorded(call: Any, error: str) -> None:
    async with FakeSlack(LOOSE) as fake:
        # a message Bob wrote (the bot may not edit it)
        users_message = fake._store(C0AGENTS, "mine", [], BOB["id"])
        await expect_error(call(web(fake), users_message.ts), error)
        assert [v.kind for v in fake.violations] == [error]


async def test_form_encoded_bodies_are_read_as_slack_reads_them() -> None:
    async with FakeSlack(LOOSE) as fake:
        blocks = card(button("aep_answer_0", "k:0"))
        answer = await web(fake).api_call(
            "chat.postMessage",
            data={"channel": C0AGENTS, "text": "Run?", "blocks": json.dumps(blocks)},
        )
        assert fake.message(C0AGENTS, answer["ts"]).blocks == blocks


async def test_ephemeral_messages_are_kept_per_user() -> None:
    async with FakeSlack(LOOSE) as fake:
        parent = await web(fake).chat_postMessage(channel=C0AGENTS, text="s1")
        await web(fake).chat_postEphemeral(
            channel=C0AGENTS, user=MALLORY["id"], text="not yours", thread_ts=parent["ts"]
        )
        [note] = fake.ephemeral(MALLORY)
        assert (note.text, note.thread_ts) == ("not yours", parent["ts"])
        assert fake.ephemeral(ALICE) == []


# -- rate limits -----------------------------------------------------------------------------


async def test_post_message_is_one_a_second_per_channel() -> None:
    async with FakeSlack(Limits.real()) as fake:
        client = web(fake)
        await client.chat_postMessage(channel=C0AGENTS, text="one")
        await client.chat_postMessage(channel=C0NOTIFY, text="elsewhere")
        error = await expect_error(
            client.chat_postMessage(channel=C0AGENTS, text="two"), "ratelimited"
        )
        assert error.response.status_code == 429
        assert error.response.headers["Retry-After"] == "1"
        assert [v.kind for v in fake.violations] == ["ratelimited"]
        assert [m.text for m in fake.messages(C0AGENTS)] == ["one"]


async def test_posts_and_edits_are_counted_apart_as_slack_counts_them() -> None:
    """`chat.update` is Tier 3 for the workspace, not one of a channel's posts: an edit right
    after a post in the same channel is accepted, and the channel's post second still holds."""
    async with FakeSlack(Limits.real()) as fake:
        client = web(fake)
        posted = await client.chat_postMessage(channel=C0AGENTS, text="one")
        await client.chat_update(channel=C0AGENTS, ts=posted["ts"], text="one, edited")
        await client.chat_update(channel=C0AGENTS, ts=posted["ts"], text="one, again")
        await expect_error(client.chat_postMessage(channel=C0AGENTS, text="two"), "ratelimited")
        assert [v.method for v in fake.violations] == ["chat.postMessage"]


async def test_a_post_after_the_window_is_accepted() -> None:
    async with FakeSlack(Limits.real(per_channel={"chat.postMessage": Window(1, 0.2)})) as fake:
        client = web(fake)
        await client.chat_postMessage(channel=C0AGENTS, text="one")
        await asyncio.sleep(0.25)
        await client.chat_postMessage(channel=C0AGENTS, text="two")
        assert fake.violations == []


@pytest.mark.parametrize("method", sorted(Limits.real().per_workspace))
async def test_tier_limits_per_workspace(method: str) -> None:
    """Slack's count per minute for each tiered method: that many pass, the next is 429."""
    async with FakeSlack(Limits.real()) as fake:
        client = web(fake)
        posted = await client.chat_postMessage(channel=C0AGENTS, text="x")
        calls: dict[str, Callable[[], Any]] = {
            "chat.update": lambda: client.chat_update(channel=C0AGENTS, ts=posted["ts"], text="y"),
            "conversations.info": lambda: client.conversations_info(channel=C0AGENTS),
            "conversations.list": lambda: client.conversations_list(),
            "users.conversations": lambda: client.users_conversations(),
            "usergroups.users.list": lambda: client.usergroups_users_list(usergroup=S0OPS),
            "conversations.open": lambda: client.conversations_open(users=ALICE["id"]),
        }
        window = Limits.real().per_workspace[method]
        for _ in range(window.count):
            await calls[method]()
        error = await expect_error(calls[method](), "ratelimited")
        assert int(error.response.headers["Retry-After"]) > 1
        assert len(fake.violations) == 1


async def test_a_dm_opens_once_takes_posts_in_its_own_window_and_refuses_as_slack_does() -> None:
    async with FakeSlack(Limits.real()) as fake:
        client = web(fake)
        opened = await client.conversations_open(users=ALICE["id"])
        im = opened["channel"]["id"]
        assert im.startswith("D")
        assert not opened.get("already_open")
        again = await client.conversations_open(users=ALICE["id"], return_im=True)
        assert again["already_open"]
        assert again["channel"]["id"] == im
        assert again["channel"]["is_im"]
        assert again["channel"]["user"] == ALICE["id"]
        await client.chat_postMessage(channel=C0AGENTS, text="in the channel")
        await client.chat_postMessage(channel=im, text="privately")  # a window of its own
        assert [m.text for m in fake.dms(ALICE)] == ["privately"]
        await expect_error(client.chat_postMessage(channel=im, text="too soon"), "ratelimited")
        assert im not in [c["id"] for c in (await client.conversations_list())["channels"]]
        for user, code in (
            ("U0NOBODY", "user_not_found"),
            (BOT_USER_ID, "cannot_dm_bot"),
        ):
            await expect_error(client.conversations_open(users=user), code)
        fake.users[BOB["id"]]["deleted"] = True
        await expect_error(client.conversations_open(users=BOB["id"]), "user_disabled")
        fake.messages_tab = False
        await asyncio.sleep(1.05)
        await expect_error(client.chat_postMessage(channel=im, text="x"), "messages_tab_disabled")
        assert [v.kind for v in fake.violations] == ["ratelimited"]  # the others: people's
        fake.scopes.discard("im:write")
        error = await expect_error(client.conversations_open(users=ALICE["id"]), "missing_scope")
        assert error.response["needed"] == "im:write"


async def test_loose_limits_have_no_rate_limits() -> None:
    async with FakeSlack(Limits.loose()) as fake:
        for index in range(5):
            await web(fake).chat_postMessage(channel=C0AGENTS, text=str(index))
        assert fake.violations == []


async def test_an_injected_429_is_not_a_violation() -> None:
    async with FakeSlack(LOOSE) as fake:
        fake.fail_next("chat.postMessage", "ratelimited", status=429, retry_after=3)
        error = await expect_error(
            web(fake).chat_postMessage(channel=C0AGENTS, text="x"), "ratelimited"
        )
        assert error.response.headers["Retry-After"] == "3"
        await web(fake).chat_postMessage(channel=C0AGENTS, text="x")
        assert fake.violations == []


# -- Block Kit -------------------------------------------------------------------------------


def section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def actions(*elements: dict[str, Any]) -> dict[str, Any]:
    return {"type": "actions", "elements": list(elements)}


BAD_BLOCKS: dict[str, list[dict[str, Any]]] = {
    "51 blocks": [section("x")] * 51,
    "section text 3001": [section("x" * 3001)],
    "11 fields": [{"type": "section", "fields": [{"type": "mrkdwn", "text": "x"}] * 11}],
    "header 151": [{"type": "header", "text": {"type": "plain_text", "text": "x" * 151}}],
    "button value 2001": [actions(button("a", "v" * 2001))],
    "button text 76": [actions(button("a", "v", "t" * 76))],
    "action_id 256": [actions(button("a" * 256, "v"))],
    "duplicate action_id": [actions(button("a", "0"), button("a", "1"))],
    "26 elements": [actions(*(button(f"a{i}", str(i)) for i in range(26)))],
    "empty actions": [actions()],
    "empty text": [section("")],
    "emoji on mrkdwn": [
        {"type": "section", "text": {"type": "mrkdwn", "text": "x", "emoji": True}}
    ],
    "unknown block": [{"type": "poll"}],
    "input in a message": [{"type": "input"}],
    "duplicate block_id": [
        {**section("a"), "block_id": "b"},
        {**section("b"), "block_id": "b"},
    ],
    "bad style": [actions(button("a", "v", style="green"))],
}


@pytest.mark.parametrize("case", sorted(BAD_BLOCKS))
async def test_block_kit_limits_are_enforced(case: str) -> None:
    async with FakeSlack(LOOSE) as fake:
        error = await expect_error(
            web(fake).chat_postMessage(channel=C0AGENTS, text="x", blocks=BAD_BLOCKS[case]),
            "invalid_blocks",
        )
        assert "[json-pointer:/blocks" in error.response["errors"][0]
        assert [v.kind for v in fake.violations] == ["invalid_blocks"]
        assert fake.messages(C0AGENTS) == []


async def test_blocks_at_every_limit_are_accepted_and_edits_are_checked_too() -> None:
    full = [
        section("x" * 3000),
        {"type": "header", "text": {"type": "plain_text", "text": "h" * 150}},
        {"type": "context", "elements": [{"type": "mrkdwn", "text": "c"}] * 10},
        actions(*(button("a" * 250 + f"{i:02d}", "v" * 2000, "t" * 75) for i in range(25))),
    ]
    full += [{"type": "divider"}] * (50 - len(full))
    async with FakeSlack(LOOSE) as fake:
        client = web(fake)
        posted = await client.chat_postMessage(channel=C0AGENTS, text="x", blocks=full)
        await expect_error(
            client.chat_update(
                channel=C0AGENTS, ts=posted["ts"], text="x", blocks=[*full, section("y")]
            ),
            "invalid_blocks",
        )
        assert fake.message(C0AGENTS, posted["ts"]).blocks == full
        assert [v.kind for v in fake.violations] == ["invalid_blocks"]


async def test_text_over_40000_characters_is_truncated() -> None:
    async with FakeSlack(LOOSE) as fake:
        posted = await web(fake).chat_postMessage(channel=C0AGENTS, text="x" * 40_001)
        assert len(fake.message(C0AGENTS, posted["ts"]).text) == 40_000
        assert [v.kind for v in fake.violations] == ["text_truncated"]


# -- Socket Mode -----------------------------------------------------------------------------


async def test_a_press_reaches_bolt_as_slack_sends_it_and_is_acked() -> None:
    seen: list[dict[str, Any]] = []

    def setup(app: AsyncApp) -> None:
        @app.action(re.compile(r"^aep_answer_\d+$"))
        async def pressed(ack: Any, body: dict[str, Any]) -> None:
            await ack()
            seen.append(body)

    async with FakeSlack(LOOSE) as fake, bolt(fake, setup) as client:
        parent = await client.chat_postMessage(channel=C0AGENTS, text="s1")
        posted = await client.chat_postMessage(
            channel=C0AGENTS,
            thread_ts=parent["ts"],
            text="Run?",
            blocks=card(button("aep_answer_0", "k:0"), button("aep_answer_1", "k:1", "Deny")),
        )
        message = fake.message(C0AGENTS, posted["ts"])
        envelope = await fake.press(BOB, message, "aep_answer_1")
        assert envelope.acked
        assert envelope.ack_payload is None
        [body] = seen
        assert body["actions"][0]["value"] == "k:1"
        assert body["user"]["id"] == BOB["id"]
        assert body["channel"]["id"] == C0AGENTS
        assert body["container"]["thread_ts"] == parent["ts"]
        assert body["message"]["ts"] == posted["ts"]
        assert body["trigger_id"]
        with pytest.raises(LookupError):
            await fake.press(BOB, message, "aep_answer_7")
        assert fake.unanswered() == []
        assert fake.violations == []


async def test_a_modal_opens_with_a_fresh_trigger_and_its_submission_is_acked() -> None:
    def setup(app: AsyncApp) -> None:
        @app.action("aep_form")
        async def form(ack: Any, body: dict[str, Any], client: AsyncWebClient) -> None:
            await ack()
            await client.views_open(trigger_id=body["trigger_id"], view=FORM_VIEW)

        @app.view("aep_form")
        async def submitted(ack: Any, view: dict[str, Any]) -> None:
            values = view["state"]["values"]
            if values["f1"]["v"]["value"] == "0":
                await ack(response_action="errors", errors={"f1": "at least 1"})
            else:
                await ack()

    async with FakeSlack(LOOSE) as fake, bolt(fake, setup) as client:
        posted = await client.chat_postMessage(
            channel=C0AGENTS, text="Deploy?", blocks=card(button("aep_form", "card-1", "Fill"))
        )
        await fake.press(ALICE, fake.message(C0AGENTS, posted["ts"]), "aep_form")
        view = await fake.wait_until(lambda: fake.views and fake.views[-1], what="the modal")
        assert view.callback_id == "aep_form"
        assert view.private_metadata == "card-1"
        answer = await fake.submit(ALICE, view, {"f0": "prod", "f1": "0"})
        assert answer == {"response_action": "errors", "errors": {"f1": "at least 1"}}
        assert not view.closed
        with pytest.raises(ValueError, match="required"):
            await fake.submit(ALICE, view, {"f0": "prod"})
        with pytest.raises(ValueError, match="not among"):
            await fake.submit(ALICE, view, {"f0": "moon", "f1": "2"})
        assert await fake.submit(ALICE, view, {"f0": "staging", "f1": "2"}) is None
        assert view.closed
        assert fake.unanswered() == []
        assert fake.violations == []


@pytest.mark.parametrize("trouble", ["expired", "used twice", "unknown"])
async def test_views_open_needs_a_fresh_unused_trigger(trouble: str) -> None:
    errors: list[str] = []

    def setup(app: AsyncApp) -> None:
        @app.action("aep_form")
        async def form(ack: Any, body: dict[str, Any], client: AsyncWebClient) -> None:
            await ack()
            trigger = body["trigger_id"] if trouble != "unknown" else "123.abc"
            if trouble == "expired":
                await asyncio.sleep(0.3)
            try:
                if trouble == "used twice":
                    await client.views_open(trigger_id=trigger, view=FORM_VIEW)
                await client.views_open(trigger_id=trigger, view=FORM_VIEW)
            except SlackApiError as error:
                errors.append(error.response["error"])

    async with FakeSlack(Limits.loose(trigger_lifetime=0.2)) as fake, bolt(fake, setup) as client:
        posted = await client.chat_postMessage(
            channel=C0AGENTS, text="x", blocks=card(button("aep_form", "c"))
        )
        await fake.press(ALICE, fake.message(C0AGENTS, posted["ts"]), "aep_form")
        await fake.wait_until(lambda: errors, what="the refusal")
        wanted = {
            "expired": "expired_trigger_id",
            "used twice": "exchanged_trigger_id",
            "unknown": "invalid_trigger_id",
        }[trouble]
        assert errors == [wanted]
        assert [v.kind for v in fake.violations] == [wanted]


async def test_a_bad_view_is_refused() -> None:
    async with FakeSlack(LOOSE) as fake:
        trigger = fake._trigger(ALICE["id"])
        bad = {**FORM_VIEW, "title": {"type": "plain_text", "text": "t" * 25}}
        bad.pop("submit")
        error = await expect_error(
            web(fake).views_open(trigger_id=trigger, view=bad), "invalid_arguments"
        )
        messages = " ".join(error.response["response_metadata"]["messages"])
        assert "/view/title/text" in messages
        assert "/view/submit" in messages


async def test_words_reach_bolt_as_message_events_only_where_the_bot_is() -> None:
    events: list[dict[str, Any]] = []

    def setup(app: AsyncApp) -> None:
        @app.event("message")
        async def message(event: dict[str, Any]) -> None:
            events.append(event)

    async with FakeSlack(LOOSE) as fake, bolt(fake, setup) as client:
        parent = await client.chat_postMessage(channel=C0AGENTS, text="s1")
        said = await fake.say(ALICE, C0AGENTS, "yes please", thread_ts=parent["ts"])
        await fake.wait_until(lambda: events, what="the event")
        [event] = events  # the bot's own post was acked by bolt and not listened to
        assert (event["user"], event["text"], event["thread_ts"]) == (
            ALICE["id"],
            "yes please",
            parent["ts"],
        )
        assert said.envelope_id is not None
        assert "bot_id" not in event
        elsewhere = await fake.say(ALICE, C0OTHER, "hello?")
        assert elsewhere.envelope_id is None
        await fake.wait_until(
            lambda: all(e.acked for e in fake.envelopes), what="every envelope acked"
        )
        assert fake.unanswered() == []
        assert fake.violations == []


async def test_the_bots_posts_and_edits_come_back_as_events() -> None:
    events: list[dict[str, Any]] = []

    def setup(app: AsyncApp) -> None:
        @app.event("message")
        async def message(event: dict[str, Any]) -> None:
            events.append(event)

    async with (
        FakeSlack(LOOSE) as fake,
        bolt(fake, setup, ignoring_self_events_enabled=False) as client,
    ):
        posted = await client.chat_postMessage(channel=C0AGENTS, text="one")
        await client.chat_update(channel=C0AGENTS, ts=posted["ts"], text="two")
        await fake.wait_until(lambda: len(events) == 2, what="two events")
        assert events[0]["bot_id"] == BOT_ID
        assert events[0]["text"] == "one"
        assert events[1]["subtype"] == "message_changed"
        assert events[1]["message"]["text"] == "two"
        assert events[1]["previous_message"]["text"] == "one"


async def test_a_slash_command_is_acked_with_what_the_user_sees() -> None:
    def setup(app: AsyncApp) -> None:
        @app.command("/aep")
        async def aep(ack: Any, command: dict[str, Any]) -> None:
            await ack(f"{command['text']} from {command['user_id']} in {command['channel_id']}")

    async with FakeSlack(LOOSE) as fake, bolt(fake, setup):
        answer = await fake.slash(BOB, "/aep", "sessions")
        text = f"sessions from {BOB['id']} in {C0AGENTS}"
        assert answer == {"text": text}
        assert [e.text for e in fake.ephemeral(BOB)] == [text]
        with pytest.raises(LookupError):
            await fake.slash(BOB, "/deploy")
        assert fake.unanswered() == []
        assert fake.violations == []


async def test_late_and_missing_acks_are_violations() -> None:
    def setup(app: AsyncApp) -> None:
        @app.action("slow")
        async def slow(ack: Any) -> None:
            await asyncio.sleep(0.3)
            await ack()

        # no listener for "nobody": bolt does not ack it

    async with FakeSlack(Limits.loose(ack_deadline=0.2)) as fake, bolt(fake, setup) as client:
        posted = await client.chat_postMessage(
            channel=C0AGENTS, text="x", blocks=card(button("slow", "1"), button("nobody", "2"))
        )
        message = fake.message(C0AGENTS, posted["ts"])
        late = await fake.press(ALICE, message, "slow")
        missing = await fake.press(ALICE, message, "nobody")
        await fake.wait_until(lambda: late.acked, what="the late ack")
        assert fake.unanswered() == [late, missing]
        assert sorted(v.kind for v in fake.violations) == ["ack_late", "ack_missing"]
        assert late.delay is not None
        assert late.delay > 0.2
        assert missing.ack_time is None


async def test_the_client_reconnects_after_a_drop_and_a_refresh() -> None:
    pressed: list[str] = []

    def setup(app: AsyncApp) -> None:
        @app.action("go")
        async def go(ack: Any, body: dict[str, Any]) -> None:
            await ack()
            pressed.append(body["user"]["id"])

    async with FakeSlack(LOOSE) as fake, bolt(fake, setup) as client:
        posted = await client.chat_postMessage(
            channel=C0AGENTS, text="x", blocks=card(button("go", "1"))
        )
        message = fake.message(C0AGENTS, posted["ts"])
        await fake.refresh_socket()
        await fake.wait_until(lambda: len(fake.sockets) == 2 and len(fake.connected) == 1)
        await fake.drop_socket()
        await fake.wait_until(lambda: len(fake.sockets) == 3 and fake.connected, timeout=8)
        await fake.press(ALICE, message, "go")
        assert pressed == [ALICE["id"]]
        assert len(fake.calls_to("apps.connections.open", ok=True)) == 3
        assert fake.unanswered() == []
        assert fake.violations == []


async def test_response_url_answers_land_where_slack_puts_them() -> None:
    def setup(app: AsyncApp) -> None:
        @app.action("ask")
        async def ask(ack: Any, respond: Any) -> None:
            await ack()
            await respond("only you see this")
            await respond(text="answered", replace_original=True)

    async with FakeSlack(LOOSE) as fake, bolt(fake, setup) as client:
        posted = await client.chat_postMessage(
            channel=C0AGENTS, text="x", blocks=card(button("ask", "1"))
        )
        await fake.press(MALLORY, fake.message(C0AGENTS, posted["ts"]), "ask")
        await fake.wait_until(lambda: len(fake.responses) == 2, what="two responses")
        assert [e.text for e in fake.ephemeral(MALLORY)] == ["only you see this"]
        replaced = fake.message(C0AGENTS, posted["ts"])
        assert replaced.text == "answered"
        assert replaced.buttons == []
        assert fake.violations == []


async def test_make_config_is_a_valid_slack_block() -> None:
    config = pytest.importorskip("aep_bridge_slack.config")
    async with FakeSlack() as fake:
        block = make_config(fake, approver_roles=[S0OPS])
        parsed = config.SlackConfig.model_validate({"name": "slack", **block})
        assert parsed.api_base_url == fake.api_base_url
        assert parsed.bot_token.get_secret_value() == BOT_TOKEN


async def test_a_client_that_has_not_redrawn_can_press_a_removed_button() -> None:
    seen: list[dict[str, Any]] = []

    def setup(app: AsyncApp) -> None:
        @app.action("go")
        async def go(ack: Any, body: dict[str, Any]) -> None:
            await ack()
            seen.append(body)

    async with FakeSlack(LOOSE) as fake, bolt(fake, setup) as client:
        posted = await client.chat_postMessage(
            channel=C0AGENTS, text="x", blocks=card(button("go", "1"))
        )
        await client.chat_update(channel=C0AGENTS, ts=posted["ts"], text="done", blocks=[])
        message = fake.message(C0AGENTS, posted["ts"])
        with pytest.raises(LookupError):
            await fake.press(ALICE, message, "go")
        await fake.press(ALICE, message, "go", seen=0)
        [body] = seen
        assert body["message"]["blocks"] == card(button("go", "1"))
        assert fake.unanswered() == []


async def test_a_reply_to_a_reply_goes_under_the_threads_parent() -> None:
    async with FakeSlack(LOOSE) as fake:
        client = web(fake)
        parent = await client.chat_postMessage(channel=C0AGENTS, text="s1")
        said = fake._store(C0AGENTS, "hi", [], ALICE["id"], thread_ts=parent["ts"])
        reply = await client.chat_postMessage(channel=C0AGENTS, text="yo", thread_ts=said.ts)
        assert reply["message"]["thread_ts"] == parent["ts"]
        assert reply["message"]["parent_user_id"] == BOT_USER_ID
        assert [m.text for m in fake.thread(C0AGENTS, parent["ts"])] == ["hi", "yo"]


async def test_an_event_lost_with_its_connection_is_not_held_against_the_app() -> None:
    """Slack retries an unacked event on another connection; one still unacked on a live
    connection past the deadline is the app's fault."""
    async with FakeSlack(Limits.loose(ack_deadline=0.2)) as fake, bolt(fake, lambda app: None):
        await fake.say(ALICE, C0AGENTS, "lost", wait=False)  # no listener: bolt acks nothing
        await fake.drop_socket()
        await fake.wait_until(lambda: fake.connected, timeout=8, what="the reconnect")
        kept = await fake.say(ALICE, C0AGENTS, "kept", wait=False)
        await asyncio.sleep(0.3)
        assert [e.id for e in fake.unanswered()] == [kept.envelope_id]


async def test_bot_events_can_be_turned_off_and_socket_mode_refused() -> None:
    async with FakeSlack(LOOSE, bot_events=False) as fake, bolt(fake, lambda app: None) as client:
        await client.chat_postMessage(channel=C0AGENTS, text="quiet")
        await asyncio.sleep(0.05)
        assert fake.envelopes == []
        fake.socket_mode = False
        await expect_error(
            web(fake).apps_connections_open(app_token=APP_TOKEN), "socket_mode_not_enabled"
        )
