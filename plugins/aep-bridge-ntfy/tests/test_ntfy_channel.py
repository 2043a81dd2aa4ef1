"""What an ntfy user would notice, beyond the conformance suite: buttons, limits, tokens."""

from __future__ import annotations

import base64
import json
import socket
import traceback
from importlib.metadata import entry_points
from typing import Any

import httpx
import pytest
from fake_ntfy import FakeNtfy, Phone, TokenBucket, button_data
from ntfy_probe import NtfyProbe
from pydantic import ValidationError
from support import TOPIC, AdapterFactory

from aep_bridge import (
    ChannelError,
    ChannelRegistration,
    ChannelUser,
    NotificationMessage,
    OutcomeStatus,
    OutgoingMessage,
    PermissionOption,
    PermissionOutcome,
    PermissionRequest,
    RateLimited,
    Resolution,
    ResolutionStatus,
)
from aep_bridge.testing import ButtonView, FakeCore
from aep_bridge_ntfy import NtfyChannel, NtfyConfig

SESSION = "s-42"
NAME = "Fix the login test"
GOOD_TOKEN = "tk_goodtoken1234567890abcdefghij"
WRONG_TOKEN = "tk_wrongtoken987654321zyxwvutsrq"


def request(card: str = "cA1", labels: tuple[str, ...] = ("Allow", "Deny")) -> PermissionRequest:
    return PermissionRequest(
        id=card,
        title="claude-code wants to run Bash",
        description="rm -rf build/",
        options=tuple(
            PermissionOption(id=f"opt-{i}-{label.lower().replace(' ', '-')}", label=label)
            for i, label in enumerate(labels)
        ),
    )


def multibyte_text(size: int) -> str:
    """At least `size` UTF-8 bytes of text: 4096 characters of it are well over 4096 bytes."""
    words = ["café", "naïve", "größe", "日本語", "🙂", "ok"]
    out: list[str] = []
    i = 0
    while len(" ".join(out).encode()) < size:
        out.append(f"{words[i % len(words)]}{i}")
        i += 1
    return " ".join(out)


async def session(adapter: NtfyChannel, core: FakeCore) -> None:
    await core.create_thread(adapter, SESSION, NAME)


async def card(adapter: NtfyChannel, probe: NtfyProbe, req: PermissionRequest) -> dict[str, Any]:
    """Send `req` and return the notification that carries its buttons."""
    await adapter.send_permission_request(SESSION, req)
    return (await probe.notifications())[-1]


def forge(token: str, card: str | None = None, option: str | None = None) -> str:
    """`token` with its card id or option changed and its signature kept: what someone who
    read a button could make of it."""
    signed, _, mac = token.partition(".")
    fields = base64.urlsafe_b64decode(signed + "=" * (-len(signed) % 4)).decode().split("\x1f")
    fields[0] = card if card is not None else fields[0]
    fields[1] = option if option is not None else fields[1]
    altered = base64.urlsafe_b64encode("\x1f".join(fields).encode()).rstrip(b"=").decode()
    return f"{altered}.{mac}"


def press_of(action: dict[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(action["body"])
    return body


# -- presses -------------------------------------------------------------------------------


async def test_a_forged_press_is_refused_with_403_and_never_reaches_the_core(
    make_adapter: AdapterFactory, core: FakeCore, probe: NtfyProbe, phone: Phone
) -> None:
    adapter = await make_adapter()
    await session(adapter, core)
    allow = (await card(adapter, probe, request()))["actions"][0]
    genuine = press_of(allow)
    token = genuine["press"]
    another_channel = FakeCore()  # the same bridge's key, signing for another channel
    another_channel.secret, another_channel.channel = core.secret, "ntfy-2"
    forged = {
        "bad signature": token[:-4] + ("AAAA" if token[-4:] != "AAAA" else "BBBB"),
        "signature of another button": forge(token, option="1"),
        "signature of another card": forge(token, card="cZ9"),
        "an unsigned option": forge(token, option="x"),
        "no signature": token.partition(".")[0],
        "signed by another key": FakeCore().sign("cA1", "0"),
        "signed for another channel": another_channel.sign("cA1", "0"),
        "expired": core.sign("cA1", "0", ttl=-1),
    }
    for case, forgery in forged.items():
        response = await phone.tap({**allow, "body": json.dumps({**genuine, "press": forgery})})
        assert response.status_code == 403, case
        assert "forbidden" in response.json()["error"]
    for raw in ("not json", "[1, 2]", "{}", json.dumps({**genuine, "pad": "x" * 5000})):
        assert (await phone.tap({**allow, "body": raw})).status_code == 403
    assert core.presses == []

    response = await phone.tap(allow)
    assert response.status_code == 200
    assert [(p.card_id, p.answer, p.via) for p in core.presses] == [("cA1", 0, "button")]


async def test_an_altered_button_is_refused_wherever_it_was_changed(
    make_adapter: AdapterFactory, core: FakeCore, probe: NtfyProbe, phone: Phone
) -> None:
    """What the kit's altered-press test does (one byte of the button's data changed), at
    every byte of the token: each is refused before the core hears of it."""
    adapter = await make_adapter()
    await session(adapter, core)
    await card(adapter, probe, request())
    [shown] = [m for m in await probe.messages() if m.buttons]
    button = shown.buttons[1]
    token = press_of((await probe.notifications())[-1]["actions"][1])["press"]
    start = button.data.index(token.encode())
    for at in range(start, start + len(token)):
        changed = b"A" if button.data[at : at + 1] != b"A" else b"B"
        flipped = button.data[:at] + changed + button.data[at + 1 :]
        with pytest.raises(AssertionError):  # the probe asserts a 200
            await probe.press(shown, ButtonView(button.label, flipped), ChannelUser(id="x"))
        assert phone.responses[-1].status_code == 403, f"byte {at - start} of the token"
    assert core.presses == []


async def test_a_button_works_from_the_ntfy_web_app_in_a_browser(
    make_adapter: AdapterFactory, core: FakeCore, probe: NtfyProbe
) -> None:
    """The web app taps with fetch() from ntfy's origin: the browser asks first (CORS)."""
    adapter = await make_adapter()
    await session(adapter, core)
    allow = (await card(adapter, probe, request()))["actions"][0]
    origin = {"Origin": "https://ntfy.sh"}
    async with httpx.AsyncClient() as browser:
        preflight = await browser.options(
            allow["url"],
            headers={
                **origin,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "content-type",
            },
        )
        assert preflight.status_code == 204
        assert preflight.headers["access-control-allow-origin"] == "*"
        assert "POST" in preflight.headers["access-control-allow-methods"]
        assert "content-type" in preflight.headers["access-control-allow-headers"].lower()
        tap = await browser.post(
            allow["url"], headers={**origin, **allow["headers"]}, content=allow["body"]
        )
    assert tap.headers["access-control-allow-origin"] == "*"
    assert tap.json()["status"] == "accepted"
    assert core.presses[-1].answer == 0


async def test_buttons_carry_neither_the_option_id_nor_a_key_and_nothing_is_stored(
    make_adapter: AdapterFactory, core: FakeCore, probe: NtfyProbe
) -> None:
    adapter = await make_adapter()
    await session(adapter, core)
    before = dict(core.state("ntfy").values)  # type: ignore[attr-defined]
    note = await card(adapter, probe, request())
    for action in note["actions"]:
        data = button_data(action).decode()
        assert "opt-" not in data
        assert core.secret.hex() not in data
        assert base64.urlsafe_b64encode(core.secret).decode().rstrip("=") not in data
        assert "opt-" not in action["url"]
        assert "cA1" not in action["url"]
        assert action["url"].endswith("/channels/ntfy/press")
    assert core.state("ntfy").values == before, "a card costs no state"  # type: ignore[attr-defined]
    assert before == {f"session:{SESSION}": NAME}, "only the session's name, for titles"


async def test_buttons_still_work_after_the_bridge_restarts(
    make_adapter: AdapterFactory, core: FakeCore, probe: NtfyProbe, phone: Phone
) -> None:
    first = await make_adapter()
    await session(first, core)
    deny = (await card(first, probe, request()))["actions"][1]
    await first.stop()

    second = await make_adapter()  # a new instance over the same core state, routes remounted
    response = await phone.tap(deny)

    assert response.status_code == 200
    assert response.json()["status"] == "accepted"
    press = core.presses[-1]
    assert (press.card_id, press.answer, press.user.id) == ("cA1", 1, "ntfy")
    await second.send_message(SESSION, OutgoingMessage(type="text", text="back again"))
    assert (await probe.notifications())[-1]["title"] == NAME


async def test_a_refused_press_is_explained_in_a_new_notification(
    make_adapter: AdapterFactory, core: FakeCore, probe: NtfyProbe, phone: Phone
) -> None:
    adapter = await make_adapter()
    await session(adapter, core)
    allow = (await card(adapter, probe, request()))["actions"][0]
    assert allow["clear"] is True  # a tap dismisses the card on the phone
    before = len(await probe.notifications())

    core.next_resolution = Resolution(status=ResolutionStatus.NOT_ALLOWED)
    response = await phone.tap(allow)

    refused = Resolution(status=ResolutionStatus.NOT_ALLOWED).message
    assert response.status_code == 200
    assert response.json() == {"status": "not_allowed", "message": refused}
    notifications = await probe.notifications()
    assert len(notifications) == before + 1
    assert notifications[-1]["message"] == refused
    assert notifications[-1]["title"] == NAME

    # the session a button names is unsigned, so only a name this channel gave is shown
    forged_session = {**press_of(allow), "session": "Click evil.example now"}
    core.next_resolution = Resolution(status=ResolutionStatus.EXPIRED)
    await phone.tap({**allow, "body": json.dumps(forged_session)})
    assert (await probe.notifications())[-1]["title"] == "aep-bridge"
    before += 1

    core.next_resolution = Resolution(status=ResolutionStatus.ACCEPTED)
    assert (await phone.tap(allow)).json()["status"] == "accepted"
    assert len(await probe.notifications()) == before + 1, "an accepted press needs no note"


async def test_an_answer_that_did_not_arrive_offers_the_buttons_again(
    make_adapter: AdapterFactory, core: FakeCore, probe: NtfyProbe, phone: Phone
) -> None:
    adapter = await make_adapter()
    await session(adapter, core)
    req = request()
    await card(adapter, probe, req)

    lost = PermissionOutcome(status=OutcomeStatus.UNDELIVERED)
    await adapter.update_permission_request(SESSION, req, lost)
    again = (await probe.notifications())[-1]
    assert lost.summary() in again["message"]
    assert [a["label"] for a in again["actions"]] == ["Allow", "Deny"]
    assert (await phone.tap(again["actions"][0])).json()["status"] == "accepted"
    assert (core.presses[-1].card_id, core.presses[-1].answer) == ("cA1", 0)

    done = PermissionOutcome(status=OutcomeStatus.ANSWERED, option_label="Allow", by="ntfy")
    await adapter.update_permission_request(SESSION, req, done)
    closed = (await probe.notifications())[-1]
    assert done.summary() in closed["message"]
    assert "actions" not in closed


async def test_a_stale_button_always_asks_the_core(
    make_adapter: AdapterFactory, core: FakeCore, probe: NtfyProbe, phone: Phone
) -> None:
    """The adapter never decides a card is closed: the core says so, with who answered, even
    once the session's thread is gone (the adapter has nothing of the card to forget)."""
    adapter = await make_adapter()
    await session(adapter, core)
    req = request()
    deny = (await card(adapter, probe, req))["actions"][1]
    elsewhere = PermissionOutcome(status=OutcomeStatus.ANSWERED_ELSEWHERE, option_label="Allow")
    await adapter.update_permission_request(SESSION, req, elsewhere)

    core.next_resolution = Resolution(status=ResolutionStatus.ALREADY_ANSWERED, answered_by="al")
    assert (await phone.tap(deny)).json()["message"] == "Already answered by al"
    assert [p.answer for p in core.presses] == [1]
    assert (await probe.notifications())[-1]["message"] == "Already answered by al"

    await adapter.delete_session_thread(SESSION)
    assert core.state("ntfy").values == {}  # type: ignore[attr-defined]
    core.next_resolution = Resolution(status=ResolutionStatus.UNKNOWN)
    forgotten = await phone.tap(deny)
    assert forgotten.json()["status"] == "unknown"
    assert [p.answer for p in core.presses] == [1, 1], "the core, not the adapter, said so"
    assert (await probe.notifications())[-1]["title"] == "aep-bridge", "no name left to show"


async def test_a_fourth_option_is_offered_in_the_text(
    make_adapter: AdapterFactory, core: FakeCore, probe: NtfyProbe, phone: Phone
) -> None:
    adapter = await make_adapter()
    await session(adapter, core)
    labels = ("Allow", "Deny", "Allow for session", "Always deny")
    note = await card(adapter, probe, request(labels=labels))
    assert [a["label"] for a in note["actions"]] == ["Allow", "Deny", "Allow for session"]
    assert "4. Always deny" in note["message"]
    await phone.tap(note["actions"][2])
    assert core.presses[-1].answer == 2
    assert request(labels=labels).options[2].id == "opt-2-allow-for-session"


async def test_a_long_card_arrives_in_parts_with_the_buttons_under_its_end(
    make_adapter: AdapterFactory, core: FakeCore, probe: NtfyProbe, phone: Phone
) -> None:
    adapter = await make_adapter()
    await session(adapter, core)
    diff = multibyte_text(6_000)
    long = request().model_copy(update={"description": diff})
    await adapter.send_permission_request(SESSION, long)
    parts = await probe.notifications()
    assert len(parts) == 2
    assert all(len(p["message"].encode()) <= 4096 for p in parts)
    assert diff in "".join(p["message"] for p in parts)
    assert "actions" not in parts[0]
    assert [a["label"] for a in parts[1]["actions"]] == ["Allow", "Deny"]
    assert (await phone.tap(parts[1]["actions"][0])).json()["status"] == "accepted"


# -- limits --------------------------------------------------------------------------------


async def test_a_10000_byte_message_arrives_in_parts_of_at_most_4096_bytes(
    make_adapter: AdapterFactory, core: FakeCore, probe: NtfyProbe
) -> None:
    adapter = await make_adapter()
    await session(adapter, core)
    text = multibyte_text(10_000)
    assert len(text) < 4096 * 3
    assert len(text.encode()) >= 10_000

    await adapter.send_message(SESSION, OutgoingMessage(type="text", text=text))

    parts = await probe.notifications()
    assert len(parts) >= 3
    assert all(len(p["message"].encode()) <= 4096 for p in parts)
    assert "".join(p["message"] for p in parts) == text
    assert [p["title"] for p in parts] == [
        f"{NAME} ({i}/{len(parts)})" for i in range(1, len(parts) + 1)
    ]


async def test_an_empty_bucket_raises_rate_limited_with_retry_after_5_seconds(
    make_adapter: AdapterFactory, core: FakeCore, ntfy: FakeNtfy
) -> None:
    adapter = await make_adapter()
    await session(adapter, core)
    ntfy.bucket = TokenBucket(size=3, refill_seconds=3600)
    for i in range(3):
        await adapter.send_message(SESSION, OutgoingMessage(type="text", text=f"line {i}"))

    with pytest.raises(RateLimited) as info:
        await adapter.send_message(SESSION, OutgoingMessage(type="text", text="line 3"))

    assert info.value.retry_after == 5.0
    assert "too many requests" in str(info.value)
    assert [m["message"] for m in ntfy.messages] == ["line 0", "line 1", "line 2"]
    ntfy.bucket.refill()
    await adapter.send_message(SESSION, OutgoingMessage(type="text", text="line 3"))
    assert ntfy.messages[-1]["message"] == "line 3"


async def test_a_retry_after_a_429_midway_does_not_repeat_the_parts_delivered(
    make_adapter: AdapterFactory, core: FakeCore, ntfy: FakeNtfy, probe: NtfyProbe
) -> None:
    adapter = await make_adapter()
    await session(adapter, core)
    ntfy.bucket = TokenBucket(size=2, refill_seconds=3600)
    message = OutgoingMessage(type="text", text=multibyte_text(10_000))

    with pytest.raises(RateLimited):
        await adapter.send_message(SESSION, message)
    assert len(ntfy.messages) == 2
    ntfy.bucket.refill()
    await adapter.send_message(SESSION, message)  # what the core's outbox does after 5 s

    parts = await probe.notifications()
    assert "".join(p["message"] for p in parts) == message.text
    assert len({p["title"] for p in parts}) == len(parts), "no part was sent twice"


# -- the access token ----------------------------------------------------------------------


async def test_the_token_is_sent_as_a_bearer_header(
    make_adapter: AdapterFactory, core: FakeCore, ntfy: FakeNtfy, probe: NtfyProbe
) -> None:
    ntfy.token = GOOD_TOKEN
    adapter = await make_adapter(token=GOOD_TOKEN)
    await session(adapter, core)
    await adapter.send_message(SESSION, OutgoingMessage(type="text", text="on a reserved topic"))
    assert ntfy.authorization == [f"Bearer {GOOD_TOKEN}"]
    assert [n["message"] for n in await probe.notifications()] == ["on a reserved topic"]
    assert GOOD_TOKEN not in repr(adapter.config)
    assert GOOD_TOKEN not in str(adapter.config)


@pytest.mark.parametrize(
    ("token", "status", "error"),
    [(WRONG_TOKEN, "401", "unauthorized"), (None, "403", "forbidden")],
)
async def test_a_refused_token_is_a_channel_error_that_never_shows_the_token(
    make_adapter: AdapterFactory,
    core: FakeCore,
    ntfy: FakeNtfy,
    caplog: pytest.LogCaptureFixture,
    token: str | None,
    status: str,
    error: str,
) -> None:
    caplog.set_level("DEBUG")
    ntfy.token = GOOD_TOKEN
    adapter = await make_adapter(token=token)
    await session(adapter, core)

    with pytest.raises(ChannelError) as info:
        await adapter.send_message(SESSION, OutgoingMessage(type="text", text="hello"))

    assert not isinstance(info.value, RateLimited)
    assert f"HTTP {status}" in str(info.value)
    assert error in str(info.value)
    assert "`token`" in str(info.value), "the message names the setting to fix"
    shown = "".join(traceback.format_exception(info.value)) + repr(info.value) + caplog.text
    assert WRONG_TOKEN not in shown
    assert GOOD_TOKEN not in shown
    assert ntfy.messages == []


# -- starting ------------------------------------------------------------------------------


async def test_start_fails_with_the_fix_when_ntfy_is_unreachable(core: FakeCore) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    server = f"http://127.0.0.1:{port}"
    adapter = NtfyChannel(core, NtfyConfig(name="ntfy", server=server, topic=TOPIC))

    with pytest.raises(ChannelError, match="cannot reach the ntfy server") as info:
        await adapter.start()

    assert server in str(info.value)
    assert "`server`" in str(info.value)
    with pytest.raises(ChannelError, match="not started"):
        await adapter.send_message(SESSION, OutgoingMessage(type="text", text="x"))


async def test_start_fails_when_ntfy_says_it_is_unhealthy(
    make_adapter: AdapterFactory, ntfy: FakeNtfy
) -> None:
    ntfy.healthy = False
    with pytest.raises(ChannelError, match="not healthy"):
        await make_adapter()


async def test_a_stopped_channel_refuses_to_publish(make_adapter: AdapterFactory) -> None:
    adapter = await make_adapter()
    await adapter.stop()
    with pytest.raises(ChannelError, match="not started"):
        await adapter.send_message(SESSION, OutgoingMessage(type="text", text="x"))


# -- how notifications look ----------------------------------------------------------------


async def test_titles_name_the_session_and_follow_a_rename(
    make_adapter: AdapterFactory, core: FakeCore, probe: NtfyProbe
) -> None:
    adapter = await make_adapter()
    thread = await core.create_thread(adapter, SESSION, NAME)
    assert thread
    await adapter.send_message(SESSION, OutgoingMessage(type="text", text="one"))
    await adapter.rename_session_thread(SESSION, "Fix the login test for good")
    await adapter.send_message(SESSION, OutgoingMessage(type="text", text="two"))
    titles = [n["title"] for n in await probe.notifications()]
    assert titles == [NAME, "Fix the login test for good"]


async def test_what_needs_a_person_rings_louder(
    make_adapter: AdapterFactory, core: FakeCore, probe: NtfyProbe
) -> None:
    adapter = await make_adapter()
    await session(adapter, core)
    await adapter.send_message(SESSION, OutgoingMessage(type="thought", text="hmm"))
    await adapter.send_message(SESSION, OutgoingMessage(type="text", text="Done.", notify=True))
    await adapter.send_message(SESSION, OutgoingMessage(type="error", text="run failed"))
    await adapter.send_permission_request(SESSION, request())
    link = "https://bridge.example.com/s/42"
    for kind in ("completed", "input_required"):
        await adapter.send_notification(
            NotificationMessage(session_id=SESSION, type=kind, summary=kind, deep_link=link)
        )
    priorities = [n["priority"] for n in await probe.notifications()]
    assert priorities == [2, 3, 4, 4, 3, 4]
    assert (await probe.notifications())[-1]["click"] == link


# -- packaging and config ------------------------------------------------------------------


def test_the_bridge_finds_the_channel_through_the_entry_point() -> None:
    found = [ep for ep in entry_points(group="aep_bridge") if ep.name == "ntfy"]
    assert [ep.value for ep in found] == ["aep_bridge_ntfy"]
    plugin = found[0].load()
    assert plugin.register_channels() == [NtfyChannel]
    registration = ChannelRegistration.of(NtfyChannel)
    assert registration.name == "ntfy"
    assert registration.config_model is NtfyConfig
    assert registration.capabilities.max_buttons == 3


def test_the_config_requires_a_valid_topic_and_explains_it() -> None:
    with pytest.raises(ValidationError) as missing:
        NtfyConfig.model_validate({"name": "ntfy"})
    assert [e["loc"] for e in missing.value.errors()] == [("topic",)]
    assert "password" in (NtfyConfig.model_fields["topic"].description or "")

    with pytest.raises(ValidationError, match="64 letters"):
        NtfyConfig.model_validate({"topic": "my topic!"})
    with pytest.raises(ValidationError, match="public_url"):
        NtfyConfig.model_validate({"topic": "t", "public_url": "bridge.example.com"})

    config = NtfyConfig.model_validate(
        {"topic": "t", "public_url": "https://bridge.example.com/", "token": GOOD_TOKEN}
    )
    assert config.public_url == "https://bridge.example.com"
    assert GOOD_TOKEN not in repr(config)
    assert GOOD_TOKEN not in config.model_dump_json()
