"""What the page does when things arrive in an order it does not choose, in a real browser
(the same bridge process, chromium and agent as `test_browser.py`), made deterministic: each
test waits for what the page shows, never for time to pass, and holds the page's first state
with `page.route` where the race is about that state being on its way.

The page's CSP refuses the `eval` behind `page.wait_for_function`, so what a test waits for
is in the DOM: the notification recorder below writes its counts on `<html>` as attributes,
which `expect` polls.
"""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Route, expect

from tests.channels.web.test_browser import CHROMIUM, Web, answered, ask, card_in, option
from tests.channels.web.test_browser import web as web  # the fixture

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason="no /usr/bin/chromium on this machine (see test_browser.py)"
)

#: a tab out of sight on demand (`window.__hidden = true`), and `Notification` replaced by a
#: recorder that keeps what a browser keeps on the screen: a new notification with the tag of
#: one showing replaces it (the Notifications API's rule), `close()` takes one away. The
#: permission and its prompt stay the browser's own. An init script runs through the DevTools
#: protocol, outside the page's CSP; the page's own code is what constructs and closes.
RECORDER = """
window.__hidden = false;
Object.defineProperty(Document.prototype, "hidden", { get: () => window.__hidden });
Object.defineProperty(Document.prototype, "visibilityState",
  { get: () => (window.__hidden ? "hidden" : "visible") });
(() => {
  const Real = window.Notification;
  if (!Real) return;
  const showing = [];
  let made = 0, most = 0;
  window.__titles = [];
  const mark = () => {
    const root = document.documentElement;
    root.setAttribute("data-notes-made", String(made));
    root.setAttribute("data-notes-showing", String(showing.length));
    root.setAttribute("data-notes-most", String(most));
  };
  window.Notification = class extends EventTarget {
    constructor(title, options) {
      super();
      const tag = (options || {}).tag || "";
      if (tag) {
        const same = showing.findIndex((other) => other.tag === tag);
        if (same >= 0) showing.splice(same, 1);
      }
      this.title = title;
      this.tag = tag;
      showing.push(this);
      made += 1;
      most = Math.max(most, showing.length);
      window.__titles.push(title);
      mark();
    }
    close() {
      const at = showing.indexOf(this);
      if (at >= 0) showing.splice(at, 1);
      mark();
    }
    static get permission() { return Real.permission; }
    static requestPermission(...args) { return Real.requestPermission(...args); }
  };
})();
"""


async def test_one_notification_at_a_time_closed_when_answered_and_on_sign_out(web: Web) -> None:
    """Questions from two sessions while the tab is out of sight: the second's notification
    replaces the first's (never two on the screen), answering the question it is about takes
    it away, and signing out takes away the one showing then."""
    context = await web.context()
    await context.add_init_script(RECORDER)
    await context.grant_permissions(["notifications"])
    page = await context.new_page()
    root = page.locator("html")
    async with web.agent() as first, web.agent() as second, web.agent() as third:
        await first.emit("session.started", {"label": "Deploy session"}, capture="redacted")
        await page.goto(web.sign_in_url)
        await expect(page.locator("#connection")).to_have_text("Live")
        # the page opened that session: its first state has come, so a question from now on
        # is news on the stream (one waiting at load is shown, not notified)
        await expect(page.locator("#session-title")).to_have_text("Deploy session")
        await page.get_by_role("button", name="Notify me of new questions").click()
        await expect(page.get_by_role("button", name="Stop notifying me")).to_be_visible()
        await page.evaluate("window.__hidden = true")  # the person looks elsewhere

        one = await ask(first, "First question?")
        await expect(root).to_have_attribute("data-notes-made", "1")
        await expect(root).to_have_attribute("data-notes-showing", "1")
        two = await ask(second, "Second question?")
        await expect(root).to_have_attribute("data-notes-made", "2")
        await expect(root).to_have_attribute("data-notes-showing", "1")  # replaced, not added
        await expect(card_in(page)).to_have_count(2)

        # answering the first question leaves the notification about the second
        await option(card_in(page).filter(has_text="First question?"), "allow").click()
        assert (await answered(one)).option == "allow"
        await expect(card_in(page)).to_have_count(1)  # the page has the outcome
        await expect(root).to_have_attribute("data-notes-showing", "1")
        # answering the question it is about takes it away
        await option(card_in(page).filter(has_text="Second question?"), "deny").click()
        assert (await answered(two)).option == "deny"
        await expect(root).to_have_attribute("data-notes-showing", "0")

        three = await ask(third, "Third question?")
        await expect(root).to_have_attribute("data-notes-made", "3")
        await expect(root).to_have_attribute("data-notes-showing", "1")
        await page.locator("#sign-out").click()
        await expect(page.locator("#connection")).to_have_text("Signed out")
        await expect(root).to_have_attribute("data-notes-showing", "0")  # no words stay behind
        await expect(root).to_have_attribute("data-notes-most", "1")  # never two at once
        assert len(await page.evaluate("window.__titles")) == 3  # one per question, no more
        three.cancel()


async def test_the_page_opens_on_the_oldest_question_even_if_a_newer_session_streams_first(
    web: Web,
) -> None:
    """The page's first state is held back (`page.route`) while a newer session starts and
    asks on the stream: the page has heard of the newer session first, and still opens on
    the session whose question has waited longest once the state comes."""
    page = await web.signed_in()
    async with web.agent() as older, web.agent() as newer:
        await older.emit("session.started", {"label": "Older session"}, capture="redacted")
        oldest = await ask(older, "Run the oldest question?")
        await expect(card_in(page)).to_have_count(1)  # the bridge has it

        held = asyncio.Event()
        release = asyncio.Event()

        async def hold(route: Route) -> None:
            held.set()
            await release.wait()
            with contextlib.suppress(PlaywrightError):  # a request of the page before the reload
                await route.continue_()

        await page.route("**/api/state", hold)
        await page.reload()  # the key stays in this tab: the state is the one request made
        await expect(page.locator("#connection")).to_have_text("Live")  # the stream is open
        await asyncio.wait_for(held.wait(), 30)
        await expect(page.locator("#session-title")).to_have_text("Pick a session")

        await newer.emit("session.started", {"label": "Newer session"}, capture="redacted")
        newest = await ask(newer, "Run the newer question?")
        # the stream told the page of the newer session and its question, the state not yet
        await expect(page.locator("#sessions a.session")).to_have_count(1)
        await expect(card_in(page)).to_have_count(1)
        await expect(card_in(page)).to_contain_text("Run the newer question?")
        await expect(page.locator("#session-title")).to_have_text("Pick a session")

        release.set()
        await expect(card_in(page)).to_have_count(2)  # the state has come
        await expect(page.locator("#session-title")).to_have_text("Run the oldest question?")
        await expect(card_in(page, "#timeline")).to_have_count(1)
        await expect(card_in(page, "#timeline")).to_contain_text("Run the oldest question?")
        current = page.locator('#sessions a.session[aria-current="page"]')
        await expect(current).to_have_count(1)
        await expect(current).to_contain_text("Run the oldest question?")
        await page.unroute("**/api/state", hold)
        for task in (oldest, newest):
            task.cancel()
