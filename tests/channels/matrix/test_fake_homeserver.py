"""The fake homeserver, driven by the real mautrix: what a Matrix client sees from it.

The Matrix channel's tests run on this fake, so each test here checks one thing a client relies
on (a long-poll that wakes, an idempotent txn id, a 429 with its wait, a duplicate reaction...).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest
from mautrix.api import Method, Path
from mautrix.client import Client
from mautrix.errors import (
    MatrixRequestError,
    MatrixUnknownRequestError,
)
from mautrix.types import (
    EventID,
    EventType,
    Filter,
    FilterID,
    LoginType,
    PaginationDirection,
    RoomEncryptionStateEventContent,
    RoomEventFilter,
    RoomFilter,
    RoomID,
    UserID,
)

from aep_bridge import RateLimited
from aep_bridge_matrix.client import make_client

from .fake_homeserver import (
    ADA,
    BOB,
    BOT,
    STRANGER,
    FakeHomeserver,
    Limits,
    ManualClock,
    html_problems,
)


@pytest.fixture
async def fake() -> AsyncIterator[FakeHomeserver]:
    async with FakeHomeserver() as server:
        yield server


def _client(fake: FakeHomeserver, user: str = BOT, token: str | None = None) -> Client:
    return Client(mxid=user, base_url=fake.url, token=token or fake.token(user))


async def _closing(client: Client) -> None:
    await client.api.session.close()


async def _send(
    client: Client, room: RoomID, content: dict[str, Any], txn_id: str | None = None
) -> EventID:
    """Send raw `m.room.message` content (as the channel will, with its own relations)."""
    return await client.send_message_event(
        room, EventType.ROOM_MESSAGE, cast(Any, content), txn_id=txn_id
    )


def _thread_reply(root: str, body: str) -> dict[str, Any]:
    return {
        "msgtype": "m.text",
        "body": body,
        "m.relates_to": {
            "rel_type": "m.thread",
            "event_id": root,
            "is_falling_back": True,
            "m.in_reply_to": {"event_id": root},
        },
    }


async def test_login_by_password_and_token_then_whoami(fake: FakeHomeserver) -> None:
    client = Client(mxid=BOT, base_url=fake.url)
    try:
        login = await client.login(password="pw-bot", device_name="aep-bridge")
        assert login.user_id == BOT
        assert client.api.token == login.access_token
        assert (await client.whoami()).user_id == BOT
        login = await client.login(login_type=LoginType.TOKEN, token=fake.login_token(BOT))
        assert (await client.whoami()).device_id == login.device_id
        fake.revoke(login.access_token)
        with pytest.raises(MatrixRequestError) as refused:
            await client.whoami()
        assert (refused.value.http_status, refused.value.errcode) == (401, "M_UNKNOWN_TOKEN")
    finally:
        await _closing(client)


async def test_a_long_poll_answers_when_another_user_sends(fake: FakeHomeserver) -> None:
    room = fake.create_room("agents", [BOT, ADA])
    client = _client(fake)
    try:
        first = await client.sync(timeout=0)
        assert room in first["rooms"]["join"]
        poll: asyncio.Future[Any] = asyncio.ensure_future(
            client.sync(since=first["next_batch"], timeout=30_000)
        )
        await asyncio.sleep(0.05)
        assert not poll.done()  # nothing new: the server holds the request
        sent = fake.send_as(ADA, RoomID(room), "run the tests?")
        data = await asyncio.wait_for(poll, 5)  # answered long before its 30 s
        events = data["rooms"]["join"][room]["timeline"]["events"]
        assert [(e["sender"], e["event_id"]) for e in events] == [(ADA, sent)]
        assert data["rooms"]["join"][room]["timeline"]["limited"] is False
    finally:
        await _closing(client)


async def test_the_sync_loop_dispatches_people_and_the_bots_own_events(
    fake: FakeHomeserver,
) -> None:
    room = RoomID(fake.create_room("agents", [BOT, ADA]))
    client = _client(fake)
    seen: list[tuple[str, str]] = []

    async def on_message(event: Any) -> None:
        seen.append((event.sender, event.content.body))

    client.add_event_handler(EventType.ROOM_MESSAGE, on_message)
    task = client.start(None)
    try:
        await fake.wait_until(lambda: fake.calls_to("/sync$"), what="the first sync")
        fake.send_as(ADA, room, "hello")
        await client.send_text(room, "hi Ada")
        await fake.wait_until(lambda: len(seen) == 2, what="both messages")
        assert seen == [(ADA, "hello"), (BOT, "hi Ada")]
    finally:
        client.stop()
        with contextlib.suppress(asyncio.CancelledError):
            await task  # mautrix's sync future ends quietly when stopped
        await _closing(client)


async def test_thread_reply_edit_reaction_and_redaction(fake: FakeHomeserver) -> None:
    room = RoomID(fake.create_room("agents", [BOT, ADA]))
    client = _client(fake)
    try:
        root = await _send(client, room, {"msgtype": "m.text", "body": "session"})
        reply = await _send(client, room, _thread_reply(root, "working…"))
        await _send(
            client,
            room,
            {
                "msgtype": "m.text",
                "body": "* done",
                "m.new_content": {
                    "msgtype": "m.text",
                    "body": "done",
                    "format": "org.matrix.custom.html",
                    "formatted_body": "<b>done</b>",
                },
                "m.relates_to": {"rel_type": "m.replace", "event_id": reply},
            },
        )
        [message] = fake.thread(room, root)
        assert [v["body"] for v in message.versions] == ["working…", "done"]
        assert message.html == "<b>done</b>"
        fetched = await client.api.request(Method.GET, Path.v3.rooms[room].event[reply])
        assert (
            fetched["unsigned"]["m.relations"]["m.replace"]["content"]["m.new_content"]["body"]
            == "done"
        )
        summary = (await client.api.request(Method.GET, Path.v3.rooms[room].event[root]))[
            "unsigned"
        ]
        assert summary["m.relations"]["m.thread"]["count"] == 1

        yes = await client.react(room, reply, "✅")
        fake.react_as(ADA, room, reply, "✅")
        assert fake.reactions(reply) == {"✅": [BOT, ADA]}
        relations = await client.api.request(
            Method.GET, f"/_matrix/client/v1/rooms/{room}/relations/{reply}/m.annotation"
        )
        assert [e["content"]["m.relates_to"]["key"] for e in relations["chunk"]] == ["✅", "✅"]

        await client.redact(room, yes, reason="taken back")
        assert fake.reactions(reply) == {"✅": [ADA]}  # a redacted reaction no longer counts
        gone = await client.api.request(Method.GET, Path.v3.rooms[room].event[yes])
        assert gone["content"] == {}
        assert gone["unsigned"]["redacted_because"]["content"]["reason"] == "taken back"
        assert fake.violations == []
    finally:
        await _closing(client)


async def test_an_edit_by_someone_else_is_not_a_version(fake: FakeHomeserver) -> None:
    room = RoomID(fake.create_room("agents", [BOT, ADA]))
    client = _client(fake)
    try:
        adas = fake.send_as(ADA, room, "Ada's words")
        await _send(
            client,
            room,
            {
                "msgtype": "m.text",
                "body": "* the bot's words",
                "m.new_content": {"msgtype": "m.text", "body": "the bot's words"},
                "m.relates_to": {"rel_type": "m.replace", "event_id": adas},
            },
        )  # Synapse stores it; every client ignores it
        assert fake.message(adas).body == "Ada's words"
        fetched = await client.api.request(Method.GET, Path.v3.rooms[room].event[adas])
        assert "m.relations" not in fetched["unsigned"]
        assert [v.kind for v in fake.violations] == ["edit_invalid"]
        fake.edit_as(ADA, room, adas, "Ada's better words")
        assert [v["body"] for v in fake.message(adas).versions] == [
            "Ada's words",
            "Ada's better words",
        ]
    finally:
        await _closing(client)


async def test_the_same_txn_id_stores_one_event(fake: FakeHomeserver) -> None:
    room = RoomID(fake.create_room("agents", [BOT]))
    client = _client(fake)
    try:
        content = {"msgtype": "m.text", "body": "once"}
        first = await _send(client, room, content, txn_id="t1")
        again = await _send(client, room, content, txn_id="t1")
        assert first == again
        assert [m.body for m in fake.messages(room)] == ["once"]
        data = await client.sync(timeout=0)
        [event] = [
            e
            for e in data["rooms"]["join"][room]["timeline"]["events"]
            if e["type"] == "m.room.message"
        ]
        assert event["unsigned"]["transaction_id"] == "t1"  # how a client spots its own echo
    finally:
        await _closing(client)


async def test_the_eleventh_message_of_a_burst_is_rate_limited(fake: FakeHomeserver) -> None:
    clock = ManualClock()
    fake.clock = clock
    room = RoomID(fake.create_room("agents", [BOT]))
    client = make_client(fake.url, BOT, fake.token(BOT))  # the channel's own client
    try:
        for n in range(10):
            await client.send_text(room, f"line {n}")
        with pytest.raises(RateLimited) as limited:
            await client.send_text(room, "line 10")
        assert limited.value.retry_after == 5.0  # the body's `retry_after_ms`: 5000
        assert [v.kind for v in fake.violations] == ["M_LIMIT_EXCEEDED"]
        url = f"{fake.url}/_matrix/client/v3/rooms/{room}/send/m.room.message/raw"
        auth = {"Authorization": f"Bearer {fake.token(BOT)}"}
        async with client.api.session.put(url, json={"body": "x"}, headers=auth) as raw:
            assert raw.status == 429
            assert raw.headers["Retry-After"] == "5"
            assert (await raw.json())["retry_after_ms"] == 5000
        clock.advance(5)
        await client.send_text(room, "line 10")  # after the wait it goes through
        assert len(fake.messages(room)) == 11
    finally:
        await _closing(client)


async def test_loose_limits_have_no_rate_limit() -> None:
    async with FakeHomeserver(Limits.loose()) as fake:
        room = RoomID(fake.create_room("agents", [BOT]))
        client = _client(fake)
        try:
            for n in range(30):
                await client.send_text(room, f"line {n}")
            assert fake.violations == []
        finally:
            await _closing(client)


async def test_a_duplicate_reaction_is_refused(fake: FakeHomeserver) -> None:
    room = RoomID(fake.create_room("agents", [BOT, ADA]))
    client = _client(fake)
    try:
        question = await client.send_text(room, "Run `make`?")
        await client.react(room, question, "1️⃣")
        with pytest.raises(MatrixUnknownRequestError) as refused:
            await client.react(room, question, "1️⃣")
        assert refused.value.errcode == "M_DUPLICATE_ANNOTATION"
        assert fake.reactions(question) == {"1️⃣": [BOT]}
    finally:
        await _closing(client)


async def test_an_encrypted_rooms_state_is_visible(fake: FakeHomeserver) -> None:
    room = RoomID(fake.create_room("secret", [BOT, ADA], encrypted=True))
    client = _client(fake)
    try:
        state = cast(
            RoomEncryptionStateEventContent,
            await client.get_state_event(room, EventType.ROOM_ENCRYPTION),
        )
        assert state.algorithm.value == "m.megolm.v1.aes-sha2"
        plain = RoomID(fake.create_room("plain", [BOT]))
        with pytest.raises(MatrixRequestError) as missing:
            await client.get_state_event(plain, EventType.ROOM_ENCRYPTION)
        assert missing.value.errcode == "M_NOT_FOUND"
        data = await client.sync(timeout=0)
        types = {e["type"] for e in data["rooms"]["join"][room]["state"]["events"]}
        types |= {e["type"] for e in data["rooms"]["join"][room]["timeline"]["events"]}
        assert "m.room.encryption" in types
    finally:
        await _closing(client)


async def test_a_sync_that_fell_behind_is_limited_and_pages_back(fake: FakeHomeserver) -> None:
    room = RoomID(fake.create_room("agents", [BOT, ADA]))
    client = _client(fake)
    try:
        since = (await client.sync(timeout=0))["next_batch"]
        sent = [fake.send_as(ADA, room, f"line {n}") for n in range(15)]
        data = await client.sync(since=since, timeout=0)
        timeline = data["rooms"]["join"][room]["timeline"]
        assert timeline["limited"] is True
        assert [e["event_id"] for e in timeline["events"]] == sent[5:]
        older = await client.get_messages(
            room, PaginationDirection.BACKWARD, from_token=timeline["prev_batch"], limit=100
        )
        events = older.events  # type: ignore[attr-defined]  # a functional NamedTuple
        missed = [e.event_id for e in events if e.event_id in sent]
        assert missed == list(reversed(sent[:5]))
    finally:
        await _closing(client)


async def test_an_invite_shows_in_sync_and_the_bot_joins(fake: FakeHomeserver) -> None:
    room = RoomID(fake.create_room("ops", [ADA], invited=[BOT], creator=ADA))
    client = _client(fake)
    try:
        data = await client.sync(timeout=0)
        assert list(data["rooms"]["invite"]) == [room]
        assert room not in data["rooms"]["join"]
        await client.join_room_by_id(room)
        members = await client.get_joined_members(room)
        assert set(members) == {ADA, BOT}
        assert (await client.get_displayname(UserID(ADA))) == "Ada"
        with pytest.raises(MatrixRequestError) as refused:
            await client.send_text(
                RoomID(fake.create_room("other", [STRANGER], creator=STRANGER)), "x"
            )
        assert refused.value.errcode == "M_FORBIDDEN"
    finally:
        await _closing(client)


async def test_too_large_events_and_html_outside_the_subset(fake: FakeHomeserver) -> None:
    room = RoomID(fake.create_room("agents", [BOT, BOB]))
    client = _client(fake)
    try:
        with pytest.raises(MatrixRequestError) as refused:
            await client.send_text(room, "x" * 70_000)
        assert (refused.value.http_status, refused.value.errcode) == (413, "M_TOO_LARGE")
        await client.send_text(room, "ok", html="<p>ok</p><script>alert(1)</script>")
        await client.send_text(room, "ok", html='<pre><code class="language-py">x</code></pre>')
        kinds = [(v.kind, v.detail) for v in fake.violations]
        assert kinds == [("M_TOO_LARGE", "event too large"), ("html_outside_subset", "<script>")]
    finally:
        await _closing(client)


def test_the_html_subset() -> None:
    assert html_problems('<a href="https://x.test">x</a><br/><span data-mx-spoiler>s</span>') == []
    assert html_problems('<p style="color:red" onclick="x()">x</p>') == ["<p style>", "<p onclick>"]
    assert html_problems('<a href="javascript:x()">x</a><style>p{}</style>') == [
        "<a href='javascript:x()'>",
        "<style>",
    ]


async def test_a_filter_id_or_inline_filter_sets_the_timeline_limit(fake: FakeHomeserver) -> None:
    room = RoomID(fake.create_room("agents", [BOT, ADA]))
    client = _client(fake)
    try:
        filter_id = await client.create_filter(
            Filter(room=RoomFilter(timeline=RoomEventFilter(limit=3)))
        )
        since = (await client.sync(timeout=0))["next_batch"]
        sent = [fake.send_as(ADA, room, f"line {n}") for n in range(5)]
        data = await client.sync(since=since, timeout=0, filter_id=filter_id)
        timeline = data["rooms"]["join"][room]["timeline"]
        assert [e["event_id"] for e in timeline["events"]] == sent[2:]
        assert timeline["limited"] is True
        inline = json.dumps({"room": {"timeline": {"limit": 50}}})
        data = await client.sync(since=since, timeout=0, filter_id=FilterID(inline))
        assert len(data["rooms"]["join"][room]["timeline"]["events"]) == 5
        full = await client.sync(since=data["next_batch"], timeout=0, full_state=True)
        state = {e["type"] for e in full["rooms"]["join"][room]["state"]["events"]}
        assert {"m.room.create", "m.room.power_levels", "m.room.name"} <= state
    finally:
        await _closing(client)


async def test_create_room_invites_and_the_person_sees_the_bots_messages(
    fake: FakeHomeserver,
) -> None:
    client = _client(fake)
    try:
        room = await client.create_room(name="team-a", invitees=[ADA])
        assert fake.rooms[room].invited == {ADA}
        assert fake.state(room, "m.room.name") == {"name": "team-a"}
        await client.send_text(room, "session started")
        ada = _client(fake, ADA)
        try:
            await ada.join_room_by_id(room)
            fake.send_as(ADA, room, "thanks", reply_to=fake.messages(room)[0].event_id)
        finally:
            await _closing(ada)
        assert [m.body for m in fake.messages(room, from_bot=True)] == ["session started"]
        assert [m.sender for m in fake.messages(room, from_bot=False)] == [ADA]
    finally:
        await _closing(client)


async def test_what_a_homeserver_refuses_or_a_channel_must_not_send(fake: FakeHomeserver) -> None:
    secret = RoomID(fake.create_room("secret", [BOT, ADA], encrypted=True))
    theirs = RoomID(fake.create_room("ops", [BOT, ADA], creator=ADA))
    client = _client(fake)
    try:
        await client.send_text(secret, "plain words in an encrypted room")
        reply = await _send(client, theirs, _thread_reply(fake.send_as(ADA, theirs, "q"), "a"))
        with pytest.raises(MatrixRequestError) as nested:
            await _send(client, theirs, _thread_reply(reply, "a thread in a thread"))
        assert (nested.value.http_status, nested.value.errcode) == (400, "M_UNKNOWN")
        adas = fake.send_as(ADA, theirs, "mine")
        with pytest.raises(MatrixRequestError) as forbidden:
            await client.redact(theirs, EventID(adas))  # the bot is at power 0 in Ada's room
        assert (forbidden.value.http_status, forbidden.value.errcode) == (403, "M_FORBIDDEN")
        assert [v.kind for v in fake.violations] == [
            "plaintext_in_encrypted_room",
            "M_UNKNOWN",
            "M_FORBIDDEN",
        ]
        assert fake.message(adas).body == "mine"
    finally:
        await _closing(client)
