"""Configuration: one JSON file, validated with errors that name the key and the fix.

The top level is `BridgeConfig`. Each block under `channels` is validated by the model its
plugin declares (`ChannelAdapter.config_model`), so a third-party channel's options are
checked as strictly as the built-in ones. Strings may say `${VAR}` to take a value from the
environment, so tokens need not sit in the file; `$${` writes a literal `${`.

Without a file the bridge runs on embedded defaults: the AEP endpoint on 127.0.0.1:8787, the
console channel and the web page.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Final, Literal
from urllib.parse import parse_qsl, urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from ..aep.errors import InvalidFilter
from ..aep.filters import Filter
from ..aep.registry import Capture
from ..contract.adapter import ChannelRegistration
from ..contract.plugins import PluginHost
from ..contract.types import ChannelConfig
from ..intake.auth import split_host
from ..intake.proxy import networks
from ..text.terminal import visible
from .config_errors import explain
from .people import OWNER, PersonConfig, approver_names
from .people import problems as people_problems

#: the most approvers a question may need (more is a typo, and could never be met)
MAX_APPROVALS: Final = 10
#: envelope attributes that change from one event of a session to the next
PER_EVENT_ATTRIBUTES: Final = frozenset(
    {"id", "type", "subject", "run", "step", "cause", "severity", "capture"}
)
#: what the bridge keeps of every session, so a route's `approvers` apply to its session
#: control as to its questions
SESSION_ATTRIBUTES: Final = frozenset({"agent", "source", "session"})

CONFIG_ENV: Final = "AEP_BRIDGE_CONFIG"
#: the file name under `$XDG_CONFIG_HOME/aep-bridge` (`default_config_path`)
CONFIG_FILE: Final = "config.json"
DEFAULT_HOST: Final = "127.0.0.1"
DEFAULT_PORT: Final = 8787

#: What runs with no config file at all.
EMBEDDED_DEFAULTS: Final[dict[str, Any]] = {
    "listen": {"host": DEFAULT_HOST, "port": DEFAULT_PORT},
    "channels": {"console": {"approvers": ["local"]}, "web": {"approvers": ["local"]}},
}

#: a host name, an IPv4 address or a bracketed IPv6 one (`listen.allowed_hosts`)
_HOST_NAME: Final = re.compile(r"[A-Za-z0-9_]([A-Za-z0-9_.-]*[A-Za-z0-9_.])?|\[[0-9A-Fa-f:.]+\]")
_VARIABLE: Final = re.compile(r"\$\$\{|\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class ListenConfig(BaseModel):
    """Where the bridge serves its AEP endpoint (and the web channel)."""

    model_config = ConfigDict(extra="forbid")

    host: str = DEFAULT_HOST
    port: int = Field(default=DEFAULT_PORT, ge=1, le=65535)
    allowed_hosts: list[str] = Field(
        default_factory=list,
        description="host names (no port) a request may give as Host besides the loopback "
        "names and the listen address; a web page on them is the bridge's own origin",
    )
    public_url: str | None = Field(
        default=None,
        description="the bridge's address as agents and browsers reach it through a reverse "
        "proxy, such as https://bridge.example.com: its host and origin are the bridge's own, "
        "and the web page's links and the URLs the bridge prints use it",
    )
    trusted_proxies: list[str] = Field(
        default_factory=list,
        description="addresses or networks (127.0.0.1, 10.0.0.0/8) of the reverse proxies whose "
        "X-Forwarded-For/-Proto/-Host and Forwarded headers are believed; from any other "
        "peer they are ignored",
    )
    max_connections: int = Field(
        default=1000,
        ge=1,
        description="connections the endpoint holds at once; more are answered 503 and "
        "closed (lowered to stay below the process's open-file limit)",
    )
    request_head_timeout: float = Field(
        default=10.0,
        gt=0,
        le=30,
        description="seconds a new connection has to send its request head; one idle or "
        "slower is closed",
    )

    @field_validator("allowed_hosts")
    @classmethod
    def _host_names(cls, names: list[str]) -> list[str]:
        for name in names:
            if not _HOST_NAME.fullmatch(name):
                raise ValueError(
                    f"{name!r} is not a host name: write a name or address alone, "
                    "with no scheme, port or path"
                )
        return names

    @field_validator("public_url")
    @classmethod
    def _public_url(cls, url: str | None) -> str | None:
        """An origin (scheme, host, optional port), never a path, credentials, a query or a
        fragment: the bridge compares browsers' `Origin` with it and prints it in links, and
        its pages link from the root."""
        if url is None:
            return None
        url = url.rstrip("/")
        scheme, sep, rest = url.partition("://")
        authority = rest.split("/", 1)[0]
        if (
            not sep
            or scheme.lower() not in ("http", "https")
            or not authority
            or "@" in authority
            or any(c in rest for c in "?#/ ")
            or split_host(authority) is None
        ):
            raise ValueError(
                f"{url!r} is not a public URL: write the scheme and host the proxy serves, "
                "such as https://bridge.example.com (no user, path, query or fragment: the "
                "proxy serves the bridge at the root of a name)"
            )
        return url

    @field_validator("trusted_proxies")
    @classmethod
    def _proxies(cls, entries: list[str]) -> list[str]:
        networks(entries)  # raises naming the entry that is not an address or network
        return entries


class RelaySourceConfig(BaseModel):
    """An external AEP relay the bridge consumes from, as a WebSocket consumer."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field(
        pattern=r"^wss?://",
        description="the relay's WebSocket URL, such as wss://relay.example/socket",
    )
    token: SecretStr | None = Field(default=None, description="the relay's bearer token")
    filter: dict[str, Any] | None = Field(
        default=None, description="an attr-match filter: which events to take (default: all)"
    )
    capture: Capture | None = Field(
        default=None, description="a capture ceiling the relay applies before sending"
    )

    @field_validator("url")
    @classmethod
    def _no_credentials(cls, url: str) -> str:
        """A credential in the URL would be logged and shown wherever the URL is (the
        relay's source name, `aep-bridge status`): it belongs in `token`. The message never
        repeats it."""
        parts = urlsplit(url)
        if "@" in parts.netloc:
            where = "a user name or password (user:pass@)"
        elif any(key.lower() in _URL_SECRETS for key, _ in parse_qsl(parts.query, True)):
            where = "a token in its query (?token=)"
        else:
            return url
        raise ValueError(
            f"carries {where}: remove it from the URL and put the relay's token in this "
            "relay's `token` field instead"
        )


#: query parameters that carry a secret (`RelaySourceConfig.url` refuses them)
_URL_SECRETS: Final = frozenset({"token", "access_token", "auth", "password", "api_key"})


class LogSourceConfig(BaseModel):
    """A folder of session logs (`{root}/{agent}/{session}.jsonl`) to follow."""

    model_config = ConfigDict(extra="forbid")

    root: str = Field(description="the folder agents write their session logs to")
    glob: str = Field(default="*/*.jsonl", description="which files under root are logs")


class IntakeConfig(BaseModel):
    """The embedded AEP endpoint, and the other places events come from."""

    model_config = ConfigDict(extra="forbid")

    replay_buffer: int = Field(
        default=1000, ge=1, description="events kept per session for replay and resume"
    )
    max_event_bytes: int = Field(default=1024 * 1024, ge=1024, description="largest event accepted")
    max_body_bytes: int = Field(
        default=16 * 1024 * 1024, ge=1024, description="largest POST /events body accepted"
    )
    max_queued_bytes: int = Field(
        default=4 * 1024 * 1024,
        ge=64 * 1024,
        description="bytes of events waiting for one WebSocket or SSE connection's "
        "subscriptions; past it the connection is dropped and resumes from its position",
    )
    max_replay_bytes: int = Field(
        default=128 * 1024 * 1024,
        ge=1024 * 1024,
        description="bytes of events the replay buffers keep on disk in all (state.db); past "
        "it the oldest go, ended sessions' first, and a consumer resuming from before what "
        "is left gets replay-exhausted",
    )
    replay_retention: float = Field(
        default=3600.0,
        ge=0,
        description="seconds an ended session's replay buffer is kept after its session.ended; "
        "0 drops it at the next flush",
    )
    open_on_loopback: bool = Field(
        default=False,
        description="accept events and consumers without the token while listening on a "
        "loopback address only; control always needs the token",
    )
    relays: list[RelaySourceConfig] = Field(
        default_factory=list, description="external AEP relays to consume from"
    )
    logs: list[LogSourceConfig] = Field(
        default_factory=list, description="session-log folders to follow (read-only sessions)"
    )


class RouteConfig(BaseModel):
    """Sessions whose first event matches `match` go to `channels`."""

    model_config = ConfigDict(extra="forbid")

    match: dict[str, Any] = Field(
        default_factory=dict,
        description="an attr-match filter on the session's first event, such as "
        '{"agent": "claude-code"}; {} matches every session',
    )
    channels: list[str] = Field(
        min_length=1, description="the channel names (keys under channels) the session goes to"
    )
    approvals: int = Field(
        default=1,
        ge=1,
        le=MAX_APPROVALS,
        description="how many distinct approvers every question of the route's sessions needs "
        "before its answer goes to the agent (the two-person rule); one deny ends it at once",
    )
    approvers: Literal["owner"] | Annotated[list[str], Field(min_length=1)] | None = Field(
        default=None,
        description="who may answer the questions of the route's sessions, instead of each "
        "channel's approvers and approver_roles: \"owner\" (the session's owner, by their "
        'identities under people), or a list of people\'s names that may hold "owner"',
    )

    places: dict[str, Annotated[str, Field(min_length=1)]] = Field(
        default_factory=dict,
        description="where on each of its channels the route's sessions go, by channel name: "
        "a Slack channel id, a Discord text channel id, instead of the channel's own (a team "
        "per channel, each with its own rate limits); a channel left out uses its own",
    )

    @field_validator("match")
    @classmethod
    def _valid_filter(cls, value: dict[str, Any]) -> dict[str, Any]:
        try:
            Filter.parse(value)
        except InvalidFilter as exc:
            raise ValueError(f"not an attr-match filter: {exc}") from None
        return value

    @model_validator(mode="after")
    def _session_wide_match(self) -> RouteConfig:
        """A route's approvals are found again for each question by matching the question
        itself: its match must name only what every event of a session carries alike."""
        varying = sorted(set(self.match) & PER_EVENT_ATTRIBUTES)
        if self.approvals > 1 and varying:
            raise ValueError(
                f"approvals above 1 need a match on what every event of a session shares "
                f"(agent, source, session or an extension), but it names {', '.join(varying)}: "
                "drop those keys or put approvals on a route without them"
            )
        other = sorted(set(self.match) - SESSION_ATTRIBUTES)
        if self.approvers is not None and other:
            raise ValueError(
                f"approvers need a match on what the bridge keeps of every session (agent, "
                f"source or session), but it names {', '.join(other)}: drop those keys or put "
                "approvers on a route without them"
            )
        return self


class ApprovalRule(BaseModel):
    """`attention.require_approvals[]`: permission requests whose tool and command match
    need `approvals` distinct approvers."""

    model_config = ConfigDict(extra="forbid")

    tool: str | None = Field(
        default=None, min_length=1, description='a glob on the tool\'s name, such as "Bash"'
    )
    command: str | None = Field(
        default=None,
        min_length=1,
        description='a glob on the command the tool would run, such as "git push --force*"',
    )
    approvals: int = Field(
        ge=1, le=MAX_APPROVALS, description="how many distinct approvers such a request needs"
    )

    @model_validator(mode="after")
    def _names_something(self) -> ApprovalRule:
        if self.tool is None and self.command is None:
            raise ValueError(
                'a rule needs "tool", "command" or both (a rule for every question is a '
                "route's approvals)"
            )
        return self


class RedactionConfig(BaseModel):
    """What is scrubbed from every text before it leaves the machine (docs/security.md)."""

    model_config = ConfigDict(extra="forbid")

    secret_env: list[str] = Field(
        default_factory=list,
        description="names of environment variables whose values are replaced by "
        "[REDACTED:secret] wherever they appear (the bridge's token and every secret field "
        "of this file, such as channel and relay tokens, are always included)",
    )
    pii: bool = Field(default=True, description="also replace e-mail addresses and the like")


class AttentionConfig(BaseModel):
    """How answers from chat reach their agent (docs/architecture.md, the attention loop)."""

    model_config = ConfigDict(extra="forbid")

    answer_hold: float = Field(
        default=300.0,
        ge=0,
        description="seconds an answer waits for its agent to reconnect when the agent is not "
        "connected (no-route), as after a restart of either; the request's expires_at ends "
        "the wait earlier; 0 opens the question again at once",
    )
    require_approvals: list[ApprovalRule] = Field(
        default_factory=list,
        description='permission requests that need several distinct approvers: each a "tool" '
        'and/or "command" glob and "approvals"; the highest count that applies wins (a '
        "route's approvals too)",
    )


class AwayConfig(BaseModel):
    """Away mode (issue 33, docs/agents.md#steer-from-your-phone): when a session is away,
    the agent daemon holds the agent's stop and asks the chat what next."""

    model_config = ConfigDict(extra="forbid")

    after_minutes: float | None = Field(
        default=None,
        gt=0,
        description="a session is away, without anyone switching it, once no prompt has been "
        "typed in its terminal for this many minutes; null (the default): only the switches "
        "(`aep-bridge away on`, /away, the web page) make a session away",
    )
    hold_minutes: float = Field(
        default=30.0,
        gt=0,
        le=60,
        description="how long the daemon holds an away agent's stop for an answer from the "
        "chat, at most 60 (the longest a hook waits: `aep-bridge install` writes the Stop "
        "hook's timeout above it); with no answer by then the agent stops",
    )


class StoreConfig(BaseModel):
    """What the store (`state_dir`/state.db) keeps of sessions that are over."""

    model_config = ConfigDict(extra="forbid")

    session_retention_days: float = Field(
        default=30.0,
        gt=0,
        description="days the records of an ended session (its threads, questions, answers, "
        "resume positions, and the channels' state about it) are kept; older ones are "
        "deleted at start and once a minute while the bridge runs, and a button of theirs "
        "still in a chat then answers that the question is unknown. A fraction of a day "
        "is allowed (a small disk, a test)",
    )
    dedupe_window: int = Field(
        default=200_000,
        ge=1000,
        description="how many event ids the bridge remembers so that an event that comes "
        "again (an emitter's retry, a relay's replay) is shown once, the oldest forgotten "
        "first: some 36 bytes each in state.db (7 MB at the default); an event that comes "
        "again after more than this many others may be shown twice",
    )


class AuditConfig(BaseModel):
    """The audit trail (`aep-bridge audit`, docs/security.md): how long it is kept."""

    model_config = ConfigDict(extra="forbid")

    retention_days: float = Field(
        default=365.0,
        gt=0,
        description="days a record of the audit trail (questions, answers, refused presses, "
        "instructions, tokens) is kept; older ones are deleted at start and once a minute "
        "while the bridge runs. Nothing else ever deletes or changes a record",
    )


AgentCapture = Literal["metadata", "redacted", "full"]


class AgentsConfig(BaseModel):
    """The agent daemon (`aep-bridge agentd`, docs/agents.md): what its events may carry
    out of the machine. It reads this file when it starts; its flags override it."""

    model_config = ConfigDict(extra="forbid")

    capture: AgentCapture = Field(
        default="metadata",
        description="the highest capture level of the agents' events other than attention.*: "
        "metadata (tool names and digests, not their arguments or results), redacted or full",
    )
    attention_capture: AgentCapture = Field(
        default="redacted",
        description="the highest capture level of attention.* (permission prompts, questions): "
        "redacted shows the person answering the prompt with secrets, paths and PII replaced",
    )


class BridgeConfig(BaseModel):
    """The whole file. Channel blocks stay raw here; `resolve_channels` checks them."""

    model_config = ConfigDict(extra="forbid")

    listen: ListenConfig = Field(default_factory=ListenConfig)
    intake: IntakeConfig = Field(default_factory=IntakeConfig)
    redaction: RedactionConfig = Field(default_factory=RedactionConfig)
    attention: AttentionConfig = Field(default_factory=AttentionConfig)
    agents: AgentsConfig = Field(default_factory=AgentsConfig)
    away: AwayConfig = Field(default_factory=AwayConfig)
    store: StoreConfig = Field(default_factory=StoreConfig)
    audit: AuditConfig = Field(default_factory=AuditConfig)
    routes: list[RouteConfig] | None = Field(
        default=None,
        description="which sessions go to which channels: a session goes to the channels of "
        "every route it matches (none if it matches none); without routes, every session goes "
        "to every enabled channel",
    )
    #: where SQLite and the token live; default `$XDG_STATE_HOME/aep-bridge`
    state_dir: str | None = None
    channels: dict[str, dict[str, Any]] = Field(default_factory=dict)
    people: dict[str, PersonConfig] = Field(
        default_factory=dict,
        description="each person (a principal's name: a token's NAME, local for the bridge's "
        "own token) and their user id on each channel (keys under channels), such as "
        '{"ada": {"telegram": "123456", "slack": "U024BE7LH"}}',
    )


@dataclass(frozen=True, slots=True)
class ConfigProblem:
    """One thing wrong with a config: where, what, and how to fix it."""

    key: str
    message: str
    fix: str | None = None

    def __str__(self) -> str:
        """One line, whatever the config's key names and values hold (a newline in a key
        would otherwise print a line of its own, such as a forged `aep-bridge: error:`)."""
        where = f"{self.key}: " if self.key else ""
        fix = f" ({self.fix})" if self.fix else ""
        return visible(f"{where}{self.message}{fix}", one_line=True)


class ConfigError(Exception):
    """A config that cannot be used, with every problem found."""

    def __init__(self, source: str, problems: list[ConfigProblem]) -> None:
        self.source = source
        self.problems = problems
        super().__init__("\n".join(f"{source}: {p}" for p in problems))


@dataclass(frozen=True, slots=True)
class ResolvedChannel:
    """An enabled channel whose plugin is loaded and whose block is valid."""

    name: str
    registration: ChannelRegistration
    config: ChannelConfig


@dataclass(slots=True)
class ChannelPlan:
    """What `resolve_channels` found: channels to run, problems, and warnings."""

    channels: list[ResolvedChannel] = field(default_factory=list)
    problems: list[ConfigProblem] = field(default_factory=list)
    warnings: list[ConfigProblem] = field(default_factory=list)


def default_config_path(environ: Mapping[str, str] | None = None) -> Path:
    """`$XDG_CONFIG_HOME/aep-bridge/config.json`, else `~/.config/aep-bridge/config.json`.

    A relative `XDG_CONFIG_HOME` is ignored, as the XDG specification says it must be.
    """
    env = os.environ if environ is None else environ
    base = env.get("XDG_CONFIG_HOME", "")
    if base and Path(base).is_absolute():
        return Path(base) / "aep-bridge" / CONFIG_FILE
    home = env.get("HOME")
    return (Path(home) if home else Path.home()) / ".config" / "aep-bridge" / CONFIG_FILE


def config_path(explicit: str | None = None) -> Path | None:
    """The config file to use: the argument, else `$AEP_BRIDGE_CONFIG`, else the default
    file (`default_config_path`) when it exists, else none (the embedded defaults)."""
    chosen = explicit or os.environ.get(CONFIG_ENV)
    if chosen:
        return Path(chosen).expanduser()
    default = default_config_path()
    return default if default.exists() else None


def read_config(path: Path | None) -> BridgeConfig:
    """Parse and validate the top level of a config file (or the embedded defaults)."""
    if path is None:
        return BridgeConfig.model_validate(EMBEDDED_DEFAULTS)
    source = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(
            source, [ConfigProblem("", f"cannot read the file: {exc.strerror}")]
        ) from None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            source,
            [
                ConfigProblem(
                    "", f"not valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
                )
            ],
        ) from None
    if not isinstance(raw, dict):
        raise ConfigError(source, [ConfigProblem("", "the config must be a JSON object")])
    problems: list[ConfigProblem] = []
    top = {k: v for k, v in raw.items() if k != "channels"}
    top = interpolate(top, "", os.environ, problems)
    if problems:
        raise ConfigError(source, problems)
    try:
        return BridgeConfig.model_validate({**top, "channels": raw.get("channels", {})})
    except ValidationError as exc:
        raise ConfigError(source, problems_of(exc, "", BridgeConfig)) from None


def interpolate(
    value: Any, key: str, environ: Mapping[str, str], problems: list[ConfigProblem]
) -> Any:
    """Replace `${VAR}` in every string of `value`; an unset variable is a problem at `key`."""
    if isinstance(value, str):

        def substitute(match: re.Match[str]) -> str:
            if match.group(0) == "$${":
                return "${"
            name = match.group(1)
            if name not in environ:
                problems.append(
                    ConfigProblem(
                        key,
                        f"environment variable {name} is not set",
                        f"export {name}=... before starting the bridge, or write the value here",
                    )
                )
                return ""
            return environ[name]

        return _VARIABLE.sub(substitute, value)
    if isinstance(value, dict):
        return {k: interpolate(v, _join(key, k), environ, problems) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, f"{key}[{i}]", environ, problems) for i, v in enumerate(value)]
    return value


def _join(key: str, part: object) -> str:
    return f"{key}.{part}" if key else str(part)


def problems_of(error: ValidationError, prefix: str, model: type[BaseModel]) -> list[ConfigProblem]:
    """Pydantic's errors as config problems: the key, plain words and the fix, never
    pydantic's own phrasing (`config_errors`)."""
    return [ConfigProblem(key, message, fix) for key, message, fix in explain(error, prefix, model)]


def resolve_channels(
    config: BridgeConfig, host: PluginHost, environ: Mapping[str, str] | None = None
) -> ChannelPlan:
    """Check every channel block against its plugin's model; disabled blocks are not checked."""
    environ = os.environ if environ is None else environ
    plan = ChannelPlan()
    for name, block in config.channels.items():
        key = f"channels.{name}"
        if not isinstance(block, dict):
            plan.problems.append(ConfigProblem(key, "must be an object of channel options"))
            continue
        kind = block.get("type", name)
        # an unavailable type is reported at `type` when the block names one, else at the key
        type_key = f"{key}.type" if "type" in block else key
        if block.get("enabled", True) is False:
            if kind not in host.channels:
                plan.warnings.append(
                    ConfigProblem(type_key, f"disabled; {host.problem(str(kind))}")
                )
            continue
        registration = host.channels.get(kind) if isinstance(kind, str) else None
        if registration is None:
            plan.problems.append(ConfigProblem(type_key, host.problem(str(kind))))
            continue
        found: list[ConfigProblem] = []
        values = interpolate(block, key, environ, found)
        if found:
            plan.problems += found
            continue
        try:
            channel_config = registration.config_model.model_validate(
                {**values, "name": name, "type": kind}
            )
        except ValidationError as exc:
            plan.problems += problems_of(exc, key, registration.config_model)
            continue
        if not channel_config.approvers and not channel_config.approver_roles:
            plan.warnings.append(
                ConfigProblem(
                    f"{key}.approvers",
                    "is empty: requests will be shown here, but nobody can answer them",
                    "list the platform user ids allowed to answer",
                )
            )
        if channel_config.allow_instructions and not channel_config.instructions_by_default():
            plan.warnings.append(
                ConfigProblem(
                    f"{key}.allow_instructions",
                    "is true in a group: any approver here can give an agent its next "
                    "instruction, which is as powerful as the agent",
                    "keep approvers to the people you would hand your terminal, or set it to false",
                )
            )
        plan.channels.append(ResolvedChannel(name, registration, channel_config))
    placeable = {c.name: c.registration.capabilities.places for c in plan.channels}
    for index, route in enumerate(config.routes or ()):
        for position, target in enumerate(route.channels):
            if target not in config.channels:
                known = ", ".join(config.channels) or "none"
                plan.problems.append(
                    ConfigProblem(
                        f"routes[{index}].channels[{position}]",
                        f"names no channel: {target!r}",
                        f"use a key under channels ({known})",
                    )
                )
        for target in route.places:
            if target not in route.channels:
                plan.problems.append(
                    ConfigProblem(
                        f"routes[{index}].places.{target}",
                        f"names {target!r}, a channel the route does not send to",
                        f"add {target!r} to the route's channels, or remove it from places",
                    )
                )
            elif placeable.get(target) is False:
                plan.problems.append(
                    ConfigProblem(
                        f"routes[{index}].places.{target}",
                        f"names {target!r}, a channel that shows every session in one place "
                        "(it cannot put a thread elsewhere)",
                        f"remove {target!r} from places; Slack and Discord channels take places",
                    )
                )
    for key, message, fix in people_problems(config.people, config.channels):
        plan.problems.append(ConfigProblem(key, message, fix))
    for index, route in enumerate(config.routes or ()):
        for position, name in enumerate(approver_names(route.approvers)):
            if name != OWNER and name not in config.people:
                plan.problems.append(
                    ConfigProblem(
                        f"routes[{index}].approvers"
                        + ("" if isinstance(route.approvers, str) else f"[{position}]"),
                        f"names no person: {name!r}",
                        'use "owner" or a name under people '
                        f"({', '.join(config.people) or 'none'})",
                    )
                )
    public = config.listen.public_url
    if public and public.lower().startswith("https://") and not config.listen.trusted_proxies:
        plan.warnings.append(
            ConfigProblem(
                "listen.trusted_proxies",
                "is empty while listen.public_url is https: the proxy's X-Forwarded-Proto is "
                "not believed, so the web page behind it refuses its own requests",
                "list the proxy's address, such as 127.0.0.1",
            )
        )
    if config.intake.open_on_loopback and behind_proxy(config.listen):
        plan.warnings.append(
            ConfigProblem(
                "intake.open_on_loopback",
                "is ignored behind a proxy (listen.public_url or listen.trusted_proxies is set): "
                "every connection through the proxy comes from loopback, so anyone who reaches "
                "the proxy would send events without a token",
                "remove intake.open_on_loopback; agents present a token (aep-bridge token create)",
            )
        )
    return plan


def behind_proxy(listen: ListenConfig) -> bool:
    """Whether the bridge is reached through a reverse proxy, so that a connection from
    loopback may be anyone's: then nothing is open without the token."""
    return bool(listen.public_url or listen.trusted_proxies)
