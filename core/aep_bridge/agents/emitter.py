"""The daemon's side of the envelope: identity, positions, runs, and the durable session log.

The daemon owns session order (AEP-0001 §7): each event gets the next `seq` of its session
within the daemon's `epoch`. The epoch is bumped and persisted on every start, so a daemon
that restarts mid-session never reuses a position. Every event is appended to the session's
JSONL log before it goes anywhere else: the log is the record `aep-bridge validate` checks
and a history consumer can replay, whatever happened to the connection.
"""

from __future__ import annotations

import getpass
import hashlib
import re
import secrets
import socket
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from ..aep.build import make_event
from ..aep.envelope import Event
from ..aep.ids import new_id, source_uri
from ..aep.registry import Capture, Severity
from .bounds import TooLarge, bounded_id, fit, json_size
from .calls import OpenCalls
from .paths import read_private, write_private

EPOCH_FILE: Final = "epoch"
#: the daemon directory's instance name, beside its epoch
INSTANCE_FILE: Final = "instance"
_INSTANCE: Final = re.compile(r"[0-9a-f]{16,64}")
LOG_DIR: Final = "logs"
_SAFE_NAME: Final = re.compile(r"[A-Za-z0-9._-]{1,80}")
#: types that end the session's current run
_RUN_ENDS: Final = frozenset({"run.finished", "run.failed", "run.cancelled"})


def next_epoch(directory: Path) -> int:
    """Bump and persist the restart generation: one more than the last start's."""
    try:
        last = int(read_private(directory / EPOCH_FILE, 64) or "")
    except ValueError:
        last = -1
    epoch = last + 1
    write_private(directory / EPOCH_FILE, f"{epoch}\n".encode())
    return epoch


def instance_id(directory: Path) -> str:
    """This daemon directory's own name for its `hello` (`identity.instance`): random, made
    at its first start, and the same at every later one, so the bridge gives a restarted
    daemon back its own sessions and never another daemon's (AEP-0003 §4: `instance`
    disambiguates processes)."""
    found = (read_private(directory / INSTANCE_FILE, 256) or "").strip()
    if _INSTANCE.fullmatch(found):
        return found
    made = secrets.token_hex(8)
    write_private(directory / INSTANCE_FILE, f"{made}\n".encode())
    return made


def log_name(session: str) -> str:
    """A file name for a session's log: the id when it is a plain name, else its hash."""
    if _SAFE_NAME.fullmatch(session) and not session.startswith("."):
        return f"{session}.jsonl"
    return f"{hashlib.sha256(session.encode()).hexdigest()[:32]}.jsonl"


@dataclass(slots=True)
class SessionState:
    """What the daemon remembers of one agent session."""

    agent: str
    session: str
    source: str
    seq: int = 0
    run: str | None = None
    runs: int = 0
    log: Path | None = None
    #: the last events sent, re-sent after a reconnect (dedupe makes that harmless, and it
    #: re-claims the session for its commands)
    recent: list[Event] = field(default_factory=list)
    #: session rules from "allow for this session", for agents that keep none themselves
    allowed: set[str] = field(default_factory=set)
    #: its calls not ended yet, to link a permission request to the one it gates (calls.py)
    calls: OpenCalls = field(default_factory=OpenCalls)
    #: instructions given in a row from the chat at a held Stop with no tool call between
    #: them: what Claude Code counts against CLAUDE_CODE_STOP_HOOK_BLOCK_CAP (steer.py)
    blocks: int = 0
    #: whether an event of it named the OS user yet (`osuser`, on its first events only)
    told_user: bool = False


#: the extension attribute naming the OS user the daemon runs as: with the source's host,
#: the bridge shows a session's owner as `ada (ada@laptop)` (`approvers.owner_of`)
OS_USER: Final = "osuser"
#: the longest OS user name sent (a longer one is not sent)
MAX_OS_USER: Final = 64


def os_user() -> str | None:
    """The OS user the daemon runs as, or None when it cannot be told (no passwd entry)."""
    try:
        name = getpass.getuser()
    except (KeyError, OSError):
        return None
    return name if 0 < len(name) <= MAX_OS_USER and name.isprintable() else None


class Emitter:
    """Builds, logs and positions every event the daemon emits."""

    #: events of a session re-sent after a reconnect
    RECENT: Final = 16
    #: sessions remembered (most recently active first to stay); an older one that comes
    #: back starts a new run of positions in the same epoch, after the ones it had
    SESSIONS: Final = 256
    #: sessions whose recent events are re-sent after a reconnect
    REPLAYED: Final = 32

    def __init__(
        self, directory: Path, *, host: str | None = None, user: str | None = None
    ) -> None:
        self.directory = directory
        self.host = host or socket.gethostname()
        self.user = user or os_user()
        self.epoch = next_epoch(directory)
        self.instance = instance_id(directory)
        self.sessions: OrderedDict[tuple[str, str], SessionState] = OrderedDict()
        #: where forgotten sessions' positions reached, so none is used twice in this epoch
        self._resumed: dict[tuple[str, str], int] = {}

    def recent(self) -> list[Event]:
        """The last events of the most recently active sessions, oldest session first."""
        live = list(self.sessions.values())[-self.REPLAYED :]
        return [event for state in live for event in state.recent]

    def session(self, agent: str, session: str) -> SessionState:
        session = bounded_id(session)
        key = (agent, session)
        state = self.sessions.get(key)
        if state is not None:
            self.sessions.move_to_end(key)
        else:
            logs = self.directory / LOG_DIR / agent
            logs.mkdir(parents=True, exist_ok=True, mode=0o700)
            state = SessionState(
                agent,
                session,
                source_uri(self.host, agent, session),
                seq=self._resumed.pop(key, 0),
                log=logs / log_name(session),
            )
            self.sessions[key] = state
            while len(self.sessions) > self.SESSIONS:
                self._forget()
        return state

    def _forget(self) -> None:
        """Drop the least recently active session, keeping where its positions reached."""
        _, state = self.sessions.popitem(last=False)
        self._resumed[(state.agent, state.session)] = state.seq

    def build(
        self,
        state: SessionState,
        type_: str,
        data: dict[str, Any] | None,
        *,
        capture: Capture = "metadata",
        subject: str | None = None,
        cause: str | None = None,
        severity: Severity | None = None,
        run: str | None = None,
        max_bytes: int | None = None,
        extensions: dict[str, str | int | bool] | None = None,
    ) -> Event:
        """The next event of `state`'s session, logged, at most `max_bytes` long (its longest
        strings cut to fit, bounds.py). Raises `InvalidEvent` on a bad one and `TooLarge` on
        one that cannot fit (nothing is logged or positioned then)."""
        if run is not None:
            run = bounded_id(run)
        counted = type_ == "run.started" and run is None  # a run the daemon names
        if counted:
            run = f"run-{state.runs + 1}-{new_id().lower()}"
        if self.user and not state.told_user:  # the owner's OS user, once a session
            extensions = {**(extensions or {}), OS_USER: self.user}

        def made(payload: dict[str, Any] | None, **same: Any) -> Event:
            return make_event(
                type_,
                source=state.source,
                agent=state.agent,
                session=state.session,
                seq=state.seq,
                epoch=self.epoch,
                run=run or state.run,
                data=payload,
                subject=None if subject is None else bounded_id(subject),
                cause=cause,
                severity=severity,
                capture=capture,
                extensions=extensions,
                **same,
            )

        event = made(data)
        if max_bytes is not None and len(event.raw) > max_bytes:
            room = max_bytes - (len(event.raw) - (json_size(data) if data is not None else 0))
            fitted = fit(data, room) if data is not None and room > 0 else None
            if fitted is None:
                raise TooLarge(type_, len(event.raw), max_bytes)
            event = made(fitted, id=event.id, time=event.time)
            if len(event.raw) > max_bytes:
                raise TooLarge(type_, len(event.raw), max_bytes)
        if type_ == "run.started":
            state.runs += counted
            state.run = run
        state.seq += 1
        state.told_user = True
        if type_ in _RUN_ENDS:
            state.run = None
        if state.log is not None:
            with open(state.log, "ab") as log:
                log.write(event.raw + b"\n")
        state.recent.append(event)
        del state.recent[: -self.RECENT]
        return event


__all__ = [
    "Emitter",
    "SessionState",
    "instance_id",
    "log_name",
    "next_epoch",
]
