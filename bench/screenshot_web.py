"""The README's screenshot of the web page during `aep-bridge demo` (docs/web-demo.png).

Run it after a change to the page: `.venv/bin/python bench/screenshot_web.py`. It starts
`aep-bridge run` with the web channel in a temporary folder, signs in through the URL the
bridge logs, plays `aep-bridge demo`, and takes the picture when the demo waits for its push
to be allowed (the session open beside the waiting question), in Debian's chromium, headless.
Then it answers the demo in the page, so the demo ends as a user's would.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # for tests.bridge_process

from playwright.async_api import async_playwright, expect  # noqa: E402
from tests.bridge_process import BridgeProcess, free_port, write_config  # noqa: E402
from tests.channels.web.test_browser import CHROMIUM, FLAGS  # noqa: E402

OUT = ROOT / "docs" / "web-demo.png"


async def main() -> int:
    expect.set_options(timeout=30_000)
    with tempfile.TemporaryDirectory() as folder:
        port = free_port()
        channels = {"web": {"approvers": ["local"], "capture": "redacted"}}
        bridge = BridgeProcess(write_config(Path(folder), port, channels), Path(folder) / "log")
        base = f"http://127.0.0.1:{port}"
        await bridge.start(base)
        try:
            sign_in = await bridge.sign_in_url()
            token = await asyncio.to_thread(bridge.token)
            async with async_playwright() as playwright:
                browser = await playwright.chromium.launch(
                    executable_path=str(CHROMIUM), headless=True, args=FLAGS
                )
                page = await browser.new_page(viewport={"width": 1280, "height": 900})
                await page.goto(sign_in)
                demo = await asyncio.create_subprocess_exec(
                    *[sys.executable, "-m", "aep_bridge", "demo", "--url", base],
                    *["--token", token, "--pace", "0.05", "--timeout", "120"],
                    cwd=ROOT,
                    env=bridge.env(),
                    stdout=asyncio.subprocess.DEVNULL,
                )
                card = page.locator("#queue article.card")
                await expect(card).to_contain_text("git push origin fix/checkout")
                await page.locator("#sessions a.session").first.click()
                await expect(page.locator("#session-view")).to_contain_text("git push origin")
                await page.evaluate("window.scrollTo(0, 0)")
                await page.screenshot(path=str(OUT), full_page=True)
                print(f"wrote {OUT.relative_to(ROOT)}")
                # let the demo end as a user's does: allow the push, fill in the form
                await card.locator("button.option").filter(has_text="Allow").click()
                form = page.locator("#queue article.card")
                await expect(form).to_contain_text("Where should the fix be released?")
                await form.get_by_label("Release channel").select_option(label="Beta")
                sends = form.locator("form").filter(has=page.get_by_label("Release channel"))
                await sends.get_by_role("button").click()
                status = await asyncio.wait_for(demo.wait(), 60)
                await browser.close()
                return status
        finally:
            await bridge.aclose()


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
