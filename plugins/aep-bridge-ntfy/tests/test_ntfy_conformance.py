"""The channel contract's conformance suite, run against a real HTTP round trip.

The adapter publishes to a fake ntfy server over a loopback socket; the probe reads the topic
as a phone would and taps buttons by sending the action's HTTP request to the bridge side,
where the adapter's routes are mounted as the bridge mounts them. `restart` stops the adapter
and starts a new one on the same core, server and address, as a bridge restart does.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from ntfy_probe import NtfyProbe
from support import AdapterFactory

from aep_bridge import ChannelAdapter, ChannelUser, PermissionOption, PermissionRequest, Resolution
from aep_bridge import ResolutionStatus as Status
from aep_bridge.testing import ChannelConformance, FakeCore, Harness

#: every press from the topic is reported as the configured identity (default "ntfy")
NTFY_USER = ChannelUser(id="ntfy", name="ntfy")


class TestNtfyConformance(ChannelConformance):
    @pytest.fixture
    async def harness(
        self, make_adapter: AdapterFactory, core: FakeCore, probe: NtfyProbe
    ) -> AsyncIterator[Harness]:
        adapter = await make_adapter()

        async def restart() -> ChannelAdapter:
            await adapter.stop()
            return await make_adapter()

        yield Harness(adapter, core, probe, approver=NTFY_USER, restart=restart)
        await adapter.stop()

    async def test_presses_by_anyone_go_to_the_core_which_decides(self, harness: Harness) -> None:
        """Replaces the suite's version, which presses as `stranger-99` and expects that id.

        ntfy does not say who tapped a button: anyone subscribed to the topic taps as the
        topic's `identity`. What the suite guards still holds and is checked here: the adapter
        does not filter presses; even one the core will refuse reaches the core.
        """
        h = harness
        await self._thread(h)
        h.core.next_resolution = Resolution(status=Status.NOT_ALLOWED)
        request = PermissionRequest(
            id="c8Qb",
            title="claude-code wants to run Bash",
            description="rm -rf build/",
            options=(PermissionOption(id="o1", label="Allow", is_allow=True),),
        )
        card = await self._card(h, request)
        stranger = ChannelUser(id="stranger-99", name="Mallory")
        await h.probe.press(card, card.buttons[0], stranger)
        await self._wait_for_press(h, 1)
        press = h.core.presses[-1]
        assert (press.card_id, press.answer, press.via) == ("c8Qb", 0, "button")
        assert press.user.id == NTFY_USER.id
