"""A channel plugin (for `AEP_BRIDGE_PLUGINS`) whose start fails with an error that quotes
its secret, a URL with credentials and a bot URL: what a careless library does."""

from __future__ import annotations

from pydantic import SecretStr

from aep_bridge import hookimpl
from aep_bridge.contract.adapter import ChannelRegistration
from aep_bridge.contract.types import ChannelConfig
from aep_bridge.testing import MemoryChannel


class LeakyConfig(ChannelConfig):
    secret: SecretStr


class LeakyChannel(MemoryChannel):
    """Fails to start, quoting its secret."""

    name = "leaky"
    config_model = LeakyConfig

    async def start(self) -> None:
        secret = self.config.secret.get_secret_value()  # type: ignore[attr-defined]
        raise RuntimeError(
            f"cannot log in with {secret} at https://admin:pa55word-x@relay.example/bot"
            "123456:AAsecret-bot-token/getMe"
        )


@hookimpl
def register_channels() -> list[ChannelRegistration]:
    return [ChannelRegistration.of(LeakyChannel)]
