"""The fake Discord, driven by the real discord.py over loopback HTTP and WebSocket.

These tests prove the fake speaks Discord's wire format (discord.py logs in, gets READY and the
guild, parses every answer into its own objects) and enforces Discord's limits with Discord's
errors, so channel tests written against it mean something.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, ClassVar

import discord
import httpx
import pytest
from discord import app_commands

from .fake_discord import (
    ALICE,
    APPLICATION_ID,
    APPROVER_ROLE_ID,
    BOB,
    BOT_ID,
    BOT_ROLE_ID,
    DEFAULT_TOKEN,
    FORUM_CHANNEL_ID,
    GUILD_ID,
    MALLORY,
    NOTIFY_CHANNEL_ID,
    TEXT_CHANNEL_ID,
    FakeDiscord,
    Limits,
    ManualClock,
    Window,
    point_discord_py,
)

POST_MESSAGE = "POST /channels/{channel_id}/messages"


def intents(*, message_content: bool = True) -> discord.Intents:
    """What the channel will ask for: guilds, guild messages, message content."""
    wanted = discord.Intents.none()
    wanted.guilds = True
    wanted.guild_messages = True
    wanted.message_content = message_content
    return wanted


@asynccontextmanager
async def connected(
    fake: FakeDiscord,
    *,
    setup: Callable[[discord.Client], Any] | None = None,
    **options: Any,
) -> AsyncIterator[discord.Client]:
    """A real discord.Client logged in to the fake, READY, and closed afterwards."""
    options.setdefault("intents", intents())
    client = discord.Client(guild_ready_timeout=0.05, **options)
    if setup is not None:
        setup(client)
    with point_discord_py(fake):
        await client.login(DEFAULT_TOKEN)
        runner = asyncio.create_task(client.connect(reconnect=True))
        try:
            async with asyncio.timeout(5):
                await client.wait_until_ready()
            yield client
        finally:
            await client.close()
            await asyncio.wait_for(runner, 5)


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    """A fake with every size and interaction limit but no rate limits."""
    async with FakeDiscord(limits=Limits.loose()) as served:
        yield served


async def new_thread(client: discord.Client, name: str = "session 1") -> discord.Thread:
    text = client.get_channel(TEXT_CHANNEL_ID)
    assert isinstance(text, discord.TextChannel)
    return await text.create_thread(name=name, type=discord.ChannelType.public_thread)


# -- login, READY, the guild ------------------------------------------------------------------


async def test_login_ready_and_the_guild(fake: FakeDiscord) -> None:
    async with connected(fake) as client:
        assert client.user is not None
        assert (client.user.id, client.user.bot) == (BOT_ID, True)
        assert client.application_id == APPLICATION_ID
        guild = client.get_guild(GUILD_ID)
        assert guild is not None
        assert guild.owner_id == int(ALICE["id"])
        assert isinstance(guild.get_channel(TEXT_CHANNEL_ID), discord.TextChannel)
        assert isinstance(guild.get_channel(FORUM_CHANNEL_ID), discord.ForumChannel)
        assert isinstance(guild.get_channel(NOTIFY_CHANNEL_ID), discord.TextChannel)
        assert guild.get_role(APPROVER_ROLE_ID) is not None
        # the bot's own member came with GUILD_CREATE; what it may do in the channel
        assert guild.me is not None
        allowed = guild.get_channel(TEXT_CHANNEL_ID).permissions_for(guild.me)  # type: ignore[union-attr]
        assert allowed.create_public_threads
        assert allowed.send_messages_in_threads
        assert allowed.manage_threads

        alice = await guild.fetch_member(int(ALICE["id"]))
        assert [r.id for r in alice.roles if not r.is_default()] == [APPROVER_ROLE_ID]
        mallory = await guild.fetch_member(int(MALLORY["id"]))
        assert [r for r in mallory.roles if not r.is_default()] == []
        fetched = await client.fetch_channel(FORUM_CHANNEL_ID)
        assert isinstance(fetched, discord.ForumChannel)
        assert {c.id for c in await guild.fetch_channels()} == {
            TEXT_CHANNEL_ID,
            FORUM_CHANNEL_ID,
            NOTIFY_CHANNEL_ID,
        }

    assert [c.key for c in fake.calls[:2]] == ["GET /users/@me", "GET /oauth2/applications/@me"]
    assert all(c.status == 200 for c in fake.calls)
    (session,) = fake.sessions
    assert session.intents == intents().value
    assert fake.heartbeats >= 1  # discord.py beats right after HELLO, the fake ACKs
    assert fake.violations == []


async def test_wire_format_errors_and_headers(fake: FakeDiscord) -> None:
    auth = {"Authorization": f"Bot {DEFAULT_TOKEN}"}
    async with httpx.AsyncClient(base_url=fake.api_base_url) as http:
        me = await http.get("/users/@me", headers=auth)
        assert me.headers["content-type"] == "application/json"  # exactly, no charset
        assert me.json()["id"] == str(BOT_ID)
        assert (await http.get("/users/@me")).status_code == 401
        assert (await http.get("/users/@me", headers={"Authorization": "Bot nope"})).json() == {
            "message": "401: Unauthorized",
            "code": 0,
        }
        missing = await http.get("/no/such/route", headers=auth)
        assert (missing.status_code, missing.json()["message"]) == (404, "404: Not Found")
        unknown = await http.get("/channels/42", headers=auth)
        assert (unknown.status_code, unknown.json()) == (
            404,
            {"message": "Unknown Channel", "code": 10003},
        )
        gateway = (await http.get("/gateway/bot", headers=auth)).json()
        assert gateway["url"] == fake.gateway_url
        assert gateway["shards"] == 1

        # components discord.py's View would refuse locally, sent raw
        def row(*ids: str) -> dict[str, Any]:
            return {
                "type": 1,
                "components": [{"type": 2, "style": 1, "label": i, "custom_id": i} for i in ids],
            }

        async def post(body: dict[str, Any]) -> httpx.Response:
            return await http.post(f"/channels/{TEXT_CHANNEL_ID}/messages", json=body, headers=auth)

        too_many_rows = await post({"content": "x", "components": [row(str(i)) for i in range(6)]})
        assert too_many_rows.status_code == 400
        assert too_many_rows.json()["code"] == 50035
        assert too_many_rows.json()["errors"]["components"]["_errors"][0]["code"] == (
            "BASE_TYPE_MAX_LENGTH"
        )
        wide = await post({"content": "x", "components": [row("a", "b", "c", "d", "e", "f")]})
        assert wide.json()["errors"]["components"]["0"]["components"]["_errors"][0]["message"] == (
            "Must be between 1 and 5 in length."
        )
        long_id = await post({"content": "x", "components": [row("a" * 101)]})
        assert long_id.json()["errors"]["components"]["0"]["components"]["0"]["custom_id"] == {
            "_errors": [
                {"code": "BASE_TYPE_BAD_LENGTH", "message": "Must be between 1 and 100 in length."}
            ]
        }
        twice = await post({"content": "x", "components": [row("same", "same")]})
        assert "COMPONENT_CUSTOM_ID_DUPLICATED" in twice.text
        label = {"type": 2, "style": 1, "label": "L" * 81, "custom_id": "ok"}
        long_label = await post(
            {"content": "x", "components": [{"type": 1, "components": [label]}]}
        )
        assert "label" in long_label.json()["errors"]["components"]["0"]["components"]["0"]
        options = [{"label": str(i), "value": str(i)} for i in range(26)]
        select = {"type": 3, "custom_id": "pick", "options": options}
        too_many_options = await post(
            {"content": "x", "components": [{"type": 1, "components": [select]}]}
        )
        assert "options" in too_many_options.json()["errors"]["components"]["0"]["components"]["0"]
        empty = await post({"content": ""})
        assert empty.json() == {"message": "Cannot send an empty message", "code": 50006}
        ok = await post({"content": "fine", "components": [row("a", "b", "c", "d", "e")] * 1})
        assert ok.status_code == 200

    kinds = [v.kind for v in fake.violations]
    assert kinds == ["invalid_form"] * 6 + ["empty_message"]
    assert "components" in fake.violations[0].detail


# -- threads and forum posts ----------------------------------------------------------------


async def test_public_thread_forum_post_rename_archive(fake: FakeDiscord) -> None:
    async with connected(fake) as client:
        thread = await new_thread(client)
        assert thread.type is discord.ChannelType.public_thread
        assert thread.parent_id == TEXT_CHANNEL_ID
        text = client.get_channel(TEXT_CHANNEL_ID)
        assert isinstance(text, discord.TextChannel)
        # neither a message nor a type: Discord makes a private thread
        private = await text.create_thread(name="quiet")
        assert private.type is discord.ChannelType.private_thread
        assert [(t.name, t.type) for t in fake.threads(TEXT_CHANNEL_ID)] == [
            ("session 1", 11),
            ("quiet", 12),
        ]
        # THREAD_CREATE reached the client's cache
        await fake.wait_until(lambda: client.get_channel(thread.id) is not None)

        forum = client.get_channel(FORUM_CHANNEL_ID)
        assert isinstance(forum, discord.ForumChannel)
        post = await forum.create_thread(name="session 2", content="Started: fix the login test")
        assert post.thread.parent_id == FORUM_CHANNEL_ID
        assert post.message.id == post.thread.id  # a post's starter message has its id
        assert [m.content for m in fake.messages(post.thread.id)] == ["Started: fix the login test"]

        card = await thread.send("first")
        renamed = await thread.edit(name="session 1: done")
        assert renamed.name == "session 1: done"
        closed = await thread.edit(archived=True, locked=True)
        assert (closed.archived, closed.locked) == (True, True)
        stored = fake.channel(thread.id)
        assert (stored.name, stored.archived, stored.locked) == ("session 1: done", True, True)
        assert [(old, new) for old, new, _ in stored.renames] == [("session 1", "session 1: done")]
        # THREAD_UPDATE reached the client: discord.py drops archived threads from its cache
        await fake.wait_until(lambda: client.get_channel(thread.id) is None)

        # a message in an archived thread cannot be edited
        with pytest.raises(discord.HTTPException) as archived:
            await card.edit(content="changed")
        assert (archived.value.status, archived.value.code) == (400, 50083)

        # the bot posting to an archived, unlocked thread unarchives it
        await thread.edit(archived=False, locked=False)
        await thread.edit(archived=True)
        await thread.send("again")
        assert fake.channel(thread.id).archived is False

    assert fake.violations == []


# -- components and interactions ------------------------------------------------------------


class Card(discord.ui.View):
    """A permission card: defer at once, then edit the outcome in and drop the buttons."""

    def __init__(self) -> None:
        super().__init__(timeout=None)
        self.pressed: list[tuple[str, int]] = []

    @discord.ui.button(label="Allow", style=discord.ButtonStyle.success, custom_id="aep:allow")
    async def allow(self, interaction: discord.Interaction, button: discord.ui.Button) -> None:
        await interaction.response.defer()
        self.pressed.append(("allow", interaction.user.id))
        await interaction.edit_original_response(content="Allowed by Alice", view=None)


class Answer(
    discord.ui.DynamicItem[discord.ui.Button], template=r"aep:card:(?P<card>\w+):(?P<n>\d)"
):
    """A button that keeps working after a restart: its state is in its custom_id."""

    seen: ClassVar[list[tuple[str, int, int, list[int]]]] = []

    def __init__(self, card: str, n: int) -> None:
        super().__init__(discord.ui.Button(label=f"Option {n}", custom_id=f"aep:card:{card}:{n}"))
        self.card, self.n = card, n

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction, item: discord.ui.Button, match: re.Match[str]
    ) -> Answer:
        return cls(match["card"], int(match["n"]))

    async def callback(self, interaction: discord.Interaction) -> None:
        roles = [r.id for r in getattr(interaction.user, "roles", []) if not r.is_default()]
        Answer.seen.append((self.card, self.n, interaction.user.id, roles))
        if APPROVER_ROLE_ID not in roles:
            await interaction.response.send_message("You may not answer this.", ephemeral=True)
            return
        await interaction.response.edit_message(content=f"Answered: option {self.n}", view=None)


async def test_button_press_is_deferred_then_edited(fake: FakeDiscord) -> None:
    async with connected(fake) as client:
        thread = await new_thread(client)
        view = Card()
        sent = await thread.send("Run the tests?", view=view)
        stored = fake.message(sent.id)
        assert stored.custom_ids == ["aep:allow"]
        assert stored.buttons[0]["label"] == "Allow"

        pressed = fake.press(sent.id, "aep:allow", ALICE)
        await fake.wait_until(lambda: fake.message(sent.id).content == "Allowed by Alice")
        assert view.pressed == [("allow", int(ALICE["id"]))]
        assert pressed.response is not None
        assert pressed.response.type == 6  # deferred update
        assert pressed.response.latency < Limits().interaction_deadline  # type: ignore[operator]

        edited = fake.message(sent.id)
        assert edited.components == []
        assert [v.content for v in edited.edits] == ["Run the tests?"]
        assert edited.edits[0].components[0]["components"][0]["custom_id"] == "aep:allow"
        assert fake.unanswered() == []
        with pytest.raises(KeyError):
            fake.press(sent.id, "aep:allow", ALICE)  # the button is gone
    assert fake.violations == []


async def test_dynamic_item_answers_after_a_restart(fake: FakeDiscord) -> None:
    Answer.seen = []

    def register(client: discord.Client) -> None:
        client.add_dynamic_items(Answer)

    async with connected(fake) as before:
        thread = await new_thread(before)
        view = discord.ui.View(timeout=None)
        view.add_item(Answer("c0ffee", 0))
        view.add_item(Answer("c0ffee", 1))
        card = await thread.send("Allow `rm -rf build`?", view=view)

    # a new client (the bridge restarted) with only the DynamicItem class registered
    async with connected(fake, setup=register):
        refused = fake.press(card.id, "aep:card:c0ffee:1", MALLORY)
        await fake.wait_until(lambda: refused.acknowledged)
        (note,) = fake.ephemeral(MALLORY)
        assert note.content == "You may not answer this."
        assert fake.messages(thread.id, ephemeral=False)[-1].custom_ids == [
            "aep:card:c0ffee:0",
            "aep:card:c0ffee:1",
        ]

        fake.press(card.id, "aep:card:c0ffee:1", BOB)
        await fake.wait_until(lambda: fake.message(card.id).content == "Answered: option 1")
        assert fake.message(card.id).components == []

    assert [(c, n, u) for c, n, u, _ in Answer.seen] == [
        ("c0ffee", 1, int(MALLORY["id"])),
        ("c0ffee", 1, int(BOB["id"])),
    ]
    assert Answer.seen[1][3] == [APPROVER_ROLE_ID]
    assert [r.type for r in fake.responses] == [4, 7]
    assert fake.violations == []


async def test_a_button_an_edit_took_away_is_still_pressed_and_discord_py_drops_it() -> None:
    """A client that has not redrawn an edit still shows the button it took away; Discord
    sends the press with the message as it is now, and discord.py, finding no such
    component on it, drops it (`ViewStore.schedule_dynamic_item_call`): nobody answers, and
    the person sees "This interaction failed". What `aep_bridge_discord` must handle itself."""
    Answer.seen = []
    async with FakeDiscord(limits=Limits.loose(interaction_deadline=0.2)) as fake:

        def register(client: discord.Client) -> None:
            client.add_dynamic_items(Answer)

        async with connected(fake, setup=register) as client:
            thread = await new_thread(client)
            view = discord.ui.View(timeout=None)
            view.add_item(Answer("c0ffee", 0))
            card = await thread.send("Allow?", view=view)
            fake.press(card.id, "aep:card:c0ffee:0", BOB)
            await fake.wait_until(lambda: fake.message(card.id).components == [])
            with pytest.raises(KeyError):
                fake.press(card.id, "aep:card:c0ffee:0", ALICE)  # not on the message now
            late = fake.press(card.id, "aep:card:c0ffee:0", ALICE, seen=0)
            await fake.wait_until(lambda: fake.unanswered(), timeout=3)
        assert [(c, n, u) for c, n, u, _ in Answer.seen] == [("c0ffee", 0, int(BOB["id"]))]
        assert fake.unanswered() == [late]
        assert [v.kind for v in fake.violations] == ["interaction_unanswered"]


async def test_select_modal_slash_command_and_reply(fake: FakeDiscord) -> None:
    got: dict[str, Any] = {}

    class Reason(discord.ui.Modal, title="Why deny?"):
        reason = discord.ui.TextInput(label="Reason", custom_id="reason", max_length=200)

        async def on_submit(self, interaction: discord.Interaction) -> None:
            got["reason"] = self.reason.value
            await interaction.response.defer()

    class Form(discord.ui.View):
        @discord.ui.select(
            custom_id="aep:form:env",
            options=[discord.SelectOption(label=v, value=v) for v in ("dev", "prod")],
        )
        async def env(self, interaction: discord.Interaction, select: discord.ui.Select) -> None:
            got["env"] = select.values
            await interaction.response.send_modal(Reason())

    tree_holder: list[app_commands.CommandTree] = []

    def setup(client: discord.Client) -> None:
        tree = app_commands.CommandTree(client)

        @tree.command(
            name="status", description="Show the sessions", guild=discord.Object(GUILD_ID)
        )
        async def status(interaction: discord.Interaction, verbose: bool = False) -> None:
            got["status"] = (interaction.user.id, verbose)
            await interaction.response.send_message("2 sessions", ephemeral=True)

        tree_holder.append(tree)

    messages: list[discord.Message] = []

    async with connected(fake, setup=setup) as client:
        client.event(_collect(messages))
        (tree,) = tree_holder
        synced = await tree.sync(guild=discord.Object(GUILD_ID))
        assert [c.name for c in synced] == ["status"]
        assert [c["name"] for c in fake.commands(GUILD_ID)] == ["status"]

        thread = await new_thread(client)
        form = await thread.send("Which environment?", view=Form())
        picked = fake.press(form.id, "aep:form:env", BOB, values=["prod"])
        await fake.wait_until(lambda: picked.modal is not None)
        assert picked.modal is not None
        assert picked.modal["title"] == "Why deny?"
        with pytest.raises(ValueError, match="takes 1-1 values"):
            fake.press(form.id, "aep:form:env", BOB, values=[])
        submitted = fake.submit_modal(picked, {"reason": "not on a Friday"})
        await fake.wait_until(lambda: submitted.acknowledged)
        assert got["env"] == ["prod"]
        assert got["reason"] == "not on a Friday"

        slash = fake.slash("status", {"verbose": True}, BOB, channel=thread.id)
        await fake.wait_until(lambda: slash.acknowledged)
        assert got["status"] == (int(BOB["id"]), True)
        (answer,) = fake.ephemeral(BOB)
        assert answer.content == "2 sessions"
        assert answer not in fake.messages(thread.id)

        reply = fake.say(thread.id, "use the staging db", BOB, reply_to=form.id)
        seen = await fake.wait_until(lambda: [m for m in messages if m.id == reply.id])
        assert seen[0].content == "use the staging db"
        assert seen[0].reference is not None
        assert seen[0].reference.message_id == form.id
        assert isinstance(seen[0].author, discord.Member)
        assert APPROVER_ROLE_ID in [r.id for r in seen[0].author.roles]
        # the bot's own messages come back through the gateway too, as on Discord
        assert any(m.id == form.id for m in messages)
    assert fake.violations == []


def _collect(into: list[discord.Message]) -> Callable[[discord.Message], Any]:
    async def on_message(message: discord.Message) -> None:
        into.append(message)

    return on_message


async def test_message_content_intent_and_privileged_intents() -> None:
    async with FakeDiscord(limits=Limits.loose()) as fake:
        messages: list[discord.Message] = []
        async with connected(fake, intents=intents(message_content=False)) as client:
            client.event(_collect(messages))
            said = fake.say(TEXT_CHANNEL_ID, "secret plan", ALICE)
            mentioned = fake.say(TEXT_CHANNEL_ID, f"<@{BOT_ID}> hello", ALICE)
            await fake.wait_until(lambda: len(messages) == 2)
        assert [m.content for m in messages] == ["", f"<@{BOT_ID}> hello"]
        assert said.content == "secret plan"
        assert mentioned.pings == {f"user:{BOT_ID}"}

    async with FakeDiscord(limits=Limits.loose(), privileged_intents=set()) as fake:
        client = discord.Client(intents=intents())
        with point_discord_py(fake):
            await client.login(DEFAULT_TOKEN)
            with pytest.raises(discord.PrivilegedIntentsRequired):
                await asyncio.wait_for(client.connect(reconnect=True), 5)
            await client.close()
        assert fake.gateway_closes == [4014]


async def test_gateway_reconnect_resumes_and_replays(fake: FakeDiscord) -> None:
    messages: list[discord.Message] = []
    async with connected(fake) as client:
        client.event(_collect(messages))
        fake.reconnect()
        # said while the client reconnects: replayed to it on RESUME
        missed = fake.say(TEXT_CHANNEL_ID, "while you were away", ALICE)
        (session,) = fake.sessions
        await fake.wait_until(lambda: session.resumes == 1 and session.connected)
        said = fake.say(TEXT_CHANNEL_ID, "still there?", BOB)
        await fake.wait_until(lambda: [m for m in messages if m.id == said.id])
    assert [m.id for m in messages] == [missed.id, said.id]
    assert len(fake.sessions) == 1  # resumed, not identified again


# -- limits ---------------------------------------------------------------------------------


async def test_content_and_embed_limits_are_discord_errors(fake: FakeDiscord) -> None:
    async with connected(fake) as client:
        thread = await new_thread(client)
        await thread.send("x" * 2000)
        with pytest.raises(discord.HTTPException) as caught:
            await thread.send("x" * 2001)
        assert (caught.value.status, caught.value.code) == (400, 50035)
        assert "content: Must be 2000 or fewer in length." in caught.value.text

        async def refused(**kwargs: Any) -> str:
            with pytest.raises(discord.HTTPException) as error:
                await thread.send(**kwargs)
            assert error.value.code == 50035
            return error.value.text

        assert "embeds.0.title" in await refused(embed=discord.Embed(title="t" * 257))
        assert "embeds.0.description" in await refused(embed=discord.Embed(description="d" * 4097))
        many = discord.Embed(title="fields")
        for i in range(26):
            many.add_field(name=str(i), value="v")
        assert "embeds.0.fields" in await refused(embed=many)
        assert "embeds.0.fields.0.value" in await refused(
            embed=discord.Embed().add_field(name="n", value="v" * 1025)
        )
        halves = [discord.Embed(description="d" * 3500) for _ in range(2)]
        assert "Embed size exceeds maximum size of 6000" in await refused(embeds=halves)
        await thread.send(embeds=[discord.Embed(description="d" * 3000) for _ in range(2)])

    assert fake.violation_counts["invalid_form"] == 6
    assert fake.messages(fake.threads(TEXT_CHANNEL_ID)[0].id)[-1].embeds[1]["type"] == "rich"


async def test_bucket_429_is_retried_by_discord_py_and_headers_prevent_it() -> None:
    burst = Limits.loose(buckets={POST_MESSAGE: Window(3, 1.0)})
    # headers hidden (a shared or undisclosed limit): discord.py learns it from 429s
    async with FakeDiscord(limits=dataclasses.replace(burst, rate_headers=False)) as fake:
        async with connected(fake) as client:
            thread = await new_thread(client)
            for i in range(5):
                await thread.send(f"line {i}")
        assert [m.content for m in fake.messages(thread.id)] == [f"line {i}" for i in range(5)]
        refusals = fake.calls_to("POST", "/channels/{channel_id}/messages", status=429)
        assert refusals
        assert {v.kind for v in fake.violations} == {"rate_limit"}
        assert all(0 < (v.retry_after or 0) <= 1.0 for v in fake.violations)

    # headers announced (Discord's default): discord.py waits before it would break the bucket
    async with FakeDiscord(limits=burst) as fake:
        async with connected(fake) as client:
            thread = await new_thread(client)
            for i in range(5):
                await thread.send(f"line {i}")
        assert len(fake.messages(thread.id)) == 5
        assert fake.violations == []


async def test_429_shape_on_the_wire() -> None:
    async with FakeDiscord(limits=Limits.loose(buckets={POST_MESSAGE: Window(1, 30.0)})) as fake:
        auth = {"Authorization": f"Bot {DEFAULT_TOKEN}"}
        url = f"/channels/{NOTIFY_CHANNEL_ID}/messages"
        async with httpx.AsyncClient(base_url=fake.api_base_url, headers=auth) as http:
            first = await http.post(url, json={"content": "one"})
            assert first.headers["x-ratelimit-limit"] == "1"
            assert first.headers["x-ratelimit-remaining"] == "0"
            assert 29 < float(first.headers["x-ratelimit-reset-after"]) <= 30
            second = await http.post(url, json={"content": "two"})
        assert second.status_code == 429
        body = second.json()
        assert body["message"] == "You are being rate limited."
        assert body["global"] is False
        assert 29 < body["retry_after"] <= 30
        assert second.headers["retry-after"] == "30"
        assert second.headers["x-ratelimit-bucket"] == first.headers["x-ratelimit-bucket"]
        assert second.headers["via"]  # without it discord.py assumes a Cloudflare ban
        assert [m.content for m in fake.messages(NOTIFY_CHANNEL_ID)] == ["one"]

    async with FakeDiscord(limits=Limits.loose(global_=Window(2, 1.0))) as fake:
        async with httpx.AsyncClient(base_url=fake.api_base_url, headers=auth) as http:
            statuses = [(await http.get("/users/@me")).status_code for _ in range(3)]
            last = await http.get("/users/@me")
        assert statuses == [200, 200, 429]
        assert last.json()["global"] is True
        assert last.headers["x-ratelimit-global"] == "true"
        assert [v.kind for v in fake.violations] == ["global_rate_limit"] * 2


async def test_max_ratelimit_timeout_raises_rate_limited() -> None:
    slow = {"buckets": {POST_MESSAGE: Window(2, 60.0)}, "rate_headers": False}
    async with FakeDiscord(limits=Limits.loose(**slow)) as fake:
        async with connected(fake, max_ratelimit_timeout=30.0) as client:
            thread = await new_thread(client)
            await thread.send("one")
            await thread.send("two")
            with pytest.raises(discord.RateLimited) as caught:
                await thread.send("three")
            assert caught.value.retry_after > 30
        assert [v.kind for v in fake.violations] == ["rate_limit"]

    # the unannounced 2 renames per 10 minutes of a thread
    async with FakeDiscord() as fake:
        async with connected(fake, max_ratelimit_timeout=30.0) as client:
            thread = await new_thread(client)
            await thread.edit(name="renamed once")
            await thread.edit(name="renamed twice")
            await thread.edit(archived=True)  # not a rename
            with pytest.raises(discord.RateLimited) as caught:
                await thread.edit(name="renamed thrice")
            assert caught.value.retry_after > 500
        assert fake.channel(thread.id).name == "renamed twice"
        assert [v.kind for v in fake.violations] == ["rename_limit"]


async def test_interaction_answered_after_3_s_is_refused() -> None:
    clock = ManualClock()
    go = asyncio.Event()
    outcome: list[BaseException] = []

    class Slow(discord.ui.View):
        @discord.ui.button(label="Allow", custom_id="slow")
        async def slow(self, interaction: discord.Interaction, button: discord.ui.Button) -> None:
            await go.wait()
            try:
                await interaction.response.defer()
            except discord.HTTPException as error:
                outcome.append(error)

    async with FakeDiscord(limits=Limits.loose(), clock=clock) as fake:
        async with connected(fake) as client:
            thread = await new_thread(client)
            card = await thread.send("Allow?", view=Slow(timeout=None))
            pressed = fake.press(card.id, "slow", ALICE)
            clock.advance(3.5)
            go.set()
            await fake.wait_until(lambda: outcome)
        (error,) = outcome
        assert isinstance(error, discord.NotFound)
        assert (error.code, error.text) == (10062, "Unknown interaction")
        assert pressed.late
        assert not pressed.acknowledged
        assert fake.unanswered() == [pressed]
        assert [v.kind for v in fake.violations] == ["interaction_late"]

        # a second answer to one interaction (raw: discord.py refuses it locally)
        press = fake.press(card.id, "slow", BOB)
        url = f"/interactions/{press.id}/{press.token}/callback"
        async with httpx.AsyncClient(base_url=fake.api_base_url) as http:
            assert (await http.post(url, json={"type": 6})).status_code == 204  # no with_response
            again = await http.post(url, json={"type": 6})
        assert again.json() == {
            "message": "Interaction has already been acknowledged.",
            "code": 40060,
        }


async def test_unanswered_interaction_is_recorded() -> None:
    async with FakeDiscord(limits=Limits.loose(interaction_deadline=0.2)) as fake:
        async with connected(fake) as client:
            thread = await new_thread(client)
            # a button no view or dynamic item handles after this client's restart
            sent = await thread.send("orphan", view=Card())
        async with connected(fake):
            pressed = fake.press(sent.id, "aep:allow", ALICE)
            await fake.wait_until(lambda: fake.violations, timeout=3)
        assert [v.kind for v in fake.violations] == ["interaction_unanswered"]
        assert fake.unanswered() == [pressed]


async def test_permissions_are_enforced(fake: FakeDiscord) -> None:
    fake.set_overwrite(TEXT_CHANNEL_ID, BOT_ROLE_ID, deny=1 << 35)  # CREATE_PUBLIC_THREADS
    async with connected(fake) as client:
        with pytest.raises(discord.Forbidden) as caught:
            await new_thread(client)
        assert caught.value.code == 50013
        notify = client.get_channel(NOTIFY_CHANNEL_ID)
        assert isinstance(notify, discord.TextChannel)
        fake.set_overwrite(NOTIFY_CHANNEL_ID, GUILD_ID, deny=1 << 10)  # VIEW_CHANNEL
        fake.set_overwrite(NOTIFY_CHANNEL_ID, BOT_ROLE_ID, deny=1 << 10)
        with pytest.raises(discord.Forbidden) as hidden:
            await notify.send("hello")
        assert hidden.value.code == 50001
    assert fake.violations == []


async def test_followups_mentions_token_lifetime_and_injected_failures() -> None:
    clock = ManualClock()
    done = asyncio.Event()
    read_original: list[str] = []  # within the token's 15 minutes
    late_edit: list[BaseException] = []

    def setup(client: discord.Client) -> None:
        tree = app_commands.CommandTree(client)

        @tree.command(name="sessions", description="List", guild=discord.Object(GUILD_ID))
        async def sessions(interaction: discord.Interaction) -> None:
            await interaction.response.defer(thinking=True)
            await interaction.followup.send("1 session")  # fills the loading message
            await interaction.followup.send("only you see this", ephemeral=True)
            original = await interaction.original_response()
            read_original.append(original.content)
            await done.wait()
            try:
                await interaction.edit_original_response(content="too late")
            except discord.HTTPException as error:
                late_edit.append(error)

        client.tree = tree  # type: ignore[attr-defined]

    async with FakeDiscord(limits=Limits.loose(), clock=clock) as fake:
        async with connected(fake, setup=setup) as client:
            await client.tree.sync(guild=discord.Object(GUILD_ID))  # type: ignore[attr-defined]
            ran = fake.slash("sessions", user=ALICE, channel=NOTIFY_CHANNEL_ID)
            await fake.wait_until(lambda: len(ran.followups) == 2)
            assert ran.response is not None
            assert ran.response.type == 5
            shown = fake.messages(NOTIFY_CHANNEL_ID)
            assert [m.content for m in shown] == ["1 session"]
            assert shown[0].id == ran.original_id
            assert shown[0].flags & (1 << 7) == 0  # no longer loading
            assert [m.content for m in fake.ephemeral(ALICE)] == ["only you see this"]
            # the command read its response before the clock moves past the token's life
            assert await fake.wait_until(lambda: read_original) == ["1 session"]
            clock.advance(901)  # the interaction token lasts 15 minutes
            done.set()
            await fake.wait_until(lambda: late_edit)
            assert isinstance(late_edit[0], discord.HTTPException)
            assert late_edit[0].code == 50027

            notify = client.get_channel(NOTIFY_CHANNEL_ID)
            assert isinstance(notify, discord.TextChannel)
            loud = await notify.send(f"@everyone <@{ALICE['id']}> look")
            quiet = await notify.send(
                f"@everyone <@{ALICE['id']}> look", allowed_mentions=discord.AllowedMentions.none()
            )
            assert fake.message(loud.id).pings == {"everyone", f"user:{ALICE['id']}"}
            assert fake.message(quiet.id).pings == set()

            fake.fail_next(POST_MESSAGE, 403, message="Missing Access")
            with pytest.raises(discord.Forbidden):
                await notify.send("refused once")
            await notify.send("then fine")
        assert fake.messages(NOTIFY_CHANNEL_ID)[-1].content == "then fine"
        assert fake.violations == []


# -- direct messages ----------------------------------------------------------------------------


async def test_direct_messages_open_once_and_refuse_as_discord_does(fake: FakeDiscord) -> None:
    """discord.py's `create_dm` and a send there: one DM channel per person (the same id
    again), 50007 for a person who takes no DM or shares no server, 50033 for no such user;
    the bot's DMs do not reach a gateway without the DIRECT_MESSAGES intent."""
    fake.close_dms(BOB)
    fake.remove_member(MALLORY)
    async with connected(fake) as client:
        dm = await client.create_dm(discord.Object(int(ALICE["id"])))
        assert dm.type is discord.ChannelType.private
        assert dm.recipient is not None
        assert dm.recipient.id == int(ALICE["id"])
        sent = await dm.send("hello Alice")
        again = await client.http.start_private_message(int(ALICE["id"]))
        assert again["id"] == str(dm.id)  # the same channel again
        for person in (BOB, MALLORY):
            closed = await client.create_dm(discord.Object(int(person["id"])))
            with pytest.raises(discord.Forbidden) as refused:
                await closed.send("hello")
            assert (refused.value.code, refused.value.text) == (
                50007,
                "Cannot send messages to this user",
            )
        with pytest.raises(discord.HTTPException) as nobody:
            await client.http.start_private_message(1000000000000000999)
        assert (nobody.value.status, nobody.value.code) == (400, 50033)
    channel = fake.dm_channel(ALICE)
    assert channel is not None
    assert channel.id == dm.id
    assert [m.content for m in fake.dms(ALICE)] == ["hello Alice"]
    assert fake.message(sent.id).channel_id == dm.id
    assert fake.dms(BOB) == []
    assert fake.dms(MALLORY) == []
    assert all(
        event != "MESSAGE_CREATE" or data.get("channel_id") != str(dm.id)
        for session in fake.sessions
        for _, frame in session.sent
        for event, data in [(frame["t"], frame["d"])]
    )
