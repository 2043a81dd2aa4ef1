"""The fake-platform kit of `aep_bridge.testing`: a server in the test's loop, its limits."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from aep_bridge.testing import (
    FakePlatform,
    FixedWindow,
    InLoopServer,
    ManualClock,
    SlidingWindow,
    Window,
    retry_after_seconds,
)


class TinyChat(FakePlatform):
    """A platform with one call, `POST /send`: two messages per ten seconds
    per chat, a 20-character message and 8-byte button data."""

    platform_name = "the fake tiny chat"
    message_limit = 20
    button_data_limit = 8

    def __init__(self, clock: ManualClock) -> None:
        super().__init__(
            Starlette(routes=[Route("/send", self._send, methods=["POST"])]), clock=clock
        )
        self.per_chat: dict[str, FixedWindow] = {}
        self.sent: list[str] = []

    async def _send(self, request: Request) -> Response:
        body: dict[str, Any] = await request.json()
        call = self.record("send", body)
        problem = self.check_message(body["text"]) or self.check_button_data(body.get("button", ""))
        if problem is not None:
            call.status = 400
            return JSONResponse({"error": problem}, status_code=400)
        window = self.per_chat.setdefault(body["chat"], FixedWindow(Window(2, 10.0)))
        refused = self.admit({"per_chat": window})
        if refused is not None:
            call.status = refused.status_code
            return refused
        self.sent.append(body["text"])
        return JSONResponse({"ok": True})

    def too_many_requests(self, wait: float, kind: str) -> Response:
        # the platform's own shape: its retry-after in the body, in whole seconds
        return JSONResponse(
            {"ok": False, "parameters": {"retry_after": retry_after_seconds(wait)}},
            status_code=429,
        )


async def test_the_base_answers_429_with_the_platforms_retry_after_once_the_limit_is_passed() -> (
    None
):
    clock = ManualClock()
    async with TinyChat(clock) as fake, httpx.AsyncClient(base_url=fake.url()) as client:
        for text in ("one", "two"):
            answer = await client.post("/send", json={"chat": "c1", "text": text})
            assert answer.status_code == 200
        clock.advance(2.5)
        refused = await client.post("/send", json={"chat": "c1", "text": "three"})
        other_chat = await client.post("/send", json={"chat": "c2", "text": "elsewhere"})
        clock.advance(7.5)
        again = await client.post("/send", json={"chat": "c1", "text": "three again"})

    assert refused.status_code == 429
    assert refused.json() == {"ok": False, "parameters": {"retry_after": 8}}
    assert other_chat.status_code == 200
    assert again.status_code == 200
    # the refused call did nothing and is recorded as refused
    assert fake.sent == ["one", "two", "elsewhere", "three again"]
    assert [c.body["text"] for c in fake.calls_to("send", status=429)] == ["three"]
    assert len(fake.calls_to("send")) == 5


async def test_the_default_429_carries_a_retry_after_header_in_whole_seconds() -> None:
    fake = FakePlatform(clock=ManualClock())
    answer = fake.too_many_requests(0.2, "global")
    assert answer.status_code == 429
    assert answer.headers["Retry-After"] == "1"


async def test_message_and_button_data_sizes_are_the_platforms() -> None:
    async with TinyChat(ManualClock()) as fake, httpx.AsyncClient(base_url=fake.url()) as client:
        long_text = await client.post("/send", json={"chat": "c", "text": "x" * 21})
        fits = await client.post("/send", json={"chat": "c", "text": "x" * 20, "button": "é" * 4})
        long_data = await client.post("/send", json={"chat": "c", "text": "hi", "button": "é" * 5})
    assert long_text.status_code == 400
    assert "too long (21 > 20)" in long_text.json()["error"]
    assert fits.status_code == 200
    # button data is measured in UTF-8 bytes: five "é" are ten
    assert long_data.status_code == 400
    assert "10 bytes > 8" in long_data.json()["error"]
    assert fake.sent == ["x" * 20]


async def test_a_server_started_in_the_tests_loop_is_stopped_at_its_end_and_its_port_released() -> (
    None
):
    async with InLoopServer(Starlette(routes=[])) as server, httpx.AsyncClient() as client:
        port = server.port
        assert port > 0
        answer = await client.get(server.url("/nothing"))
        assert answer.status_code == 404

    with pytest.raises(httpx.ConnectError):
        async with httpx.AsyncClient() as client:
            await client.get(f"http://127.0.0.1:{port}/nothing")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as again:
        again.bind(("127.0.0.1", port))  # free again


async def test_closing_ends_what_the_fake_holds_open_so_stopping_does_not_wait() -> None:
    class LongPoll(InLoopServer):
        def __init__(self) -> None:
            super().__init__(Starlette(routes=[Route("/poll", self._poll)]))
            self.released = asyncio.Event()

        async def _poll(self, request: Request) -> Response:
            await self.released.wait()
            return JSONResponse([])

        async def closing(self) -> None:
            self.released.set()

    async with LongPoll() as server, httpx.AsyncClient() as client:
        poll = asyncio.create_task(client.get(server.url("/poll")))
        await asyncio.sleep(0.05)
        assert not poll.done()
        await server.stop()
        answer = await poll
    assert answer.status_code == 200


def test_a_fixed_window_resets_all_at_once_a_sliding_one_call_by_call() -> None:
    fixed, sliding = FixedWindow(Window(2, 10.0)), SlidingWindow(Window(2, 10.0))
    for bucket in (fixed, sliding):
        bucket.take(0.0)
        bucket.take(6.0)
    # both full until the first call is ten seconds old
    assert fixed.wait(9.0) == pytest.approx(1.0)
    assert sliding.wait(9.0) == pytest.approx(1.0)
    fixed.take(10.0)
    sliding.take(10.0)
    # the fixed bucket opened afresh at 10 (one of two used); the sliding one still holds 6
    assert fixed.wait(12.0) == 0.0
    assert sliding.wait(12.0) == pytest.approx(4.0)
    assert retry_after_seconds(4.0) == 4
    assert retry_after_seconds(0.01) == 1
