"""aep-bridge: watch and steer AI coding agents from chat.

This module is the public API for channel plugins: the adapter contract, its types, the
hook markers, and the helpers every channel needs. Every name a hook or a contract method
hands a plugin is exported here (`Event` for vendor rendering, `ToolCall`, `ToolOutcome` and
`ToolView` for tool rendering, `BridgeView` for the lifecycle hooks, Starlette's `BaseRoute`
for routes, the `Setup*` types for setup wizards, `blocks_html` for a page in a browser
(`HtmlRenderer` for a platform's HTML built on it),
`visible` for text bound for a terminal).
A channel imports only from here, from `aep_bridge.markup` (the message model: the blocks
of `OutgoingMessage.blocks`), and from `aep_bridge.testing` in its tests.
"""

import importlib
from typing import TYPE_CHECKING, Any

# first: in the `aep-bridge` command, Ctrl-C during the imports below ends it in one line
from . import _startup  # noqa: F401

if TYPE_CHECKING:  # what type checkers see; at run time each name is imported on first use
    from starlette.routing import BaseRoute

    from . import markup
    from .aep.envelope import Event
    from .contract.adapter import (
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
    from .contract.hookspecs import hookimpl
    from .contract.markup_html import HtmlRenderer, blocks_html
    from .contract.preview import PreviewDialect
    from .contract.types import (
        OUTGOING_KINDS,
        AgentCommand,
        Attachment,
        CallKind,
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
        Posted,
        RateLimit,
        RateLimited,
        RateLimits,
        Resolution,
        ResolutionStatus,
        SignedPress,
    )
    from .contract.wizard import SetupContext, SetupError, SetupIO, SetupOption, SetupWizard
    from .markup import Blocks
    from .text.terminal import visible
    from .text.text import measure, split_text
    from .toolkit.cards import CardKeys, CardRecords, SessionThreads, command_menu
    from .toolkit.http import read_body
    from .toolkit.limits import wait_seconds
    from .toolkit.preview import (
        BARE_URL,
        HEADS_UP_ICONS,
        HEADS_UP_QUESTION,
        MESSAGE_ICONS,
        OUTCOME_ICONS,
        TOOL_ICONS,
        InlineHtml,
        SentPreview,
        autolinked,
        button_rows,
        expiry_time,
        heads_up_icon,
        message_icon,
        outcome_icon,
    )
    from .toolkit.runtime import Once, Tasks
    from .toolkit.setup import (
        PAIRING_ATTEMPTS,
        TOKEN_TRIES,
        DoctorRun,
        PairingCode,
        PairingVerdict,
        SetupToken,
        approver_option,
        ask_choice,
        ask_number,
        ask_token,
        check_token,
        check_with_doctor,
        clean_error,
        doctor_fail,
        doctor_ok,
        given_approvers,
        human_duration,
        keep_tokens,
        number_problem,
        pair_from,
        poll_times,
        scrub_token,
        tilde,
        token_env_option,
        url_problem,
        wait_option,
        wait_setup_option,
        wait_until,
        write_channel_block,
    )
    from .toolkit.text import (
        LINE_BREAK,
        SpanMark,
        break_ticks,
        indent_rest,
        keep_end,
        link_target,
        marked,
        one_line,
        plan_body,
        split_closing,
        split_to_fit,
        table_text,
    )
    from .tools import ToolCall, ToolOutcome, ToolView

__version__ = "0.1.0"

#: where each public name lives. Importing them lazily keeps `import aep_bridge` cheap, so
#: `aep-bridge hook` (run by the agent on every hook, which waits on it) starts in
#: milliseconds instead of the half second the whole API takes to import.
_HOMES: dict[str, tuple[str, ...]] = {
    "starlette.routing": ("BaseRoute",),
    ".contract.adapter": (
        "CONTRACT_VERSION",
        "DEFAULT_SIGNATURE_TTL",
        "AdapterFactory",
        "BridgeCore",
        "BridgeView",
        "ChannelAdapter",
        "ChannelRegistration",
        "ChannelState",
        "ContractMismatch",
    ),
    ".aep.envelope": ("Event",),
    ".contract.hookspecs": ("hookimpl",),
    ".markup": ("Blocks",),
    ".contract.markup_html": (
        "HtmlRenderer",
        "blocks_html",
    ),
    ".contract.preview": ("PreviewDialect",),
    ".text.terminal": ("visible",),
    ".text.text": (
        "measure",
        "split_text",
    ),
    ".toolkit.setup": (
        "PAIRING_ATTEMPTS",
        "TOKEN_TRIES",
        "DoctorRun",
        "PairingCode",
        "PairingVerdict",
        "SetupToken",
        "approver_option",
        "ask_choice",
        "ask_number",
        "ask_token",
        "check_token",
        "check_with_doctor",
        "clean_error",
        "doctor_fail",
        "doctor_ok",
        "given_approvers",
        "human_duration",
        "keep_tokens",
        "number_problem",
        "pair_from",
        "poll_times",
        "scrub_token",
        "tilde",
        "token_env_option",
        "url_problem",
        "wait_option",
        "wait_setup_option",
        "wait_until",
        "write_channel_block",
    ),
    ".toolkit.preview": (
        "BARE_URL",
        "HEADS_UP_ICONS",
        "HEADS_UP_QUESTION",
        "MESSAGE_ICONS",
        "OUTCOME_ICONS",
        "TOOL_ICONS",
        "InlineHtml",
        "SentPreview",
        "autolinked",
        "button_rows",
        "expiry_time",
        "heads_up_icon",
        "message_icon",
        "outcome_icon",
    ),
    ".toolkit.cards": (
        "CardKeys",
        "CardRecords",
        "SessionThreads",
        "command_menu",
    ),
    ".toolkit.http": ("read_body",),
    ".toolkit.limits": ("wait_seconds",),
    ".toolkit.runtime": (
        "Once",
        "Tasks",
    ),
    ".toolkit.text": (
        "LINE_BREAK",
        "SpanMark",
        "break_ticks",
        "indent_rest",
        "keep_end",
        "link_target",
        "marked",
        "one_line",
        "plan_body",
        "split_closing",
        "split_to_fit",
        "table_text",
    ),
    ".tools": (
        "ToolCall",
        "ToolOutcome",
        "ToolView",
    ),
    ".contract.types": (
        "OUTGOING_KINDS",
        "AgentCommand",
        "Attachment",
        "CallKind",
        "ChannelCapabilities",
        "ChannelConfig",
        "ChannelError",
        "ChannelUser",
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
        "Posted",
        "RateLimit",
        "RateLimited",
        "RateLimits",
        "Resolution",
        "ResolutionStatus",
        "SignedPress",
    ),
    ".contract.wizard": (
        "SetupContext",
        "SetupError",
        "SetupIO",
        "SetupOption",
        "SetupWizard",
    ),
}
_HOME_OF: dict[str, str] = {name: home for home, names in _HOMES.items() for name in names}
_SUBMODULES = frozenset({"markup"})


def __getattr__(name: str) -> Any:
    """Import a public name on first use (PEP 562), and keep it for the next."""
    home = _HOME_OF.get(name)
    if home is None:
        if name not in _SUBMODULES:
            raise AttributeError(f"module 'aep_bridge' has no attribute {name!r}")
        value: Any = importlib.import_module(f".{name}", __name__)
    else:
        value = getattr(
            importlib.import_module(home, __name__ if home.startswith(".") else None), name
        )
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__all__ = [
    "BARE_URL",
    "CONTRACT_VERSION",
    "DEFAULT_SIGNATURE_TTL",
    "HEADS_UP_ICONS",
    "HEADS_UP_QUESTION",
    "LINE_BREAK",
    "MESSAGE_ICONS",
    "OUTCOME_ICONS",
    "OUTGOING_KINDS",
    "PAIRING_ATTEMPTS",
    "TOKEN_TRIES",
    "TOOL_ICONS",
    "AdapterFactory",
    "AgentCommand",
    "Attachment",
    "BaseRoute",
    "Blocks",
    "BridgeCore",
    "BridgeView",
    "CallKind",
    "CardKeys",
    "CardRecords",
    "ChannelAdapter",
    "ChannelCapabilities",
    "ChannelConfig",
    "ChannelError",
    "ChannelRegistration",
    "ChannelState",
    "ChannelUser",
    "ContractMismatch",
    "DoctorCheck",
    "DoctorRun",
    "Event",
    "FormChoice",
    "FormField",
    "HtmlRenderer",
    "IncomingMessage",
    "InlineHtml",
    "NotificationMessage",
    "Once",
    "OutcomeStatus",
    "OutgoingKind",
    "OutgoingMessage",
    "PairingCode",
    "PairingVerdict",
    "PermissionOption",
    "PermissionOutcome",
    "PermissionRequest",
    "Posted",
    "PreviewDialect",
    "RateLimit",
    "RateLimited",
    "RateLimits",
    "Resolution",
    "ResolutionStatus",
    "SentPreview",
    "SessionThreads",
    "SetupContext",
    "SetupError",
    "SetupIO",
    "SetupOption",
    "SetupToken",
    "SetupWizard",
    "SignedPress",
    "SpanMark",
    "Tasks",
    "ToolCall",
    "ToolOutcome",
    "ToolView",
    "__version__",
    "approver_option",
    "ask_choice",
    "ask_number",
    "ask_token",
    "autolinked",
    "blocks_html",
    "break_ticks",
    "button_rows",
    "check_token",
    "check_with_doctor",
    "clean_error",
    "command_menu",
    "doctor_fail",
    "doctor_ok",
    "expiry_time",
    "given_approvers",
    "heads_up_icon",
    "hookimpl",
    "human_duration",
    "indent_rest",
    "keep_end",
    "keep_tokens",
    "link_target",
    "marked",
    "markup",
    "measure",
    "message_icon",
    "number_problem",
    "one_line",
    "outcome_icon",
    "pair_from",
    "plan_body",
    "poll_times",
    "read_body",
    "scrub_token",
    "split_closing",
    "split_text",
    "split_to_fit",
    "table_text",
    "tilde",
    "token_env_option",
    "url_problem",
    "visible",
    "wait_option",
    "wait_seconds",
    "wait_setup_option",
    "wait_until",
    "write_channel_block",
]
