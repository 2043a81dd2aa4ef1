"""A test-only channel and the fake chat platform it talks to, which records everything.

`RecordingChannel` is a thin adapter, shaped like a real one: every call is an HTTP request to
the platform, a 429 becomes `RateLimited`, a 5xx or a dropped connection `ChannelError`, and it
never sleeps or retries on its own. It declares threads, buttons, edits and rate limits, so the
core's outbox backs up behind them. Its route `POST /press {card, option, user}` (mounted by the
bridge at `/channels/<name>/press`) is a button press: it hands the press to the core and
returns the `Resolution` as JSON.

`FakePlatform` is the platform: a Starlette app on a loopback port, run inside the test
process. It assigns thread and message ids, records every call that took effect (in order),
answers some calls with 429 (`retry_after`) or 502 without doing them, like a real platform
under load (thread creation only with 429), and can `freeze`: from then on every call takes
effect but is never answered, which is what a call in flight looks like when the bridge
process dies.

Load the channel in a bridge process with `AEP_BRIDGE_PLUGINS=tests.core.recording_channel`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import httpx
import uvicorn
from pydantic import Field
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from aep_bridge import (
    BridgeCore,
    ChannelAdapter,
    ChannelCapabilities,
    ChannelConfig,
    ChannelError,
    ChannelUser,
    NotificationMessage,
    OutgoingMessage,
    PermissionOutcome,
    PermissionRequest,
    RateLimit,
    RateLimited,
    RateLimits,
    hookimpl,
)
from tests.bridge_process import free_port

#: What the channel declares unless its config says otherwise: each thread (and the chat
#: notifications go to) 10 calls a second, the whole bot 50.
DEFAULT_LIMITS = RateLimits(
    per_chat=RateLimit(count=10, per_seconds=1.0),
    global_=RateLimit(count=50, per_seconds=1.0),
)


class RecordingConfig(ChannelConfig):
    """`channels.<name>` for the recording channel."""

    platform_url: str = Field(description="the fake platform's base URL, http://127.0.0.1:port")
    #: the limits to declare (the platform's real ones); default `DEFAULT_LIMITS`
    rate_limits: RateLimits | None = None
    #: seconds one platform call may take before it counts as failed
    timeout: float = 30.0


class RecordingChannel(ChannelAdapter[RecordingConfig]):
    """A fake chat platform with threads, buttons and edits, for fault tests."""

    name = "recording"
    capabilities = ChannelCapabilities(
        threads=True,
        buttons=True,
        edits=True,
        text_answers=True,
        forms=False,
        max_message_length=2000,
        max_button_data=64,
        max_buttons=8,
        rate_limits=DEFAULT_LIMITS,
    )
    config_model: ClassVar[type[ChannelConfig]] = RecordingConfig

    def __init__(self, core: BridgeCore, config: RecordingConfig) -> None:
        super().__init__(core, config)
        if config.rate_limits is not None:
            self.capabilities = self.capabilities.model_copy(
                update={"rate_limits": config.rate_limits}
            )
        self._client: httpx.AsyncClient | None = None

    # -- lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        self._client = httpx.AsyncClient(
            base_url=self.config.platform_url.rstrip("/"), timeout=self.config.timeout
        )
        try:
            reply = await self._client.get("/health")
        except httpx.HTTPError as exc:
            await self._client.aclose()
            raise ChannelError(
                f"the platform at {self.config.platform_url} is down: {exc}"
            ) from None
        if reply.status_code != 200:
            await self._client.aclose()
            raise ChannelError(f"the platform said {reply.status_code} to /health")

    async def stop(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    def routes(self) -> Sequence[BaseRoute]:
        return (Route("/press", self._press, methods=["POST"]),)

    # -- the platform --------------------------------------------------------------------

    async def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        if self._client is None:
            raise ChannelError("the channel is not started")
        try:
            reply = await self._client.post(path, json=body)
        except httpx.HTTPError as exc:
            raise ChannelError(f"POST {path}: {type(exc).__name__}") from exc
        if reply.status_code == 429:
            raise RateLimited(float(reply.json().get("retry_after", 1.0)))
        if reply.status_code >= 500:
            raise ChannelError(f"POST {path}: {reply.status_code}")
        if reply.status_code != 200:
            raise ChannelError(f"POST {path}: {reply.status_code} {reply.text}", permanent=True)
        result: dict[str, Any] = reply.json()
        return result

    def _thread(self, session_id: str) -> str:
        thread = self.core.thread_id(self.instance_name, session_id)
        if thread is None:  # the core holds a session's jobs until its thread exists
            raise ChannelError(f"session {session_id} has no thread", permanent=True)
        return thread

    # -- the contract --------------------------------------------------------------------

    async def create_session_thread(self, session_id: str, name: str) -> str:
        reply = await self._post("/threads", {"session": session_id, "name": name})
        return str(reply["thread"])

    async def rename_session_thread(self, session_id: str, new_name: str) -> None:
        await self._post(f"/threads/{self._thread(session_id)}/rename", {"name": new_name})

    async def archive_session_thread(self, session_id: str) -> None:
        await self._post(f"/threads/{self._thread(session_id)}/archive", {})

    async def delete_session_thread(self, session_id: str) -> None:
        await self._post(f"/threads/{self._thread(session_id)}/delete", {})

    async def send_message(self, session_id: str, content: OutgoingMessage) -> None:
        thread = self._thread(session_id)
        state = self.core.state(self.instance_name)
        known = await state.get(f"key:{session_id}:{content.key}") if content.key else None
        body = {"type": content.type, "text": content.text, "notify": content.notify}
        if known is not None:
            await self._post(f"/messages/{known}/edit", body)
            return
        reply = await self._post("/messages", {"thread": thread, "session": session_id, **body})
        if content.key:
            await state.set(f"key:{session_id}:{content.key}", str(reply["message"]))

    async def send_permission_request(self, session_id: str, request: PermissionRequest) -> None:
        thread = self._thread(session_id)
        # a press names only the card: remember its session first (a platform would keep it
        # in the button's callback data)
        await self.core.state(self.instance_name).set(f"card:{request.id}", session_id)
        buttons = (
            []
            if request.informational
            else [
                {"option": o.id, "label": o.label, "data": f"{request.id}:{o.id}"}
                for o in request.options
            ]
        )
        await self._post(
            "/cards",
            {
                "thread": thread,
                "session": session_id,
                "card": request.id,
                "title": request.title,
                "description": request.description,
                "buttons": buttons,
            },
        )

    async def update_permission_request(
        self, session_id: str, request: PermissionRequest, outcome: PermissionOutcome
    ) -> None:
        await self._post(
            f"/cards/{request.id}/update",
            {
                "status": str(outcome.status),
                "option": outcome.option_id,
                "label": outcome.option_label,
                "by": outcome.by,
                "closed": outcome.closed,
                "summary": outcome.summary(),
            },
        )

    async def send_notification(self, notification: NotificationMessage) -> None:
        await self._post(
            "/notifications",
            {
                "session": notification.session_id,
                "type": notification.type,
                "summary": notification.summary,
            },
        )

    # -- presses -------------------------------------------------------------------------

    async def _press(self, request: Request) -> Response:
        """`{card, option, user}`: someone pressed a button of a card."""
        try:
            body = await request.json()
            card, option, user = str(body["card"]), str(body["option"]), str(body["user"])
        except (ValueError, KeyError, TypeError):
            return JSONResponse({"error": "send {card, option, user}"}, status_code=400)
        session = await self.core.state(self.instance_name).get(f"card:{card}")
        if session is None:
            return JSONResponse({"status": "unknown", "message": "no such card"}, status_code=404)
        resolution = await self.core.resolve_permission(
            session, card, option, ChannelUser(id=user, name=user)
        )
        return JSONResponse({**resolution.model_dump(mode="json"), "message": resolution.message})


@hookimpl
def register_channels() -> list[type[RecordingChannel]]:
    return [RecordingChannel]


# -- the fake platform -----------------------------------------------------------------


@dataclass
class Call:
    """One call that took effect on the platform (what a person would see happen)."""

    n: int  # order of arrival
    op: str  # thread, rename, archive, delete, message, edit, card, update, notification
    body: dict[str, Any]
    thread: str | None = None
    #: made while frozen: it took effect, but the caller never got the answer
    stalled: bool = False
    at: float = field(default_factory=time.monotonic)


class FakePlatform:
    """The platform: records what took effect; 429s, 502s and a freeze on demand."""

    def __init__(self, *, seed: int = 0, rate_429: float = 0.0, rate_502: float = 0.0) -> None:
        self.rng = random.Random(seed)
        self.rate_429 = rate_429
        self.rate_502 = rate_502
        self.retry_after = (0.05, 0.4)
        self.calls: list[Call] = []
        self.threads: dict[str, dict[str, Any]] = {}
        self.refused = {"429": 0, "502": 0}
        self._ids = itertools.count(1)
        self._order = itertools.count(1)
        self._messages: dict[str, str] = {}  # message id -> thread
        self._frozen = False
        self._release = asyncio.Event()
        self.app = Starlette(
            routes=[
                Route("/health", self._health, methods=["GET"]),
                Route("/threads", self._threads, methods=["POST"]),
                Route("/threads/{thread}/{action}", self._thread_action, methods=["POST"]),
                Route("/messages", self._message, methods=["POST"]),
                Route("/messages/{message}/edit", self._edit, methods=["POST"]),
                Route("/cards", self._card, methods=["POST"]),
                Route("/cards/{card}/update", self._update, methods=["POST"]),
                Route("/notifications", self._notification, methods=["POST"]),
            ]
        )

    # -- what the test looks at ----------------------------------------------------------

    def of(self, op: str) -> list[Call]:
        return [c for c in self.calls if c.op == op]

    @property
    def stalled(self) -> list[Call]:
        return [c for c in self.calls if c.stalled]

    def freeze(self) -> None:
        """From now on, calls take effect and are never answered (until `release`)."""
        self._frozen = True
        self._release.clear()

    def release(self) -> None:
        """Answer nothing that was frozen (its caller is gone), and behave normally again."""
        self._frozen = False
        self._release.set()

    # -- behaviour -----------------------------------------------------------------------

    def _fault(self, *, fail: bool = True) -> Response | None:
        """Sometimes say "slow down" or (with `fail`) fail, without doing anything; never
        while frozen."""
        if self._frozen:
            return None
        roll = self.rng.random()
        if roll < self.rate_429:
            self.refused["429"] += 1
            wait = round(self.rng.uniform(*self.retry_after), 3)
            return JSONResponse({"ok": False, "retry_after": wait}, status_code=429)
        if fail and roll < self.rate_429 + self.rate_502:
            self.refused["502"] += 1
            return JSONResponse({"ok": False, "error": "bad gateway"}, status_code=502)
        return None

    async def _done(self, op: str, body: dict[str, Any], result: dict[str, Any]) -> Response:
        thread = body.get("thread") or result.get("thread")
        call = Call(next(self._order), op, {**body, **result}, thread, stalled=self._frozen)
        self.calls.append(call)
        if call.stalled:
            await self._release.wait()  # the caller is dead by then; the answer goes nowhere
        return JSONResponse({"ok": True, **result})

    async def _health(self, request: Request) -> Response:
        return JSONResponse({"ok": True})

    async def _threads(self, request: Request) -> Response:
        body = await request.json()
        # only rate limited, so every thread exists within a bounded time (the core retries a
        # failed creation after 1, 2, 4, ... seconds, which a test cannot afford to wait for)
        refused = self._fault(fail=False)
        if refused is not None:
            return refused
        thread = f"T{next(self._ids)}"
        self.threads[thread] = {"session": body["session"], "name": body["name"]}
        return await self._done("thread", body, {"thread": thread})

    async def _thread_action(self, request: Request) -> Response:
        thread, action = request.path_params["thread"], request.path_params["action"]
        body = await request.json()
        if thread not in self.threads or action not in ("rename", "archive", "delete"):
            return JSONResponse({"ok": False, "error": "no such thread"}, status_code=404)
        refused = self._fault()
        if refused is not None:
            return refused
        return await self._done(action, {**body, "thread": thread}, {})

    async def _message(self, request: Request) -> Response:
        body = await request.json()
        if body.get("thread") not in self.threads:
            return JSONResponse({"ok": False, "error": "no such thread"}, status_code=400)
        refused = self._fault()
        if refused is not None:
            return refused
        message = f"M{next(self._ids)}"
        self._messages[message] = body["thread"]
        return await self._done("message", body, {"message": message})

    async def _edit(self, request: Request) -> Response:
        message = request.path_params["message"]
        body = await request.json()
        if message not in self._messages:
            return JSONResponse({"ok": False, "error": "no such message"}, status_code=400)
        refused = self._fault()
        if refused is not None:
            return refused
        return await self._done("edit", {**body, "thread": self._messages[message]}, {})

    async def _card(self, request: Request) -> Response:
        body = await request.json()
        if body.get("thread") not in self.threads:
            return JSONResponse({"ok": False, "error": "no such thread"}, status_code=400)
        refused = self._fault()
        if refused is not None:
            return refused
        message = f"M{next(self._ids)}"
        self._messages[message] = body["thread"]
        return await self._done("card", body, {"message": message})

    async def _update(self, request: Request) -> Response:
        card = request.path_params["card"]
        body = await request.json()
        shown = [c for c in self.calls if c.op == "card" and c.body["card"] == card]
        if not shown:
            return JSONResponse({"ok": False, "error": "no such card"}, status_code=400)
        refused = self._fault()
        if refused is not None:
            return refused
        return await self._done("update", {**body, "card": card, "thread": shown[0].thread}, {})

    async def _notification(self, request: Request) -> Response:
        body = await request.json()
        refused = self._fault()
        if refused is not None:
            return refused
        return await self._done("notification", body, {})


class _InLoopServer(uvicorn.Server):
    """uvicorn in the test's event loop, leaving the test runner's signals alone."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@contextlib.asynccontextmanager
async def serve_platform(platform: FakePlatform) -> AsyncIterator[str]:
    """Serve `platform` on a loopback port in the running loop; yields its base URL."""
    port = free_port()
    server = _InLoopServer(
        uvicorn.Config(platform.app, host="127.0.0.1", port=port, log_level="error", lifespan="off")
    )
    task = asyncio.create_task(server.serve())
    async with asyncio.timeout(10):
        while not server.started:
            await asyncio.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        platform.release()
        server.should_exit = True
        server.force_exit = True
        await asyncio.wait_for(task, 10)
