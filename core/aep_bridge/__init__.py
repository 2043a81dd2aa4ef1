"""aep-bridge: watch and steer AI coding agents from chat.

This module is the public API for channel plugins: the adapter contract, its types, the
hook markers, and the helpers every channel needs. A channel imports only from here (and
`aep_bridge.testing` in its tests).
"""

from .adapter import (
    CONTRACT_VERSION,
    AdapterFactory,
    BridgeCore,
    ChannelAdapter,
    ChannelState,
    ContractMismatch,
)
from .hookspecs import hookimpl
from .plugins import ChannelRegistration
from .text import measure, split_text
from .types import (
    OUTGOING_KINDS,
    AgentCommand,
    Attachment,
    ChannelCapabilities,
    ChannelConfig,
    ChannelError,
    ChannelUser,
    DoctorCheck,
    FormChoice,
    FormField,
    IncomingMessage,
    NotificationMessage,
    OutcomeStatus,
    OutgoingKind,
    OutgoingMessage,
    PermissionOption,
    PermissionOutcome,
    PermissionRequest,
    RateLimit,
    RateLimited,
    RateLimits,
    Resolution,
    ResolutionStatus,
)

__version__ = "0.1.0"

__all__ = [
    "CONTRACT_VERSION",
    "OUTGOING_KINDS",
    "AdapterFactory",
    "AgentCommand",
    "Attachment",
    "BridgeCore",
    "ChannelAdapter",
    "ChannelCapabilities",
    "ChannelConfig",
    "ChannelError",
    "ChannelRegistration",
    "ChannelState",
    "ChannelUser",
    "ContractMismatch",
    "DoctorCheck",
    "FormChoice",
    "FormField",
    "IncomingMessage",
    "NotificationMessage",
    "OutcomeStatus",
    "OutgoingKind",
    "OutgoingMessage",
    "PermissionOption",
    "PermissionOutcome",
    "PermissionRequest",
    "RateLimit",
    "RateLimited",
    "RateLimits",
    "Resolution",
    "ResolutionStatus",
    "__version__",
    "hookimpl",
    "measure",
    "split_text",
]
