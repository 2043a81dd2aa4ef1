"""The `bridge` fixture: your channel inside the real aep-bridge core, for end-to-end tests.

aep-bridge registers this module as a pytest plugin (entry point `pytest11`), so any test in
an environment with aep-bridge and pytest-asyncio can ask for `bridge`. It runs what
`aep-bridge run` runs, minus the agents' network endpoint: the real `Bridge` with your channel
registered as a plugin, its store in the test's `tmp_path`, the hub and its `LocalSource`, the
real outbox, and your channel's routes served over HTTP on a loopback port. Agents are
scripted, in-process, on the same hub the bridge reads.

    from aep_bridge.testing.fixture import BridgeFixture

    async def test_a_press_answers_the_agent(bridge: BridgeFixture) -> None:
        running = await bridge.start(MyChannel, {"server": fake.url, "approvers": ["u1"]})
        agent = running.agent()
        agent.start("Deploy the site")
        agent.ask("Run `make deploy`?", options=[("allow", "Allow"), ("deny", "Deny")])
        await running.settle()  # the card is on your fake platform now
        await fake.press("Deny", as_user="u1")  # what a person does there
        await running.settle()
        assert agent.answers == [{"option": "deny"}]

A platform that calls back over HTTP gets `bridge.url` before the bridge starts (put it in
the config as your public URL): your routes are at `{bridge.url}/channels/{name}/...`, the
same address after `running.restart()`.

Loading the plugin imports its packages, `aep_bridge` and `aep_bridge.testing`, and nothing
more: the bridge, its config and the HTTP server are imported when a test starts one.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

import pytest

from ..aep.envelope import Event
from ..contract.adapter import BridgeView, ChannelAdapter
from ..contract.hookspecs import hookimpl
from ..contract.types import ChannelError
from ..intake.principals import new_token
from .agent import ScriptedAgent

if TYPE_CHECKING:
    import uvicorn
    from starlette.types import ASGIApp, Receive, Scope, Send

    from ..config.config import BridgeConfig
    from ..contract.plugins import PluginHost
    from ..intake.hub import Hub
    from ..intake.source import LocalSource
    from ..loop.bridge import Bridge
    from ..store import Store

try:
    from pytest_asyncio import fixture as _async_fixture
except ImportError:  # pragma: no cover - without it, pytest says the async fixture went unrun
    _async_fixture = pytest.fixture  # type: ignore[assignment]

A = TypeVar("A", bound=ChannelAdapter[Any])

#: how long an answer may wait for the agent's ack in these tests (the bridge's own is 10 s)
ACK_TIMEOUT = 2.0
#: how long `settle()` waits by default before failing the test
SETTLE_TIMEOUT = 10.0


class _Channel:
    """The plugin that registers the channel under test, as its entry point would."""

    def __init__(self, channel: type[ChannelAdapter[Any]]) -> None:
        self.channel = channel

    @hookimpl
    def register_channels(self) -> list[type[ChannelAdapter[Any]]]:
        return [self.channel]


class RunningBridge(Generic[A]):
    """A running bridge with one channel instance, `name`, whose adapter is `adapter`."""

    def __init__(
        self, owner: BridgeFixture, name: str, config: BridgeConfig, host: PluginHost
    ) -> None:
        self._owner = owner
        self._config = config
        self._host = host
        #: the channel instance's name (its key under `channels`)
        self.name = name
        self._agents: list[ScriptedAgent] = []
        self._store: Store | None = None
        self._hub: Hub | None = None
        self._source: LocalSource | None = None
        self._bridge: Bridge | None = None

    # -- what a test uses ------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The bridge's HTTP address (channel routes are under `/channels/{name}`)."""
        return self._owner.url

    @property
    def channel_url(self) -> str:
        """Where this channel's routes are served: `{url}/channels/{name}`."""
        return f"{self.url}/channels/{self.name}"

    @property
    def adapter(self) -> A:
        """The running adapter (a new one after `restart()`)."""
        adapter = self._running.adapter(self.name)
        if adapter is None:
            raise RuntimeError(f"channel {self.name!r} is not running")
        return adapter  # type: ignore[return-value]

    @property
    def view(self) -> BridgeView:
        """What a plugin's hooks see of the bridge: running channels, their state, threads."""
        return self._running

    def agent(
        self,
        session: str = "sess-1",
        *,
        agent: str = "test-agent",
        decide: Callable[[Event], str | None] | None = None,
    ) -> ScriptedAgent:
        """A new agent on the bridge's hub, for session `session`. `decide(command)` returns
        None to accept a command, or the reason it is rejected (`control.rejected`)."""
        if self._hub is None:
            raise RuntimeError("the bridge is stopped")
        scripted = ScriptedAgent(self._hub, agent=agent, session=session, decide=decide)
        self._agents.append(scripted)
        return scripted

    async def settle(self, timeout: float = SETTLE_TIMEOUT) -> None:
        """Wait until every event the agents emitted has been handled, every answer has
        reached its agent, and every platform call the bridge queued has been made."""
        bridge = self._running
        try:
            async with asyncio.timeout(timeout):
                while True:
                    await asyncio.sleep(0)
                    if self._queued():
                        continue
                    await bridge.idle()
                    await asyncio.sleep(0)
                    if not self._queued() and not bridge.busy:
                        return
        except TimeoutError:
            raise AssertionError(f"the bridge was still busy after {timeout:g}s") from None

    async def restart(self) -> None:
        """Stop the bridge (delivering what it can) and start it again on the same store,
        config and address, with the agents still connected: what a restart of
        `aep-bridge run` does. The channel gets a new adapter; its platform is yours."""
        await self._stop()
        await self._start()

    async def stop(self) -> None:
        """Stop the bridge now (the fixture does it at the end of the test otherwise); the
        fixture can `start` another one after."""
        await self._stop()
        if self._owner._running is self:
            self._owner._running = None

    # -- parts ---------------------------------------------------------------------------

    @property
    def _running(self) -> Bridge:
        if self._bridge is None:
            raise RuntimeError("the bridge is stopped")
        return self._bridge

    def _queued(self) -> bool:
        """Whether the bridge's subscription holds events it has not taken yet."""
        if self._hub is None or self._source is None:
            raise RuntimeError("the bridge is stopped")
        owner = self._source._participant
        return any(s.pending for s in self._hub.subscriptions if s.owner is owner)

    async def _start(self) -> None:
        from ..intake.hub import Hub, HubLimits
        from ..intake.source import LocalSource
        from ..loop.bridge import Bridge
        from ..store import Store

        try:
            self._store = Store.open(self._owner.state_dir)
            intake = self._config.intake
            limits = HubLimits(
                replay_buffer=intake.replay_buffer,
                replay_bytes=intake.max_replay_bytes,
                replay_retention=intake.replay_retention,
            )
            self._hub = Hub(limits, self._store)
            for scripted in self._agents:  # connected as before: agents reconnect after a restart
                self._hub.join(scripted.participant)
                scripted.hub = self._hub
            self._source = LocalSource(self._hub)
            bridge = Bridge(
                self._config,
                self._host,
                store=self._store,
                ack_timeout=ACK_TIMEOUT,
                secrets=[self._owner.token],
                url=self._owner.url,
                token=self._owner.token,
            )
            self._bridge = bridge
            bridge.add_source(self._source)
            await bridge.start()
        except BaseException:
            await self._stop()
            raise
        if self.name not in bridge.channels or self.name in bridge.starting:
            # a test wants to know now: a start the bridge would try again counts as failed
            why = (
                bridge.failed.get(self.name)
                or bridge.starting.get(self.name)
                or "; ".join(str(p) for p in bridge.plan.problems)
            )
            await self._stop()
            raise ChannelError(f"channel {self.name!r} did not start: {why}")
        self._owner._serve(bridge.routes())

    async def _stop(self) -> None:
        bridge, self._bridge = self._bridge, None
        self._owner._serve(None)
        if bridge is not None:
            await bridge.stop(5.0)
        if self._source is not None:
            await self._source.close()
        if self._hub is not None:
            self._hub.flush()
        if self._store is not None:
            self._store.close()
        self._store = self._hub = self._source = None


class BridgeFixture:
    """The `bridge` fixture: start the real core with your channel, at `url`."""

    def __init__(self, state_dir: Path) -> None:
        #: where the bridge's store lives (the test's `tmp_path`)
        self.state_dir = state_dir
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.bind(("127.0.0.1", 0))
        # replies go out at once (Nagle would hold each small one ~40 ms for the client's ACK)
        self._socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        #: the bridge's HTTP address, known before it starts: your config's public URL
        self.url = f"http://127.0.0.1:{self._socket.getsockname()[1]}"
        #: the bridge's bearer token (`BridgeView.is_bridge_token`), as `aep-bridge token` prints
        self.token = new_token(24)
        self._app: ASGIApp | None = None
        self._server: uvicorn.Server | None = None
        self._serving: asyncio.Task[None] | None = None
        self._running: RunningBridge[Any] | None = None

    @overload
    async def start(
        self,
        channel: type[A],
        config: Mapping[str, Any] | None = None,
        *,
        name: str | None = None,
        plugins: Sequence[object] = (),
        settings: Mapping[str, Any] | None = None,
    ) -> RunningBridge[A]: ...

    @overload
    async def start(
        self,
        channel: str,
        config: Mapping[str, Any] | None = None,
        *,
        name: str | None = None,
        plugins: Sequence[object] = (),
        settings: Mapping[str, Any] | None = None,
    ) -> RunningBridge[ChannelAdapter[Any]]: ...

    async def start(
        self,
        channel: type[ChannelAdapter[Any]] | str,
        config: Mapping[str, Any] | None = None,
        *,
        name: str | None = None,
        plugins: Sequence[object] = (),
        settings: Mapping[str, Any] | None = None,
    ) -> RunningBridge[Any]:
        """Start the bridge with one channel instance and return it running.

        `channel` is your adapter class (registered for you, as your entry point would), or a
        channel type by name (`"ntfy"`), found among installed plugins through their
        `aep_bridge` entry points, as `aep-bridge run` finds it. `config` is the channel's
        block from a config file (`approvers` included); `name` its key (the channel's name by
        default). `plugins` are more plugin modules or objects (an `approver_decision` hook,
        say); `settings` the rest of the config file (`routes`, `redaction`). A channel that
        cannot start raises `ChannelError` with the reason, as `aep-bridge run` logs it.
        """
        from ..config.config import BridgeConfig
        from ..contract.plugins import PluginHost

        if self._running is not None:
            raise RuntimeError("the bridge is running already: restart() or stop() it first")
        host = PluginHost()
        if isinstance(channel, str):
            host.load(autoload=True)
            kind = channel
        else:
            _registered(host.register(_Channel(channel), f"{channel.__module__} (under test)"))
            kind = channel.name
        for plugin in plugins:
            _registered(host.register(plugin))
        instance = name or kind
        document = {
            **(settings or {}),
            "state_dir": str(self.state_dir),
            "channels": {instance: {"type": kind, **(config or {})}},
        }
        running: RunningBridge[Any] = RunningBridge(
            self, instance, BridgeConfig.model_validate(document), host
        )
        await self._listen()
        await running._start()
        self._running = running
        return running

    async def close(self) -> None:
        """Stop the bridge and the HTTP server (the fixture's teardown)."""
        running, self._running = self._running, None
        try:
            if running is not None:
                await running._stop()
        finally:
            if self._server is not None and self._serving is not None:
                self._server.should_exit = True
                await self._serving
            self._socket.close()

    # -- the HTTP side -----------------------------------------------------------------------

    def _serve(self, routes: Sequence[Any] | None) -> None:
        """Serve `routes` from now on (None: answer 503, as a stopped bridge does not)."""
        if routes is None:
            self._app = None
            return
        from starlette.applications import Starlette

        self._app = Starlette(routes=list(routes))

    async def _asgi(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._app is not None:
            await self._app(scope, receive, send)
            return
        if scope["type"] == "http":
            from starlette.responses import PlainTextResponse

            await PlainTextResponse("the bridge is not running", 503)(scope, receive, send)

    async def _listen(self) -> None:
        if self._serving is not None:
            return
        import uvicorn

        class Server(uvicorn.Server):
            @contextlib.contextmanager
            def capture_signals(self) -> Iterator[None]:
                yield  # Ctrl-C is pytest's

        config = uvicorn.Config(
            self._asgi,
            interface="asgi3",
            log_config=None,
            log_level="warning",
            lifespan="off",
            access_log=False,
        )
        self._server = server = Server(config)
        self._serving = asyncio.create_task(server.serve(sockets=[self._socket]))
        async with asyncio.timeout(10):
            while not server.started:
                if self._serving.done():
                    self._serving.result()
                await asyncio.sleep(0.01)


def _registered(record: Any) -> None:
    if record.status == "failed":
        raise ChannelError(f"plugin {record.name!r} could not be loaded: {record.error}")


@_async_fixture
async def bridge(tmp_path: Path) -> AsyncIterator[BridgeFixture]:
    """The real aep-bridge core, for your channel: `await bridge.start(MyChannel, config)`.

    See `aep_bridge.testing.fixture`. Needs pytest-asyncio.
    """
    fixture = BridgeFixture(tmp_path / "aep-bridge")
    try:
        yield fixture
    finally:
        await fixture.close()


__all__ = ["BridgeFixture", "RunningBridge", "ScriptedAgent", "bridge"]
