"""The channel contract's conformance kit, against the real mautrix and the fake homeserver
over loopback (no rate limit here: the kit calls the adapter directly, without the core's
outbox that keeps it; the end-to-end tests keep Synapse's)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from aep_bridge import ChannelUser, PermissionOption, PermissionRequest
from aep_bridge.testing import ChannelConformance, FakeCore, Harness
from aep_bridge_matrix import MatrixChannel

from .fake_homeserver import ADA, STRANGER, FakeHomeserver, Limits
from .probe import MatrixProbe, make_adapter, make_room

APPROVER = ChannelUser(id=ADA, name=ADA)


class TestMatrixConformance(ChannelConformance):
    @pytest.fixture
    async def harness(self) -> AsyncIterator[Harness]:
        async with FakeHomeserver(limits=Limits.loose()) as fake:
            room = make_room(fake)
            core = FakeCore()
            adapter = make_adapter(fake, core, room)
            core.attach(adapter)
            await adapter.start()
            running = [adapter]

            async def restart() -> MatrixChannel:
                await running[-1].stop()
                again = make_adapter(fake, core, room)
                core.attach(again)
                await again.start()
                running.append(again)
                return again

            try:
                yield Harness(
                    adapter, core, MatrixProbe(fake, core, room), APPROVER, restart=restart
                )
            finally:
                for each in running:
                    await each.stop()
            assert fake.violations == []

    async def test_presses_by_anyone_go_to_the_core_which_decides(self, harness: Harness) -> None:
        """The kit's stranger is `stranger-99`, no Matrix id; here it is a member of the room
        who is no approver: the reaction reaches the core, which refuses it."""
        h = harness
        await self._thread(h)
        request = PermissionRequest(
            id="c8Qb",
            title="claude-code wants to run Bash",
            options=(PermissionOption(id="o1", label="Allow", is_allow=True),),
        )
        card = await self._card(h, request)
        await h.probe.press(card, card.buttons[0], ChannelUser(id=STRANGER))
        assert [r.user.id for r in h.core.refused] == [STRANGER]
        assert h.core.presses[-1].user.id == STRANGER
