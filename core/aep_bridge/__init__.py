"""aep-bridge: watch and steer AI coding agents from chat.

This module is the public API for channel plugins: the adapter contract, its types, the
hook markers, and the helpers every channel needs. Every name a hook or a contract method
hands a plugin is exported here (`Event` for vendor rendering, `ToolCall`, `ToolOutcome` and
`ToolView` for tool rendering, `BridgeView` for the lifecycle hooks, Starlette's `BaseRoute`
for routes, the `Setup*` types for setup wizards).
A channel imports only from here, from `aep_bridge.markup` (the message model: the blocks
of `OutgoingMessage.blocks`), and from `aep_bridge.testing` in its tests.
"""

# first: in the `aep-bridge` command, Ctrl-C during the imports below ends it in one line
from . import _startup  # noqa: F401

# isort: split
from starlette.routing import BaseRoute

from . import markup
from .adapter import (
    CONTRACT_VERSION,
    DEFAULT_SIGNATURE_TTL,
    AdapterFactory,
    BridgeCore,
    BridgeView,
    ChannelAdapter,
    ChannelRegistration,
    ChannelState,
    ContractMismatch,
)
from .aep.envelope import Event
from .hookspecs import hookimpl
from .markup import Blocks
from .preview import PreviewDialect
from .text import measure, split_text
from .tools import ToolCall, ToolOutcome, ToolView
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
    SignedPress,
)
from .wizard import SetupContext, SetupError, SetupIO, SetupOption, SetupWizard

__version__ = "0.1.0"

__all__ = [
    "CONTRACT_VERSION",
    "DEFAULT_SIGNATURE_TTL",
    "OUTGOING_KINDS",
    "AdapterFactory",
    "AgentCommand",
    "Attachment",
    "BaseRoute",
    "Blocks",
    "BridgeCore",
    "BridgeView",
    "ChannelAdapter",
    "ChannelCapabilities",
    "ChannelConfig",
    "ChannelError",
    "ChannelRegistration",
    "ChannelState",
    "ChannelUser",
    "ContractMismatch",
    "DoctorCheck",
    "Event",
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
    "PreviewDialect",
    "RateLimit",
    "RateLimited",
    "RateLimits",
    "Resolution",
    "ResolutionStatus",
    "SetupContext",
    "SetupError",
    "SetupIO",
    "SetupOption",
    "SetupWizard",
    "SignedPress",
    "ToolCall",
    "ToolOutcome",
    "ToolView",
    "__version__",
    "hookimpl",
    "markup",
    "measure",
    "split_text",
]
