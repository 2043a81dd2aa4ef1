"""The conformance kit for channel plugins.

- `FakeCore`: a `BridgeCore` that records what adapters report, refuses non-approvers as the
  real core does, and answers the rest as told.
- `MemoryChannel`: an in-memory channel, for testing the core without any platform.
- `ScriptedIO`: the person at a setup wizard, answering from a script; `run_setup` runs a
  wizard as `aep-bridge setup NAME ARGS` does; `setup_home` gives its test a home of its own.
- `ChannelConformance`: the suite every channel runs against its own adapter and its own fake
  platform. Subclass it in your tests and provide a `harness` fixture:

      class TestMyChannel(ChannelConformance):
          @pytest.fixture
          async def harness(self):
              async with my_fake_platform() as fake:
                  core = FakeCore()
                  adapter = MyChannel(core, MyConfig(name="mine", approvers=["u1"], ...))
                  await adapter.start()
                  yield Harness(adapter, core, MyProbe(fake), approver=ChannelUser(id="u1"))
                  await adapter.stop()

  The probe is the test's eyes and hands on the fake platform: what a person would see
  (threads, messages as displayed, buttons) and what they can do (press, reply). See
  docs/writing-a-channel.md.

It needs pytest and pytest-asyncio, which a plugin's tests have anyway; nothing here runs in
the bridge itself. The kit's modules: `conformance` (the suite and its `Harness`), `views`
(what a probe shows, and `PlatformProbe`), `memory` (`FakeCore`, `MemoryChannel` and their
parts), `setup_kit` (`ScriptedIO`, `setup_home`), `platform` (`InLoopServer`, `FakePlatform`, the
limit windows: the base of a fake platform server), `e2e` (`aep-bridge run` against your
fake: `end_to_end`, `EndToEnd`, `BridgeProcess`), `agent` and `fixture` (the `bridge` fixture
and its `ScriptedAgent`). `VirtualTime` lives in `aep_bridge.commands.simtime` (`aep-bridge preview`
runs on it) and is exported here for a plugin's outbox tests. Import every name from
`aep_bridge.testing` (or `aep_bridge.testing.fixture`), not from the modules; `logs`
(`library_logs_nothing_wrong`: your SDK logged no error) is exported here too, while `model`
(`ChannelModel`, a Hypothesis state machine) and `flood` are imported as modules.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ..commands.simtime import VirtualTime
from .conformance import SESSION, ChannelConformance, Harness, sample_message
from .logs import library_logs_nothing_wrong, logged_wrong
from .memory import FakeCore, MemoryChannel, MemoryProbe, MemoryState, Press, Refusal
from .setup_kit import ScriptedIO, SetupHome, setup_home
from .views import ButtonView, MessageView, PlatformProbe, ThreadView

if TYPE_CHECKING:
    from ..commands.setup_command import run_setup
    from .e2e import PERMISSION_ASK, BridgeProcess, EndToEnd, end_to_end
    from .platform import (
        FakePlatform,
        FixedWindow,
        InLoopServer,
        ManualClock,
        RecordedCall,
        SlidingWindow,
        Window,
        retry_after_seconds,
    )

#: what is imported when first used: the end-to-end harness runs `aep-bridge` and an agent,
#: the fake platform's base a web server (uvicorn), `run_setup` (`aep-bridge setup`) the
#: config and the plugin host; a test that loads the kit (the `bridge` fixture's plugin,
#: loaded by every pytest run) needs none of them
_LAZY = {
    "..commands.setup_command": ("run_setup",),
    ".e2e": ("PERMISSION_ASK", "BridgeProcess", "EndToEnd", "end_to_end"),
    ".platform": (
        "FakePlatform",
        "FixedWindow",
        "InLoopServer",
        "ManualClock",
        "RecordedCall",
        "SlidingWindow",
        "Window",
        "retry_after_seconds",
    ),
}


def __getattr__(name: str) -> Any:
    for module, names in _LAZY.items():
        if name in names:
            return getattr(importlib.import_module(module, __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "PERMISSION_ASK",
    "SESSION",
    "BridgeProcess",
    "ButtonView",
    "ChannelConformance",
    "EndToEnd",
    "FakeCore",
    "FakePlatform",
    "FixedWindow",
    "Harness",
    "InLoopServer",
    "ManualClock",
    "MemoryChannel",
    "MemoryProbe",
    "MemoryState",
    "MessageView",
    "PlatformProbe",
    "Press",
    "RecordedCall",
    "Refusal",
    "ScriptedIO",
    "SetupHome",
    "SlidingWindow",
    "ThreadView",
    "VirtualTime",
    "Window",
    "end_to_end",
    "library_logs_nothing_wrong",
    "logged_wrong",
    "retry_after_seconds",
    "run_setup",
    "sample_message",
    "setup_home",
]
