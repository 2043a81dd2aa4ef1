"""The web channel passes the conformance kit. Its platform is its own HTTP API: the probe is
a signed-in browser (httpx against the channel's routes, as the bridge mounts them), reading
`/api/state` and `/api/sessions/{id}` and pressing through `/api/answer`."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from html.parser import HTMLParser
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import Mount

from aep_bridge import ChannelUser
from aep_bridge.testing import (
    ButtonView,
    ChannelConformance,
    FakeCore,
    Harness,
    MessageView,
    ThreadView,
)
from aep_bridge_web import WebChannel, WebConfig
from tests import permission_card

BASE = "http://bridge.test"


class _Text(HTMLParser):
    """The text a browser shows of some HTML."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []

    def handle_data(self, data: str) -> None:
        self.parts.append(data)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("p", "br", "pre", "li", "div", "tr", "h3", "h4", "summary"):
            self.parts.append("\n")


def shown(markup: str) -> str:
    parser = _Text()
    parser.feed(markup)
    return "".join(parser.parts).strip()


class Browser:
    """A signed-in browser on the channel's page (a new sign-in after a restart)."""

    def __init__(self, channel: WebChannel) -> None:
        self.channel = channel
        self.key = ""
        self.client: httpx.AsyncClient | None = None

    async def _client(self) -> httpx.AsyncClient:
        if self.client is None or self.client._transport is not self._transport:  # restarted
            app = Starlette(routes=[Mount("/channels/web", routes=list(self.channel.routes()))])
            self._transport = httpx.ASGITransport(app=app)
            self.client = httpx.AsyncClient(transport=self._transport, base_url=BASE)
            code = self.channel.signin.new_code()
            reply = await self.client.get(f"/channels/web/signin?code={code}")
            assert reply.status_code == 303
            self.key = reply.headers["location"].partition("#key=")[2]
            assert self.key
            self.client.headers["X-Page-Key"] = self.key
        return self.client

    def restarted(self, channel: WebChannel) -> None:
        self.channel = channel
        self.client = None

    async def get(self, path: str) -> Any:
        reply = await (await self._client()).get(f"/channels/web/{path}")
        assert reply.status_code == 200, reply.text
        return reply.json()

    async def post(self, body: dict[str, Any]) -> httpx.Response:
        client = await self._client()
        return await client.post(
            "/channels/web/api/answer",
            content=json.dumps(body),
            headers={"Content-Type": "application/json"},
        )


class WebProbe:
    def __init__(self, browser: Browser) -> None:
        self.browser = browser

    async def threads(self) -> list[ThreadView]:
        state = await self.browser.get("api/state")
        return [ThreadView(s["id"], s["title"], s["state"] == "ended") for s in state["sessions"]]

    async def messages(self, thread_id: str | None = None) -> list[MessageView]:
        state = await self.browser.get("api/state")
        entries: list[tuple[str, int, MessageView]] = []
        for session in state["sessions"]:
            if thread_id is not None and session["id"] != thread_id:
                continue
            timeline = await self.browser.get(f"api/sessions/{session['id']}")
            for n, item in enumerate(timeline["items"]):
                view = MessageView(item["key"], session["id"], shown(item["html"]))
                entries.append((item["time"], n, view))
            for n, card in enumerate(timeline["cards"]):
                entries.append((card["time"], 10_000 + n, self._card(card)))
        return [view for _, _, view in sorted(entries, key=lambda e: (e[0], e[1]))]

    @staticmethod
    def _card(card: dict[str, Any]) -> MessageView:
        lines = [card["title"], shown(card["description_html"])]
        outcome = card["outcome"]
        if outcome is not None:
            lines.append(outcome["summary"])
        open_ = not card["informational"] and (outcome is None or not outcome["closed"])
        buttons = tuple(ButtonView(o["label"], o["token"].encode()) for o in card["options"])
        return MessageView(
            card["id"], card["session_id"], "\n".join(lines), buttons if open_ else ()
        )

    async def press(self, message: MessageView, button: ButtonView, user: ChannelUser) -> None:
        index = [b.label for b in message.buttons].index(button.label)
        token = button.data.decode(errors="replace")
        await self.browser.post({"card_id": message.id, "option": index, "token": token})

    async def reply(
        self,
        thread_id: str | None,
        text: str,
        user: ChannelUser,
        reply_to: MessageView | None = None,
    ) -> None:
        if reply_to is not None:
            await self.browser.post({"card_id": reply_to.id, "text": text})


class TestWebConformance(ChannelConformance):
    @pytest.fixture
    async def harness(self) -> AsyncIterator[Harness]:
        core = FakeCore()
        config = WebConfig(name="web", approvers=["local"])
        channel = WebChannel(core, config)
        core.attach(channel)
        await channel.start()
        browser = Browser(channel)

        async def restart() -> WebChannel:
            """A bridge restart: a new adapter on the same core; the browser signs in again."""
            await browser.channel.stop()
            again = WebChannel(core, config)
            core.attach(again)
            await again.start()
            browser.restarted(again)
            return again

        yield Harness(channel, core, WebProbe(browser), approver=channel.user, restart=restart)
        await browser.channel.stop()


# -- the card a person judges, in the order they read it (issue 32) ------------------------


async def test_a_real_bash_card_reads_session_folder_command_reason_then_options() -> None:
    """Claude Code's permission, through the real mapping and renderer, as the page gets it
    (`description_html` is what the page puts under the card's title and session line): the
    folder under home, the whole long command in a code block, the reason rendered (inline
    code and bold, no raw backticks), and no "Permission requested" line repeating the
    title; an Edit's card shows its diff."""
    core = FakeCore()
    channel = WebChannel(core, WebConfig(name="web", approvers=["local"]))
    core.attach(channel)
    await channel.start()
    try:
        await core.create_thread(channel, "s1", permission_card.SESSION_NAME)
        await channel.send_permission_request("s1", permission_card.bash_card())
        await channel.send_permission_request("s1", permission_card.edit_card())
        browser = Browser(channel)
        (session,) = (await browser.get("api/state"))["sessions"]
        bash, edit = (await browser.get(f"api/sessions/{session['id']}"))["cards"]
    finally:
        await channel.stop()
    assert session["title"] == permission_card.SESSION_NAME  # the card's session line
    assert bash["title"] == "claude-code asks permission: Bash"
    html = bash["description_html"]
    command = permission_card.COMMAND.replace("&", "&amp;").replace("'", "&#x27;")
    assert permission_card.in_order(
        html,
        f"Folder: <code>{permission_card.FOLDER}</code>",
        f'<pre><code class="language-bash">{command}</code></pre>',
        "Install the package with its <code>test</code> extras, then run <strong>every</strong>",
    ), html
    assert "`" not in html
    assert "**" not in html
    assert "Permission requested" not in shown(html)
    assert permission_card.in_order(shown(edit["description_html"]), "src/app.py", "-x = 1")
