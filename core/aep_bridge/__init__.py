"""aep-bridge: watch and steer AI coding agents from chat."""

__version__ = "0.1.0"
