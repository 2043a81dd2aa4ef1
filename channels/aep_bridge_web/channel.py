"""The web channel: agent sessions on a page the bridge serves, answered from the browser.

Every session is a thread on the page; every card is answerable in place, and also listed in
the page's "Waiting for you" queue. The person signed in is `config.user` (`local` by
default), who may answer when the channel's `approvers` list them: the core checks, as for
every channel. What the page shows lives in memory (`Board`) and is saved in the channel's
state a moment after each change, so a restart shows it again; sign-ins are memory only, and
each ends (`auth.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Sequence
from typing import Any

from aep_bridge import (
    BaseRoute,
    BridgeCore,
    BridgeView,
    ChannelAdapter,
    ChannelCapabilities,
    ChannelUser,
    NotificationMessage,
    OutgoingMessage,
    PermissionOutcome,
    PermissionRequest,
    split_text,
)

from .auth import SignIn
from .board import Board
from .config import WebConfig
from .pages import PING_EVERY, Pages

log = logging.getLogger("aep_bridge.web")
#: how long a card's press tokens are good for (a card can wait days for its answer)
PRESS_TTL = 30 * 86_400.0
#: seconds a change waits before it is saved, so that a burst is saved once
SAVE_DELAY = 0.2
#: how often, while a page is open, away mode is read again to push a change to the page:
#: a switch anywhere (another channel's /away, `aep-bridge away`) or automatic away, which
#: begins with the passing of time and no event
AWAY_EVERY = 0.5


class WebChannel(ChannelAdapter[WebConfig]):
    """Sessions live on a local web page, with Allow/Deny buttons, text answers and forms."""

    name = "web"
    config_model = WebConfig
    contract_version = "1.2"
    capabilities = ChannelCapabilities(
        threads=True,
        buttons=True,
        edits=True,
        text_answers=True,
        forms=True,
        max_message_length=16_000,
        max_button_data=256,  # a button carries its press token (`BridgeCore.sign`)
        max_buttons=25,
        # everyone signed in is `config.user`: the page cannot tell two people apart
        identifies_users=False,
        # a heads-up would say again, beside the card or the reply, what the timeline says
        heads_ups=False,
    )

    def __init__(self, core: BridgeCore, config: WebConfig) -> None:
        super().__init__(core, config)
        self.user = ChannelUser(id=config.user, name=config.user_name)
        self.board = Board(self._sign, self._changed)
        self.signin = SignIn(
            config.signin_minutes * 60,
            idle=config.signin_idle_hours * 3600,
            lifetime=config.signin_max_hours * 3600,
            limit=config.signin_limit,
        )
        self.ping_every = PING_EVERY
        self.view: BridgeView | None = None
        self._pages = Pages(self)
        self._watch: asyncio.Task[None] | None = None
        #: sessions changed since they were last saved, and the save on its way
        self._dirty: set[str] = set()
        self._saving: asyncio.Task[None] | None = None
        #: the away state the open pages were last told, and the task that tells them
        self._away_told: dict[str, Any] | None = None
        self._away_task: asyncio.Task[None] | None = None

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        """Load what the page showed before a restart (the page is served by the bridge;
        `announce` logs its sign-in URL)."""
        state = self.core.state(self.instance_name)
        for session_id in json.loads(await state.get("sessions") or "[]"):
            saved = await state.get(f"session:{session_id}")
            if saved is not None:
                self.board.load(saved)
        self._dirty.clear()
        self._away_task = asyncio.create_task(self._follow_away(), name="web-away")

    def away_shown(self) -> dict[str, Any]:
        """Away mode as the page shows it: the everywhere switch, the signed-in person's own
        (`person`, when `people` maps the page's user) and this page's sessions."""
        described = self.core.away_state(self.user)
        shown = self.board.sessions
        listed = [s for s in described.get("sessions", []) if s.get("id") in shown]
        keep = ("everywhere", "by", "after_minutes", "hold_seconds", "person")
        return {**{k: described.get(k) for k in keep}, "sessions": listed}

    async def _follow_away(self) -> None:
        """Push away mode to the open pages (`event: away`) whenever it changes, however it
        changed; read only while a page is open."""
        while True:
            await asyncio.sleep(AWAY_EVERY)
            if not self.board.watched:
                self._away_told = None
                continue
            now = self.away_shown()
            if now != self._away_told:  # a page just opened is told too: it may have
                self.board.notice("away", now)  # fetched the state just before a change
                self._away_told = now

    def _changed(self, session_id: str) -> None:
        self._dirty.add(session_id)
        if self._saving is None or self._saving.done():
            self._saving = asyncio.create_task(self._save_soon(), name="web-save")

    async def _save_soon(self) -> None:
        await asyncio.sleep(SAVE_DELAY)  # a burst of changes is saved once
        await self._save()

    async def _save(self) -> None:
        """Keep the changed sessions in the channel's state, for the next start."""
        state = self.core.state(self.instance_name)
        dirty, self._dirty = self._dirty, set()
        for session_id in sorted(dirty):
            saved = self.board.dump(session_id)
            if saved is None:
                await state.delete(f"session:{session_id}")
            else:
                await state.set(f"session:{session_id}", saved)
        if dirty:
            await state.set("sessions", json.dumps(list(self.board.sessions)))

    def announce(self, view: BridgeView) -> str:
        """Log the one-time sign-in URL, at the bridge's address; return the URL."""
        self.view = view
        if self._watch is None:
            self._watch = asyncio.create_task(self._end_streams(view), name="web-stopping")
        # the bridge's address: `listen.public_url` behind a proxy (https), else the listener
        address = (view.url or "http://127.0.0.1:8787").rstrip("/")
        name, code = self.instance_name, self.signin.new_code()
        log.info(
            "web %s: sign in at %s/channels/%s/signin?code=%s (one use, within %s minutes)",
            name,
            address,
            name,
            code,
            f"{self.config.signin_minutes:g}",
        )
        return f"{address}/channels/{name}/signin?code={code}"

    async def _end_streams(self, view: BridgeView) -> None:
        """End the pages' streams as soon as the bridge begins to stop: an open page must
        not hold the stop up (it reconnects to the next start)."""
        await view.stopping.wait()
        self.board.close()

    def is_bridge_token(self, value: str) -> bool:
        return self.view is not None and self.view.is_bridge_token(value)

    @property
    def address(self) -> str | None:
        """The page's address as the bridge knows it (the one the sign-in URL is logged at),
        once the bridge has said it."""
        if self.view is None or not self.view.url:
            return None
        return f"{self.view.url.rstrip('/')}/channels/{self.instance_name}/"

    async def stop(self) -> None:
        saving, self._saving = self._saving, None
        if saving is not None:
            saving.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await saving
        if self._dirty:
            await self._save()
        self.board.close()
        self.signin.clear()
        following, self._away_task = self._away_task, None
        if following is not None:
            following.cancel()
            await asyncio.gather(following, return_exceptions=True)
        watch, self._watch = self._watch, None
        if watch is not None:
            watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watch

    def routes(self) -> Sequence[BaseRoute]:
        return self._pages.routes()

    # -- what the core sends ---------------------------------------------------------------

    async def create_session_thread(self, session_id: str, name: str) -> str:
        self.board.session(session_id, title=name)
        return session_id

    async def rename_session_thread(self, session_id: str, new_name: str) -> None:
        self.board.session(session_id, title=new_name)

    async def archive_session_thread(self, session_id: str) -> None:
        self.board.session(session_id, state="ended")

    def _sign(self, card_id: str, option: str) -> str:
        return self.core.sign(card_id, option, ttl=PRESS_TTL)

    async def send_message(self, session_id: str, content: OutgoingMessage) -> None:
        limit = self.capabilities.max_message_length
        if content.blocks or len(content.text) <= limit:
            self.board.message(session_id, content)
            return
        # plain text longer than a message (the outbox splits blocks): one item per piece
        key = content.key or f"{session_id}:{id(content)}"
        for i, piece in enumerate(split_text(content.text, limit)):
            part = content.model_copy(update={"text": piece})
            self.board.message(session_id, part, key=f"{key}#{i}")

    async def send_permission_request(self, session_id: str, request: PermissionRequest) -> None:
        self.board.card(session_id, request, None)

    async def update_permission_request(
        self, session_id: str, request: PermissionRequest, outcome: PermissionOutcome
    ) -> None:
        self.board.card(session_id, request, outcome)

    async def send_notification(self, notification: NotificationMessage) -> None:
        """Never called (`heads_ups` is False): the page has no place for heads-ups. What one
        says is on the page already, said once: a question is its card (and waits in the
        queue at the top), a finished run is its reply, a failure its error line."""
