"""`aep-bridge run --config` as a child process, for tests that run the real product: the
testing kit's (`aep_bridge.testing.e2e`), run from this checkout."""

from __future__ import annotations

from pathlib import Path

from aep_bridge.testing.e2e import SIGN_IN, free_port, stored, write_config
from aep_bridge.testing.e2e import BridgeProcess as _BridgeProcess

ROOT = Path(__file__).resolve().parents[1]


class BridgeProcess(_BridgeProcess):
    """The kit's `BridgeProcess` in this checkout (its test modules importable as plugins)."""

    def __init__(self, config: Path, log: Path, *, plugins: str | None = None) -> None:
        super().__init__(config, log, plugins=plugins, root=ROOT)


__all__ = ["ROOT", "SIGN_IN", "BridgeProcess", "free_port", "stored", "write_config"]
