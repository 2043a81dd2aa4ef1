"""The event path of the bridge: one event in, its delivery record, its session, and what
it shows in every routed channel (rendered once for channels alike), in one transaction.

`Mirror` is a part of the loop, built and wired by `Bridge`: it owns the per-event state
(the dedupe window's pruning, each stream's floors, the open store group, the threads to
create) and is given everything else it uses: the store, the sessions, the renderer, the
routes, the running channels (the bridge's own dict: a channel that starts or stops shows
here at once), and the question cards (`Cards`: a request's card, a heads-up's recipients).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from ..aep.envelope import Event
from ..outbox import Job, card_key
from ..render import Rendered, Renderer
from ..store import Floors, Store, floor_of
from .approvers import owner_of
from .attention import Attention
from .away import AwayState
from .channel_core import Channel
from .routing import Routes
from .sessions import SessionRecord, Sessions
from .withheld import Withheld, notice, shows_more

#: Events handled between two prunings of the dedupe window at most (`store.dedupe_window`
#: keys kept; a window smaller than ten times this is pruned every tenth of it).
PRUNE_EVERY = 10_000
#: Events handled in one store transaction at most (see `Mirror.group_commit`).
GROUP_MAX = 500
#: Chatter that may be dropped under backpressure (the outbox counts what it drops).
_DROPPABLE_SEVERITIES = frozenset({"debug", "info"})


def heads_up_key(request_id: str) -> str:
    """The `coalesce` key of a request's heads-up: what `_show_outcome` withdraws."""
    return f"heads-up:{request_id}"


def latest_key(kind: str) -> str:
    """The `coalesce` key of a session's heads-up that is about no question: one per kind."""
    return f"latest-heads-up:{kind}"


class Cards(Protocol):
    """What the mirror asks of the question cards (`questions.QuestionCards`)."""

    def open_request(self, session: SessionRecord, event: Event, targets: list[Channel]) -> str:
        """Store an `attention.requested` and queue its cards; returns the request's id."""
        ...

    def recipients(self, channel: Channel, session_id: str) -> tuple[str, ...]:
        """Who `channel` tells a session's heads-ups privately."""
        ...


class Mirror:
    """Events in: dedupe, sessions, rendering, the jobs of every routed channel."""

    def __init__(
        self,
        *,
        store: Store,
        sessions: Sessions,
        attention: Attention,
        away: AwayState,
        renderer: Renderer,
        routing: Routes,
        channels: Mapping[str, Channel],
        cards: Cards,
        identity: str,
        principal_in: Callable[[str, str], str | None],
        create_threads: Callable[[list[tuple[str, str]]], None],
        dedupe_window: int,
    ) -> None:
        """`channels` is the bridge's dict of running channels, read at every event.
        `identity`: the bridge's own source (its echoed commands are skipped).
        `principal_in(stream, session)`: who a source says emitted a session (its owner).
        `create_threads`: begins creating the threads an event's new session needs (the
        bridge runs those calls as tasks). `dedupe_window`: event keys the store keeps."""
        self.store = store
        self.sessions = sessions
        self.attention = attention
        self.away = away
        self.renderer = renderer
        self.routing = routing
        self.channels = channels
        self.identity = identity
        self._cards = cards
        self._principal_in = principal_in
        self._create_threads = create_threads
        self._withheld = Withheld(store)  # the capture notice's sessions (`withheld`)
        self._creating: list[tuple[str, str]] = []  # (channel, session id) to create now
        self._handled = 0
        self._grouped = 0
        #: how many event keys the dedupe window keeps (`store.dedupe_window`), and every how
        #: many events it is pruned to that
        self._seen_window = dedupe_window
        self._prune_every = max(1, min(PRUNE_EVERY, dedupe_window // 10))
        #: per stream, each session's position when the bridge started (`_handled_before`)
        self._floors: dict[str, Floors] = {}

    def group_commit(self) -> None:
        """Handle a burst of events in one store transaction (group commit).

        The group opens with the first event of a burst and commits as soon as this task
        waits for the next one (the loop runs the callback first), or after `GROUP_MAX`
        events. Nothing written in it leaves the process before it commits: the outbox and
        `send_command` commit an open group before a platform call or a command.
        """
        if self.store.group_until_idle():
            self._grouped = 0
            return
        self._grouped += 1
        if self._grouped >= GROUP_MAX:
            self.store.commit_group()

    # -- events -----------------------------------------------------------------------------

    def handle_event(self, stream: str, event: Event) -> None:
        """Everything one event causes, in one transaction with its delivery record."""
        if self.attention.waiting and event.seq is not None and event.session is not None:
            # the agent's own event, even one seen before: it claims its session again,
            # so answers waiting for it go now
            self.attention.agent_seen(event.source, event.session)
        if self._handled_before(stream, event):
            return
        with self.store.transaction():
            if not self.store.record_delivery(stream, event):
                return  # seen before (a replay, a resume, a redelivery)
            if event.source == self.identity:
                return  # our own commands and attention.routed, echoed back
            if event.session is None:
                self._agent_event(event)
            else:
                session = self._session_of(stream, event)
                if session is not None:
                    self._mirror(session, event)
        if self._creating:
            self._create_threads(self._creating)
            self._creating = []

    def _handled_before(self, stream: str, event: Event) -> bool:
        """Whether `event` is older than what this stream had handled when the bridge started.

        The dedupe window is bounded (the oldest keys are pruned), while a source replays
        everything it still holds after a restart; an event at or below the position its
        session had reached then was handled by an earlier run, seen key or not.
        """
        self._handled += 1
        if self._handled % self._prune_every == 0:
            self.store.prune_seen(self._seen_window)
        position = event.position
        if position is None or event.session is None:
            return False
        floors = self._floors.get(stream)
        if floors is None:
            floors = self._floors[stream] = self.store.floors(stream)
        floor = floor_of(floors, event.source, event.session)
        return floor is not None and position <= floor

    def _session_of(self, stream: str, event: Event) -> SessionRecord | None:
        """The event's session; the owner's sequenced events create it, others only find it."""
        if event.seq is None:  # commands, acks, attention.routed: foreign to the session
            key = event.session_key
            assert key is not None
            return self.sessions.find(*key) or self.sessions.find_by_session(key[1])
        key = event.session_key
        assert key is not None
        known = self.sessions.find(*key)
        if known is not None:
            return known
        owner = owner_of(self._principal_in(stream, key[1]), event)  # its first event
        session, created = self.sessions.get_or_create(event, stream, key[1], owner)
        if created:
            self._withheld.created(session.id)
            for name in self.routing.channels_for(event, list(self.channels)):
                channel = self.channels[name]
                thread_name = self.renderer.thread_name(event, ceiling=channel.config.capture)
                place = self.routing.place_for(event, name)
                self.sessions.begin_thread(session.id, name, thread_name, place)
                channel.outbox.hold(session.id)
                self._creating.append((name, session.id))
        return session

    def _targets(self, session: SessionRecord) -> list[Channel]:
        return [self.channels[c] for c in self.sessions.channels(session.id) if c in self.channels]

    def _mirror(self, session: SessionRecord, event: Event) -> None:
        targets = self._targets(session)
        self.attention.on_event(event, session)
        self.away.on_event(event, session)
        asked: str | None = None  # the request this event opened: its heads-up is keyed
        withheld = self._withheld.judge(session.id, event)
        if event.type == "attention.requested" and event.seq is not None:
            asked = self._cards.open_request(session, event, targets)
        # channels alike (same capture ceiling, verbosity, what rings, and whether they edit
        # in place) share one rendering and its jobs
        renderings: dict[tuple[Any, ...], tuple[Rendered, list[Job]]] = {}
        for channel in targets:
            config = channel.config
            edits = channel.adapter.capabilities.edits
            look = (config.capture, config.verbosity, tuple(sorted(config.notify)), edits)
            shared = renderings.get(look)
            if shared is None:
                rendered = self.renderer.render(
                    event,
                    ceiling=config.capture,
                    verbosity=config.verbosity,
                    notify=config.notify,
                    edits=edits,
                )
                droppable = event.severity in _DROPPABLE_SEVERITIES
                jobs = [
                    Job.message(
                        session.id,
                        message,
                        droppable=droppable and not message.notify and message.type != "error",
                    )
                    for message in rendered.messages
                ]
                shared = renderings[look] = (rendered, jobs)
            rendered, jobs = shared
            for job in jobs:
                channel.outbox.submit(job)
            if withheld and shows_more(config.capture):  # once, after the session's header
                channel.outbox.submit(Job.message(session.id, notice(session.id)))
            # a heads-up outside the thread; where there are no threads, the messages are
            # the heads-ups (the channel rings as it can), and a second one would ring twice.
            # A channel without heads-ups declines it: its outbox never queues it
            if rendered.notification is not None and channel.adapter.capabilities.threads:
                thread = self.sessions.thread(session.id, channel.name)
                notification = rendered.notification.model_copy(
                    update={
                        "session_id": session.id,
                        "session_name": thread.name if thread else None,
                        "request_id": asked,
                        "recipients": self._cards.recipients(channel, session.id),
                    }
                )
                # a question's heads-up is its own; of the others (a run finished, an error)
                # only the session's latest unsent one of each kind goes: a busy agent's
                # runs would otherwise queue a ping each behind the platform's pace
                key = heads_up_key(asked) if asked is not None else latest_key(notification.type)
                after = None if asked is None else card_key(asked)  # it links to the card
                channel.outbox.submit(Job.notification(notification, key=key, after=after))
            if rendered.rename and self.sessions.name_thread(
                session.id, channel.name, rendered.rename
            ):
                channel.outbox.submit(Job.rename(session.id, rendered.rename))
        if event.type == "session.ended":
            self._end(session, targets)

    def _end(self, session: SessionRecord, targets: list[Channel]) -> None:
        self.sessions.end(session.id)
        self._withheld.forget(session.id)
        for channel in targets:
            match channel.config.on_session_end:
                case "archive":
                    channel.outbox.submit(Job.archive(session.id))
                case "delete":
                    channel.outbox.submit(Job.delete(session.id))
                case "keep":
                    pass
            self.sessions.close_thread(session.id, channel.name)

    def _agent_event(self, event: Event) -> None:
        """`agent.*`: no session, so no thread; health changes become notifications."""
        for name in self.routing.channels_for(event, list(self.channels)):
            channel = self.channels[name]
            rendered = self.renderer.render(
                event, ceiling=channel.config.capture, verbosity=channel.config.verbosity
            )
            if rendered.notification is not None:
                channel.outbox.submit(Job.notification(rendered.notification))
