"""The core's own test doubles, apart from the public kit (`aep_bridge.testing`), which is
what a channel plugin's tests import.

- `LocalAgent`: an agent on a `Hub`, in-process; it emits a session's events and acknowledges
  the commands it is sent. The core's tests, the benchmarks and the model tests run it on their
  hub. Its code is the kit's `ScriptedAgent` (`aep_bridge.testing.agent`): the public `bridge`
  fixture hands plugin authors the same agent, so the class cannot leave the package; this is
  the core's name for it.
- `VirtualTime`: a clock and a sleep on which time passes only when every task waits, for the
  outbox's rate limits in no time. Its code is `aep_bridge.commands.simtime`, because
  `aep-bridge preview` replays a recording on it; the kit also exports it for plugin authors.
"""

from __future__ import annotations

from aep_bridge.commands.simtime import VirtualTime
from aep_bridge.testing.agent import ScriptedAgent

LocalAgent = ScriptedAgent

__all__ = ["LocalAgent", "VirtualTime"]
