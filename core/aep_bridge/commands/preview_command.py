"""`aep-bridge preview`: a recorded session as the page a platform's thread would be.

Nothing of the pipeline is imitated: the real `Bridge` runs in this process (its store in a
temporary folder, no network, no token), configured as the user's config has that channel
(`preview_config`: its redaction, routes and the instance's block), with one channel instance
whose adapter is a recorder (`_Recorder`). The recorder asks the channel's own adapter (built
from the instance's config, never started) for its capabilities and rate limits, how it
measures, which limits a call spends (`call_kind`) and where it counts (`limit_keys`), so the
real outbox paces and orders the calls as it would for that channel. Every event of the file
enters the hub as `POST /events` admits it, at its own recorded pace on a simulated clock
(the outbox's injectable `clock` and `sleep`), so the platform's rate limits, coalescing and
cards-first order apply as they would have while the session ran, in a fraction of a second.
When the outbox is idle, what the recorder holds (each thread's messages in the order first
sent, each at its latest version, cards with their last outcome, heads-ups apart) is laid
out with the channel's `preview_dialect` (`aep_bridge.contract.preview`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import sys
import tempfile
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, TextIO

from ..aep.envelope import Event
from ..aep.errors import InvalidEvent
from ..aep.validation import parse_event
from ..config.config import ConfigError, config_path
from ..contract.adapter import ChannelAdapter, ChannelRegistration
from ..contract.preview import (
    PreviewDialect,
    Shown,
    ShownCard,
    ShownHeadsUp,
    ShownMessage,
    ShownThread,
    WebDialect,
    page,
    transcript,
)
from ..contract.types import (
    CallKind,
    ChannelCapabilities,
    ChannelConfig,
    NotificationMessage,
    OutgoingMessage,
    PermissionOutcome,
    PermissionRequest,
)
from ..markup import Blocks
from ..process.exit_status import EXIT_OK, EXIT_USAGE
from ..text.scrub import scrub
from ..text.terminal import visible
from .preview_config import WEB, PreviewError, Target, target, unrouted
from .simtime import VirtualTime

#: the longest pause between two recorded events that is replayed (simulated time): a
#: session left overnight is not a night of rate-limit windows
MAX_GAP: Final = 3600.0
#: how long (real seconds) a preview may take before it is given up
TIMEOUT: Final = 120.0
VERBOSITIES: Final = ("quiet", "normal", "verbose")
CAPTURES: Final = ("none", "metadata", "redacted", "full")


# -- the recording channel -------------------------------------------------------------------


class _Recorder(ChannelAdapter[ChannelConfig]):
    """A channel that shows nothing anywhere: it keeps what a platform would show (`Shown`),
    with the capabilities, measure, call kinds and rate-limit keys of the channel it stands
    for: its real adapter's (`real`, built from the instance's config and never started),
    else, for a type alone, its class's declaration."""

    name = "preview"
    capabilities = ChannelCapabilities(
        threads=True, buttons=True, edits=True, text_answers=True, forms=False,
        max_message_length=4096,
    )  # fmt: skip

    def __init__(
        self,
        core: Any,
        config: ChannelConfig,
        *,
        like: type[ChannelAdapter[Any]] | None,
        capabilities: ChannelCapabilities,
        dialect: PreviewDialect,
        real: ChannelAdapter[Any] | None = None,
    ) -> None:
        super().__init__(core, config)
        self.capabilities = real.capabilities if real is not None else capabilities
        self._like = like
        self._real = real
        self._dialect = dialect
        self.shown = Shown()
        self._threads: dict[str, ShownThread] = {}
        self._keyed: dict[tuple[str, str], ShownMessage] = {}
        self._cards: dict[str, ShownCard] = {}
        self._ids = itertools.count(1)

    # the platform's own arithmetic: its adapter's, else its class's where that needs no
    # config of its own
    def measure(self, blocks: Blocks) -> int:
        if self._real is not None:
            return self._real.measure(blocks)
        own = self._like.measure if self._like is not None else ChannelAdapter.measure
        if own is not ChannelAdapter.measure:
            try:
                return int(own(self, blocks))
            except Exception:  # it needs its own config or connection: count plain text
                pass
        return super().measure(blocks)

    def call_kind(self, op: str, args: tuple[Any, ...]) -> CallKind | None:
        if self._real is not None:
            return self._real.call_kind(op, args)
        own = self._like.call_kind if self._like is not None else ChannelAdapter.call_kind
        if own is not ChannelAdapter.call_kind:
            try:
                return own(self, op, args)
            except Exception:  # it needs its own config (Slack's channels): the default
                pass
        return super().call_kind(op, args)

    def limit_keys(self, session_id: str | None) -> tuple[str, str]:
        if self._real is not None:
            return self._real.limit_keys(session_id)
        own = self._like.limit_keys if self._like is not None else ChannelAdapter.limit_keys
        if own is not ChannelAdapter.limit_keys:
            try:
                chat, group = own(self, session_id)
                return str(chat), str(group)
            except Exception:  # it needs its own config (Telegram's chat id): the default
                pass
        return super().limit_keys(session_id)

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    def _shown_thread(self, session_id: str) -> ShownThread:
        # (not `_thread`: a channel's own methods, run on this recorder where it has no
        # adapter of its own, may call theirs by that name)
        thread = self._threads.get(session_id)
        if thread is None:  # a platform without threads: one place per session
            thread = self._threads[session_id] = ShownThread(session_id)
            self.shown.threads.append(thread)
        return thread

    async def create_session_thread(self, session_id: str, name: str) -> str:
        thread = ShownThread(name)
        self._threads[session_id] = thread
        self.shown.threads.append(thread)
        return f"t{next(self._ids)}"

    async def rename_session_thread(self, session_id: str, new_name: str) -> None:
        self._shown_thread(session_id).name = new_name

    async def archive_session_thread(self, session_id: str) -> None:
        self._shown_thread(session_id).closed = True

    async def delete_session_thread(self, session_id: str) -> None:
        self._shown_thread(session_id).deleted = True

    async def send_message(self, session_id: str, content: OutgoingMessage) -> None:
        thread = self._shown_thread(session_id)
        key = (session_id, content.key) if content.key is not None else None
        earlier = self._keyed.get(key) if key is not None else None
        if earlier is not None and earlier in thread.items:
            if not (content.notify and self._dialect.resend_on_notify):
                earlier.content = content  # edited in place: an edit does not ring
                return
            thread.items.remove(earlier)  # sent again below, so that it rings
        shown = ShownMessage(content, rang=content.notify)
        thread.items.append(shown)
        if key is not None:
            self._keyed[key] = shown

    async def send_permission_request(self, session_id: str, request: PermissionRequest) -> None:
        if request.id in self._cards:  # sent before: shown once
            return
        card = ShownCard(request, None, rang=request.notify)
        self._cards[request.id] = card
        self._shown_thread(session_id).items.append(card)

    async def update_permission_request(
        self, session_id: str, request: PermissionRequest, outcome: PermissionOutcome
    ) -> None:
        card = self._cards.get(request.id)
        if card is not None:
            card.request, card.outcome = request, outcome

    async def send_notification(self, notification: NotificationMessage) -> None:
        if notification.outcome is not None:  # the closing update of a question's heads-up
            for heads_up in self.shown.heads_ups:
                if (
                    notification.request_id is not None
                    and heads_up.notification.request_id == notification.request_id
                ):
                    heads_up.notification = notification
            return
        status = self._dialect.thread_status(notification)
        if status is not None:  # said at the head of the session's thread, not a heads-up
            self._shown_thread(notification.session_id).status = status
            return
        self.shown.heads_ups.append(ShownHeadsUp(notification))


# -- choosing the channel -------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Choice:
    name: str
    registration: ChannelRegistration | None
    like: type[ChannelAdapter[Any]] | None
    dialect: PreviewDialect


def _adapter_class(registration: ChannelRegistration) -> type[ChannelAdapter[Any]] | None:
    factory = registration.factory
    if isinstance(factory, type) and issubclass(factory, ChannelAdapter):
        return factory
    return None


def choose(channel: str, host: Any, instances: Sequence[str] = ()) -> _Choice:
    """The channel type to preview: one a loaded plugin provides, or `web`; `instances`,
    the config's channel names, are named too when `channel` is none of them."""
    registration = host.channels.get(channel)
    if registration is None and channel != WEB:
        reason = host.unavailable(channel)
        if reason is not None:  # a channel this install has but cannot load, with the fix
            raise PreviewError(f"channel {channel!r} cannot be previewed: {reason}")
        available = sorted({*host.channels, WEB})
        configured = f", or a channel of your config ({', '.join(instances)})" if instances else ""
        raise PreviewError(
            f"unknown channel {channel!r}: the channels that can be previewed here are "
            f"{', '.join(available)} (a channel type a plugin provides, or web{configured}; "
            "`aep-bridge plugins` lists the plugins)"
        )
    like = _adapter_class(registration) if registration is not None else None
    dialect: PreviewDialect = like.preview_dialect() if like is not None else WebDialect()
    return _Choice(channel, registration, like, dialect)


# -- reading the recording -------------------------------------------------------------------


def read_events(data: bytes, label: str) -> list[Event]:
    """Every event of a JSONL recording, checked as `POST /events` checks it; a bad line is
    a `PreviewError` naming it and the fix."""
    events: list[Event] = []
    for number, line in enumerate(data.split(b"\n"), 1):
        if not line.strip():
            continue
        try:
            events.append(parse_event(line.rstrip(b"\r")))
        except InvalidEvent as exc:
            raise PreviewError(
                f"{label}:{number}: not a valid AEP event: {exc}; fix or remove that line "
                f"(`aep-bridge validate {label}` checks the whole file)"
            ) from None
    if not events:
        raise PreviewError(f"{label}: holds no event (one AEP event per line, as JSON)")
    return events


def _moment(event: Event) -> datetime | None:
    """When the event happened, as recorded (RFC 3339), or None if that cannot be read."""
    try:
        moment = datetime.fromisoformat(event.time.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else None


# -- the run ---------------------------------------------------------------------------------


async def record(
    events: Sequence[Event],
    choice: _Choice,
    host: Any,
    *,
    verbosity: str = "normal",
    capture: str = "redacted",
    to: Target | None = None,
) -> Shown:
    """Run the real bridge over `events` with a recorder standing for `choice`; return what
    it showed once everything was sent. `to`: the channel as the user's config has it (its
    redaction, routes and settings; `verbosity` and `capture` are then its own), else the
    type alone on the built-in defaults."""
    recorder = await run_recorder(events, choice, host, _target(choice, to, verbosity, capture))
    return recorder.shown


def _target(choice: _Choice, to: Target | None, verbosity: str, capture: str) -> Target:
    if to is not None:
        return to
    from ..config.config import BridgeConfig

    return Target(
        name=choice.name,
        kind=choice.name,
        settings={"verbosity": verbosity, "capture": capture},
        typed=None,
        config=BridgeConfig(),
        secrets=(),
        source=None,
        configured=False,
    )


def _real_adapter(choice: _Choice, to: Target, core: Any) -> ChannelAdapter[Any] | None:
    """The channel's own adapter, built from the instance's config as `run` builds it but
    never started (no connection, no token used): what it declares for this instance (a
    private chat's limits, no heads-ups without a notifications channel) and how it counts
    are its own. None for a type alone, or a plugin whose factory refuses."""
    if choice.registration is None or to.typed is None:
        return None
    try:
        adapter = choice.registration.factory(core, to.typed)
    except Exception:  # a factory that needs more than its config: the class's declaration
        return None
    return adapter if isinstance(adapter, ChannelAdapter) else None


async def run_recorder(
    events: Sequence[Event], choice: _Choice, host: Any, to: Target
) -> _Recorder:
    """`record`'s run: the recorder once the bridge is idle (what it showed, and what it
    declared to the outbox)."""
    from ..config.config import BridgeConfig
    from ..intake.hub import Hub, HubLimits
    from ..intake.source import LocalSource
    from ..loop.bridge import Bridge
    from ..store import Store

    capabilities = (
        choice.registration.capabilities
        if choice.registration is not None
        else _Recorder.capabilities.model_copy(update={"forms": True})
    )
    recorders: list[_Recorder] = []

    def build(core: Any, config: ChannelConfig) -> _Recorder:
        recorder = _Recorder(
            core,
            config,
            like=choice.like,
            capabilities=capabilities,
            dialect=choice.dialect,
            real=_real_adapter(choice, to, core),
        )
        recorders.append(recorder)
        return recorder

    host.channels[choice.name] = ChannelRegistration(
        name=choice.name,
        factory=build,
        capabilities=capabilities,
        plugin="aep-bridge preview",
    )
    time = VirtualTime()
    with tempfile.TemporaryDirectory(prefix="aep-bridge-preview-") as folder:
        config = BridgeConfig.model_validate(_bridge_config(to, choice.name, folder))
        store = Store.open(Path(folder))
        hub = Hub(HubLimits(), store)
        source = LocalSource(hub)
        bridge = Bridge(
            config,
            host,
            store=store,
            outbox_options={"clock": time.clock, "sleep": time.sleep},
            secrets=to.secrets,
        )
        bridge.add_source(source)
        try:
            async with asyncio.timeout(TIMEOUT):
                await bridge.start()
                if not recorders:
                    why = "; ".join(str(p) for p in bridge.plan.problems) or "it did not start"
                    raise PreviewError(f"the bridge could not run channel {to.name!r}: {why}")
                await _replay(events, hub, time)
                await _settle(bridge, hub, source)
        except TimeoutError:
            raise PreviewError(
                f"the bridge was still busy after {TIMEOUT:g} s: the recording may be too "
                "large to preview"
            ) from None
        finally:
            await bridge.stop(1.0)
            await source.close()
            await time.close()
            hub.flush()
            store.close()
    return recorders[-1]


def _bridge_config(to: Target, kind: str, folder: str) -> dict[str, Any]:
    """The bridge's config: the user's redaction, and their routes over the channel `to`
    alone (the config's other channels kept as disabled names, so routes naming them stay
    valid and send nothing here)."""
    channels: dict[str, dict[str, Any]] = {to.name: {**to.settings, "type": kind}}
    raw: dict[str, Any] = {
        "state_dir": folder,
        "redaction": to.config.redaction.model_dump(),
        "channels": channels,
    }
    if to.configured and to.config.routes is not None:
        raw["routes"] = [route.model_dump() for route in to.config.routes]
        for name in to.config.channels:
            channels.setdefault(name, {"type": kind, "enabled": False})
    channels[to.name].setdefault("approvers", ["preview"])
    return raw


async def _replay(events: Sequence[Event], hub: Any, time: VirtualTime) -> None:
    """Admit each event as `POST /events` does, after the pause it had in the recording."""
    last: datetime | None = None
    for event in events:
        moment = _moment(event)
        if last is not None and moment is not None:
            gap = (moment - last).total_seconds()
            if gap > 0:
                await time.sleep(min(gap, MAX_GAP))
        if moment is not None and (last is None or moment > last):
            last = moment
        hub.admit([_rebased(event, moment)])


def _rebased(event: Event, moment: datetime | None) -> Event:
    """A question's `expires_at` moved to now plus the time it had left when it was asked.

    The bridge keeps a question's expiry on the wall clock; a recording's is in its past, so
    replayed as it is, every card would close "Expired without an answer" the moment it
    opened, whatever the recording says became of it."""
    if event.type != "attention.requested" or moment is None or not event.data:
        return event
    expires = event.data.get("expires_at")
    try:
        left = datetime.fromisoformat(str(expires).replace("Z", "+00:00")) - moment
    except (TypeError, ValueError):
        return event
    when = datetime.now(UTC) + left
    data = {
        **event.data,
        "expires_at": when.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
    }
    return event.model_copy(update={"data": data})


async def _settle(bridge: Any, hub: Any, source: Any) -> None:
    """Wait until every event was handled and every platform call made."""
    owner = source._participant

    def queued() -> bool:
        return any(s.pending for s in hub.subscriptions if s.owner is owner)

    while True:
        await asyncio.sleep(0)
        if queued():
            continue
        await bridge.idle()
        await asyncio.sleep(0)
        if not queued() and not bridge.busy:
            return


# -- the command -----------------------------------------------------------------------------


def render(
    data: bytes,
    label: str,
    channel: str,
    *,
    verbosity: str | None = None,
    capture: str | None = None,
    host: Any = None,
    text: bool = False,
    config: Path | None = None,
) -> str:
    """The page for a recording (`data`, one AEP event per line) in `channel`; with `text`,
    its plain-text transcript instead. `config`: the config file the bridge would read (None:
    the built-in defaults); `verbosity` and `capture` override the channel's own."""
    from ..contract.plugins import PluginHost

    if host is None:
        host = PluginHost()
        host.load()
    to = target(channel, host, config, verbosity=verbosity, capture=capture)
    choice = choose(to.kind, host, list(to.config.channels) if to.source else ())
    events = read_events(data, label)
    sessions, away = unrouted(events, to)
    if sessions and away == sessions:
        raise PreviewError(
            f"no session of {label} goes to channel {to.name!r} under the routes of "
            f"{to.source} (a session goes to the channels of every route its first event "
            "matches): preview a channel they send it to, or change the routes"
        )
    shown = asyncio.run(record(events, choice, host, to=to))
    if text:
        return transcript(shown)
    title = shown.threads[0].name if shown.threads else label
    about = (
        f"aep-bridge preview: {label} in {choice.dialect.name} ({to.name}), "
        f"verbosity {to.verbosity}, capture {to.capture}"
    )
    if to.source is not None:
        about += f", as {to.source} configures it"
    if away:
        about += f"; {away} of its {sessions} sessions not shown (the routes send them elsewhere)"
    return page(shown, choice.dialect, title=title, about=about)


def main(
    file: str | None,
    *,
    demo: bool,
    channel: str,
    verbosity: str | None = None,
    capture: str | None = None,
    out: str | None = None,
    err: TextIO | None = None,
    text: bool = False,
    config_file: str | None = None,
) -> int:
    """`aep-bridge preview`: write the page, say where on standard error. The config is the
    one `aep-bridge run` would read (`--config`, `$AEP_BRIDGE_CONFIG`, the default file)."""
    from ..config import env_file

    err = err or sys.stderr
    try:
        if demo == (file is not None):
            raise PreviewError("give the SESSION.jsonl to preview, or --demo (not both)")
        if demo:
            from ..demo import recorded

            data, label, target = recorded().encode(), "the demo session", Path("reference")
        else:
            assert file is not None
            path = Path(file)
            try:
                data = sys.stdin.buffer.read() if file == "-" else path.read_bytes()
            except OSError as exc:
                raise PreviewError(f"cannot read {file}: {exc.strerror}") from None
            label = "<stdin>" if file == "-" else path.name
            target = Path("session") if file == "-" else path.with_suffix("")
        env_file.load()  # the secrets the wizards saved, as `run` reads them: to redact them
        document = render(
            data,
            label,
            channel,
            verbosity=verbosity,
            capture=capture,
            text=text,
            config=config_path(config_file),
        )
        if text:  # a transcript is read in a terminal (`cat`, a pager): the agent's escapes shown
            document = visible(document)
    except ConfigError as exc:  # as `aep-bridge check` says it: the key and the fix
        for problem in exc.problems:
            print(scrub(f"aep-bridge preview: {exc.source}: {problem}"), file=err)
        return EXIT_USAGE
    except PreviewError as exc:
        print(f"aep-bridge preview: {scrub(str(exc))}", file=err)
        return EXIT_USAGE
    if out == "-":
        sys.stdout.write(document)
        return EXIT_OK
    suffix = "txt" if text else "html"
    written = Path(out) if out else target.with_name(f"{target.name}.{channel}.{suffix}")
    try:
        written.write_text(document, encoding="utf-8")
    except OSError as exc:
        print(f"aep-bridge preview: cannot write {written}: {exc.strerror}", file=err)
        return EXIT_USAGE
    print(f"aep-bridge preview: wrote {written}", file=err)
    return EXIT_OK


__all__ = ["PreviewError", "choose", "main", "read_events", "record", "render", "run_recorder"]
