"""The Discord adapter against the fake Discord, beyond the conformance kit: forum posts,
archiving and locking, a card's outcome after its thread was archived, what Discord's refusals
become for the core's outbox (never a sleep inside discord.py, never the token in a message),
and what a person sees when their words are not taken."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from aep_bridge import (
    ChannelError,
    FormChoice,
    FormField,
    OutcomeStatus,
    OutgoingMessage,
    PermissionOption,
    PermissionOutcome,
    PermissionRequest,
    RateLimited,
)
from aep_bridge.testing import FakeCore
from aep_bridge_discord import DiscordChannel
from tests import permission_card

from .fake_discord import (
    ALICE,
    APPROVER_ROLE_ID,
    DEFAULT_TOKEN,
    FORUM_CHANNEL_ID,
    GUILD_ID,
    MALLORY,
    TEXT_CHANNEL_ID,
    FakeDiscord,
    Limits,
    Window,
    point_discord_py,
)
from .probe import make_adapter, shown

SESSION = "s-chan"
POST_MESSAGE = "POST /channels/{channel_id}/messages"
CARD = PermissionRequest(
    id="cA1",
    title="claude-code asks permission: Bash",
    description="rm -rf build/",
    options=(
        PermissionOption(id="allow", label="Allow", is_allow=True),
        PermissionOption(id="deny", label="Deny"),
    ),
)
DENIED = PermissionOutcome(
    status=OutcomeStatus.ANSWERED, option_id="deny", option_label="Deny", by="Alice"
)


@asynccontextmanager
async def started(
    fake: FakeDiscord, core: FakeCore | None = None, **config: Any
) -> AsyncIterator[tuple[DiscordChannel, FakeCore]]:
    core = core or FakeCore(approvers=[])
    with point_discord_py(fake):
        adapter = make_adapter(fake, core, approver_roles=[str(APPROVER_ROLE_ID)], **config)
        core.attach(adapter)
        await adapter.start()
        try:
            yield adapter, core
        finally:
            await adapter.stop()


async def test_in_a_forum_each_session_is_a_post() -> None:
    async with FakeDiscord(limits=Limits.loose()) as fake:
        async with started(fake, channel_id=str(FORUM_CHANNEL_ID)) as (adapter, core):
            thread = await core.create_thread(adapter, SESSION, "fix the flaky test")
            await adapter.send_message(SESSION, OutgoingMessage(type="text", text="On it."))
            await adapter.send_permission_request(SESSION, CARD)
        (post,) = fake.threads(FORUM_CHANNEL_ID)
        assert (str(post.id), post.name) == (thread, "fix the flaky test")
        texts = [shown(m) for m in fake.messages(post.id, from_bot=True)]
        assert texts[0] == "🧵 fix the flaky test"  # the post's first message
        assert texts[1] == "On it."
        assert "rm -rf build/" in texts[2]
        assert fake.violations == []


async def test_an_ended_session_is_archived_and_locked_and_a_late_outcome_shows() -> None:
    async with FakeDiscord(limits=Limits.loose()) as fake:
        async with started(fake, lock_on_end=True) as (adapter, core):
            thread = int(await core.create_thread(adapter, SESSION, "deploy"))
            await adapter.send_permission_request(SESSION, CARD)
            await adapter.archive_session_thread(SESSION)
            stored = fake.channel(thread)
            assert (stored.archived, stored.locked) == (True, True)
            # the outcome arrives after the thread closed: Discord refuses edits there, so
            # the thread is opened for the edit and closed again, locked as it was
            await adapter.update_permission_request(SESSION, CARD, DENIED)
        (card,) = [m for m in fake.messages(thread, from_bot=True) if "rm -rf" in m.content]
        assert "Answered by Alice" in shown(card)
        assert card.components == []
        stored = fake.channel(thread)
        assert (stored.archived, stored.locked) == (True, True)
        assert fake.violations == []


async def test_a_429_is_the_core_s_rate_limited_at_once_with_discord_s_retry_after() -> None:
    async with FakeDiscord(limits=Limits.loose()) as fake:
        async with started(fake) as (adapter, core):
            await core.create_thread(adapter, SESSION, "storm")
            fake.fail_next(POST_MESSAGE, 429, retry_after=7.5)
            with pytest.raises(RateLimited) as caught:
                await adapter.send_message(SESSION, OutgoingMessage(type="text", text="hi"))
            assert caught.value.retry_after == 7.5
            # the outbox's retry goes through
            await adapter.send_message(SESSION, OutgoingMessage(type="text", text="hi"))
        assert len(fake.calls_to("POST", "/channels/{channel_id}/messages")) == 2  # no retry


async def test_a_bucket_discord_py_knows_is_empty_raises_instead_of_sleeping() -> None:
    slow = {"buckets": {POST_MESSAGE: Window(2, 60.0)}}
    async with FakeDiscord(limits=Limits.loose(**slow)) as fake:
        async with started(fake) as (adapter, core):
            await core.create_thread(adapter, SESSION, "burst")

            async def burst() -> None:
                for n in range(3):
                    await adapter.send_message(SESSION, OutgoingMessage(type="text", text=f"m{n}"))

            with pytest.raises(RateLimited) as caught:
                await burst()
            assert caught.value.retry_after > 50  # the bucket's reset, from its headers
        sent = fake.calls_to("POST", "/channels/{channel_id}/messages")
        assert 1 <= len(sent) <= 2
        assert fake.violations == []  # discord.py did not ask again: it read the headers


async def test_a_refused_token_is_permanent_and_never_quoted() -> None:
    async with FakeDiscord(token="another." + DEFAULT_TOKEN) as fake:
        core = FakeCore()
        with point_discord_py(fake):
            adapter = make_adapter(fake, core)
            with pytest.raises(ChannelError) as caught:
                await adapter.start()
            await adapter.stop()
        assert caught.value.permanent
        assert "token" in str(caught.value)
        assert DEFAULT_TOKEN not in str(caught.value)


async def test_without_the_message_content_intent_start_says_where_to_turn_it_on() -> None:
    async with FakeDiscord(privileged_intents=set()) as fake:
        with point_discord_py(fake):
            adapter = make_adapter(fake, FakeCore())
            with pytest.raises(ChannelError) as caught:
                await adapter.start()
            await adapter.stop()
        assert caught.value.permanent
        assert "Message Content intent" in str(caught.value)


async def test_agent_text_pings_nobody() -> None:
    async with FakeDiscord(limits=Limits.loose()) as fake:
        async with started(fake) as (adapter, core):
            thread = int(await core.create_thread(adapter, SESSION, "pings"))
            text = "@everyone look at <@&1000000000000000301> and @here"
            await adapter.send_message(SESSION, OutgoingMessage(type="text", text=text))
        (message,) = fake.messages(thread, from_bot=True)
        assert message.pings == set()
        assert shown(message) == text


async def test_a_stranger_s_reply_to_a_card_is_answered_with_why() -> None:
    async with FakeDiscord(limits=Limits.loose()) as fake:
        core = FakeCore(approvers=[str(ALICE["id"])])
        async with started(fake, core) as (adapter, _):
            thread = int(await core.create_thread(adapter, SESSION, "words"))
            words = CARD.model_copy(update={"id": "cT1", "accepts_text": True, "options": ()})
            await adapter.send_permission_request(SESSION, words)
            (card,) = fake.messages(thread, from_bot=True)
            fake.say(thread, "main", MALLORY, reply_to=card)
            answer = await fake.wait_until(
                lambda: [m for m in fake.messages(thread, from_bot=True) if m.reply_to],
                what="the answer to Mallory",
            )
        assert core.refused[-1].user.id == str(MALLORY["id"])
        assert shown(answer[-1]) == "Refused: you are not an approver for this channel"
        assert answer[-1].reply_to == fake.messages(thread)[-2].id  # Mallory's words
        assert core.presses[-1].answer == "main"
        assert answer[-1].pings == set()


async def test_slash_commands_are_registered_and_go_to_the_core_from_a_session_s_thread() -> None:
    async with FakeDiscord(limits=Limits.loose()) as fake:
        async with started(fake) as (adapter, core):
            assert sorted(c["name"] for c in fake.commands(GUILD_ID)) == [
                "away",
                "back",
                "cancel",
                "pause",
                "resume",
                "sessions",
                "status",
            ]
            thread = int(await core.create_thread(adapter, SESSION, "fix the *flaky* test"))

            listed = fake.slash("sessions", user=MALLORY, channel=TEXT_CHANNEL_ID)
            await fake.wait_until(lambda: fake.ephemeral(MALLORY), what="the list")
            (note,) = fake.ephemeral(MALLORY)
            assert shown(note) == "Sessions:\nfix the *flaky* test"
            assert f"/{thread}>)" in note.content  # a link to the thread
            assert listed.acknowledged

            fake.slash("cancel", user=ALICE, channel=TEXT_CHANNEL_ID)
            await fake.wait_until(lambda: fake.ephemeral(ALICE), what="the hint")
            assert shown(fake.ephemeral(ALICE)[-1]) == "/cancel works in a session's thread."
            assert core.incoming == []

            fake.slash("cancel", user=ALICE, channel=thread)
            await fake.wait_until(lambda: core.incoming, what="the command at the core")
            (message,) = core.incoming
            assert (message.session_id, message.thread_id, message.text) == (
                SESSION,
                str(thread),
                "/cancel",
            )
            assert message.user.roles == (str(APPROVER_ROLE_ID),)  # for the core's check

            fake.slash("away", user=ALICE, channel=thread)  # away mode, from the thread
            await fake.wait_until(lambda: len(core.incoming) == 2, what="/away at the core")
            assert (core.incoming[-1].session_id, core.incoming[-1].text) == (SESSION, "/away")
        # registered once: a second start finds them there
        async with started(fake):
            pass
        assert len(fake.calls_to("PUT")) == 1
        assert fake.unanswered() == []


FORM = PermissionRequest(
    id="cF1",
    kind="form",
    title="Deploy settings",
    fields=(
        FormField(
            id="f1",
            type="select",
            label="Environment",
            required=True,
            choices=(FormChoice(id="c1", label="Staging"), FormChoice(id="c2", label="Production")),
        ),
        FormField(id="f2", type="boolean", label="Tell the team?"),
        FormField(id="f3", type="string", label="Release note", required=True),
        FormField(id="f4", type="number", label="Replicas"),
        FormField(
            id="f5",
            type="select",
            label="Regions",
            multi=True,
            choices=(FormChoice(id="eu", label="EU"), FormChoice(id="us", label="US")),
        ),
    ),
)


async def test_a_form_opens_as_a_modal_for_an_approver_and_is_sent_by_its_ids() -> None:
    async with FakeDiscord(limits=Limits.loose()) as fake:
        core = FakeCore(approvers=[str(ALICE["id"])])
        async with started(fake, core) as (adapter, _):
            thread = int(await core.create_thread(adapter, SESSION, "form"))
            await adapter.send_permission_request(SESSION, FORM)
            (card,) = fake.messages(thread, from_bot=True)
            assert [b["label"] for b in card.buttons] == ["Fill in ✏️"]
            assert "Press Fill in to answer" in shown(card)

            # a stranger opens nothing: the core refuses first, privately
            refused = fake.press(card, card.custom_ids[0], MALLORY)
            await fake.wait_until(lambda: fake.ephemeral(MALLORY), what="the refusal")
            assert refused.modal is None
            assert core.refused[-1].user.id == str(MALLORY["id"])

            opened = fake.press(card, card.custom_ids[0], ALICE)
            await fake.wait_until(lambda: opened.modal is not None, what="the modal")
            assert opened.modal is not None
            assert opened.modal["title"] == "Deploy settings"
            assert core.presses == []  # nothing is sent before the form is submitted
            answers: dict[str, str | list[str]] = {
                "f0": ["1"],
                "f1": ["y"],
                "f2": "ships the new login",
                "f3": "3",
                "f4": ["0", "1"],
            }
            fake.submit_modal(opened, answers)
            await fake.wait_until(lambda: core.presses, what="the form at the core")
        press = core.presses[-1]
        assert (press.card_id, press.via) == ("cF1", "form")
        assert press.answer == {
            "f1": "c2",
            "f2": True,
            "f3": "ships the new login",
            "f4": 3.0,
            "f5": ["eu", "us"],
        }
        assert fake.message(card.id).edits == []  # the shared card did not change
        assert fake.unanswered() == []
        assert fake.violations == []


async def test_a_finished_answer_replaces_its_draft_even_when_the_draft_is_gone() -> None:
    async with FakeDiscord(limits=Limits.loose()) as fake:
        async with started(fake) as (adapter, core):
            thread = int(await core.create_thread(adapter, SESSION, "drafts"))
            draft = OutgoingMessage(type="text", text="Work", key="r1", notify=False)
            await adapter.send_message(SESSION, draft)
            await adapter.send_message(SESSION, draft.model_copy(update={"text": "Working"}))
            (shown_draft,) = fake.messages(thread, from_bot=True)
            assert shown(shown_draft) == "Working"  # edited in place
            # someone deletes the draft; the finished answer still arrives, once
            fake.fail_next("DELETE /channels/{channel_id}/messages/{message_id}", 404)
            final = draft.model_copy(update={"text": "Done.", "notify": True})
            await adapter.send_message(SESSION, final)
        assert [shown(m) for m in fake.messages(thread, from_bot=True)][-1] == "Done."
        assert fake.calls_to("DELETE", "/channels/{channel_id}/messages/{message_id}", status=404)


# -- the card a person judges, in the order they read it (issue 32) ------------------------


async def test_a_real_bash_card_reads_session_folder_command_reason_then_options() -> None:
    """Claude Code's permission, through the real mapping and renderer, as Discord gets it:
    the session, the folder under home, the whole long command in a code block, the reason
    as markdown Discord renders (not escaped backticks), then the buttons."""
    request = permission_card.bash_card()
    async with FakeDiscord(limits=Limits.loose()) as fake:
        async with started(fake) as (adapter, core):
            thread = int(await core.create_thread(adapter, SESSION, "words"))
            await adapter.send_permission_request(SESSION, request)
            await adapter.send_permission_request(SESSION, permission_card.edit_card())
        bash, edit = [m for m in fake.messages(thread, from_bot=True) if "❓" in m.content]
        assert fake.violations == []
    assert permission_card.in_order(
        bash.content,
        "claude-code asks permission: Bash",
        f"Session: {permission_card.SESSION_NAME}",
        f"Folder: `{permission_card.FOLDER}`",
        f"```bash\n{permission_card.COMMAND}\n```",  # whole, in code
        "Install the package with its `test` extras, then run **every** part",
    )
    assert "\\`" not in bash.content
    assert "Permission requested" not in bash.content
    labels = [c["label"] for row in bash.components for c in row["components"]]
    assert labels == [o.label for o in request.options]
    assert permission_card.in_order(edit.content, "Folder: `~/proj`", "src/app.py", "-x = 1")
