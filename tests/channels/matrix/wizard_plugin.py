"""A test plugin offering `aep-bridge setup matrix` and the matrix channel type's doctor, until
the Matrix channel's own `__init__` registers them (its `MatrixChannel.doctor()` is
`diagnose(self.config)`, as here): the setup tests find the wizard through the hook, as the
core does, and `check_with_doctor` runs the same checks `aep-bridge doctor` will."""

from __future__ import annotations

from typing import Any

from aep_bridge import ChannelCapabilities, ChannelRegistration, DoctorCheck, hookimpl
from aep_bridge_matrix.config import MatrixConfig
from aep_bridge_matrix.doctor import diagnose
from aep_bridge_matrix.setup import MatrixSetup


class DoctorOnly:
    """The part of the channel `aep-bridge doctor` builds and calls."""

    def __init__(self, core: Any, config: MatrixConfig) -> None:
        self.config = config

    async def doctor(self) -> list[DoctorCheck]:
        return await diagnose(self.config)


@hookimpl
def register_channels() -> list[ChannelRegistration]:
    capabilities = ChannelCapabilities(
        threads=True,
        buttons=False,
        edits=True,
        text_answers=True,
        forms=False,
        max_message_length=32_000,
    )
    return [
        ChannelRegistration(
            name="matrix",
            factory=DoctorOnly,  # type: ignore[arg-type]
            capabilities=capabilities,
            config_model=MatrixConfig,
            description="a Matrix room (the doctor only, for the setup tests)",
        )
    ]


@hookimpl
def register_setup_wizards() -> list[MatrixSetup]:
    return [MatrixSetup()]
