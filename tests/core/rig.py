"""A whole bridge in one process: hub, store, the core loop and memory channels.

Nothing of ours is replaced: events enter the real `Hub` as an agent's would, the real
`Bridge` consumes them through `LocalSource`, and channels are `MemoryChannel`s driven through
the same outbox a platform channel gets. Tests look at what a person would see in each channel.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine

from aep_bridge import hookimpl
from aep_bridge.config.config import BridgeConfig
from aep_bridge.contract.adapter import ChannelRegistration
from aep_bridge.contract.plugins import PluginHost
from aep_bridge.contract.types import ChannelConfig, ChannelUser
from aep_bridge.intake.hub import Hub, HubLimits, Participant
from aep_bridge.intake.source import LocalSource
from aep_bridge.loop.bridge import Bridge
from aep_bridge.store import Store
from aep_bridge.testing import MemoryChannel, VirtualTime
from aep_bridge.testing.model import ChannelModel
from tests.core.doubles import LocalAgent

ALICE = ChannelUser(id="alice", name="Alice")
BOB = ChannelUser(id="bob", name="Bob")
MALLORY = ChannelUser(id="mallory", name="Mallory")


#: what a memory channel "platform" holds, kept across a bridge restart
_PLATFORM = ("threads", "messages", "cards", "_by_key", "_ids")


class _MemoryPlugin:
    """Memory channels whose platform outlives the bridge: a restarted bridge finds the
    threads and cards the previous one made, as it would on a real platform."""

    def __init__(self, carrying: frozenset[str] = frozenset()) -> None:
        self.platforms: dict[str, dict[str, Any]] = {}
        #: the channels that show a card's context (`card_context`)
        self.carrying = carrying

    @hookimpl
    def register_channels(self) -> list[ChannelRegistration]:
        def build(core: Any, config: ChannelConfig) -> MemoryChannel:
            channel = MemoryChannel(core, config)
            if config.name in self.carrying:
                channel.capabilities = channel.capabilities.model_copy(
                    update={"card_context": True}
                )
            kept = self.platforms.setdefault(config.name, {})
            for attribute in _PLATFORM:
                if attribute in kept:
                    setattr(channel, attribute, kept[attribute])
                else:
                    kept[attribute] = getattr(channel, attribute)
            return channel

        return [dataclasses.replace(ChannelRegistration.of(MemoryChannel), factory=build)]


def memory_host(*plugins: object, carrying: frozenset[str] = frozenset()) -> PluginHost:
    host = PluginHost()
    host.register(_MemoryPlugin(carrying), "memory-plugin")
    for plugin in plugins:
        host.register(plugin)
    return host


def two_channels(**extra: Any) -> dict[str, Any]:
    """Channels `alpha` and `beta`, both memory channels; alice approves on both."""
    block = {"type": "memory", "approvers": ["alice", "bob"], **extra}
    return {"alpha": dict(block), "beta": dict(block)}


class Rig:
    """`async with Rig(tmp_path) as rig:` a running bridge; `rig.agent()` joins an agent."""

    def __init__(
        self,
        state_dir: Path | None = None,
        *,
        channels: dict[str, Any] | None = None,
        routes: list[dict[str, Any]] | None = None,
        host: PluginHost | None = None,
        ack_timeout: float = 2.0,
        outbox_options: dict[str, Any] | None = None,
        secrets: tuple[str, ...] = (),
        connected: tuple[Participant, ...] = (),
        clock: Callable[[], float] = time.time,
        **config: Any,
    ) -> None:
        self.state_dir = state_dir
        self.secrets = secrets  # what `aep-bridge run` passes: the endpoint's token
        self.config = BridgeConfig.model_validate(
            {"channels": channels or two_channels(), "routes": routes, **config}
        )
        self.host = host or memory_host()
        self.ack_timeout = ack_timeout
        self.outbox_options = outbox_options
        self.connected = connected  # agents already connected when the bridge starts
        self.clock = clock  # the wall clock of the sessions' retention

    async def __aenter__(self) -> Rig:
        self.store = Store.open(self.state_dir) if self.state_dir else Store.memory()
        self.hub = Hub(HubLimits(), self.store)
        self.source = LocalSource(self.hub)
        for participant in self.connected:
            self.hub.join(participant)
        self.bridge = Bridge(
            self.config,
            self.host,
            store=self.store,
            ack_timeout=self.ack_timeout,
            outbox_options=self.outbox_options,
            secrets=self.secrets,
            clock=self.clock,
        )
        self.bridge.add_source(self.source)
        await self.bridge.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def stop(self, flush_timeout: float = 5.0) -> None:
        if getattr(self, "bridge", None) is None:
            return
        await self.bridge.stop(flush_timeout)
        await self.source.close()
        self.hub.flush()
        self.store.close()
        self.bridge = None  # type: ignore[assignment]

    def agent(self, session: str = "sess-1", **kwargs: Any) -> LocalAgent:
        return LocalAgent(self.hub, session=session, **kwargs)

    def channel(self, name: str) -> MemoryChannel:
        adapter = self.bridge.channels[name].adapter
        assert isinstance(adapter, MemoryChannel)
        return adapter

    async def settle(self) -> None:
        """Wait until every event admitted so far has been handled and every call made."""
        for _ in range(10_000):
            await asyncio.sleep(0)
            if self._queued():
                continue
            await self.bridge.idle()
            await asyncio.sleep(0)
            if not self._queued() and not self.bridge.busy:
                return
        raise AssertionError("the bridge did not settle")

    def _queued(self) -> bool:
        """Whether the bridge's own subscription still holds events it has not taken."""
        owner = self.source._participant
        return any(s.pending for s in self.hub.subscriptions if s.owner is owner)

    # -- what a person sees --------------------------------------------------------------

    def thread_texts(self, channel: str, session: str = "sess-1") -> list[str]:
        """The texts shown in the session's thread in `channel`, in order."""
        memory = self.channel(channel)
        thread = self.thread_of(channel, session)
        return [m.text for m in memory.messages if m.thread_id == thread]

    def thread_of(self, channel: str, session: str = "sess-1") -> str | None:
        record = self.bridge.sessions.find_by_session(session)
        return None if record is None else self.bridge.sessions.thread_id(channel, record.id)

    def card(self, channel: str, index: int = -1) -> tuple[str, Any, str]:
        """A card shown in `channel`: (session id, request, message id)."""
        return list(self.channel(channel).cards.values())[index]

    def card_text(self, channel: str, index: int = -1) -> str:
        _, _, message_id = self.card(channel, index)
        return next(m.text for m in self.channel(channel).messages if m.id == message_id)

    def buttons(self, channel: str, index: int = -1) -> list[tuple[str, str]]:
        _, _, message_id = self.card(channel, index)
        return next(m.buttons for m in self.channel(channel).messages if m.id == message_id)


class BridgeMachine(RuleBasedStateMachine):
    """A whole bridge under a Hypothesis state machine: a loop and a state directory of its
    own, and a memory platform that outlives the bridge's restarts. Rules call `_run` and
    `_settle`; `_start` makes a `Rig` with the machine's options (and `extra` ones)."""

    rig_options: ClassVar[dict[str, Any]] = {}
    #: the memory channels that show a card's context (`card_context`)
    carrying: ClassVar[frozenset[str]] = frozenset()

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.tmp = tempfile.TemporaryDirectory(prefix="aep-machine-")
        self.state_dir = Path(self.tmp.name) / "state"
        self.host = memory_host(carrying=self.carrying)
        self.rig = self._run(self._start())

    def _run(self, coroutine: Any) -> Any:
        return self.loop.run_until_complete(coroutine)

    async def _start(self, **extra: Any) -> Rig:
        rig = Rig(self.state_dir, host=self.host, **self.rig_options, **extra)
        return await rig.__aenter__()

    def _settle(self) -> None:
        self._run(self.rig.settle())

    def _restart(self, agents: list[LocalAgent], *, flush_timeout: float = 5.0) -> None:
        """Stop the bridge (flushing for up to `flush_timeout`) and start it again on the same
        state, with `agents` still connected, as they are when a real bridge restarts."""
        self._run(self.rig.stop(flush_timeout))
        self.rig = self._run(self._start(connected=tuple(a.participant for a in agents)))
        for agent in agents:
            agent.hub = self.rig.hub

    def teardown(self) -> None:
        try:
            self._run(self.rig.stop())
        finally:
            self.loop.close()
            self.tmp.cleanup()


class ChannelMachine(ChannelModel, BridgeMachine):
    """The kit's `ChannelModel` on this rig: the real bridge with one platform channel (its
    plugin, `PLUGIN`, named `CHANNEL`) on its fake, which outlives the bridge's restarts as
    the platform does. The outbox runs on `VirtualTime`: a platform's pace in no time (the
    fakes keep their size limits but not their rate limits; the end-to-end tests keep
    those). A subclass opens its fake (`_open_fake`), gives the channel's block, and the
    kit's platform hooks."""

    PLUGIN: ClassVar[ModuleType]
    CHANNEL: ClassVar[str]

    # the bridge's hooks are the rig's (the model's come first in the order of bases)
    _run = BridgeMachine._run
    _settle = BridgeMachine._settle
    _restart = BridgeMachine._restart

    def __init__(self) -> None:
        self.fake: Any = None
        self.clock = VirtualTime()
        super().__init__()

    async def _open_fake(self) -> Any:
        raise NotImplementedError

    def _channel_block(self) -> dict[str, Any]:
        raise NotImplementedError

    async def _start(self, **extra: Any) -> Rig:
        if self.fake is None:
            self.fake = await self._open_fake()
        rig = Rig(
            self.state_dir,
            host=memory_host(self.PLUGIN),
            channels={self.CHANNEL: {**self._channel_block(), "type": self.CHANNEL}},
            outbox_options={"clock": self.clock.clock, "sleep": self.clock.sleep},
            **extra,
        )
        return await rig.__aenter__()

    def _new_agent(self, session: str, decide: Callable[[Any], str | None]) -> LocalAgent:
        agent: LocalAgent = self.rig.agent(session, decide=decide)
        return agent

    def _thread_of(self, k: int) -> str | None:
        agent = self.sessions[k].agent
        record = self.rig.bridge.sessions.find(agent.source, agent.session)
        if record is None:
            return None
        thread: str | None = self.rig.bridge.sessions.thread_id(self.CHANNEL, record.id)
        return thread

    async def _idle(self) -> None:
        await self.rig.settle()

    def _restored(self) -> None:
        """Put back what the fake changed for the SDK (its endpoints), after teardown."""

    def teardown(self) -> None:
        try:
            self._run(self.rig.stop())
            self._run(self.clock.close())
            if self.fake is not None:
                self._run(self.fake.__aexit__(None, None, None))
        finally:
            self._restored()
            self.loop.close()
            self.tmp.cleanup()


def machine_settings(examples: int, steps: int) -> settings:
    """A state machine's settings: `examples` runs of up to `steps` steps each, or as many
    runs as `MODEL_EXAMPLES` says (a longer bug hunt by hand)."""
    return settings(
        max_examples=int(os.environ.get("MODEL_EXAMPLES", examples)),
        stateful_step_count=steps,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
