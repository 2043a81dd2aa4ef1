"""Configuration: one JSON file, validated with errors that name the key and the fix.

The top level is `BridgeConfig`. Each block under `channels` is validated by the model its
plugin declares (`ChannelAdapter.config_model`), so a third-party channel's options are
checked as strictly as the built-in ones. Strings may say `${VAR}` to take a value from the
environment, so tokens need not sit in the file; `$${` writes a literal `${`.

Without a file the bridge runs on embedded defaults: the AEP endpoint on 127.0.0.1:8787 and
the console channel.
"""

from __future__ import annotations

import difflib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator

from .adapter import ChannelRegistration
from .aep.errors import InvalidFilter
from .aep.filters import Filter
from .aep.registry import Capture
from .plugins import PluginHost
from .types import ChannelConfig

CONFIG_ENV: Final = "AEP_BRIDGE_CONFIG"
DEFAULT_HOST: Final = "127.0.0.1"
DEFAULT_PORT: Final = 8787

#: What runs with no config file at all.
EMBEDDED_DEFAULTS: Final[dict[str, Any]] = {
    "listen": {"host": DEFAULT_HOST, "port": DEFAULT_PORT},
    "channels": {"console": {"approvers": ["local"]}},
}

_VARIABLE: Final = re.compile(r"\$\$\{|\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class ListenConfig(BaseModel):
    """Where the bridge serves its AEP endpoint (and the web channel)."""

    model_config = ConfigDict(extra="forbid")

    host: str = DEFAULT_HOST
    port: int = Field(default=DEFAULT_PORT, ge=1, le=65535)


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

    @field_validator("match")
    @classmethod
    def _valid_filter(cls, value: dict[str, Any]) -> dict[str, Any]:
        try:
            Filter.parse(value)
        except InvalidFilter as exc:
            raise ValueError(f"not an attr-match filter: {exc}") from None
        return value


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


class BridgeConfig(BaseModel):
    """The whole file. Channel blocks stay raw here; `resolve_channels` checks them."""

    model_config = ConfigDict(extra="forbid")

    listen: ListenConfig = Field(default_factory=ListenConfig)
    intake: IntakeConfig = Field(default_factory=IntakeConfig)
    redaction: RedactionConfig = Field(default_factory=RedactionConfig)
    routes: list[RouteConfig] | None = Field(
        default=None,
        description="which sessions go to which channels: a session goes to the channels of "
        "every route it matches (none if it matches none); without routes, every session goes "
        "to every enabled channel",
    )
    #: where SQLite and the token live; default `$XDG_STATE_HOME/aep-bridge`
    state_dir: str | None = None
    channels: dict[str, dict[str, Any]] = Field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ConfigProblem:
    """One thing wrong with a config: where, what, and how to fix it."""

    key: str
    message: str
    fix: str | None = None

    def __str__(self) -> str:
        where = f"{self.key}: " if self.key else ""
        fix = f" ({self.fix})" if self.fix else ""
        return f"{where}{self.message}{fix}"


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


def config_path(explicit: str | None = None) -> Path | None:
    """The config file to use: the argument, else `$AEP_BRIDGE_CONFIG`, else none."""
    chosen = explicit or os.environ.get(CONFIG_ENV)
    return Path(chosen).expanduser() if chosen else None


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
    """Pydantic's errors as config problems: a dotted key, plain words, a fix where we can."""
    problems = []
    for detail in error.errors(include_url=False):
        loc = [str(p) for p in detail["loc"]]
        key = _join(prefix, ".".join(loc)) if loc else prefix
        kind = detail["type"]
        fix = None
        if kind == "missing":
            message = "is required"
            description = _field_description(model, loc)
            fix = description or None
        elif kind == "extra_forbidden":
            message = "is not a known key"
            known = _known_keys(model, loc[:-1])
            close = difflib.get_close_matches(loc[-1], known, n=1)
            fix = f"did you mean {close[0]!r}?" if close else f"known keys: {', '.join(known)}"
        else:
            message = detail["msg"].removeprefix("Value error, ")
        problems.append(ConfigProblem(key, message, fix))
    return problems


def _submodel(model: type[BaseModel], path: list[str]) -> type[BaseModel] | None:
    current: type[BaseModel] | None = model
    for part in path:
        if current is None or part not in current.model_fields:
            return None
        annotation = current.model_fields[part].annotation
        current = (
            annotation
            if isinstance(annotation, type) and issubclass(annotation, BaseModel)
            else None
        )
    return current


def _known_keys(model: type[BaseModel], path: list[str]) -> list[str]:
    sub = _submodel(model, path)
    return sorted(sub.model_fields) if sub is not None else []


def _field_description(model: type[BaseModel], loc: list[str]) -> str | None:
    parent = _submodel(model, loc[:-1])
    if parent is None or not loc or loc[-1] not in parent.model_fields:
        return None
    return parent.model_fields[loc[-1]].description


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
        plan.channels.append(ResolvedChannel(name, registration, channel_config))
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
    return plan
