"""`aep-bridge agentd`: the per-user agent daemon between the hooks and the bridge.

Each hook call (`aep-bridge hook AGENT`, shim.py) posts its payload here over a Unix socket
in a private directory. The daemon maps it to AEP events (codex.py, claude_code.py), gives
them their envelope, session position and run (emitter.py), logs them, and sends them to the
bridge over one WebSocket (link.py). A permission prompt or a question is held open until a
human answers from the chat, the hold passes, or the agent moves on (held.py).

Routes (HTTP/1.1 on the socket; `curl --unix-socket SOCK http://agentd/healthz`):
- `POST /hook/{agent}`: a hook payload; answers `{"output": <the JSON the hook prints> | null}`
  at once, or, for a held hook, when it is decided;
- `GET /healthz`: `{"ok": true, "relay": <whether the bridge connection is up>}`.

It is started on demand by the first hook and keeps running; one per user (a lock file in
its directory), so a second start exits quietly.

No request outlives its daemon: each one it raises is recorded in its directory until it is
closed (ledger.py), and a daemon that starts closes, as dismissed, every request the last one
left open (it was killed). A held request also carries `expires_at` at its hold's end, so the
bridge closes its card then if nothing else does. A clean stop (SIGTERM, Ctrl-C) lets every
held hook go, closes what is open, and sends that to the bridge before it exits.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import json
import logging
import os
import signal
import socket
import ssl
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any, Final

from ..aep.envelope import Event
from ..aep.errors import InvalidEvent
from ..aep.redaction import RedactionPolicy, Redactor
from ..aep.registry import CAPTURE_ORDER, Capture, Severity
from ..config.config import ConfigError, config_path, read_config
from ..process.exit_status import EXIT_OK, EXIT_USAGE
from ..process.log_setup import TerminalSafe
from ..text.scrub import ScrubFilter, register, secrets_in
from . import claude_code, codex, grants, steer
from .bounds import TooLarge, bounded_id
from .emitter import LOG_DIR, Emitter, SessionState, log_name
from .held import AttentionLoop
from .ledger import Ledger, Left
from .link import BridgeLink
from .login import CA_VARIABLE, Login, LoginError, ssl_context
from .login import load as load_login
from .mapping import ALLOW, ALLOW_SESSION, Ceiling, Emission, Verdict
from .paths import agentd_dir, check_private, socket_path
from .shim import BLOCK_CAP_VARIABLE, DEFAULT_HOLD, HELD_HOOKS, MAX_HOLD, MAX_PAYLOAD

log = logging.getLogger("aep_bridge.agentd")

MAPPINGS: Final[dict[str, ModuleType]] = {"claude-code": claude_code, "codex": codex}
#: hooks after which an open request about the same tool is moot: the agent went on
_TOOL_MOVED_ON: Final = frozenset({"PostToolUse", "PostToolUseFailure", "PermissionDenied"})
#: what a held Stop maps to that ends the turn: said only once the agent does stop
_TURN_ENDS: Final = frozenset({"run.finished"})
#: hooks after which every open request of the session is moot
_SESSION_MOVED_ON: Final = frozenset({"UserPromptSubmit", "Stop", "StopFailure", "SessionEnd"})
#: hooks that close a heads-up ("the agent waits for you"): the person is back
_BACK: Final = frozenset({"UserPromptSubmit", "PreToolUse", "SessionEnd", "Stop"})
#: agents that keep no "for this session" rule of their own: the daemon keeps it
_DAEMON_KEEPS_RULES: Final = frozenset({"codex"})
#: how long a held prompt waits for the bridge link that is coming up (a daemon that just
#: started), before it is dismissed and the agent asks for itself; taken from the hold
LINK_WAIT: Final = 1.0
#: how long a clean stop waits for what it closed to reach the bridge
STOP_FLUSH: Final = 2.0
#: the events that end a request (AEP-0002 §7)
_TERMINALS: Final = frozenset({"attention.resolved", "attention.timeout"})
#: the daemon's own name on the wire: its `hello`, and the stream of its answers to commands
#: for a session none of its agents has (`_find`)
DAEMON_AGENT: Final = "aep-bridge-agentd"

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


@dataclass(slots=True)
class _Heads:
    """Heads-ups (informational requests) open per session, to close when the person is back."""

    open: dict[tuple[str, str], list[Event]] = field(default_factory=dict)


class AgentDaemon:
    """The daemon's state and its one ASGI app."""

    def __init__(
        self,
        directory: Path,
        url: str,
        token: str | None,
        *,
        ceiling: Ceiling | None = None,
        default_hold: float = DEFAULT_HOLD,
        trust: ssl.SSLContext | None = None,
    ) -> None:
        """`trust`: the certificates of a `wss://` bridge (`agent login --ca-file`); None:
        the system's."""
        self.ceiling = ceiling or Ceiling()
        self.default_hold = default_hold
        self.token = token
        self.trust = trust
        #: where the daemon asks whether a session is away (steer.py)
        self.away_url = steer.away_url(url)
        #: the hold of a Stop in `session` while its person is away, None when not away
        self.ask_away: Callable[[str], Awaitable[float | None]] = self._ask_bridge
        self.emitter = Emitter(directory)
        self.link = BridgeLink(
            url,
            token,
            self._on_command,
            agent=DAEMON_AGENT,
            instance=f"{socket.gethostname()}/agentd/{self.emitter.instance}",
            replay=self.emitter.recent,
            dropped=self._dropped,
            trust=trust,
        )
        self.loop = AttentionLoop(self._emit, self.link.send, self._find, self.ceiling)
        self._heads = _Heads()
        self._stopping = False
        self.ledger = Ledger(directory)
        self.closed_at_start = self._close_left_open()

    # -- events -------------------------------------------------------------------------

    def _emit(
        self,
        state: SessionState,
        type_: str,
        data: dict[str, Any],
        *,
        capture: Capture = "metadata",
        subject: str | None = None,
        cause: str | None = None,
        severity: Severity | None = None,
        run: str | None = None,
        extensions: dict[str, str | int | bool] | None = None,
    ) -> Event:
        event = self.emitter.build(
            state,
            type_,
            data,
            capture=capture,
            subject=subject,
            cause=cause,
            severity=severity,
            run=run,
            max_bytes=self.link.max_event_bytes,
            extensions=extensions,
        )
        if event.type == "attention.requested":  # durable before it can be shown
            self.ledger.add(Left(event.id, state.agent, state.session))
        elif event.type in _TERMINALS and event.subject is not None:
            self.ledger.forget(event.subject)
        self.link.send(event)
        return event

    async def _ask_bridge(self, session: str) -> float | None:
        return await steer.hold_if_away(self.away_url, self.token, session, trust=self.trust)

    def _close_left_open(self) -> int:
        """Close, as dismissed, every request the last daemon left open: it was killed, and
        nobody can answer them any more (their hooks have let the agent decide)."""
        closed = 0
        for request in self.ledger.left_open():
            if request.agent not in MAPPINGS:
                continue  # not a record this daemon wrote
            state = self.emitter.session(request.agent, request.session)
            try:
                self.loop.close(state, request.id)
            except (InvalidEvent, TooLarge):
                continue
            closed += 1
        self.ledger.save()  # nothing of the last daemon's is open now
        if closed:
            log.info("closed %d request(s) the last daemon left open", closed)
        return closed

    def stopping(self) -> None:
        """A clean stop: let every held hook go (the agent asks for itself). With the bridge
        connected, every open request, held or heads-up, is closed as dismissed (and sent
        before the daemon exits); with the bridge away, they stay recorded, and the next
        daemon closes them."""
        self._stopping = True
        if not self.link.connected:
            self.loop.release()
            return
        self.loop.dismiss_all()
        for agent, session in list(self._heads.open):
            self._close_heads_ups(self.emitter.session(agent, session))

    def _emit_mapped(
        self, state: SessionState, emission: Emission, cause: str | None = None
    ) -> Event:
        return self._emit(
            state,
            emission.type,
            emission.data,
            capture=emission.capture,
            subject=emission.subject,
            cause=cause,
            severity=emission.severity,
            run=emission.run,
        )

    def _find(self, session: str | None) -> SessionState | None:
        """The session a command names, to answer it in: one this daemon knows, else one
        its session logs show it had (it restarted since), else a stream of the daemon's
        own, so that a command it cannot take is refused, never dropped in silence."""
        if session is None:
            return None
        known = (s for (_, name), s in self.emitter.sessions.items() if name == session)
        found = next(known, None)
        if found is not None:
            return found
        logs = self.emitter.directory / LOG_DIR
        had = (a for a in MAPPINGS if (logs / a / log_name(session)).is_file())
        return self.emitter.session(next(had, DAEMON_AGENT), session)

    def _dropped(self, event: Event) -> None:
        """The link dropped `event` (too big for the bridge): a prompt nobody will see
        lets its hook go at once (the agent asks in its terminal)."""
        held = self.loop.pending.get(event.id)
        if held is not None:
            self.loop.let_go(held)

    async def _on_command(self, command: Event) -> None:
        await self.loop.on_command(command)

    def _close_heads_ups(self, state: SessionState) -> None:
        for request in self._heads.open.pop((state.agent, state.session), []):
            self.loop.close(state, request.id)

    # -- one hook -----------------------------------------------------------------------

    async def handle(
        self,
        agent: str,
        payload: Any,
        hold: float,
        gone: asyncio.Future[None] | None = None,
        *,
        block_cap: int = steer.DEFAULT_BLOCK_CAP,
    ) -> dict[str, Any] | None:
        """Map and emit one hook's events; the JSON the hook prints (None: nothing).
        `block_cap`: the agent's cap on Stop blocks in a row (0: none)."""
        mapping = MAPPINGS[agent]
        if not isinstance(payload, dict):
            return None
        session, _ = mapping.identity(payload)
        if not isinstance(session, str) or not session:
            return None
        session = bounded_id(session)  # a 2 MB session id is one session of a short name
        hook = payload.get("hook_event_name")
        clock = asyncio.get_running_loop()
        deadline = clock.time() + hold  # the hold runs from the hook's arrival
        expires = _rfc3339(time.time() + hold) if hook in HELD_HOOKS else None
        state = self.emitter.session(agent, session)
        if hook == "PermissionRequest" and agent in _DAEMON_KEEPS_RULES:
            rule = mapping.session_rule_key(payload)
            if rule is not None and rule in state.allowed:
                return mapping.hook_output(payload, Verdict(option=ALLOW))  # type: ignore[no-any-return]
        self._settle(agent, state, hook, payload)
        steer_hold: float | None = None
        if hook in getattr(mapping, "STEERED_HOOKS", ()):
            steer_hold = await self._steer_hold(agent, state, session, block_cap)
        emissions = mapping.map_hook(payload, self.ceiling)
        ends: list[Emission] = []
        if steer_hold is not None:
            # while the chat is asked what next the turn is not over: its end is said once
            # the agent does stop (Done, no answer), and not at all if an instruction carries
            # it on; so the question is the thread's next message, not a "finished" line
            ends = [e for e in emissions if e.type in _TURN_ENDS]
            emissions = [e for e in emissions if e.type not in _TURN_ENDS]
        held: tuple[Event, str | None] | None = None
        for emission in emissions:
            try:
                event = self._emit_one(state, hook, emission, payload, expires)
            except InvalidEvent as exc:  # a mapping fault: lose this event, not the hook
                codes = ", ".join(sorted({v.rule for v in exc.violations}))
                log.warning("dropped a %s event that is not valid: %s", emission.type, codes)
                continue
            except TooLarge as exc:  # thousands of keys: lose this event, not the hook
                log.warning("dropped an event: %s", exc)
                continue
            if event is not None and event.type == "attention.requested":
                if hook in HELD_HOOKS and "control" in (event.data or {}).get("respond_via", []):
                    held = (event, emission.subject)
                else:
                    self._heads.open.setdefault((agent, session), []).append(event)
        if held is None and steer_hold is not None:
            output = await self._steer(agent, state, payload, gone, steer_hold)
            if output is None:  # the agent stops after all: its turn ends now
                for end in ends:
                    self._emit_end(state, hook, end, payload)
            return output
        if held is None:
            return None
        request, subject = held
        return await self._hold(agent, state, payload, request, subject, deadline, gone)

    async def _steer_hold(
        self, agent: str, state: SessionState, session: str, block_cap: int
    ) -> float | None:
        """Whether a Stop is held (the person is away): the hold's seconds, or None when the
        agent stops as it always did (not away, no answer from the bridge, the daemon
        stopping).

        The agent ignores a block past its cap on blocks in a row: a question whose answer
        would be dropped is not asked (the agent stops; the person's next prompt resets it)."""
        if self._stopping:
            return None
        if block_cap > 0 and state.blocks >= block_cap:
            log.warning(
                "not asking what next: %d instructions in a row without a tool call reach "
                "%s's cap (%s=%d)",
                state.blocks,
                agent,
                BLOCK_CAP_VARIABLE,
                block_cap,
            )
            return None
        hold = await self.ask_away(session)
        if hold is None or self._stopping:
            return None
        return hold

    async def _steer(
        self,
        agent: str,
        state: SessionState,
        payload: dict[str, Any],
        gone: asyncio.Future[None] | None,
        hold: float,
    ) -> dict[str, Any] | None:
        """A Stop while the person is away (`_steer_hold`): ask the chat what next, and hold
        the hook until an instruction, Done, the hold's end, or the agent moving on
        (steer.py). None: the agent stops."""
        clock = asyncio.get_running_loop()
        deadline = clock.time() + hold
        emission = steer.stop_request(agent, payload, self.ceiling)
        data = {**emission.data, "expires_at": _rfc3339(time.time() + hold)}
        try:
            request = self._emit(
                state,
                emission.type,
                data,
                capture=emission.capture,
                severity=emission.severity,
                extensions={steer.STEER: steer.STOP},
            )
        except (InvalidEvent, TooLarge) as exc:  # lose the question, not the agent's stop
            log.warning("could not ask what next: %s", exc)
            return None
        output = await self._hold(
            agent, state, payload, request, steer.HELD_SUBJECT, deadline, gone
        )
        if output is not None:  # an instruction: the agent goes on, one more block in a row
            state.blocks += 1
        return output

    def _emit_end(
        self, state: SessionState, hook: Any, emission: Emission, payload: dict[str, Any]
    ) -> None:
        """Emit a held Stop's own end of the turn, once the agent does stop."""
        try:
            self._emit_one(state, hook, emission, payload)
        except (InvalidEvent, TooLarge) as exc:
            log.warning("dropped an event: %s", exc)

    async def _hold(
        self,
        agent: str,
        state: SessionState,
        payload: dict[str, Any],
        request: Event,
        subject: str | None,
        deadline: float,
        gone: asyncio.Future[None] | None,
    ) -> dict[str, Any] | None:
        """Hold the hook on `request` until it is decided or `deadline` (the loop's clock)."""
        clock = asyncio.get_running_loop()
        hold = max(0.0, deadline - clock.time())
        opened = self.loop.open(state, request, subject)  # answerable, dismissable, from now
        try:
            # a link coming up (the daemon just started): wait a moment for it
            ready = not self._stopping and await self.link.ready(min(LINK_WAIT, hold))
        except asyncio.CancelledError:  # the daemon stops
            self.loop.let_go(opened)
            raise
        if not ready:  # nobody can answer: the agent asks for itself, now
            self.loop.let_go(opened)
            return self._decided(agent, state, payload, opened.future.result())
        waiting: asyncio.Future[Verdict | None] = asyncio.ensure_future(
            self.loop.wait(opened, max(0.0, deadline - clock.time()))
        )
        try:
            if gone is not None:
                either: list[asyncio.Future[Any]] = [waiting, gone]
                await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
            if not waiting.done() and gone is not None and gone.done():
                waiting.cancel()  # the hook went away: the request is dismissed
                with contextlib.suppress(asyncio.CancelledError):
                    await waiting
                self.loop.let_go(opened)  # (if the wait never began)
                return None
            verdict = await waiting
        except asyncio.CancelledError:  # this call itself was cancelled (the daemon stops)
            waiting.cancel()
            self.loop.let_go(opened)
            raise
        return self._decided(agent, state, payload, verdict)

    def _decided(
        self, agent: str, state: SessionState, payload: dict[str, Any], verdict: Verdict | None
    ) -> dict[str, Any] | None:
        """What the hook prints for `verdict` (None: the agent decides for itself)."""
        mapping = MAPPINGS[agent]
        if verdict is not None and verdict.option == ALLOW_SESSION and agent in _DAEMON_KEEPS_RULES:
            rule = mapping.session_rule_key(payload)
            if rule is not None:
                state.allowed.add(rule)
        return mapping.hook_output(payload, verdict)  # type: ignore[no-any-return]

    def _emit_one(
        self,
        state: SessionState,
        hook: Any,
        emission: Emission,
        payload: dict[str, Any],
        expires: str | None = None,
    ) -> Event | None:
        run = None if emission.run is None else bounded_id(emission.run)
        if emission.type == "run.started" and state.run is not None and run != state.run:
            # the last run was never closed (the agent was interrupted): it ends here
            self._emit(state, "run.cancelled", {"by": "user"}, run=state.run)
        if emission.type == "session.ended":
            self.loop.dismiss(state)
            self._close_heads_ups(state)
        data = emission.data
        if (
            emission.type == "attention.requested"
            and hook == "PermissionRequest"
            and data.get("kind") == "permission"
        ):
            # the "for this session" options, each labelled with what it grants (grants.py)
            offered = MAPPINGS[state.agent].session_grants(payload)
            data = grants.with_options(data, grants.options(offered, self.ceiling))
        if (
            emission.type == "attention.requested"
            and expires is not None
            and "control" in (data.get("respond_via") or [])
        ):
            data = {**data, "expires_at": expires}  # the bridge closes it then, if nothing else
        cause = None
        if emission.type == "attention.requested" and hook == "PermissionRequest":
            cause = state.calls.cause(payload)  # the call it gates (calls.py), if seen
        event = self._emit_mapped(
            state,
            Emission(
                emission.type,
                data,
                emission.subject,
                emission.capture,
                emission.severity,
                emission.run,
            ),
            cause,
        )
        if emission.type == "tool.requested" and hook == "PreToolUse":
            state.calls.requested(payload, event.id)
        return event

    def _settle(self, agent: str, state: SessionState, hook: Any, payload: dict[str, Any]) -> None:
        """What this hook says about the requests and the calls still open in its session."""
        state.calls.hook(hook, payload)
        if hook in steer.RESETS_BLOCKS:
            state.blocks = 0
        if hook in _BACK:
            self._close_heads_ups(state)
        if hook == "UserPromptSubmit":  # typed in the terminal: a held Stop is answered there
            self.loop.answered_elsewhere(state, steer.HELD_SUBJECT, {})
        if hook in _TOOL_MOVED_ON:
            self.loop.dismiss(state, subject=_text(payload.get("tool_name")))
        elif hook in _SESSION_MOVED_ON:
            self.loop.dismiss(state)
        elif hook == "ElicitationResult":  # the person answered in the terminal
            server = _text(payload.get("mcp_server_name"))
            content = payload.get("content")
            if payload.get("action") == "accept" and isinstance(content, dict):
                self.loop.answered_elsewhere(state, server, {"values": content})
            else:  # declined or cancelled there: closed without an answer
                self.loop.dismiss(state, subject=server)

    # -- the ASGI app -------------------------------------------------------------------

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        method, path = scope["method"], scope["path"]
        if method == "GET" and path == "/healthz":
            await _reply(send, 200, {"ok": True, "relay": self.link.connected})
            return
        agent = path.removeprefix("/hook/") if path.startswith("/hook/") else None
        if method != "POST" or agent is None:
            await _reply(send, 404, {"error": "POST /hook/{agent} or GET /healthz"})
            return
        if agent not in MAPPINGS:
            await _reply(send, 404, {"error": f"unknown agent {agent!r}: {sorted(MAPPINGS)}"})
            return
        body = await _read_body(receive)
        if body is None:
            await _reply(send, 413, {"error": f"a hook payload is at most {MAX_PAYLOAD} bytes"})
            return
        try:
            payload = json.loads(body)
        except (ValueError, RecursionError):
            await _reply(send, 400, {"error": "the payload is not JSON"})
            return
        gone: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        watcher = asyncio.create_task(_watch_disconnect(receive, gone))
        try:
            output = await self.handle(
                agent,
                payload,
                _hold_of(scope, self.default_hold),
                gone,
                block_cap=_block_cap_of(scope, agent),
            )
        finally:
            watcher.cancel()
        await _reply(send, 200, {"output": output})


def _rfc3339(at: float) -> str:
    """A wall-clock time as AEP writes it (RFC 3339, UTC, milliseconds)."""
    return datetime.fromtimestamp(at, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _hold_of(scope: dict[str, Any], default: float) -> float:
    for name, value in scope.get("headers") or []:
        if name == b"x-aep-hold":
            try:
                hold = float(value)
            except ValueError:
                break
            return default if hold != hold else max(0.0, min(hold, MAX_HOLD))
    return default


def _block_cap_of(scope: dict[str, Any], agent: str) -> int:
    """The agent's cap on Stop blocks in a row, as its hook saw it (`X-AEP-Block-Cap`), else
    the agent's own default (`STOP_BLOCK_CAP` of its mapping: Codex has none, 0; Claude
    Code's is 8)."""
    for name, value in scope.get("headers") or []:
        if name == b"x-aep-block-cap" and value.isdigit() and len(value) < 10:
            return int(value)
    mapping = MAPPINGS.get(agent)
    default = getattr(mapping, "STOP_BLOCK_CAP", steer.DEFAULT_BLOCK_CAP)
    return default if isinstance(default, int) else steer.DEFAULT_BLOCK_CAP


async def _read_body(receive: Receive) -> bytes | None:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return b""
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_PAYLOAD:
            return None
        chunks.append(chunk)
        if not message.get("more_body"):
            return b"".join(chunks)


async def _watch_disconnect(receive: Receive, gone: asyncio.Future[None]) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            if not gone.done():
                gone.set_result(None)
            return


async def _reply(send: Send, status: int, body: dict[str, Any]) -> None:
    data = json.dumps(body, separators=(",", ":")).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


# -- the command ----------------------------------------------------------------------------


def add_parser(commands: Any) -> None:
    """`aep-bridge agentd` on the command line."""
    parser = commands.add_parser(
        "agentd",
        help="run the agent daemon the hooks talk to (started on demand by `aep-bridge hook`)",
        description="The per-user daemon between the agents' hooks and the bridge. The hooks "
        "start it when it is not running; run it yourself to see its log or choose options.",
    )
    parser.add_argument("--url", help="the bridge's address (default: the running bridge's)")
    parser.add_argument("--token", help="the bridge's token (default: this machine's bridge's)")
    parser.add_argument("--dir", help="its directory (socket, epoch, session logs)")
    parser.add_argument(
        "--ca-file",
        metavar="PEM",
        help="certificates to trust for a wss:// bridge besides the system's (default: "
        "$AEP_BRIDGE_CA_FILE, else the one `agent login` kept)",
    )
    parser.add_argument(
        "--capture",
        choices=CAPTURE_ORDER[1:],
        help="the highest capture level of events other than attention.* (default: the "
        "config's agents.capture, metadata)",
    )
    parser.add_argument(
        "--attention-capture",
        choices=CAPTURE_ORDER[1:],
        help="the highest capture level of attention.* events (default: the config's "
        "agents.attention_capture, redacted: the person answering sees the prompt, with "
        "secrets, paths and PII redacted)",
    )
    parser.add_argument("--config", help="the bridge's config file (default: as `run` finds it)")


def _address(
    url: str | None, token: str | None, config: str | None, stored: Login | None = None
) -> tuple[str, str | None]:
    """The bridge's WebSocket and token: the flags, else `AEP_BRIDGE_URL`/`_TOKEN`, else
    `agent login`'s (`stored`), else this machine's bridge (its `listen.json` and token)."""
    url = url or os.environ.get("AEP_BRIDGE_URL")
    token = token or os.environ.get("AEP_BRIDGE_TOKEN")
    if stored is not None and url is None:
        url, token = stored.url, token or stored.token
    if url is None or token is None:
        from ..process.client_endpoint import endpoint

        base, found = endpoint(config, url, token, "agentd")
        url, token = base, token or found
    if url.startswith(("http://", "https://")):
        url = url.replace("http", "ws", 1).rstrip("/") + "/socket"
    return url, token


def _trust(flag: str | None, stored: Login | None) -> ssl.SSLContext:
    """The certificates the daemon trusts for a `wss://` bridge: the system's (which honour
    `SSL_CERT_FILE`) plus `--ca-file`, else `AEP_BRIDGE_CA_FILE`, else the login's."""
    chosen = flag or os.environ.get(CA_VARIABLE) or (stored.ca_file if stored else None)
    return ssl_context(chosen)


def main(args: argparse.Namespace) -> int:
    """Run the daemon until SIGTERM or Ctrl-C; 0 also when another one already runs."""
    directory = Path(args.dir).expanduser() if args.dir else agentd_dir()
    try:
        _private_dir(directory)
    except PermissionError as exc:
        print(f"aep-bridge agentd: {exc}", file=sys.stderr)
        return EXIT_USAGE
    # held open (and locked) for the process's life: one daemon per directory
    lock = open(directory / "agentd.lock", "a+")  # noqa: SIM115
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        print("aep-bridge agentd: already running for this user", file=sys.stderr)
        return EXIT_OK
    pid = directory / "agentd.pid"  # a stale one (a killed daemon's) is written over
    pid.write_text(f"{os.getpid()}\n")
    signal.signal(signal.SIGTERM, _stop_now)  # until the server takes SIGTERM over
    try:
        return _run(args, directory)
    finally:
        _remove_pid(pid)


def _stop_now(signum: int, frame: Any) -> None:
    """SIGTERM before the daemon serves: stop, through the `finally`s (the pid file goes)."""
    raise SystemExit(0)


def _remove_pid(pid: Path) -> None:
    """Remove the pid file when it names this process (it always does: the lock is held)."""
    with contextlib.suppress(OSError, ValueError):
        if int(pid.read_text()) == os.getpid():
            pid.unlink()


def _run(args: argparse.Namespace, directory: Path) -> int:
    """The daemon, once it holds its directory's lock, until it stops."""
    logging.basicConfig(  # the libraries at WARNING: httpx's INFO lines are URLs
        level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stderr
    )
    log.setLevel(logging.INFO)
    try:
        config = read_config(config_path(args.config))
    except ConfigError as exc:
        print(f"aep-bridge agentd: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        stored = load_login()
        url, token = _address(args.url, args.token, args.config, stored)
        trust = _trust(args.ca_file, stored)
    except LoginError as exc:
        print(f"aep-bridge agentd: {exc}", file=sys.stderr)
        return EXIT_USAGE
    secrets = [*secrets_in(config), *([token] if token else [])]
    register(secrets)  # never in a line it writes, whatever the line quotes (a URL, an error)
    for handler in logging.getLogger().handlers:
        handler.addFilter(ScrubFilter())
        handler.addFilter(TerminalSafe())  # an agent's text as text, one line a record
    policy = RedactionPolicy.from_environment(
        config.redaction.secret_env, extra_values=secrets, pii=config.redaction.pii
    )
    ceiling = Ceiling(
        events=args.capture or config.agents.capture,
        attention=args.attention_capture or config.agents.attention_capture,
        redactor=Redactor(policy),
    )
    try:
        daemon = AgentDaemon(directory, url, token, ceiling=ceiling, trust=trust)
    except OSError as exc:  # its epoch or instance file a folder, a disk that is full
        where = exc.filename2 or exc.filename or directory
        print(
            f"aep-bridge agentd: cannot use {where}: {exc.strerror or exc} (move it aside, "
            "or run with another --dir)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(daemon, socket_path(directory)))
    return EXIT_OK


def _private_dir(directory: Path) -> None:
    """Make `directory` (0700), and refuse one another user owns or others can enter: the
    directory's permissions are what keeps other users away from the socket."""
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    check_private(directory)


def _bind(path: Path) -> socket.socket:
    """The daemon's listening socket at `path`, readable and writable by its user only."""
    _private_dir(path.parent)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # a socket left by a daemon that was killed (the lock says none runs)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        listener.bind(os.fspath(path))
    finally:
        os.umask(old)
    listener.listen(64)
    return listener


async def _serve(daemon: AgentDaemon, path: Path) -> None:
    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn's server, which lets the held hooks go as it stops (it would wait for
        them, up to their hold, before it closes)."""

        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            daemon.stopping()
            await super().shutdown(sockets)

    listener = _bind(path)
    # log_config=None: uvicorn logs through the daemon's handler (scrubbed, terminal-safe),
    # not through a handler of its own
    config = uvicorn.Config(
        daemon, log_level="warning", lifespan="on", access_log=False, log_config=None
    )
    server = Server(config)
    daemon.link.start()
    log.info(
        "agentd listening on %s (epoch %d), sending to %s",
        path,
        daemon.emitter.epoch,
        daemon.link.url,
    )
    try:
        asyncio.get_running_loop().add_signal_handler(
            signal.SIGTERM, lambda: setattr(server, "should_exit", True)
        )
        await server.serve(sockets=[listener])
    finally:
        daemon.stopping()  # (again, if the server did not get to it)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        if not await daemon.link.flush(STOP_FLUSH):
            log.warning("stopped with %d event(s) the bridge has not had", daemon.link.waiting)
        await daemon.link.close()
        daemon.ledger.close()


__all__ = ["MAPPINGS", "AgentDaemon", "add_parser", "main"]
