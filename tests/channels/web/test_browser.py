"""The web page in a real browser: Debian's chromium, headless, driven by Playwright.

Each test starts `aep-bridge run` as a process of its own (a temporary config and state
directory, the web channel on), signs in through the URL the bridge logs, and plays an agent
against the bridge's real endpoint with `TinyAgent`. Nothing of ours is replaced: what the
browser shows and what the agent receives are what a person and an agent would get.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.async_api import (
    Browser,
    BrowserContext,
    Locator,
    Page,
    async_playwright,
    expect,
)

from aep_bridge.commands.tinyagent import Answer, TinyAgent
from tests.bridge_process import ROOT, BridgeProcess, free_port, write_config

CHROMIUM = Path("/usr/bin/chromium")
#: the flags the bridge's browser tests run chromium with (Playwright adds --headless and a
#: fresh temporary --user-data-dir to every launch)
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
HERE = Path(__file__).resolve().parent
AXE = HERE / "node_modules" / "axe-core" / "axe.min.js"
SIGN_IN = re.compile(
    r"web (?P<name>\S+): sign in at (?P<url>http://\S+/channels/web/signin\?code=\S+) "
    r"\(one use, within 15 minutes\)"
)
#: how long the browser waits for the page to show something (generous: a slow CI machine)
WAIT_MS = 15_000
PROMPT = "git push origin fix/checkout"

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="no /usr/bin/chromium on this machine (`.ci/run` installs Debian's chromium, "
    "so CI runs these tests; locally: apt-get install chromium)",
)
expect.set_options(timeout=WAIT_MS)


@dataclass
class Web:
    """A running bridge with the web channel, a browser, and what the test needs of both."""

    bridge: BridgeProcess
    base: str
    sign_in_url: str
    token: str
    browser: Browser

    @property
    def page_url(self) -> str:
        return f"{self.base}/channels/web/"

    async def context(self, **options: Any) -> BrowserContext:
        """A browser context of its own: no cookie, no storage (a second person, or a fresh
        browser)."""
        context = await self.browser.new_context(**options)
        # every CSP violation the page causes, kept where the test can read it (an init
        # script runs through the DevTools protocol, so the page's own CSP does not block it)
        await context.add_init_script(
            "window.__csp = [];"
            "document.addEventListener('securitypolicyviolation', e =>"
            " window.__csp.push(e.violatedDirective + ' ' + (e.blockedURI || 'inline')));"
        )
        return context

    async def signed_in(self, **options: Any) -> Page:
        """A page signed in through the logged one-time URL, at the web page."""
        page = await (await self.context(**options)).new_page()
        response = await page.goto(self.sign_in_url)
        assert response is not None
        assert response.ok, f"sign-in failed: {response.status}\n{await page.content()}"
        assert page.url == self.page_url  # the key's fragment is gone from the address bar
        # signed in: the page checked its key with the bridge, keeps it and reads the stream
        await expect(page.locator("#connection")).to_have_text("Live")
        return page

    async def sign_in_with_token(self, page: Page) -> None:
        """The sign-in form, filled in with the bridge's token as a person would."""
        if not await page.get_by_label("The bridge's token").is_visible():
            await page.goto(f"{self.base}/channels/web/signin")
        await page.get_by_label("The bridge's token").fill(self.token)
        async with page.expect_navigation(url=self.page_url):
            await page.get_by_role("button", name="Sign in").click()
        await expect(page.locator("#connection")).to_have_text("Live")

    def agent(self, **options: Any) -> TinyAgent:
        """An agent connected to the bridge's WebSocket endpoint."""
        socket = self.base.replace("http://", "ws://", 1) + "/socket"
        return TinyAgent(socket, self.token, agent="demo-agent", **options)


@pytest.fixture
async def web(tmp_path: Path) -> AsyncIterator[Web]:
    async with running_web(tmp_path) as running:
        yield running


@contextlib.asynccontextmanager
async def running_web(tmp_path: Path, **settings: Any) -> AsyncIterator[Web]:
    """The bridge with the web channel and a browser; `settings` more of the config file."""
    port = free_port()
    channels = {"web": {"approvers": ["local"], "capture": "redacted"}}
    config = write_config(tmp_path, port, channels)
    if settings:
        config.write_text(json.dumps({**json.loads(config.read_text()), **settings}))
    bridge = BridgeProcess(config, tmp_path / "bridge.log")
    base = f"http://127.0.0.1:{port}"
    await bridge.start(base)
    try:
        line = await bridge.until(
            "the sign-in line", lambda: SIGN_IN.search(bridge.log.read_text()), 20
        )
        token = await asyncio.to_thread(bridge.token)
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(
                executable_path=str(CHROMIUM), headless=True, args=FLAGS
            )
            try:
                yield Web(bridge, base, line["url"], token, browser)
            finally:
                await browser.close()
    finally:
        await bridge.aclose()


def card_in(page: Page, where: str = "#queue") -> Locator:
    """The cards in `where` (the waiting queue unless told)."""
    return page.locator(f"{where} article.card")


def option(card: Locator, label: str) -> Locator:
    """The card's button for `label` (exactly that label)."""
    return card.locator("button.option").filter(has_text=re.compile(rf"^\s*{re.escape(label)}\s*$"))


def submit(card: Locator, field: str) -> Locator:
    """The button that sends the form holding the input labelled `field`."""
    return card.locator("form").filter(has=card.page.get_by_label(field)).get_by_role("button")


async def ask(agent: TinyAgent, question: str = PROMPT, **options: Any) -> asyncio.Task[Answer]:
    """The agent asks in the background; the task ends with the answer it received."""
    options.setdefault("timeout", 60)
    task = asyncio.create_task(agent.ask(question, ["allow", "deny"], **options))
    await asyncio.sleep(0)
    return task


async def answered(task: asyncio.Task[Answer]) -> Answer:
    """What the agent received (generous: this is no timing check)."""
    return await asyncio.wait_for(task, 30)


async def csp_violations(page: Page) -> list[str]:
    return list(await page.evaluate("window.__csp || []"))


# -- the whole loop -------------------------------------------------------------------------


async def test_sign_in_press_allow_the_agent_gets_it_and_both_tabs_show_the_outcome(web: Web):
    page = await web.signed_in()
    second = await page.context.new_page()  # the same person, a second tab
    await second.goto(web.page_url)
    async with web.agent() as agent:
        asking = await ask(agent)
        card = card_in(page)
        await expect(card).to_have_count(1)
        await expect(card).to_contain_text(PROMPT)
        card_id = await card.get_attribute("data-card-id")
        assert card_id
        # the session appears in the list, named by its agent
        session = page.locator("#sessions a.session[data-session-id]")
        await expect(session).to_have_count(1)
        await expect(session).to_contain_text("demo-agent")
        await expect(card_in(second)).to_have_count(1)
        assert [await b.inner_text() for b in await card.locator("button.option").all()] == [
            "allow",
            "deny",
        ]

        await option(card, "allow").click()

        answer = await answered(asking)
        assert answer.option == "allow"
        for tab in (page, second):
            outcome = tab.locator(f'article.card[data-card-id="{card_id}"] .outcome')
            await expect(outcome.first).to_contain_text("allow")
            await expect(outcome.first).to_contain_text("you")
            # answered: it is no longer waiting for anyone
            await expect(
                tab.locator(f'#queue article.card[data-card-id="{card_id}"]')
            ).to_have_count(0)
    assert await csp_violations(page) == []


async def test_the_session_view_shows_the_timeline_live(web: Web):
    page = await web.signed_in()
    async with web.agent() as agent:
        asking = await ask(agent)
        link = page.locator("#sessions a.session[data-session-id]")
        await expect(link).to_have_count(1)
        await link.click()
        view = page.locator("#session-view")
        await expect(view).to_contain_text(PROMPT)
        await expect(card_in(page, "#session-view")).to_have_count(1)
        await option(card_in(page), "deny").click()
        assert (await answered(asking)).option == "deny"
        await expect(view.locator("article.card .outcome").first).to_contain_text("deny")


async def test_a_second_person_sees_the_outcome_of_an_answer_given_elsewhere(web: Web):
    """Two browsers (two sign-ins): one answers, the other's card closes live."""
    first = await web.signed_in()
    other = await (await web.context()).new_page()
    await web.sign_in_with_token(other)
    assert other.url == web.page_url
    async with web.agent() as agent:
        asking = await ask(agent)
        await expect(card_in(first)).to_have_count(1)
        await expect(card_in(other)).to_have_count(1)
        card_id = await card_in(first).get_attribute("data-card-id")
        await option(card_in(other), "allow").click()
        assert (await answered(asking)).option == "allow"
        outcome = first.locator(f'article.card[data-card-id="{card_id}"] .outcome')
        await expect(outcome.first).to_contain_text("allow")


# -- sign-in --------------------------------------------------------------------------------


async def test_without_the_cookie_the_page_and_the_api_refuse(web: Web):
    async with web.agent() as agent:
        asking = await ask(agent)
        signed = await web.signed_in()
        await expect(card_in(signed)).to_have_count(1)  # there is something to see

        page = await (await web.context()).new_page()
        response = await page.goto(web.page_url)
        assert response is not None
        assert response.status == 401
        body = await page.locator("body").inner_text()
        assert "aep-bridge token" in body
        assert PROMPT not in body
        assert await page.locator("article.card").count() == 0
        for path in ("api/state", "api/stream"):
            api = await page.request.get(f"{web.base}/channels/web/{path}")
            assert api.status == 401, path
            assert PROMPT not in await api.text()
        posted = await page.request.post(
            f"{web.base}/channels/web/api/answer",
            data={"card_id": await card_in(signed).get_attribute("data-card-id"), "option": 0},
        )
        assert posted.status in (401, 403)
        assert not asking.done()
        asking.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asking


async def test_the_bridge_root_leads_to_the_page(web: Web):
    page = await web.signed_in()
    response = await page.goto(f"{web.base}/")
    assert response is not None
    assert response.ok
    assert page.url == web.page_url
    await expect(page.locator("#queue")).to_be_attached()
    await expect(page.locator("#sessions")).to_be_attached()


async def test_the_sign_in_code_works_once_and_the_token_signs_in_again(web: Web):
    page = await web.signed_in()
    cookies = {c["name"]: c for c in await page.context.cookies()}
    cookie = cookies["aep_web"]
    assert cookie["httpOnly"] is True
    assert cookie["sameSite"] == "Strict"
    assert cookie["path"] == "/channels/web"
    assert cookie["secure"] is False
    assert cookie["expires"] > 0  # Max-Age: the sign-in's lifetime, not forever
    assert await page.evaluate("document.cookie") == ""  # the page's script cannot read it
    # the tab's key: in this tab's storage, not in the page's HTML
    key = await page.evaluate("sessionStorage.getItem('aep-web-key:/channels/web/')")
    assert key
    assert key not in await page.content()

    again = await (await web.context()).new_page()
    response = await again.goto(web.sign_in_url)
    assert response is not None
    assert response.status == 403
    body = await again.locator("body").inner_text()
    assert "aep-bridge token" in body
    assert "aep_web" not in {c["name"] for c in await again.context.cookies()}

    # a link with the token is refused (it would stay in the history): the form signs in
    response = await again.goto(f"{web.base}/channels/web/signin?token={web.token}")
    assert response is not None
    assert response.status == 400
    assert "aep_web" not in {c["name"] for c in await again.context.cookies()}
    await web.sign_in_with_token(again)
    assert again.url == web.page_url
    assert "aep_web" in {c["name"] for c in await again.context.cookies()}


class OtherPort:
    """A real HTTP server on another loopback port: what a local user who gets the signed-in
    person's browser to open one link on their port receives, and can send back. Browsers
    keep cookies apart by host and path, not by port."""

    def __init__(self, set_cookie: str | None = None) -> None:
        self.set_cookie = set_cookie
        #: the `Cookie` header of each request, exactly as the browser sent it
        self.cookies: list[str] = []
        self.server: asyncio.Server | None = None

    async def __aenter__(self) -> OtherPort:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()

    @property
    def url(self) -> str:
        assert self.server is not None
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/channels/web/free-stickers"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
            for line in head.split("\r\n")[1:]:
                name, _, value = line.partition(":")
                if name.lower() == "cookie":
                    self.cookies.append(value.strip())
            body = b"<!doctype html><title>free stickers</title><p>Thanks!</p>"
            extra = f"Set-Cookie: {self.set_cookie}\r\n" if self.set_cookie else ""
            writer.write(
                (
                    "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nConnection: close\r\n"
                    f"Content-Length: {len(body)}\r\n{extra}\r\n"
                ).encode()
                + body
            )
            await writer.drain()
        writer.close()


async def test_a_server_on_another_port_gets_the_cookie_and_with_it_nothing(web: Web):
    """The attack: the signed-in browser opens one link on another loopback port; chromium
    sends that server the bridge's cookie. Replayed against the bridge exactly as received,
    the cookie reads no state, no key, no press token, answers nothing and signs no one out."""
    page = await web.signed_in()
    async with web.agent() as agent:
        asking = await ask(agent)
        card = card_in(page)
        await expect(card).to_have_count(1)
        card_id = await card.get_attribute("data-card-id")
        async with OtherPort() as other:
            lure = await page.context.new_page()
            await lure.goto(other.url)
            await lure.close()
        assert other.cookies, "chromium sent the other port no cookie at all"
        sent = other.cookies[0]
        assert "aep_web=" in sent  # what the attacker holds: the cookie, as chromium sends it
        secrets = [
            await page.evaluate("Object.values(sessionStorage).join(' ')"),
            *[
                await b.evaluate("b => b.dataset.token || ''")
                for b in await card.locator("button").all()
            ],
        ]
        secrets = [s for s in secrets if s]
        base = f"{web.base}/channels/web"
        async with httpx.AsyncClient(headers={"Cookie": sent}, timeout=10) as thief:
            state = await thief.get(f"{base}/api/state")
            assert state.status_code == 401, f"the cookie alone read the state: {state.text}"
            replies = [state]
            for path in ("", "signin", "api/stream", "api/sessions/x"):
                replies.append(await thief.get(f"{base}/{path}"))
            replies.append(await thief.get(f"{web.base}/"))
            body = {"card_id": card_id, "option": 0}
            for path in ("api/answer", "api/signout"):
                replies.append(
                    await thief.post(
                        f"{base}/{path}",
                        content=json.dumps(body),
                        headers={"Content-Type": "application/json"},
                    )
                )
        for reply in replies:
            seen = reply.text + json.dumps(dict(reply.headers))
            assert PROMPT not in seen, (reply.url, reply.status_code)
            assert not [s for s in secrets if s in seen], reply.url
            assert "csrf" not in seen.lower(), reply.url
        api = [r.status_code for r in replies if "/api/" in str(r.url)]
        assert api == [401, 401, 401, 401, 401], api
        assert not asking.done()
        # the person is still signed in, and their own press is what the agent gets
        await option(card, "deny").click()
        assert (await answered(asking)).option == "deny"


async def test_a_clobbered_cookie_leaves_a_clear_signed_out_state(web: Web):
    """Another port can overwrite the cookie (same host, same path): the page then says,
    plainly, that it is signed out and how to sign in, and sends nothing; the form signs in
    again."""
    page = await web.signed_in()
    async with web.agent() as agent:
        asking = await ask(agent)
        card = card_in(page)
        await expect(card).to_have_count(1)
        async with OtherPort("aep_web=clobbered; Path=/channels/web; HttpOnly") as other:
            lure = await page.context.new_page()
            await lure.goto(other.url)
            await lure.close()
        cookies = await page.context.cookies(web.page_url)
        assert [c["value"] for c in cookies if c["name"] == "aep_web"] == ["clobbered"]

        await option(card, "allow").click()
        signed_out = page.locator("#signed-out")
        await expect(signed_out).to_be_visible()
        await expect(signed_out).to_contain_text("Signed out: sign in again")
        await expect(signed_out).to_contain_text("not one the bridge knows")
        # the command to run reads as code, never as markdown's backticks
        await expect(page.locator("#signed-out-why code")).to_have_text("aep-bridge token")
        assert "`" not in await signed_out.inner_text()
        await expect(page.locator("#connection")).to_have_text("Signed out")
        await expect(page.locator("#board")).to_be_hidden()
        assert await page.locator("article.card").count() == 0
        assert not asking.done()
        # a reload says so too, without the page's script
        response = await page.reload()
        assert response is not None
        assert response.status == 401
        await expect(page.locator("body")).to_contain_text("not one the bridge knows")

        await web.sign_in_with_token(page)
        await expect(card_in(page)).to_have_count(1)
        await option(card_in(page), "allow").click()
        assert (await answered(asking)).option == "allow"


async def test_a_link_with_a_key_of_anothers_choosing_signs_no_tab_out(web: Web):
    """Any page, another port's included, can send the browser to the page with a `#key=` of
    its choosing: the page checks a handed-over key with the bridge before it takes it or
    tells the other tabs, so every tab stays signed in and answers."""
    page = await web.signed_in()
    async with web.agent() as agent:
        asking = await ask(agent)
        await expect(card_in(page)).to_have_count(1)
        lured = await page.context.new_page()
        await lured.goto(f"{web.page_url}#key={'A' * 43}")
        # the lured tab is signed in by the open one, not signed out by the bogus key
        await expect(lured.locator("#connection")).to_have_text("Live")
        await expect(card_in(lured)).to_have_count(1)
        await expect(page.locator("#connection")).to_have_text("Live")
        await expect(page.locator("#signed-out")).to_be_hidden()
        await option(card_in(page), "allow").click()
        assert (await answered(asking)).option == "allow"


async def test_sign_out_ends_the_sign_in_in_every_tab(web: Web):
    page = await web.signed_in()
    second = await page.context.new_page()
    await second.goto(web.page_url)  # a new tab: the open one hands it the sign-in
    await expect(second.locator("#connection")).to_have_text("Live")
    await expect(page.get_by_role("button", name="Sign out")).to_be_visible()
    await page.get_by_role("button", name="Sign out").click()
    for tab in (page, second):
        await expect(tab.locator("#signed-out")).to_be_visible()
        await expect(tab.locator("#signed-out-why")).to_contain_text("signed out")
        await expect(tab.locator("#connection")).to_have_text("Signed out")
        assert await tab.evaluate("sessionStorage.length") == 0
    assert "aep_web" not in {c["name"] for c in await page.context.cookies()}
    response = await page.reload()
    assert response is not None
    assert response.status == 401


async def test_a_new_tab_with_no_signed_in_tab_open_is_told_how_to_sign_in(web: Web):
    """The cookie alone does not sign a tab in: with no open tab to hand it the key, a new
    tab shows the signed-out state, and the form signs it in."""
    page = await web.signed_in()
    context = page.context
    await page.close()
    fresh = await context.new_page()
    response = await fresh.goto(web.page_url)
    assert response is not None
    assert response.ok  # the cookie is good for the page's HTML, which holds no secret
    await expect(fresh.locator("#signed-out")).to_be_visible()
    await expect(fresh.locator("#signed-out-why")).to_contain_text("no sign-in of its own")
    assert await axe_violations(fresh) == []
    await web.sign_in_with_token(fresh)
    await expect(fresh.locator("#board")).to_be_visible()


async def test_after_a_bridge_restart_the_page_says_so_and_signs_in_again(web: Web):
    page = await web.signed_in()
    async with web.agent() as agent:
        await agent.emit("session.started", {"label": "Before the restart"}, capture="redacted")
        await expect(page.locator("#sessions a.session")).to_contain_text("Before the restart")
    await web.bridge.aclose()
    await web.bridge.start(web.base)
    signed_out = page.locator("#signed-out")
    # the page reconnects on its own (a second or so after the bridge is back)
    await expect(signed_out).to_be_visible(timeout=45_000)
    await expect(signed_out).to_contain_text("The bridge restarted, which ended your sign-in.")
    await expect(page.locator("#connection")).to_have_text("Signed out")
    await web.sign_in_with_token(page)
    await expect(page.locator("#sessions a.session")).to_contain_text("Before the restart")


# -- what the page may do -------------------------------------------------------------------


async def test_the_page_runs_under_its_strict_csp_with_no_violation(web: Web):
    page = await (await web.context()).new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    await page.goto(web.sign_in_url)
    response = await page.reload()
    assert response is not None
    headers = response.headers
    csp = headers["content-security-policy"]
    for directive in ("default-src 'self'", "script-src 'self'", "frame-ancestors 'none'"):
        assert directive in csp
    assert "unsafe-inline" not in csp
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["referrer-policy"] == "same-origin"
    async with web.agent() as agent:
        asking = await ask(agent)
        await expect(card_in(page)).to_have_count(1)
        await page.locator("#sessions a.session").first.click()
        await option(card_in(page), "allow").click()
        await answered(asking)
        await expect(page.locator("article.card .outcome").first).to_contain_text("allow")
    assert await page.locator("script:not([src])").count() == 0
    assert await csp_violations(page) == []
    assert errors == []


async def test_agent_text_is_shown_as_text_never_run_as_html(web: Web):
    page = await web.signed_in()
    hostile = '<img src=x onerror="window.__pwned=1"> push <b id="bold">now</b>'
    async with web.agent() as agent:
        asking = await ask(agent, hostile)
        card = card_in(page)
        await expect(card).to_have_count(1)
        await expect(card).to_contain_text("<img src=x")
        await page.locator("#sessions a.session").first.click()
        await expect(page.locator("#session-view")).to_contain_text("<b id=")
        await expect(page.locator("#sessions")).to_contain_text("<img src=x")
        assert await page.locator("img[src=x], #bold").count() == 0
        assert await page.evaluate("window.__pwned") is None
        await option(card, "deny").click()
        assert (await answered(asking)).option == "deny"
    assert await csp_violations(page) == []


async def test_another_origin_cannot_answer_for_the_signed_in_person(web: Web):
    """A page of another origin on the same machine, opened in the signed-in browser, posts
    to the answer API as a form and as a no-cors fetch (what a browser lets any page send):
    neither answers. The person's own press afterwards is the answer the agent gets."""
    page = await web.signed_in()
    evil = f"http://127.0.0.1:{free_port()}/evil.html"
    async with web.agent() as agent:
        asking = await ask(agent)
        card = card_in(page)
        await expect(card).to_have_count(1)
        card_id = await card.get_attribute("data-card-id")
        target = f"{web.base}/channels/web/api/answer"
        body = '{"card_id": "' + str(card_id) + '", "option": 0, "x": "'
        html = f"""<!doctype html><title>free stickers</title>
<form method="post" action="{target}" enctype="text/plain">
<input name='{body}' value='"}}'></form>
<script>
window.fetched = fetch("{target}", {{method: "POST", mode: "no-cors", credentials: "include",
  headers: {{"Content-Type": "text/plain"}},
  body: JSON.stringify({{card_id: "{card_id}", option: 0}})}}).then(() => "sent", e => String(e));
</script>"""

        async def serve(route: Any) -> None:
            await route.fulfill(body=html, content_type="text/html")

        await page.context.route(evil, serve)
        attacker = await page.context.new_page()
        await attacker.goto(evil)
        # sent; its reply is opaque to that page, or withheld (a network error) when the
        # bridge's headers forbid other origins to read it
        await attacker.evaluate("window.fetched")
        async with attacker.expect_navigation() as posted:
            await attacker.evaluate("document.forms[0].submit()")
        response = await posted.value
        assert response is not None
        assert response.status in (401, 403, 415), response.status

        await expect(card).to_have_count(1)  # still waiting
        await option(card, "deny").click()
        assert (await answered(asking)).option == "deny"


# -- answers beyond a button ----------------------------------------------------------------


async def test_a_typed_answer_reaches_the_agent(web: Web):
    page = await web.signed_in()
    async with web.agent() as agent:
        asking = asyncio.create_task(
            agent.ask("Which branch should I rebase onto?", kind="input", timeout=60)
        )
        card = card_in(page)
        await expect(card).to_have_count(1)
        box = card.get_by_role("textbox")
        await expect(box).to_have_count(1)
        await expect(box).to_have_accessible_name(re.compile(r"\S"))  # it has a label
        await box.fill("release/2.4")
        await box.press("Enter")  # the text box sends its answer as a form does
        answer = await answered(asking)
        assert answer.text == "release/2.4"
        await expect(page.locator("article.card .outcome").first).to_contain_text("release/2.4")


async def test_a_form_is_filled_in_and_its_values_reach_the_agent(web: Web):
    page = await web.signed_in()
    async with web.agent() as agent:
        await agent.emit("session.started", {"label": "Release"}, capture="redacted")
        agent.run = "r1"
        await agent.emit("run.started", {"trigger": "user"})
        fields = [
            {
                "id": "channel",
                "type": "select",
                "label": "Release channel",
                "required": True,
                "choices": [{"id": "stable", "label": "Stable"}, {"id": "beta", "label": "Beta"}],
            },
            {"id": "notes", "type": "string", "label": "Release notes"},
        ]
        request = await agent.emit(
            "attention.requested",
            {"kind": "form", "prompt": "Ship it?", "fields": fields, "respond_via": ["control"]},
            capture="redacted",
        )
        card = card_in(page)
        await expect(card).to_have_count(1)
        await card.get_by_label("Release channel").select_option(label="Beta")
        await card.get_by_label("Release notes").fill("Fixes the flaky checkout")
        await submit(card, "Release notes").click()

        command = await asyncio.wait_for(agent.next_command(), 30)
        assert command.type == "control.attention.respond"
        assert command.subject == request.id
        values = command.data["answer"]["values"]
        assert values == {"channel": "beta", "notes": "Fixes the flaky checkout"}
        await agent.report_answer(command)
        await expect(page.locator("article.card .outcome").first).to_be_visible()


# -- for everyone, on every screen ----------------------------------------------------------


async def test_keyboard_alone_answers_a_question(web: Web):
    page = await web.signed_in()
    async with web.agent() as agent:
        asking = await ask(agent)
        deny = option(card_in(page), "deny")
        await expect(deny).to_be_visible()
        await page.locator("body").click(position={"x": 1, "y": 1})
        for _ in range(60):
            await page.keyboard.press("Tab")
            if await deny.evaluate("b => b === document.activeElement"):
                break
        else:
            pytest.fail("Tab never reached the deny button")
        await page.keyboard.press("Enter")
        assert (await answered(asking)).option == "deny"


async def test_a_phone_sized_screen_shows_and_answers_the_question(web: Web):
    page = await web.signed_in(viewport={"width": 375, "height": 740}, is_mobile=True)
    async with web.agent() as agent:
        asking = await ask(agent)
        card = card_in(page)
        await expect(card).to_have_count(1)
        allow = option(card, "allow")
        await expect(allow).to_be_in_viewport()
        box = await allow.bounding_box()
        assert box is not None
        assert box["x"] >= 0
        assert box["x"] + box["width"] <= 375
        width = await page.evaluate("document.documentElement.scrollWidth")
        assert width <= 375, f"the page scrolls sideways on a phone ({width} px wide)"
        await allow.click()
        assert (await answered(asking)).option == "allow"
        await expect(page.locator("article.card .outcome").first).to_contain_text("allow")


def axe_source() -> str:
    """axe-core's script, installed from npm beside these tests when it is missing."""
    if not AXE.exists():
        npm = shutil.which("npm")
        assert npm, "npm is needed to install axe-core (apt-get install npm)"
        subprocess.run(
            [npm, "install", "--prefix", str(HERE), "--no-audit", "--no-fund", "axe-core@4"],
            check=True,
            capture_output=True,
            timeout=300,
        )
    return AXE.read_text()


async def axe_violations(page: Page, source: str | None = None) -> list[dict[str, Any]]:
    """axe-core's serious and critical findings on the page as it is now."""
    if source is None:
        source = await asyncio.to_thread(axe_source)
    # evaluated through DevTools, as a browser extension runs it: the page's CSP stays on
    await page.evaluate(source)
    result = await page.evaluate(
        "async () => (await axe.run(document, {resultTypes: ['violations']})).violations"
        ".map(v => ({id: v.id, impact: v.impact, help: v.help,"
        " nodes: v.nodes.map(n => n.target.join(' '))}))"
    )
    return [v for v in result if v["impact"] in ("serious", "critical")]


@pytest.mark.parametrize(
    "screen", [{"width": 1280, "height": 800}, {"width": 375, "height": 740}], ids=["desk", "phone"]
)
async def test_axe_finds_no_serious_accessibility_violation(web: Web, screen: dict[str, int]):
    source = await asyncio.to_thread(axe_source)
    page = await web.signed_in(viewport=screen)
    async with web.agent() as agent, web.agent() as other:
        asking = await ask(agent)
        typed = asyncio.create_task(other.ask("Which branch?", kind="input", timeout=60))
        await expect(card_in(page)).to_have_count(2)
        await page.locator("#sessions a.session").first.click()
        await expect(card_in(page, "#session-view")).to_have_count(1)
        assert await axe_violations(page, source) == []
        for task in (asking, typed):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


# -- the demo -------------------------------------------------------------------------------


async def test_the_demo_is_answered_in_the_browser(web: Web, tmp_path: Path):
    """`aep-bridge demo` as a user runs it: its session appears, Allow goes to it, the form's
    values go to it, and it ends with the answers printed."""
    page = await web.signed_in()
    printed = tmp_path / "demo.out"
    with printed.open("wb") as out:
        demo = await asyncio.create_subprocess_exec(
            *[sys.executable, "-m", "aep_bridge", "demo"],
            *["--url", web.base, "--token", web.token, "--pace", "0", "--timeout", "60"],
            cwd=ROOT,
            env=web.bridge.env(),
            stdout=out,
            stderr=asyncio.subprocess.STDOUT,
        )
    try:
        session = page.locator("#sessions a.session[data-session-id]")
        await expect(session).to_contain_text("Fix the flaky checkout test")
        card = card_in(page)
        await expect(card).to_have_count(1)
        await expect(card).to_contain_text("git push origin fix/checkout")
        push_id = await card.get_attribute("data-card-id")
        await session.click()
        await expect(page.locator("#session-view")).to_contain_text(
            "pytest -x tests/test_checkout.py"
        )
        await option(card, "Allow").click()
        pushed = page.locator(f'article.card[data-card-id="{push_id}"] .outcome').first
        await expect(pushed).to_contain_text("Allow")

        form = card_in(page)
        await expect(form).to_contain_text("Where should the fix be released?")
        await form.get_by_label("Release channel").select_option(label="Beta")
        await form.get_by_label("Release notes").fill("Fixes the flaky checkout")
        await submit(form, "Release notes").click()

        status = await asyncio.wait_for(demo.wait(), 60)
        text = printed.read_text()
        assert status == 0, text
        assert "push: allow" in text
        assert "release: channel: beta, notes: Fixes the flaky checkout" in text
        await expect(page.locator("#queue article.card")).to_have_count(0)
        await expect(session).to_contain_text("ended")
    except BaseException as exc:
        exc.add_note(f"aep-bridge demo printed:\n{printed.read_text()}")
        exc.add_note(f"the bridge logged:\n{web.bridge.tail()}")
        raise
    finally:
        if demo.returncode is None:
            demo.kill()
            await demo.wait()


# -- away mode, signed in as a person (issue 33, issue 34) -----------------------------------


async def test_the_header_switch_of_a_person_s_page_is_their_own(tmp_path: Path):
    async with running_web(tmp_path, people={"ada": {"web": "local"}}) as web:
        page = await web.signed_in()
        switch = page.locator("#away-all")
        await expect(switch).to_have_text("Away: off")
        await switch.click()
        await expect(switch).to_have_text("Away: on")
        await expect(page.locator("#away-all-why")).to_have_text(
            "away: ada's switch, by you on web"
        )
        state = httpx.get(
            f"{web.base}/away", headers={"Authorization": f"Bearer {web.token}"}
        ).json()
        assert (state["everywhere"], state["people"]["ada"]["away"]) == (False, True)
        await switch.click()
        await expect(switch).to_have_text("Away: off")
        await expect(page.locator("#away-all-why")).to_have_text(
            "not away: ada's switch, by you on web"
        )
