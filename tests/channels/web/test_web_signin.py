"""The web page's sign-ins, inside the real core: the cookie alone is never enough, every
sign-in ends (idle, absolute, sign-out, past the limit, a restart) and says why, and the
bridge's token signs in only through a POST form."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from aep_bridge.testing.fixture import BridgeFixture, RunningBridge
from aep_bridge_web.auth import Ended, PageSession, SignIn
from tests.channels.web.test_web_http import PROMPT, SIGN_IN, Page
from tests.core.rig import machine_settings


class Clock:
    """The sign-ins' time, moved by the test (it starts at the real monotonic time, so the
    code the bridge logged is still good)."""

    def __init__(self) -> None:
        self.now = time.monotonic()

    def __call__(self) -> float:
        return self.now


async def start(
    bridge: BridgeFixture, caplog: pytest.LogCaptureFixture, **options: Any
) -> tuple[RunningBridge[Any], str]:
    """The bridge with its web channel (`options` in its block) and the logged sign-in URL."""
    caplog.set_level(logging.INFO, logger="aep_bridge.web")
    running = await bridge.start("web", {"approvers": ["local"], **options})
    match = SIGN_IN.search(caplog.text)
    assert match, caplog.text
    return running, match.group(1)


@pytest.fixture
async def clients() -> AsyncIterator[list[httpx.AsyncClient]]:
    """Browsers, each with a cookie jar of its own."""
    made = [httpx.AsyncClient(timeout=10) for _ in range(4)]
    yield made
    for client in made:
        await client.aclose()


async def test_the_cookie_alone_reads_nothing_answers_nothing_and_signs_no_one_out(
    bridge: BridgeFixture, caplog: pytest.LogCaptureFixture, clients: list[httpx.AsyncClient]
) -> None:
    """What a server on another loopback port gets of a signed-in browser is its cookie (a
    browser sends cookies to every port): replayed alone, it yields no state, no key, no press
    token, no answer and no sign-out."""
    running, url = await start(bridge, caplog)
    agent = running.agent()
    agent.start("Fix the flaky checkout test")
    agent.ask(PROMPT)
    await running.settle()
    page = Page(running, clients[0])
    await page.sign_in(url)
    cookie = clients[0].cookies["aep_web"]
    base = running.channel_url
    thief = clients[1]
    stolen = {"Cookie": f"aep_web={cookie}"}

    state = await thief.get(f"{base}/api/state", headers=stolen)
    assert state.status_code == 401, state.text
    assert state.json()["reason"] == "missing"
    [card] = (await page.state())["queue"]  # the person's own tab still sees it
    secrets = {page.key, *(option["token"] for option in card["options"])}
    assert all(secrets)
    replies = [state]
    for path in ("", "signin", "api/state", f"api/sessions/{card['session_id']}", "api/stream"):
        replies.append(await thief.get(f"{base}/{path}", headers=stolen))
    replies.append(await thief.get(f"{running.url}/", headers=stolen))
    for path, body in (
        ("api/answer", {"card_id": card["id"], "option": 0, "token": card["options"][0]["token"]}),
        ("api/signout", {}),
    ):
        replies.append(
            await thief.post(
                f"{base}/{path}",
                content=json.dumps(body),
                headers={**stolen, "Content-Type": "application/json", "Origin": running.url},
            )
        )
    for reply in replies:
        seen = reply.text + json.dumps(dict(reply.headers))
        assert not [s for s in secrets if s in seen], reply.url
        assert "git push" not in seen, reply.url
    assert [r.status_code for r in replies[3:6]] == [401, 401, 401]
    assert [r.status_code for r in replies[-2:]] == [401, 401]
    # with a wrong key beside it, the cookie is no better
    wrong = await thief.get(f"{base}/api/state", headers={**stolen, "X-Page-Key": "x" * 43})
    assert wrong.status_code == 401
    await running.settle()
    assert agent.answers == []
    # the person is still signed in, and their press is the one the agent gets
    reply = await page.press(card, 0)
    assert reply.json()["status"] == "accepted"
    await running.settle()
    assert agent.answers == [{"option": "allow"}]


async def test_a_sign_in_ends_when_unused_for_its_idle_time_or_past_its_lifetime(
    bridge: BridgeFixture, caplog: pytest.LogCaptureFixture, clients: list[httpx.AsyncClient]
) -> None:
    running, url = await start(bridge, caplog, signin_idle_hours=1, signin_max_hours=3)
    clock = Clock()
    running.adapter.signin.clock = clock
    idle = Page(running, clients[0])
    reply = await idle.sign_in(url)
    assert "Max-Age=10800" in reply.headers["set-cookie"]
    for _ in range(2):
        clock.now += 3000  # used within the hour: still signed in
        assert (await idle.get("api/state")).status_code == 200
    clock.now += 3601
    expired = await idle.get("api/state")
    assert expired.status_code == 401
    assert expired.json()["reason"] == "expired"
    assert (
        "Your sign-in expired (unused for 1 hours, or begun over 3 hours ago)"
        in (expired.json()["detail"])
    )
    assert "aep-bridge token" in expired.json()["detail"]
    page = await clients[0].get(f"{running.channel_url}/")
    assert page.status_code == 401
    assert "Your sign-in expired" in page.text

    busy = Page(running, clients[1])
    await busy.sign_in_with_token(bridge.token)
    for _ in range(3):
        clock.now += 3000  # in use all along
        assert (await busy.get("api/state")).status_code == 200
    clock.now += 1900  # 3 hours and 100 seconds since the sign-in
    ended = await busy.get("api/state")
    assert ended.status_code == 401
    assert ended.json()["reason"] == "expired"
    assert len(running.adapter.signin) == 0


async def test_an_open_page_keeps_its_sign_in_and_its_stream_ends_with_it(
    bridge: BridgeFixture, caplog: pytest.LogCaptureFixture, clients: list[httpx.AsyncClient]
) -> None:
    running, url = await start(bridge, caplog, signin_idle_hours=1, signin_max_hours=3)
    clock = Clock()
    running.adapter.signin.clock = clock
    running.adapter.ping_every = 0.01
    page = Page(running, clients[0])
    await page.sign_in(url)
    lines: list[str] = []
    pinged = asyncio.Event()

    async def read() -> None:
        async with clients[0].stream(
            "GET", f"{running.channel_url}/api/stream", headers=page.headers
        ) as stream:
            assert stream.status_code == 200
            async for line in stream.aiter_lines():
                lines.append(line)
                if line == ": ping":
                    pinged.set()

    async def ping() -> None:
        pinged.clear()
        await asyncio.wait_for(pinged.wait(), 10)

    reader = asyncio.create_task(read())
    for _ in range(3):  # 2.5 hours with the page open and nothing asked: still signed in
        await ping()
        clock.now += 3000
    await ping()
    assert not reader.done()
    assert (await page.get("api/state")).status_code == 200
    clock.now += 3000  # past the 3 hours: the stream ends at its next ping
    await asyncio.wait_for(reader, 10)
    reply = await page.get("api/state")
    assert reply.json()["reason"] == "expired"


async def test_sign_out_ends_that_sign_in_its_cookie_and_its_stream_and_no_other(
    bridge: BridgeFixture, caplog: pytest.LogCaptureFixture, clients: list[httpx.AsyncClient]
) -> None:
    running, url = await start(bridge, caplog)
    page = Page(running, clients[0])
    await page.sign_in(url)
    other = Page(running, clients[1])
    await other.sign_in_with_token(bridge.token)
    opened = asyncio.Event()

    async def read() -> list[str]:
        lines = []
        async with clients[0].stream(
            "GET", f"{running.channel_url}/api/stream", headers=page.headers
        ) as stream:
            async for line in stream.aiter_lines():
                opened.set()
                lines.append(line)
        return lines

    reader = asyncio.create_task(read())
    await asyncio.wait_for(opened.wait(), 10)
    cookie = clients[0].cookies["aep_web"]
    out = await clients[0].post(
        f"{running.channel_url}/api/signout",
        headers={**page.headers, "Origin": running.url},
    )
    assert out.status_code == 200
    assert out.json()["status"] == "signed-out"
    assert out.headers["set-cookie"].startswith('aep_web="";')
    assert "Max-Age=0" in out.headers["set-cookie"]
    assert await asyncio.wait_for(reader, 10) == [": hello", ""]
    replay = await clients[2].get(
        f"{running.channel_url}/api/state",
        headers={"Cookie": f"aep_web={cookie}", **page.headers},
    )
    assert replay.status_code == 401
    assert replay.json()["reason"] == "signed-out"
    assert replay.json()["detail"].startswith("You signed out.")
    assert (await other.get("api/state")).status_code == 200


async def test_sign_ins_are_bounded_and_a_new_one_in_a_browser_ends_its_last(
    bridge: BridgeFixture, caplog: pytest.LogCaptureFixture, clients: list[httpx.AsyncClient]
) -> None:
    running, url = await start(bridge, caplog, signin_limit=2)
    first, second, third = (Page(running, c) for c in clients[:3])
    await first.sign_in(url)
    await second.sign_in_with_token(bridge.token)
    assert (await first.get("api/state")).status_code == 200  # used last: kept
    await third.sign_in_with_token(bridge.token)
    assert len(running.adapter.signin) == 2
    pushed = await second.get("api/state")
    assert pushed.status_code == 401
    assert pushed.json()["reason"] == "replaced"
    assert (await first.get("api/state")).status_code == 200
    assert (await third.get("api/state")).status_code == 200

    # the same browser signs in again: its previous sign-in is over, the new one works
    before = (clients[0].cookies["aep_web"], first.key)
    await first.sign_in_with_token(bridge.token)
    assert len(running.adapter.signin) == 2
    again = await clients[3].get(
        f"{running.channel_url}/api/state",
        headers={"Cookie": f"aep_web={before[0]}", "X-Page-Key": before[1]},
    )
    assert again.json()["reason"] == "replaced"
    assert (await first.get("api/state")).status_code == 200


async def test_after_a_restart_the_page_says_the_bridge_restarted(
    bridge: BridgeFixture, caplog: pytest.LogCaptureFixture, clients: list[httpx.AsyncClient]
) -> None:
    running, url = await start(bridge, caplog)
    page = Page(running, clients[0])
    await page.sign_in(url)
    await running.restart()
    reply = await page.get("api/state")
    assert reply.status_code == 401
    assert reply.json()["reason"] == "restarted"
    assert reply.json()["detail"].startswith("The bridge restarted, which ended your sign-in.")
    shown = await clients[0].get(f"{running.channel_url}/")
    assert shown.status_code == 401
    assert "The bridge restarted" in shown.text
    assert 'action="/channels/web/signin"' in shown.text
    # what to run is shown as code, not as markdown's backticks
    assert "`" not in shown.text
    assert "(<code>aep-bridge token</code> prints it) in the sign-in form" in shown.text
    # a cookie no run of the bridge made is not taken for one
    forged = await clients[1].get(
        f"{running.channel_url}/api/state", headers={"Cookie": "aep_web=forged", **page.headers}
    )
    assert forged.json()["reason"] == "unknown"


async def test_the_token_signs_in_only_through_the_post_form(
    bridge: BridgeFixture, caplog: pytest.LogCaptureFixture, clients: list[httpx.AsyncClient]
) -> None:
    """A link with the bridge's token would stay in the browser's history: refused, even
    with the right token, and the form is offered."""
    running, _ = await start(bridge, caplog)
    link = await clients[0].get(f"{running.channel_url}/signin?token={bridge.token}")
    assert link.status_code == 400
    assert "set-cookie" not in link.headers
    assert '<form method="post"' in link.text
    assert bridge.token not in link.text
    assert (await clients[0].get(f"{running.channel_url}/")).status_code == 401

    as_json = await clients[1].post(f"{running.channel_url}/signin", json={"token": bridge.token})
    assert as_json.status_code == 415
    disguised = await clients[1].post(
        f"{running.channel_url}/signin",
        content=f"token={bridge.token}",
        headers={"Content-Type": "text/plain; x=application/x-www-form-urlencoded"},
    )
    assert disguised.status_code == 415
    foreign = await clients[1].post(
        f"{running.channel_url}/signin",
        data={"token": bridge.token},
        headers={"Origin": "http://127.0.0.1:1"},
    )
    assert foreign.status_code == 403
    assert "set-cookie" not in as_json.headers
    assert "set-cookie" not in foreign.headers
    page = Page(running, clients[1])
    signed = await page.sign_in_with_token(bridge.token, Origin=running.url)
    assert signed.status_code == 303
    assert (await page.get("api/state")).status_code == 200


class SignIns(RuleBasedStateMachine):
    """`SignIn` against a plain model: a request is let in only with both halves of a live
    sign-in, within its idle time and its lifetime, and never more than `limit` are live."""

    def __init__(self) -> None:
        super().__init__()
        self.clock = Clock()
        self.signin = SignIn(60, idle=100.0, lifetime=250.0, limit=3, clock=self.clock)
        #: what the model expects live: id -> (began, last used), least recently used first
        self.live: dict[str, tuple[float, float]] = {}
        self.known: list[PageSession] = []

    def _expire(self) -> None:
        now = self.clock.now
        self.live = {
            i: (b, u) for i, (b, u) in self.live.items() if now - u <= 100 and now - b <= 250
        }

    @rule()
    def sign_in(self) -> None:
        self._expire()
        if len(self.live) == 3:  # the least recently used goes
            del self.live[next(iter(self.live))]
        session = self.signin.open()
        self.live[session.id] = (self.clock.now, self.clock.now)
        self.known.append(session)

    @rule(seconds=st.sampled_from([1.0, 30.0, 99.0, 101.0]))
    def wait(self, seconds: float) -> None:
        self.clock.now += seconds

    @rule(data=st.data(), right_key=st.booleans())
    def request(self, data: st.DataObject, right_key: bool) -> None:
        if not self.known:
            return
        session = data.draw(st.sampled_from(self.known))
        key = session.key if right_key else session.key[:-1] + "A"
        if not right_key and key == session.key:
            key = session.key[:-1] + "B"
        found = self.signin.check(session.id, key)
        self._expire()
        if right_key and session.id in self.live:
            assert found is session
            began, _ = self.live.pop(session.id)  # now the most recently used
            self.live[session.id] = (began, self.clock.now)
        else:
            assert isinstance(found, Ended), (right_key, session.id in self.live)
        # the cookie alone: never let in
        assert isinstance(self.signin.check(session.id, None), Ended)

    @rule(data=st.data())
    def sign_out(self, data: st.DataObject) -> None:
        if self.known:
            session = data.draw(st.sampled_from(self.known))
            self.signin.end(session.id, Ended.SIGNED_OUT)
            self.live.pop(session.id, None)

    @invariant()
    def bounded(self) -> None:
        assert len(self.signin) <= 3


SignIns.TestCase.settings = machine_settings(60, 30)
TestSignIns = SignIns.TestCase
