"""Which channel `aep-bridge preview` stands for, and what of the user's config applies to it.

A preview is only true if the bridge inside it is configured as the user's is: the same
redaction (`redaction.*`, every secret the config holds, its channels' tokens included, and
the bridge's own token),
the same routes (a session they send elsewhere is not shown here) and the channel instance's
own block (verbosity, capture ceiling, what rings). So `--channel` names a channel instance
of the config (`team-telegram`), or a channel type: the type's one instance in the config if
it has exactly one, else the type alone with the built-in defaults and no routes (no route
can name a channel the config does not have). The config is found as `aep-bridge run` finds
it (`config_path`). Nothing here connects anywhere: a token is read only so that it is
redacted, and a `${VAR}` left unset in a channel's block costs that channel only its
platform-specific settings (the type's declared ones are used), never the preview.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from pydantic import ValidationError

from ..aep.envelope import Event
from ..config.config import (
    EMBEDDED_DEFAULTS,
    BridgeConfig,
    ConfigError,
    ConfigProblem,
    interpolate,
    problems_of,
    read_config,
    resolve_channels,
)
from ..contract.adapter import ChannelRegistration
from ..contract.plugins import PluginHost
from ..contract.types import ChannelConfig
from ..loop.routing import Routes
from ..text.scrub import secrets_in

#: the core's own web dialect, always available (`preview_command.choose`)
WEB: Final = "web"
#: the fields of a channel's block the core reads (the recorder's own config has only these)
CORE_FIELDS: Final = frozenset(ChannelConfig.model_fields) - {"name", "type", "enabled"}


class PreviewError(Exception):
    """Why a preview cannot be made, in words for the person who asked (exit status 2)."""


@dataclass(frozen=True, slots=True)
class Target:
    """The channel a preview runs, as the bridge would run it under `config`."""

    #: the instance's name: its key in the config, else the type
    name: str
    #: its channel type (a plugin's, or `web`)
    kind: str
    #: the core's settings of the channel (`CORE_FIELDS`), as the config gives them
    settings: dict[str, Any]
    #: the block as its plugin validated it, to build the real adapter from (never started);
    #: None for a type the config does not have, or a block whose `${VAR}`s are not set here
    typed: ChannelConfig | None
    #: the config: its redaction and, when `configured`, its routes apply
    config: BridgeConfig
    #: every secret the config holds, and the bridge's token if it has one (redacted from what
    #: is shown, never printed)
    secrets: tuple[str, ...]
    #: the config file's name, or None for the built-in defaults
    source: str | None
    #: whether the channel is an instance of the config (so its routes decide what it gets)
    configured: bool

    @property
    def verbosity(self) -> str:
        return str(self.settings.get("verbosity", "normal"))

    @property
    def capture(self) -> str:
        return str(self.settings.get("capture", "redacted"))


def target(
    channel: str,
    host: PluginHost,
    path: Path | None,
    *,
    verbosity: str | None = None,
    capture: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> Target:
    """The channel `--channel channel` stands for under the config at `path` (None: the
    built-in defaults); `verbosity` and `capture`, when given, override the instance's. A
    broken config raises `ConfigError` (the key and the fix); a channel that cannot be
    previewed, `PreviewError`."""
    environ = os.environ if environ is None else environ
    config = (
        read_config(path) if path is not None else BridgeConfig.model_validate(EMBEDDED_DEFAULTS)
    )
    source = str(path) if path is not None else "built-in defaults"
    plan = resolve_channels(config, host, environ)
    secrets = (
        *secrets_in(config, *(resolved.config for resolved in plan.channels)),
        *_endpoint_token(config),
    )
    routes = [problem for problem in plan.problems if problem.key.startswith("routes[")]
    if routes:
        raise ConfigError(source, routes)
    name = _instance(channel, config, source)
    typed: ChannelConfig | None = None
    settings: dict[str, Any] = {}
    if name is None:
        kind = channel
    else:
        block = config.channels[name]
        kind = str(block.get("type", name))
        if block.get("enabled", True) is False:
            raise PreviewError(
                f"channel {name!r} is disabled in {source} (enabled: false): the bridge shows "
                "it nothing; enable it, or preview its type (--channel "
                f"{kind})"
            )
        registration = host.channels.get(kind)
        if registration is None and kind != WEB:
            raise ConfigError(source, [ConfigProblem(f"channels.{name}", host.problem(kind))])
        typed, settings = _settings(name, kind, block, registration, source, environ)
    if verbosity is not None:
        settings["verbosity"] = verbosity
    if capture is not None:
        settings["capture"] = capture
    return Target(
        name=name or channel,
        kind=kind,
        settings=settings,
        typed=typed,
        config=config,
        secrets=secrets,
        source=None if path is None else path.name,
        configured=name is not None,
    )


def unrouted(events: Sequence[Event], to: Target) -> tuple[int, int]:
    """How many of the recording's sessions there are, and how many of them the config's
    routes send elsewhere (decided on each session's first event, as the bridge does)."""
    if not to.configured:
        return 0, 0
    routes = Routes(to.config.routes)
    first: dict[tuple[str, str], Event] = {}
    for event in events:
        key = event.session_key
        if key is not None and event.seq is not None:
            first.setdefault(key, event)
    away = sum(1 for event in first.values() if not routes.channels_for(event, [to.name]))
    return len(first), away


def _endpoint_token(config: BridgeConfig) -> list[str]:
    """The bridge's own token, as `run` would have it, so that it is redacted as `run`
    redacts it; read only if it is there (a preview never makes one)."""
    from ..intake.auth import token_path
    from ..store.database import default_state_dir

    folder = Path(config.state_dir).expanduser() if config.state_dir else default_state_dir()
    try:
        token = token_path(folder).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return []
    return [token] if token else []


def _instance(channel: str, config: BridgeConfig, source: str) -> str | None:
    """The config's channel instance `channel` names: its key, or its type's one enabled
    instance; None when the config has none."""
    if channel in config.channels:
        return channel
    same = [
        key
        for key, block in config.channels.items()
        if isinstance(block, dict)
        and block.get("type", key) == channel
        and block.get("enabled", True) is not False
    ]
    if len(same) > 1:
        raise PreviewError(
            f"{source} has {len(same)} channels of type {channel!r} ({', '.join(same)}): "
            "name the one to preview with --channel"
        )
    return same[0] if same else None


def _settings(
    name: str,
    kind: str,
    block: Any,
    registration: ChannelRegistration | None,
    source: str,
    environ: Mapping[str, str],
) -> tuple[ChannelConfig | None, dict[str, Any]]:
    """The block as its plugin validates it, and the core's settings of it. A `${VAR}` not
    set here (a token kept elsewhere) leaves the platform's settings unknown (None), the
    core's still read: a preview needs no token."""
    key = f"channels.{name}"
    if not isinstance(block, dict):
        raise ConfigError(source, [ConfigProblem(key, "must be an object of channel options")])
    model = registration.config_model if registration is not None else ChannelConfig
    unset: list[ConfigProblem] = []
    values = interpolate(block, key, environ, unset)
    if not unset:
        try:
            typed = model.model_validate({**values, "name": name, "type": kind})
        except ValidationError as exc:
            raise ConfigError(source, problems_of(exc, key, model)) from None
        return typed, typed.model_dump(include=set(CORE_FIELDS))
    core = {field: value for field, value in values.items() if field in CORE_FIELDS}
    in_core = [p for p in unset if _field(p.key, key) in core]
    if in_core:  # the core's own setting is unknown: as `run` would, say which and the fix
        raise ConfigError(source, in_core)
    try:
        settings = ChannelConfig.model_validate({**core, "name": name, "type": kind})
    except ValidationError as exc:
        raise ConfigError(source, problems_of(exc, key, ChannelConfig)) from None
    return None, settings.model_dump(include=set(CORE_FIELDS))


def _field(problem_key: str, block_key: str) -> str:
    """The field of a channel's block a problem is at (`channels.x.approvers[0]`: approvers)."""
    return problem_key.removeprefix(f"{block_key}.").split(".")[0].split("[")[0]


__all__ = ["CORE_FIELDS", "WEB", "PreviewError", "Target", "target", "unrouted"]
