"""The web page as a daily tool, in a real browser (the same bridge process, chromium and
agent as `test_browser.py`): times read "2 min ago" with the full date on hover, the text box
says what typing there does, the footer says which bridge serves the page and where, and the
status marks read in words where no emoji font draws them.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
from datetime import datetime

import pytest
from playwright.async_api import expect

from tests.channels.web.test_browser import CHROMIUM, Web, answered, ask, card_in
from tests.channels.web.test_browser import web as web  # the fixture

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason="no /usr/bin/chromium on this machine (see test_browser.py)"
)


def has_emoji_font() -> bool:
    """Whether this machine has a font that draws emoji (Debian's CI image has none)."""
    fc_list = shutil.which("fc-list")
    if fc_list is None:
        return False
    listed = subprocess.run([fc_list], capture_output=True, text=True, check=False).stdout
    return "emoji" in listed.lower()


async def test_times_read_how_long_ago_with_the_full_date_on_hover_and_keep_up(web: Web):
    page = await web.signed_in()
    await page.clock.install()  # the page's clock, moved on below (it runs as usual till then)
    await page.reload()
    await expect(page.locator("#connection")).to_have_text("Live")
    async with web.agent() as agent:
        asking = await ask(agent)
        stamp = card_in(page).locator(".meta time")
        await expect(stamp).to_have_text("just now")
        # the full date and time on hover, the machine-readable one in `datetime`
        iso = await stamp.get_attribute("datetime")
        assert iso is not None
        asked = datetime.fromisoformat(iso.replace("Z", "+00:00"))
        assert abs((datetime.now(asked.tzinfo) - asked).total_seconds()) < 3600
        hover = await stamp.get_attribute("title")
        assert hover is not None
        assert str(asked.year) in hover
        assert re.search(r"\d:\d\d", hover)
        # the timeline's entries say how long ago too
        await page.locator("#sessions a.session").first.click()
        await expect(page.locator("#timeline time").first).to_have_text("just now")

        # time passes: the same element's text moves on, nothing is drawn again
        await stamp.evaluate("node => { node.dataset.probe = 'kept' }")
        await page.clock.run_for("05:00")
        await expect(card_in(page).locator(".meta time[data-probe=kept]")).to_have_text("5 min ago")
        await page.clock.run_for("03:00:00")
        await expect(card_in(page).locator(".meta time[data-probe=kept]")).to_have_text("3 h ago")
        asking.cancel()


async def test_the_text_box_beside_the_buttons_says_its_words_go_to_the_agent(web: Web):
    page = await web.signed_in()
    async with web.agent() as agent:
        asking = await ask(agent)
        box = card_in(page).get_by_label(
            "Or answer in words: sent to the agent as guidance, with a deny "
            "(naming an option picks it)"
        )
        await expect(box).to_be_visible()
        await box.fill("not on main: push it to a branch")
        await box.press("Enter")
        answer = await answered(asking)  # as the label says: a deny, the words with it
        assert (answer.option, answer.text) == ("deny", "not on main: push it to a branch")


async def test_a_question_without_buttons_labels_its_box_as_the_answer(web: Web):
    page = await web.signed_in()
    async with web.agent() as agent:
        asking = asyncio.create_task(agent.ask("Which branch?", kind="input", timeout=60))
        box = card_in(page).get_by_label("Your answer: sent to the agent as you write it")
        await expect(box).to_be_visible()
        await box.fill("release/2.4")
        await box.press("Enter")
        assert (await answered(asking)).text == "release/2.4"


async def test_the_footer_says_the_version_and_the_address_it_serves(web: Web):
    from aep_bridge import __version__

    page = await web.signed_in()
    footer = page.get_by_role("contentinfo")
    await expect(footer).to_have_text(
        f"aep-bridge {__version__} · serving {web.base}/channels/web/"
    )
    assert web.token not in await page.content()


async def test_status_marks_read_in_words_for_a_screen_reader_and_without_an_emoji_font(
    web: Web,
):
    page = await web.signed_in()
    async with web.agent() as agent:
        await agent.emit("session.started", {"label": "Marks"}, capture="redacted")
        agent.run = "r1"
        await agent.emit("run.started", {"trigger": "user"})
        for number, name in enumerate(["Read", "Bash"], 1):
            call = {"name": name, "call_id": f"call_{number}"}
            await agent.emit(
                "tool.requested",
                {"tool": call, "args_redacted": {"command": "pytest -x"}},
                subject=name,
                capture="redacted",
            )
        await agent.emit(
            "progress.task.planned",
            {"task": {"id": "t1", "title": "Push the fix"}},
            capture="redacted",
        )
        await agent.emit(
            "tool.completed",
            {"tool": {"name": "Read", "call_id": "call_1"}, "status": "success"},
            subject="Read",
            capture="redacted",
        )
        await page.locator("#sessions a.session").first.click()
        view = page.locator("#session-view")
        done = view.get_by_role("img", name="done")
        running = view.get_by_role("img", name="running")
        await expect(done).to_have_count(1)
        await expect(running).to_have_count(1)
        # what a sighted person sees: the emoji where a font draws it, else the word
        seen = await done.inner_text()
        if has_emoji_font():
            assert seen == "✅"
        else:
            assert seen == "[done]", "no emoji font here: the mark must read in words"
            assert await running.inner_text() == "[running]"
            assert await view.get_by_role("img", name="to do").inner_text() == "[to do]"


def test_the_footer_never_shows_what_a_configured_address_carries_beyond_where():
    from aep_bridge_web.pages import _shown_address

    shown = _shown_address("http://me:s3cret@[::1]:8787/channels/web/?token=abc#key=def")
    assert shown == "http://[::1]:8787/channels/web/"
    assert _shown_address(None) == "an address the bridge has not said yet"
