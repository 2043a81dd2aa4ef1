"""The web channel over HTTP, inside the real core (`bridge` fixture): sign-in, the page's
headers, the API a browser uses, the live stream, and answers reaching the agent."""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from aep_bridge.testing.fixture import BridgeFixture, RunningBridge

SIGN_IN = re.compile(
    r"web web: sign in at (http://\S+/channels/web/signin\?code=(\S+)) "
    r"\(one use, within 15 minutes\)"
)
PROMPT = "Run `git push origin fix/checkout`?"


class Page:
    """A browser's tab on the web channel: its cookie jar and the page key its sign-in gave."""

    def __init__(self, running: RunningBridge[Any], client: httpx.AsyncClient) -> None:
        self.running = running
        self.client = client
        self.key = ""

    @property
    def base(self) -> str:
        return self.running.channel_url

    def _took(self, reply: httpx.Response) -> httpx.Response:
        if reply.status_code == 303:
            self.key = reply.headers["location"].partition("#key=")[2]
        return reply

    async def sign_in(self, url: str) -> httpx.Response:
        """The logged one-time link."""
        return self._took(await self.client.get(url))

    async def sign_in_with_token(self, token: str, **headers: str) -> httpx.Response:
        """The sign-in form, posted with the bridge's token."""
        return self._took(
            await self.client.post(f"{self.base}/signin", data={"token": token}, headers=headers)
        )

    @property
    def headers(self) -> dict[str, str]:
        return {"X-Page-Key": self.key}

    async def get(self, path: str) -> httpx.Response:
        return await self.client.get(f"{self.base}/{path}", headers=self.headers)

    async def answer(self, body: dict[str, Any], **headers: str) -> httpx.Response:
        return await self.client.post(
            f"{self.base}/api/answer",
            content=json.dumps(body),
            headers={
                "Content-Type": "application/json",
                "X-Page-Key": self.key,
                "Origin": self.running.url,
                **headers,
            },
        )

    async def press(self, card: dict[str, Any], index: int, **headers: str) -> httpx.Response:
        """A click on the card's button `index`: its option and the token it carries."""
        token = card["options"][index]["token"]
        return await self.answer(
            {"card_id": card["id"], "option": index, "token": token}, **headers
        )

    async def state(self) -> dict[str, Any]:
        reply = await self.get("api/state")
        assert reply.status_code == 200, reply.text
        return dict(reply.json())


@pytest.fixture
async def web(
    bridge: BridgeFixture, caplog: pytest.LogCaptureFixture
) -> tuple[RunningBridge[Any], str]:
    """The bridge with its web channel, found by name as `aep-bridge run` finds it, and the
    sign-in URL it logged."""
    caplog.set_level(logging.INFO, logger="aep_bridge.web")
    running = await bridge.start("web", {"approvers": ["local"]})
    match = SIGN_IN.search(caplog.text)
    assert match, caplog.text
    return running, match.group(1)


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=10) as client:
        yield client


async def test_the_logged_url_signs_in_once_with_a_strict_cookie(
    web: tuple[RunningBridge[Any], str], client: httpx.AsyncClient
) -> None:
    running, url = web
    assert url.startswith(f"{running.url}/channels/web/signin?code=")
    reply = await client.get(url)
    assert reply.status_code == 303
    # the tab's key travels in the fragment, which a browser never sends to a server
    assert re.fullmatch(r"/channels/web/#key=[A-Za-z0-9_-]{43}", reply.headers["location"])
    cookie = reply.headers["set-cookie"]
    assert cookie.startswith("aep_web=")
    assert "HttpOnly" in cookie
    assert "SameSite=strict" in cookie or "SameSite=Strict" in cookie
    assert "Path=/channels/web" in cookie
    assert f"Max-Age={7 * 24 * 3600}" in cookie  # signin_max_hours: 168
    assert "Secure" not in cookie
    # the code is spent: a second use (another browser) is refused with the way back in
    async with httpx.AsyncClient() as other:
        again = await other.get(url)
        assert again.status_code == 403
        assert "aep-bridge token" in again.text
        assert "set-cookie" not in again.headers


async def test_the_bridge_token_signs_in_by_the_form_and_a_wrong_one_does_not(
    web: tuple[RunningBridge[Any], str], client: httpx.AsyncClient, bridge: BridgeFixture
) -> None:
    running, _ = web
    page = Page(running, client)
    form = await client.get(f"{running.channel_url}/signin")
    assert form.status_code == 200
    assert '<form method="post" action="/channels/web/signin"' in form.text
    assert 'type="password"' in form.text
    wrong = await page.sign_in_with_token("not-the-token")
    assert wrong.status_code == 403
    assert "set-cookie" not in wrong.headers
    right = await page.sign_in_with_token(bridge.token)
    assert right.status_code == 303
    assert (await client.get(f"{running.channel_url}/")).status_code == 200
    assert (await page.get("api/state")).status_code == 200


async def test_an_expired_code_is_refused(
    web: tuple[RunningBridge[Any], str], client: httpx.AsyncClient
) -> None:
    running, _ = web
    running.adapter.signin.ttl = -1.0  # as if 15 minutes had passed since it was made
    code = running.adapter.signin.new_code()
    reply = await client.get(f"{running.channel_url}/signin?code={code}")
    assert reply.status_code == 403


async def test_without_the_cookie_everything_but_signin_and_static_is_refused(
    web: tuple[RunningBridge[Any], str], client: httpx.AsyncClient
) -> None:
    running, _ = web
    agent = running.agent()
    agent.start("Fix the flaky checkout test")
    agent.ask(PROMPT)
    await running.settle()
    page = await client.get(f"{running.channel_url}/")
    assert page.status_code == 401
    assert "aep-bridge token" in page.text
    assert "git push" not in page.text
    for path in ("api/state", "api/sessions/x", "api/stream"):
        reply = await client.get(f"{running.channel_url}/{path}")
        assert reply.status_code == 401, path
        assert reply.json()["error"] == "signed-out"
        assert reply.json()["reason"] == "missing"
    card = running.adapter.board.state()["queue"][0]["id"]
    posted = await client.post(
        f"{running.channel_url}/api/answer", json={"card_id": card, "option": 0}
    )
    assert posted.status_code == 401
    await running.settle()
    assert agent.answers == []
    assert (await client.get(f"{running.channel_url}/static/app.js")).status_code == 200


async def test_every_response_carries_the_strict_headers(
    web: tuple[RunningBridge[Any], str], client: httpx.AsyncClient
) -> None:
    running, url = web
    page = Page(running, client)
    replies = [await client.get(f"{running.channel_url}/")]  # signed out
    replies.append(await page.sign_in(url))
    replies += [await page.get(p) for p in ("", "api/state")]
    replies.append(await client.get(f"{running.channel_url}/static/app.css"))
    for reply in replies:
        csp = reply.headers["content-security-policy"]
        assert "script-src 'self'" in csp
        assert "frame-ancestors 'none'" in csp
        assert "unsafe-inline" not in csp
        assert reply.headers["x-content-type-options"] == "nosniff"
        assert reply.headers["referrer-policy"] == "same-origin"
    assert replies[2].headers["cache-control"] == "no-store"
    assert replies[3].headers["cache-control"] == "no-store"
    html = replies[2].text
    assert "<script>" not in html
    assert "style=" not in html
    assert "<style" not in html
    assert '<script src="static/app.js" defer></script>' in html
    assert replies[3].status_code == 200


async def test_a_press_on_the_page_reaches_the_agent_and_closes_the_card(
    web: tuple[RunningBridge[Any], str], client: httpx.AsyncClient
) -> None:
    running, url = web
    page = Page(running, client)
    await page.sign_in(url)
    agent = running.agent(agent="claude-code")
    agent.start("Fix the flaky checkout test")
    agent.ask(PROMPT, options=[("allow", "Allow"), ("deny", "Deny")])
    await running.settle()
    state = await page.state()
    [session] = state["sessions"]
    assert session["title"] == "Fix the flaky checkout test"
    assert session["agent"] == "claude-code"
    assert session["pending"] == 1
    [card] = state["queue"]
    assert [o["label"] for o in card["options"]] == ["Allow", "Deny"]
    assert card["session_id"] == session["id"]
    assert card["outcome"] is None

    reply = await page.press(card, 0)
    assert reply.status_code == 200
    assert reply.json() == {"status": "accepted", "message": "Sent to the agent"}
    await running.settle()
    assert agent.answers == [{"option": "allow"}]
    state = await page.state()
    assert state["queue"] == []
    assert state["sessions"][0]["pending"] == 0
    timeline = await page.get(f"api/sessions/{session['id']}")
    [closed] = timeline.json()["cards"]
    assert closed["outcome"]["closed"] is True
    assert "Allow" in closed["outcome"]["summary"]
    assert closed["outcome"]["by"] == "you"
    # a second press (a page that had not caught up) hears what became of the question, in
    # the card's words (200: the page shows the message)
    again = await page.press(card, 1)
    assert again.status_code == 200
    assert again.json() == {
        "status": "already_answered",
        "message": f"This question is closed: {closed['outcome']['summary']}",
    }


async def test_a_question_on_the_page_is_its_card_said_once(
    web: tuple[RunningBridge[Any], str], client: httpx.AsyncClient
) -> None:
    """The timeline shows the question as its card, and no line beside it saying again that
    the agent asks permission: the page has no place for heads-ups (issue 32)."""
    running, url = web
    page = Page(running, client)
    await page.sign_in(url)
    agent = running.agent(agent="claude-code")
    agent.start("Fix invoice rounding")
    agent.ask(PROMPT, options=[("allow", "Allow"), ("deny", "Deny")])
    await running.settle()
    [session] = (await page.state())["sessions"]
    timeline = (await page.get(f"api/sessions/{session['id']}")).json()
    [card] = timeline["cards"]
    assert "git push origin fix/checkout" in json.dumps(card)
    shown = json.dumps(timeline["items"])
    assert "asks permission" not in shown
    assert "waiting for" not in shown
    assert [i for i in timeline["items"] if i["type"] == "notification"] == []


async def test_the_signed_in_user_is_refused_when_not_an_approver(
    bridge: BridgeFixture, caplog: pytest.LogCaptureFixture, client: httpx.AsyncClient
) -> None:
    caplog.set_level(logging.INFO, logger="aep_bridge.web")
    running = await bridge.start("web", {"approvers": ["someone-else"]})
    page = Page(running, client)
    match = SIGN_IN.search(caplog.text)
    assert match
    await page.sign_in(match.group(1))
    agent = running.agent()
    agent.start()
    agent.ask(PROMPT)
    await running.settle()
    [card] = (await page.state())["queue"]
    reply = await page.press(card, 0)
    assert reply.json()["status"] == "not_allowed"
    await running.settle()
    assert agent.answers == []


async def test_text_and_form_answers_go_to_the_core(
    web: tuple[RunningBridge[Any], str], client: httpx.AsyncClient
) -> None:
    running, url = web
    page = Page(running, client)
    await page.sign_in(url)
    agent = running.agent()
    agent.start()
    agent.emit(
        "attention.requested",
        {"kind": "input", "prompt": "Which branch?", "options": [], "accepts_text": True},
        capture="full",
    )
    await running.settle()
    [card] = (await page.state())["queue"]
    assert card["accepts_text"] is True
    reply = await page.answer({"card_id": card["id"], "text": "main"})
    assert reply.json()["status"] == "accepted", reply.json()
    await running.settle()
    assert agent.answers == [{"text": "main"}]


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"X-Page-Key": "forged"}, 401),
        ({"X-Page-Key": ""}, 401),
        ({"Origin": "http://evil.example"}, 403),
        ({"Content-Type": "text/plain"}, 415),
        # a type any page may send, whatever its parameters say
        ({"Content-Type": "text/plain;application/json"}, 415),
    ],
)
async def test_a_post_without_the_page_s_key_origin_or_json_changes_nothing(
    web: tuple[RunningBridge[Any], str],
    client: httpx.AsyncClient,
    headers: dict[str, str],
    status: int,
) -> None:
    running, url = web
    page = Page(running, client)
    await page.sign_in(url)
    agent = running.agent()
    agent.start()
    agent.ask(PROMPT)
    await running.settle()
    [card] = (await page.state())["queue"]
    reply = await page.press(card, 0, **headers)
    assert reply.status_code == status
    await running.settle()
    assert agent.answers == []
    assert len((await page.state())["queue"]) == 1


async def test_a_press_with_another_card_s_token_is_refused(
    web: tuple[RunningBridge[Any], str], client: httpx.AsyncClient
) -> None:
    running, url = web
    page = Page(running, client)
    await page.sign_in(url)
    agent = running.agent()
    agent.start()
    agent.ask(PROMPT)
    agent.ask("Run `make deploy`?")
    await running.settle()
    first, second = (await page.state())["queue"]
    token = first["options"][0]["token"]
    for body in (
        {"card_id": second["id"], "option": 0, "token": token},  # another card's button
        {"card_id": first["id"], "option": 1, "token": token},  # another option's
        {"card_id": first["id"], "option": 0},  # none
    ):
        reply = await page.answer(body)
        assert reply.json()["status"] == "rejected", body
        assert "reload the page" in reply.json()["message"]
    await running.settle()
    assert agent.answers == []


async def test_after_a_restart_the_page_still_shows_the_session_and_takes_the_answer(
    web: tuple[RunningBridge[Any], str], client: httpx.AsyncClient, bridge: BridgeFixture
) -> None:
    running, _ = web
    agent = running.agent()
    agent.start("Fix the flaky checkout test")
    agent.say("Found it: the cart fixture races the price load.")
    agent.ask(PROMPT, options=[("allow", "Allow"), ("deny", "Deny")])
    await running.settle()
    await running.restart()
    page = Page(running, client)  # a restart signs everyone out: sign in again
    signed = await page.sign_in_with_token(bridge.token)
    assert signed.status_code == 303
    state = await page.state()
    [session] = state["sessions"]
    assert session["title"] == "Fix the flaky checkout test"
    [card] = state["queue"]
    timeline = await page.get(f"api/sessions/{session['id']}")
    assert "the cart fixture races" in json.dumps(timeline.json()["items"])
    reply = await page.press(card, 1)
    assert reply.json()["status"] == "accepted"
    await running.settle()
    assert agent.answers == [{"option": "deny"}]


async def test_a_body_over_64_kib_is_refused(
    web: tuple[RunningBridge[Any], str], client: httpx.AsyncClient
) -> None:
    running, url = web
    page = Page(running, client)
    await page.sign_in(url)
    reply = await page.answer({"card_id": "c1", "text": "x" * 70_000})
    assert reply.status_code == 413


async def test_the_stream_sends_sessions_items_and_cards_live(
    web: tuple[RunningBridge[Any], str], client: httpx.AsyncClient
) -> None:
    running, url = web
    page = Page(running, client)
    await page.sign_in(url)
    events: list[tuple[str, dict[str, Any]]] = []

    async def read() -> None:
        async with client.stream(
            "GET", f"{running.channel_url}/api/stream", headers=page.headers
        ) as stream:
            assert stream.headers["content-type"].startswith("text/event-stream")
            name = ""
            async for line in stream.aiter_lines():
                if line.startswith("event: "):
                    name = line[7:]
                elif line.startswith("data: "):
                    events.append((name, json.loads(line[6:])))
                    if "card" in {n for n, _ in events} and "not bold" in line:
                        return

    reader = asyncio.create_task(read())
    await asyncio.sleep(0.2)
    agent = running.agent()
    agent.start("Fix the flaky checkout test")
    agent.ask(PROMPT)
    agent.say("I found the race: <b>not bold</b>")
    await running.settle()
    await asyncio.wait_for(reader, 5)
    kinds = {name for name, _ in events}
    assert {"session", "item", "card"} <= kinds
    html = " ".join(str(d.get("html", "")) for n, d in events if n == "item")
    assert "&lt;b&gt;not bold&lt;/b&gt;" in html
    assert "<b>" not in html


async def test_the_bridge_root_redirects_to_the_page(
    web: tuple[RunningBridge[Any], str], client: httpx.AsyncClient
) -> None:
    running, _ = web
    reply = await client.get(f"{running.url}/")
    assert reply.status_code == 307
    assert reply.headers["location"] == "/channels/web/"


async def test_an_open_page_s_stream_ends_when_the_bridge_stops(
    web: tuple[RunningBridge[Any], str], client: httpx.AsyncClient
) -> None:
    """A page left open must not hold up a stop: its stream ends (and it reconnects later)."""
    running, url = web
    page = Page(running, client)
    await page.sign_in(url)
    opened = asyncio.Event()

    async def read() -> list[str]:
        lines = []
        async with client.stream(
            "GET", f"{running.channel_url}/api/stream", headers=page.headers
        ) as stream:
            async for line in stream.aiter_lines():
                opened.set()
                lines.append(line)
        return lines

    reader = asyncio.create_task(read())
    await asyncio.wait_for(opened.wait(), 5)
    await running.stop()
    assert await asyncio.wait_for(reader, 10) == [": hello", ""]


def test_the_page_forgets_the_oldest_ended_sessions_past_its_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from aep_bridge_web import board

    monkeypatch.setattr(board, "SESSION_LIMIT", 3)
    kept = board.Board(lambda card, option: f"{card}:{option}")
    for name in ("s1", "s2", "s3"):
        kept.session(name)
    kept.session("s2", state="ended")
    kept.session("s1", state="ended")
    kept.session("s4")
    assert list(kept.sessions) == ["s1", "s3", "s4"]  # s2 ended first: it went
    kept.session("s5")
    assert list(kept.sessions) == ["s3", "s4", "s5"]
    kept.session("s6")  # none ended: all kept
    assert len(kept.sessions) == 4


def test_a_burst_within_one_millisecond_is_kept_in_its_order_of_arrival_and_across_a_restart(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every entry of the burst has the same time: the timeline and the queue follow the order
    the entries reached the page, and so does a board loaded from what the first one saved."""
    from aep_bridge import OutgoingMessage, PermissionOutcome, PermissionRequest
    from aep_bridge.contract.types import OutcomeStatus
    from aep_bridge_web import board

    monkeypatch.setattr(board, "now", lambda: "2026-01-01T00:00:00.000+00:00")
    kept = board.Board(lambda card, option: f"{card}:{option}")
    kept.message("s1", OutgoingMessage(type="system_message", text="Session started"))
    kept.message("s1", OutgoingMessage(type="text", text="push the fix"))
    kept.message("s1", OutgoingMessage(type="tool_call", text="Bash", key="call_1"))
    ask = PermissionRequest(id="c2", title="Run git push?")
    kept.card("s1", ask, None)
    kept.card("s0", PermissionRequest(id="c1", title="Later, elsewhere"), None)
    kept.message("s1", OutgoingMessage(type="text", text="while it waits"))
    kept.message("s1", OutgoingMessage(type="tool_update", text="Bash done", key="call_1"))

    def drawn(b: board.Board) -> list[str]:
        timeline = b.timeline("s1")
        assert timeline is not None
        entries = [*timeline["items"], *timeline["cards"]]
        # as the page draws them (entries without a position: items first, as on old pages)
        return [e.get("title") or e["html"] for e in sorted(entries, key=lambda e: e.get("seq", 0))]

    order = [
        '<p class="plain">Session started</p>',
        '<p class="plain">push the fix</p>',
        '<p class="plain">Bash done</p>',  # the call, updated in its place
        "Run git push?",
        '<p class="plain">while it waits</p>',
    ]
    assert drawn(kept) == order
    answer = PermissionOutcome(status=OutcomeStatus.ANSWERED, option_id="allow", by="you")
    said = kept.card("s1", ask, answer)["outcome"]["time"]
    kept.card("s1", ask, answer)  # the same outcome again (a retry): its time stays
    monkeypatch.setattr(board, "now", lambda: "2026-01-01T00:00:09.000+00:00")
    kept.card("s1", ask, answer)
    assert kept.cards["c2"]["outcome"]["time"] == said
    again = board.Board(lambda card, option: f"{card}:{option}")
    for session in ("s0", "s1"):
        saved = kept.dump(session)
        assert saved is not None
        again.load(saved)
    assert drawn(again) == order
    assert again.cards["c2"]["outcome"]["time"] == said
    before = len(again.items["s1"])
    late = again.message("s1", OutgoingMessage(type="text", text="after the restart"))
    assert len(again.items["s1"]) == before + 1  # a new entry, replacing none it had
    assert late["seq"] > max(e["seq"] for e in [*again.items["s1"].values()] if e is not late)
    assert [c["id"] for c in again.state()["queue"]] == ["c1"]  # c2 is answered


# -- away mode's switch (issue 33) -----------------------------------------------------------


def _bridge_away(running: RunningBridge[Any]) -> dict[str, Any]:
    """Away mode as the bridge itself holds it (what its `GET /away` gives), read through the
    real bridge the channel runs in."""
    view = running.adapter.view
    assert view is not None
    return view.away_state()


async def _switch(page: Page, body: dict[str, Any], **headers: str) -> httpx.Response:
    return await page.client.post(
        f"{page.base}/api/away",
        content=json.dumps(body),
        headers={
            "Content-Type": "application/json",
            "X-Page-Key": page.key,
            "Origin": page.running.url,
            **headers,
        },
    )


async def test_the_page_switches_away_mode_everywhere_and_per_session(
    web: tuple[RunningBridge[Any], str], client: httpx.AsyncClient
) -> None:
    running, url = web
    page = Page(running, client)
    await page.sign_in(url)
    agent = running.agent(agent="claude-code")
    agent.start("Fix the flaky checkout test")
    await running.settle()
    state = await page.state()
    [session] = state["sessions"]
    assert state["away"]["everywhere"] is False
    assert [(s["id"], s["away"]) for s in state["away"]["sessions"]] == [(session["id"], False)]

    reply = await _switch(page, {"on": True})
    assert reply.status_code == 200, reply.text
    assert reply.json()["status"] == "accepted"
    assert reply.json()["away"]["everywhere"] is True
    assert _bridge_away(running)["everywhere"] is True
    # the page's state says so after a reload, with who switched it
    away = (await page.state())["away"]
    assert away["everywhere"] is True
    assert away["by"] == "you on web"
    assert away["sessions"][0]["why"] == "everywhere"

    # the session's own switch wins over the everywhere one
    reply = await _switch(page, {"on": False, "session_id": session["id"]})
    assert reply.status_code == 200, reply.text
    [listed] = _bridge_away(running)["sessions"]
    assert (listed["away"], listed["switch"]) == (False, False)
    [shown] = (await page.get("api/away")).json()["sessions"]
    assert (shown["away"], shown["switch"]) == (False, False)

    # an unknown session is said so, and changes nothing
    reply = await _switch(page, {"on": True, "session_id": "s_nope"})
    assert reply.status_code == 404
    assert _bridge_away(running)["sessions"] == [listed]


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"X-Page-Key": "forged"}, 401),
        ({"Cookie": "aep_web=forged"}, 401),
        ({"Origin": "http://evil.example"}, 403),
        ({"Origin": "null"}, 403),
        ({"Content-Type": "text/plain"}, 415),
    ],
)
async def test_a_foreign_or_signed_out_away_switch_changes_nothing(
    web: tuple[RunningBridge[Any], str],
    client: httpx.AsyncClient,
    headers: dict[str, str],
    status: int,
) -> None:
    running, url = web
    page = Page(running, client)
    await page.sign_in(url)
    if "Cookie" in headers:  # no sign-in cookie of this browser's: only the forged one
        client.cookies.clear()
    reply = await _switch(page, {"on": True}, **headers)
    assert reply.status_code == status
    assert _bridge_away(running)["everywhere"] is False


async def test_a_signed_in_non_approver_cannot_switch_away_mode(
    bridge: BridgeFixture, caplog: pytest.LogCaptureFixture, client: httpx.AsyncClient
) -> None:
    caplog.set_level(logging.INFO, logger="aep_bridge.web")
    running = await bridge.start("web", {"approvers": ["someone-else"]})
    match = SIGN_IN.search(caplog.text)
    assert match
    page = Page(running, client)
    await page.sign_in(match.group(1))
    reply = await _switch(page, {"on": True})
    assert reply.status_code == 403
    assert reply.json()["status"] == "not_allowed"
    assert _bridge_away(running)["everywhere"] is False
    assert "refused away on on web from local" in caplog.text


async def test_a_page_signed_in_as_a_person_switches_that_persons_away(
    bridge: BridgeFixture, caplog: pytest.LogCaptureFixture, client: httpx.AsyncClient
) -> None:
    """`people` maps the page's user (`local`) to ada: the header's switch is hers, not
    everywhere's (as her `/away` in a chat is)."""
    caplog.set_level(logging.INFO, logger="aep_bridge.web")
    people = {"ada": {"web": "local"}}
    running = await bridge.start("web", {"approvers": ["local"]}, settings={"people": people})
    match = SIGN_IN.search(caplog.text)
    assert match
    page = Page(running, client)
    await page.sign_in(match.group(1))
    reply = await _switch(page, {"on": True})
    assert reply.status_code == 200, reply.text
    assert reply.json()["message"] == "Away on for ada's sessions."
    bridge_away = _bridge_away(running)
    assert bridge_away["everywhere"] is False  # nobody else's agents are held
    assert bridge_away["people"] == {"ada": {"away": True, "by": "you on web"}}
    away = (await page.get("api/away")).json()
    assert (away["everywhere"], away["person"]["switch"]) == (False, True)

    reply = await _switch(page, {"on": False})
    assert reply.json()["message"] == "Away off for ada's sessions."
    assert _bridge_away(running)["people"] == {"ada": {"away": False, "by": "you on web"}}
