"""Finding and loading plugins: the `aep_bridge` entry-point group, through pluggy.

Every plugin, built-in or third-party, is a module named by an entry point in the
`aep_bridge` group. Loading never stops at a broken plugin: one that fails to import, raises
in a hook, provides nothing, or declares a contract this core does not speak is recorded with
the reason and skipped, and the rest load. `aep-bridge plugins` shows the record.

Set `AEP_BRIDGE_DISABLE_PLUGIN_AUTOLOAD=1` to skip entry points (tests do), and
`AEP_BRIDGE_PLUGINS=module,module` to load named modules whatever the setting.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import logging
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from types import ModuleType
from typing import Any, Final, Literal

import pluggy
from pydantic import ValidationError

from . import defaults, hookspecs, install_hint
from .adapter import (
    ChannelAdapter,
    ChannelRegistration,
    ContractMismatch,
    check_contract,
)
from .types import ChannelCapabilities, ChannelConfig

ENTRY_POINT_GROUP: Final = "aep_bridge"
DISABLE_AUTOLOAD_ENV: Final = "AEP_BRIDGE_DISABLE_PLUGIN_AUTOLOAD"
PLUGINS_ENV: Final = "AEP_BRIDGE_PLUGINS"
OWN_DISTRIBUTION: Final = "aep-bridge"
#: the name the defaults are registered under: kept as before the module moved to contract/,
#: for a plugin that asks pluggy for it
DEFAULTS_PLUGIN: Final = "aep_bridge.defaults"

log = logging.getLogger("aep_bridge.plugins")


@dataclass(slots=True)
class PluginRecord:
    """What happened to one plugin at load time."""

    name: str
    module: str
    distribution: str | None = None
    version: str | None = None
    status: Literal["loaded", "failed"] = "loaded"
    error: str | None = None
    channels: list[str] = field(default_factory=list)

    @property
    def builtin(self) -> bool:
        return self.distribution == OWN_DISTRIBUTION


class PluginLoadError(Exception):
    """Why one plugin could not be used; the message says what to do."""


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


class PluginHost:
    """The plugin manager, the load record, and the channels the loaded plugins provide."""

    def __init__(self) -> None:
        self.manager = pluggy.PluginManager(hookspecs.PROJECT)
        self.manager.add_hookspecs(hookspecs)
        # the default behaviour is a plugin too (trylast): any plugin's answer comes first
        self.manager.register(defaults, name=DEFAULTS_PLUGIN)
        self.records: list[PluginRecord] = []
        self.channels: dict[str, ChannelRegistration] = {}

    @property
    def hook(self) -> Any:
        """The hook caller (`host.hook.startup(bridge=...)`)."""
        return self.manager.hook

    def load(self, *, autoload: bool | None = None) -> None:
        """Load entry-point plugins (unless disabled) and any listed in `AEP_BRIDGE_PLUGINS`."""
        if autoload is None:
            autoload = not _truthy(os.environ.get(DISABLE_AUTOLOAD_ENV))
        if autoload:
            for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
                self._load_entry_point(ep)
        for module in filter(None, (m.strip() for m in os.environ.get(PLUGINS_ENV, "").split(","))):
            if not any(r.module == module for r in self.records):
                self._load(module, module, None, None, lambda m=module: importlib.import_module(m))

    def register(self, plugin: ModuleType | object, name: str | None = None) -> PluginRecord:
        """Register a plugin object directly (tests, embedding); same checks as entry points."""
        label = name or str(getattr(plugin, "__name__", type(plugin).__name__))
        return self._load(label, label, None, None, lambda: plugin)

    def _load_entry_point(self, ep: EntryPoint) -> PluginRecord:
        dist = ep.dist.name if ep.dist is not None else None
        version = ep.dist.version if ep.dist is not None else None
        if any(r.name == ep.name and r.distribution == dist for r in self.records):
            return next(r for r in self.records if r.name == ep.name)
        return self._load(ep.name, ep.value, dist, version, lambda: ep.load(), ep=ep)

    def _load(
        self,
        name: str,
        module: str,
        dist: str | None,
        version: str | None,
        importer: Any,
        ep: EntryPoint | None = None,
    ) -> PluginRecord:
        record = PluginRecord(name, module, dist, version)
        self.records.append(record)
        try:
            plugin = importer()
        except ModuleNotFoundError as exc:
            return self._fail(record, _missing_module_hint(name, dist, ep, exc))
        except Exception as exc:
            reason = f"failed to import {module}: {type(exc).__name__}: {exc}"
            if dist == OWN_DISTRIBUTION and _is_builtin_extra(name):  # a broken platform SDK
                reason += f"; reinstall the {name} extra: {install_hint.command(name)}"
            return self._fail(record, reason)
        try:
            self.manager.register(plugin, name=_plugin_id(record))
        except ValueError as exc:
            return self._fail(record, f"cannot be registered: {exc}")
        if not self.manager.get_hookcallers(plugin):
            self.manager.unregister(name=_plugin_id(record))
            return self._fail(
                record,
                f"{module} implements no aep_bridge hook (mark functions with "
                "aep_bridge.hookimpl, such as register_channels)",
            )
        try:
            provided = self._channels_of(record)
        except PluginLoadError as exc:
            self.manager.unregister(name=_plugin_id(record))
            return self._fail(record, str(exc))
        for registration in provided:
            self.channels[registration.name] = registration
            record.channels.append(registration.name)
        return record

    def _channels_of(self, record: PluginRecord) -> list[ChannelRegistration]:
        found: list[ChannelRegistration] = []
        for impl in self.manager.hook.register_channels.get_hookimpls():
            if impl.plugin_name != _plugin_id(record):
                continue
            try:
                items = impl.function() or ()
            except Exception as exc:
                raise PluginLoadError(
                    f"register_channels raised {type(exc).__name__}: {exc}"
                ) from exc
            if not isinstance(items, Iterable):
                raise PluginLoadError("register_channels must return a list of channels")
            for item in items:
                registration = _registration(item, record.name)
                if registration.name in self.channels:
                    owner = self.channels[registration.name].plugin
                    raise PluginLoadError(
                        f"provides channel {registration.name!r}, which plugin {owner!r} "
                        "already provides: uninstall one of them"
                    )
                found.append(registration)
        return found

    @staticmethod
    def _fail(record: PluginRecord, reason: str) -> PluginRecord:
        record.status = "failed"
        record.error = reason
        return record

    def unavailable(self, channel_type: str) -> str | None:
        """Why `channel_type`, a channel some installed or built plugin has, cannot be used
        (with the fix); None for a type nothing here knows."""
        for record in self.records:
            if record.status == "failed" and record.name == channel_type:
                return f"its plugin {record.name!r} failed to load: {record.error}"
        if _is_builtin_extra(channel_type):
            return (
                f"no plugin provides channel {channel_type!r}: install the {channel_type} "
                f"extra: {install_hint.command(channel_type)}"
            )
        return None

    def problem(self, channel_type: str) -> str:
        """Why `channel_type` is not available, with the fix."""
        reason = self.unavailable(channel_type)
        if reason is not None:
            return reason
        installed = loaded_channels(self.records)
        known = (
            f"the installed channel types are {', '.join(installed)}"
            if installed
            else "no channel type is installed"
        )
        close = difflib.get_close_matches(channel_type, installed, n=1)
        if close:  # a typing slip, most likely
            return f"unknown channel type {channel_type!r}: did you mean {close[0]!r}? ({known})"
        return (
            f"unknown channel type {channel_type!r}: {known}; pip install the package that "
            "provides it, then check `aep-bridge plugins`"
        )


def _plugin_id(record: PluginRecord) -> str:
    return f"{record.distribution or 'local'}:{record.name}"


def _registration(item: object, plugin: str) -> ChannelRegistration:
    if isinstance(item, ChannelRegistration):
        registration = item
    elif inspect.isclass(item) and issubclass(item, ChannelAdapter):
        missing = sorted(getattr(item, "__abstractmethods__", ()))
        if missing:
            raise PluginLoadError(
                f"channel class {item.__name__} does not implement: {', '.join(missing)}"
            )
        for attribute in ("name", "capabilities"):
            if not hasattr(item, attribute):
                raise PluginLoadError(f"channel class {item.__name__} has no {attribute!r}")
        registration = ChannelRegistration.of(item)
        if item.archive_session_topic is not ChannelAdapter.archive_session_topic:
            log.warning(
                "channel %s implements archive_session_topic, which contract 1.2 renames "
                "archive_session_thread: it is still called, until contract 1.3",
                item.name,
            )
    else:
        raise PluginLoadError(
            f"register_channels returned {item!r}: expected a ChannelAdapter subclass "
            "or a ChannelRegistration"
        )
    if not registration.name or not isinstance(registration.name, str):
        raise PluginLoadError(f"a channel of plugin {plugin!r} has no name")
    try:
        check_contract(registration.name, registration.contract_version)
    except ContractMismatch as exc:
        raise PluginLoadError(str(exc)) from None
    try:
        capabilities = ChannelCapabilities.model_validate(registration.capabilities)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"])
        raise PluginLoadError(
            f"channel {registration.name!r} declares invalid capabilities: {where}: {first['msg']}"
        ) from None
    if not (
        inspect.isclass(registration.config_model)
        and issubclass(registration.config_model, ChannelConfig)
    ):
        raise PluginLoadError(
            f"channel {registration.name!r}: config_model must subclass aep_bridge.ChannelConfig"
        )
    return ChannelRegistration(
        name=registration.name,
        factory=registration.factory,
        capabilities=capabilities,
        config_model=registration.config_model,
        contract_version=registration.contract_version,
        description=registration.description,
        plugin=plugin,
    )


def _extras() -> set[str]:
    """The extras of aep-bridge that install a built-in channel's platform SDK.

    An extra counts only when aep-bridge also registers a channel of that name, so an extra
    for a channel that is not built (or stale metadata naming one) is never offered as a fix.
    """
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        own = distribution(OWN_DISTRIBUTION)
    except PackageNotFoundError:
        return set()
    extras = set(own.metadata.get_all("Provides-Extra") or [])
    builtin = {ep.name for ep in own.entry_points if ep.group == ENTRY_POINT_GROUP}
    return extras & builtin


def _is_builtin_extra(name: str) -> bool:
    return name in _extras() - {"all", "dev"}


def _missing_module_hint(
    name: str, dist: str | None, ep: EntryPoint | None, exc: ModuleNotFoundError
) -> str:
    missing = exc.name or str(exc)
    if dist == OWN_DISTRIBUTION and _is_builtin_extra(name):
        return (
            f"the {name} channel needs the {missing!r} module, which is not installed: "
            f"install the {name} extra: {install_hint.command(name)}"
        )
    target = ep.value if ep is not None else name
    if dist:
        return (
            f"{target} could not be imported: module {missing!r} is missing; "
            f"reinstall {dist} (pip install --force-reinstall {dist})"
        )
    return f"{target} could not be imported: module {missing!r} is missing"


def loaded_channels(records: Iterable[PluginRecord]) -> Sequence[str]:
    """Every channel name the loaded plugins provide, in load order."""
    return [c for r in records if r.status == "loaded" for c in r.channels]
