"""The fake-platform kit of `aep_bridge.testing`: a server in the test's loop, its limits."""

from __future__ import annotations

import asyncio
import logging
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from aep_bridge.contract.types import ChannelUser
from aep_bridge.testing import (
    FakeCore,
    FakePlatform,
    FixedWindow,
    InLoopServer,
    ManualClock,
    SlidingWindow,
    Window,
    logged_wrong,
    retry_after_seconds,
)
from aep_bridge.testing.flood import RoundTrip


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


def test_a_sliding_window_keeps_only_the_calls_inside_it() -> None:
    """A flood against a fake runs for thousands of calls: its bucket must not keep them all."""
    sliding = SlidingWindow(Window(2, 10.0))
    for call in range(10_000):  # one every five seconds: two in any ten, as allowed
        sliding.take(5.0 * call)
    assert len(sliding.times) <= 2
    assert sliding.wait(49_996.0) == pytest.approx(4.0)  # until the call at 49,990 is old
    assert sliding.wait(50_005.0) == 0.0


# -- the bench's round trip ------------------------------------------------------------------


class Echo(FakePlatform):
    """`POST /send` answers `{"ok": true}`, or 400 for the text "no"."""

    def __init__(self) -> None:
        super().__init__(Starlette(routes=[Route("/send", self._send, methods=["POST"])]))

    async def _send(self, request: Request) -> Response:
        body: dict[str, Any] = await request.json()
        call = self.record("send", body)
        if body["text"] == "no":
            call.status = 400
            return JSONResponse({"ok": False, "error": "no_text"}, status_code=400)
        return JSONResponse({"ok": True, "id": len(self.calls)})


class EchoTrip(RoundTrip):
    async def open(self) -> None:
        self.http = aiohttp.ClientSession(self.fake.url() + "/")
        self.tasks = [asyncio.create_task(asyncio.sleep(3600))]  # a reader of its own


async def test_the_round_trip_times_each_send_and_stops_the_bench_at_a_refused_one() -> None:
    async with Echo() as fake:
        async with EchoTrip(fake) as trip:
            answer = await trip.sent("send", {"text": "hi"}, lambda status, _: status == 200)
            assert answer == {"ok": True, "id": 1}
            with pytest.raises(RuntimeError, match="no_text"):
                await trip.sent("send", {"text": "no"}, lambda status, _: status == 200)
            library = httpx.AsyncClient(base_url=fake.url())
            await trip.through_library(
                library.post("/send", json={"text": "sdk"}), lambda c: c.body["text"] == "sdk"
            )
            await library.aclose()
            trip.pressed(10.0, 10.25, 10.5)
            reader = trip.tasks[0]
            figures = trip.figures("chat-sdk")
        assert reader.cancelled() or reader.cancelling()
        assert trip.http.closed
    assert len(trip.send) == 2
    assert len(trip.library) == 1
    assert trip.library[0] >= 0
    assert list(figures) == [
        "send round trip",
        "chat-sdk send",
        "press round trip",
        "press dispatch",
    ]
    assert figures["press dispatch"]["p50"] == 250.0
    assert figures["press round trip"]["max"] == 500.0


# -- the SDK's log -----------------------------------------------------------------------------


def test_only_the_named_libraries_errors_count() -> None:
    def record(name: str, level: int) -> logging.LogRecord:
        return logging.LogRecord(name, level, __file__, 1, "boom %s", (name,), None)

    records = [
        record("chat_sdk.gateway", logging.ERROR),
        record("chat_sdk", logging.WARNING),
        record("chat_sdkx", logging.ERROR),  # another library whose name begins alike
        record("aep_bridge", logging.ERROR),
    ]
    assert logged_wrong(records, ("chat_sdk",)) == ["chat_sdk.gateway: boom chat_sdk.gateway"]
    assert logged_wrong(records, ("chat_sdk",), logging.WARNING) == [
        "chat_sdk.gateway: boom chat_sdk.gateway",
        "chat_sdk: boom chat_sdk",
    ]


def test_a_library_that_logs_an_error_fails_the_test_a_warning_does_not(
    tmp_path: Path,
) -> None:
    """The conftest line a plugin's tests use: a test during which the SDK logged an error
    fails, naming it; one with a warning, or an error of another logger, passes."""
    (tmp_path / "conftest.py").write_text(
        "from aep_bridge.testing import library_logs_nothing_wrong\n"
        "_sdk_logs_no_errors = library_logs_nothing_wrong('chat_sdk')\n"
    )
    (tmp_path / "test_it.py").write_text(
        "import logging\n"
        "def test_quiet():\n"
        "    logging.getLogger('chat_sdk.gateway').warning('slow')\n"
        "    logging.getLogger('elsewhere').error('not ours')\n"
        "def test_broken():\n"
        "    logging.getLogger('chat_sdk.gateway').error('parse failed')\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = done.stdout
    assert "2 passed, 1 error" in out, out  # test_broken passes its call, errs after it
    assert "ERROR at teardown of test_broken" in out, out
    assert "chat_sdk.gateway: parse failed" in out, out


# -- the probes' wait for the core -------------------------------------------------------------


async def test_a_probes_reply_waits_until_the_core_has_heard_the_words() -> None:
    """What a probe's `reply` waits for: the core handed one more press, refusal or
    message; with nothing handed over, the wait ends in a timeout, not a silent pass."""
    core = FakeCore(approvers=["alice"])
    before = core.heard
    with pytest.raises(TimeoutError):
        await core.hears_more_than(before, timeout=0.05)

    async def a_stranger_answers() -> None:
        await asyncio.sleep(0.01)
        await core.answer_text("card-1", "ship it", ChannelUser(id="mallory", name="Mallory"))

    answering = asyncio.create_task(a_stranger_answers())
    await core.hears_more_than(before)
    await answering
    assert core.heard > before
    assert [r.user.id for r in core.refused] == ["mallory"]
