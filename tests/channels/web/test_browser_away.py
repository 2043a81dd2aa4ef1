"""Away mode's switches on the web page, in a real browser against `aep-bridge run` (issue
33): a click switches the bridge's away mode (as its own `GET /away` says), the page shows the
state after a reload, and a switch made elsewhere (`aep-bridge away`) shows on the open page."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import httpx
import pytest
from playwright.async_api import expect

from tests.channels.web.test_browser import CHROMIUM, Web, ask
from tests.channels.web.test_browser import web as web  # the fixture

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="no /usr/bin/chromium")


async def bridge_away(web: Web, method: str = "GET", **body: Any) -> dict[str, Any]:
    """The bridge's own `/away`, with its token, as `aep-bridge away` uses it."""
    async with httpx.AsyncClient(timeout=10) as client:
        reply = await client.request(
            method,
            f"{web.base}/away",
            headers={"Authorization": f"Bearer {web.token}"},
            json=body if method == "POST" else None,
        )
    assert reply.status_code == 200, reply.text
    return dict(reply.json())


async def test_the_header_switch_sets_away_everywhere_and_shows_it_after_a_reload(web: Web):
    page = await web.signed_in()
    switch = page.locator("#away-all")
    await expect(switch).to_have_attribute("data-away", "off")
    await expect(switch).to_have_text("Away: off")
    await switch.click()
    await expect(switch).to_have_attribute("data-away", "on")
    assert (await bridge_away(web))["everywhere"] is True

    await page.reload()
    await expect(page.locator("#connection")).to_have_text("Live")
    await expect(switch).to_have_attribute("data-away", "on")
    await expect(switch).to_have_attribute("aria-pressed", "true")
    await expect(page.locator("#away-all-why")).to_contain_text("away: everywhere")

    # `aep-bridge away off` on the bridge: the open page follows
    await bridge_away(web, "POST", on=False, session=None)
    await expect(switch).to_have_attribute("data-away", "off")


async def test_the_session_switch_sets_that_session_away(web: Web):
    page = await web.signed_in()
    async with web.agent() as agent:
        asking = await ask(agent)
        link = page.locator("#sessions a.session[data-session-id]")
        await expect(link).to_have_count(1)
        await link.click()
        switch = page.locator("#away-session")
        await expect(switch).to_have_attribute("data-away", "off")
        await switch.click()
        await expect(switch).to_have_attribute("data-away", "on")
        await expect(page.locator("#away-session-why")).to_contain_text("own switch")
        state = await bridge_away(web)
        assert state["everywhere"] is False
        [session] = state["sessions"]
        assert (session["away"], session["switch"], session["why"]) == (True, True, "session")
        await page.reload()
        await expect(page.locator("#connection")).to_have_text("Live")
        await expect(switch).to_have_attribute("data-away", "on")
        asking.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asking


async def test_a_switch_made_elsewhere_reaches_the_open_page_on_its_stream(web: Web):
    """`aep-bridge away on` (the bridge's `/away`), then off, while the page is open: the page
    shows each on its own, told on its live stream; it never asks `api/away` (it polled that
    every 10 seconds before)."""
    page = await web.signed_in()
    await expect(page.locator("#connection")).to_have_text("Live")
    asked: list[str] = []
    page.on("request", lambda r: asked.append(r.url) if r.url.endswith("/api/away") else None)
    switch = page.locator("#away-all")
    await expect(switch).to_have_attribute("data-away", "off")
    await bridge_away(web, "POST", on=True, session=None)
    await expect(switch).to_have_attribute("data-away", "on")
    await expect(page.locator("#away-all-why")).to_contain_text("away: everywhere")
    await bridge_away(web, "POST", on=False, session=None)
    await expect(switch).to_have_attribute("data-away", "off")
    assert asked == []  # the stream told it, not a poll


async def test_the_session_line_names_its_owner(web: Web):
    """Issue 34: the page says whose session it is: the principal whose token sent it (the
    bridge's own is `local`) and the host its agent runs on."""
    page = await web.signed_in()
    async with web.agent(host="ada-laptop") as agent:
        asking = await ask(agent)
        link = page.locator("#sessions a.session[data-session-id]")
        await expect(link).to_have_count(1)
        await link.click()
        await expect(page.locator("#away-session-why")).to_contain_text("owner local (ada-laptop)")
        [session] = (await bridge_away(web))["sessions"]
        assert session["owned_by"] == "local (ada-laptop)"
        asking.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asking
