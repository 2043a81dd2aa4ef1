"""The page's layout in a real browser (the same bridge process, chromium and agent as
`test_browser.py`): a session's entries in the order they arrived, never by their times; a
session open from the start; an answer's time kept across a reload; a session opened without
the queue scrolling away; and what says something waits while the tab is out of sight (the
title, the icon, an opt-in notification).
"""

from __future__ import annotations

import asyncio
import re

import pytest
from playwright.async_api import Page, expect

from tests.channels.web.test_browser import CHROMIUM, Web, answered, ask, card_in, option
from tests.channels.web.test_browser import web as web  # the fixture

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason="no /usr/bin/chromium on this machine (see test_browser.py)"
)

#: what a test reads of the notifications the page makes and the permission prompts it asks
#: for (an init script runs through the DevTools protocol, outside the page's CSP)
NOTIFICATIONS = """
window.__notes = []; window.__asked = 0; window.__hidden = false; window.__tags = [];
window.__closed = 0;
Object.defineProperty(Document.prototype, "hidden", { get: () => window.__hidden });
Object.defineProperty(Document.prototype, "visibilityState",
  { get: () => (window.__hidden ? "hidden" : "visible") });
if ("Notification" in window) {
  const Real = window.Notification;
  const asking = Real.requestPermission.bind(Real);
  window.Notification = class extends Real {
    constructor(title, options) {
      window.__notes.push([title, (options || {}).body]);
      window.__tags.push((options || {}).tag);
      super(title, options);
    }
    close() { window.__closed += 1; super.close(); }
    static requestPermission() { window.__asked += 1; return asking(); }
  };
}
"""

#: the icon with the count drawn on it
DRAWN = re.compile(r"^data:image/png;base64,")


async def timeline_order(page: Page) -> list[str]:
    """What the open session's timeline draws, top to bottom: each item's first words, a
    card as `card: <title>`."""
    return list(
        await page.locator("#timeline > *").evaluate_all(
            """nodes => nodes.map(n => n.matches('article.card')
                 ? 'card: ' + n.querySelector('h3').textContent
                 : n.querySelector('.body').textContent.trim().slice(0, 40))"""
        )
    )


async def test_a_session_s_entries_stay_in_the_order_they_arrived_after_a_reload(web: Web):
    """A tool call, the question it leads to, then the call's end: the call's entry is
    updated after the question arrived, and still belongs above it (by its time, it would
    sink below it)."""
    page = await web.signed_in()
    view = page.locator("#session-view")
    async with web.agent() as agent:
        await agent.emit("session.started", {"label": "Ordered"}, capture="redacted")
        agent.run = "r1"
        await agent.emit("run.started", {"trigger": "user"})
        call = {"name": "Bash", "call_id": "call_1"}
        await agent.emit(
            "tool.requested",
            {"tool": call, "args_redacted": {"command": "git push"}},
            subject="Bash",
            capture="redacted",
        )
        await page.locator("#sessions a.session").first.click()
        await expect(view.get_by_role("img", name="running")).to_have_count(1)
        await agent.emit(
            "attention.requested",
            {
                "kind": "permission",
                "prompt": "Run git push?",
                "options": [{"id": "allow", "label": "allow"}, {"id": "deny", "label": "deny"}],
                "respond_via": ["control"],
            },
            severity="notice",
            capture="redacted",
            subject="ask",
        )
        await expect(card_in(page, "#timeline")).to_have_count(1)
        await agent.emit(
            "tool.completed",
            {"tool": call, "status": "success"},
            subject="Bash",
            capture="redacted",
        )
        await expect(view.get_by_role("img", name="done")).to_have_count(1)
        live = await timeline_order(page)
        bash = next(i for i, entry in enumerate(live) if "Bash" in entry)
        card = next(i for i, entry in enumerate(live) if entry.startswith("card: "))
        assert live[0].startswith("Session started"), live
        assert bash < card, live  # the call that led to the question, above it
        for attempt in range(3):  # what a reload draws: the same, every time
            await page.reload()
            await expect(page.locator("#connection")).to_have_text("Live")
            await page.locator("#sessions a.session").first.click()
            await expect(card_in(page, "#timeline")).to_have_count(1)
            await expect(view.get_by_role("img", name="done")).to_have_count(1)
            assert await timeline_order(page) == live, attempt


async def test_the_page_opens_on_the_oldest_question_s_session_else_the_newest(web: Web):
    async with web.agent() as first, web.agent() as second:
        await first.emit("session.started", {"label": "Older session"}, capture="redacted")
        await second.emit("session.started", {"label": "Newer session"}, capture="redacted")
        page = await web.signed_in()
        # nothing waits: no empty "Pick a session", the newest session is open
        await expect(page.locator("#session-title")).to_have_text("Newer session")
        oldest = await ask(first, "Run the oldest question?")
        await expect(card_in(page)).to_have_count(1)
        newer = await ask(second, "Run the newer question?")
        await expect(card_in(page)).to_have_count(2)
        await page.reload()
        await expect(page.locator("#connection")).to_have_text("Live")
        # the question that waited longest: its session is open, its card in it
        await expect(page.locator("#session-title")).to_have_text("Run the oldest question?")
        await expect(card_in(page, "#timeline")).to_have_count(1)
        await expect(card_in(page, "#timeline")).to_contain_text("Run the oldest question?")
        for task in (oldest, newer):
            task.cancel()


async def test_an_answer_keeps_the_time_it_was_given_after_a_reload(web: Web):
    page = await web.signed_in()
    async with web.agent() as agent:
        asking = await ask(agent)
        await option(card_in(page), "deny").click()
        assert (await answered(asking)).option == "deny"
        await page.locator("#sessions a.session").first.click()
        outcome = page.locator("#timeline article.card .outcome")
        stamp = outcome.locator("time")
        await expect(stamp).to_have_text("just now")
        given = await stamp.get_attribute("datetime")
        assert given
        await asyncio.sleep(1.1)  # a reload a second later must not say the reload's time
        await page.reload()
        await expect(page.locator("#connection")).to_have_text("Live")
        await expect(outcome).to_contain_text("deny")
        await expect(stamp).to_have_attribute("datetime", given)
        assert await stamp.get_attribute("title")  # the full date on hover


async def test_opening_a_session_leaves_the_queue_where_it_was(web: Web):
    page = await web.signed_in(viewport={"width": 800, "height": 600})
    async with web.agent() as first, web.agent() as second:
        tasks = [await ask(first, "First question?"), await ask(second, "Second question?")]
        await expect(card_in(page)).to_have_count(2)
        link = card_in(page).nth(1).locator(".meta a")
        await link.scroll_into_view_if_needed()
        before = await page.evaluate("window.scrollY")
        await link.click()
        await expect(page.locator("#session-title")).to_contain_text("Second question?")
        await expect(page.locator("#session-view")).to_be_focused()
        assert await page.evaluate("window.scrollY") == before  # the queue did not move away
        await expect(link).to_be_in_viewport()
        for task in tasks:
            task.cancel()


async def test_the_title_and_the_icon_count_what_waits_and_clear_when_nothing_does(web: Web):
    page = await web.signed_in()
    icon = page.locator('link[rel="icon"]')
    await expect(page).to_have_title("aep-bridge")
    plain = await icon.get_attribute("href")
    async with web.agent() as first, web.agent() as second:
        asking = [await ask(first, "One?"), await ask(second, "Two?")]
        await expect(page).to_have_title("(2) aep-bridge")
        await expect(icon).to_have_attribute("href", DRAWN)
        two = await icon.get_attribute("href")
        await option(card_in(page).first, "allow").click()
        await expect(page).to_have_title("(1) aep-bridge")
        await expect(icon).not_to_have_attribute("href", two or "")
        await expect(icon).to_have_attribute("href", DRAWN)
        await option(card_in(page).first, "deny").click()
        await expect(page).to_have_title("aep-bridge")
        await expect(icon).to_have_attribute("href", plain or "")
        for task in asking:
            await answered(task)
    assert await page.evaluate("window.__csp || []") == []  # the drawn icon is allowed


async def test_notifications_are_asked_for_on_a_click_only_and_name_the_session(web: Web):
    context = await web.context()
    await context.add_init_script(NOTIFICATIONS)
    page = await context.new_page()
    await page.goto(web.sign_in_url)
    await expect(page.locator("#connection")).to_have_text("Live")
    button = page.get_by_role("button", name="Notify me of new questions")
    await expect(button).to_be_visible()
    assert await page.evaluate("window.__asked") == 0  # no prompt on load
    await context.grant_permissions(["notifications"])
    await button.click()
    await expect(page.get_by_role("button", name="Stop notifying me")).to_be_visible()
    assert await page.evaluate("window.__asked") == 1
    await page.reload()  # remembered
    await expect(page.get_by_role("button", name="Stop notifying me")).to_be_visible()
    assert await page.evaluate("window.__asked") == 0
    async with web.agent() as agent, web.agent() as other:
        shown = await ask(agent, "Seen while looking?")
        await expect(card_in(page)).to_have_count(1)
        assert await page.evaluate("window.__notes") == []  # the tab is in sight: no notification
        await page.evaluate("window.__hidden = true")  # the person looks elsewhere
        hidden = await ask(other, "Deploy to production?")
        await expect(card_in(page)).to_have_count(2)
        notes = await page.evaluate("window.__notes")
        assert len(notes) == 1, notes
        title, body = notes[0]
        assert "Deploy to production?" in title  # the session's name
        assert body
        for task in (shown, hidden):
            task.cancel()
