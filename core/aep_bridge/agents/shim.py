"""`aep-bridge hook AGENT`: the command an agent runs on every hook.

It reads the hook's JSON payload on stdin, hands it to the per-user daemon over its Unix
socket (starting the daemon when none answers), and prints the daemon's answer on stdout
for the hooks that wait for one (a permission prompt answered from the chat).

The agent waits on this command, so it is built to be quick and harmless:
- standard library only, and `aep_bridge` imports nothing eagerly: it starts in tens of ms;
- it fails open: no daemon, a dead bridge, a bad payload or any error of its own ends it
  with status 0 and nothing on stdout, which every agent reads as "no opinion" (it goes on,
  or shows its own permission dialog). It never blocks the agent beyond the hold.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Final, NoReturn

from ..process.exit_status import EXIT_FAILED, EXIT_OK
from .paths import agentd_dir, check_private, socket_path

AGENTS: Final = ("claude-code", "codex")
#: hooks the daemon holds open until a human answers (or the hold passes)
HELD_HOOKS: Final = frozenset({"PermissionRequest", "Elicitation"})
#: hooks the daemon may hold while the person is away, for as long as the bridge says
#: (its `away.hold_minutes`, at most `MAX_HOLD`); not away, they return at once (steer.py)
STEERED_HOOKS: Final = frozenset({"Stop"})
#: how long a held hook waits for the human by default, in seconds (the agent's own timeout
#: for the hook, written by `aep-bridge install`, is above it)
DEFAULT_HOLD: Final = 55.0
#: the longest payload handed on; beyond it the hook is skipped (fail open)
MAX_PAYLOAD: Final = 8 * 1024 * 1024
#: how long a hook that is not held waits for the daemon to take its payload
QUICK_WAIT: Final = 3.0
#: how long a hook waits for a daemon it started to listen
START_WAIT: Final = 4.0
#: the longest hold the daemon takes (a longer `--hold` is this one)
MAX_HOLD: Final = 3600.0
#: the hold's margin: the daemon answers at the hold, the hook gives up a little after
_MARGIN: Final = 3.0


#: Claude Code's cap on Stop blocks in a row, in the environment it gives its hooks
BLOCK_CAP_VARIABLE: Final = "CLAUDE_CODE_STOP_HOOK_BLOCK_CAP"


def _cap_header(agent: str) -> str:
    """Claude Code's cap on Stop blocks in a row, for the daemon (steer.py), when it set one
    (the variable is Claude Code's: another agent's hook never sends it)."""
    if agent != "claude-code":
        return ""
    cap = os.environ.get(BLOCK_CAP_VARIABLE, "").strip()
    return (
        f"X-AEP-Block-Cap: {int(cap)}\r\n"
        if cap.isascii() and cap.isdigit() and len(cap) < 10
        else ""
    )


def _post(path: Path, agent: str, body: bytes, hold: float, wait: float) -> bytes:
    """One HTTP/1.1 exchange with the daemon over its socket; the response's body.

    Written out by hand rather than with `http.client`, whose import (email, ssl) costs
    the agent 20 ms on every hook; the daemon's answer is a small JSON body with a
    `Content-Length`, and the connection closes after it."""
    if path.parent.exists():
        check_private(path.parent)  # never talk to a socket another user could have put there
    head = (
        f"POST /hook/{agent} HTTP/1.1\r\nHost: agentd\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nX-AEP-Hold: {hold:g}\r\n{_cap_header(agent)}"
        "Connection: close\r\n\r\n"
    )
    chunks: list[bytes] = []
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(wait)
        sock.connect(os.fspath(path))
        sock.sendall(head.encode() + body)
        while chunk := sock.recv(65536):
            chunks.append(chunk)
            if sum(map(len, chunks)) > MAX_PAYLOAD:
                raise OSError("the daemon's answer is too long")
    status, _, rest = b"".join(chunks).partition(b"\r\n")
    if status.split(b" ")[1:2] != [b"200"]:
        raise OSError(f"the daemon answered {status.decode(errors='replace')!r}")
    return rest.partition(b"\r\n\r\n")[2]


def _start_daemon(directory: Path) -> subprocess.Popen[bytes]:
    """Start `aep-bridge agentd` in its own session, detached from the agent's terminal."""
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    with open(directory / "agentd.log", "ab") as log:  # the child keeps its own copy
        return subprocess.Popen(
            [sys.executable, "-m", "aep_bridge", "agentd"],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
            close_fds=True,
        )


def deliver(agent: str, body: bytes, *, hold: float, directory: Path | None = None) -> bytes:
    """Hand one payload to the daemon (started if needed); its answer's bytes.

    Raises OSError when no daemon takes it in time: the caller fails open."""
    directory = directory if directory is not None else agentd_dir()
    path = socket_path(directory)
    try:
        event = json.loads(body).get("hook_event_name")
    except (ValueError, AttributeError, RecursionError):  # the daemon refuses it, and says why
        event = None
    if event in HELD_HOOKS:
        wait = hold + _MARGIN
    elif event in STEERED_HOOKS:
        wait = MAX_HOLD + _MARGIN  # the bridge names the hold; the daemon keeps to MAX_HOLD
    else:
        wait = QUICK_WAIT
    try:
        return _post(path, agent, body, hold, wait)
    except (FileNotFoundError, ConnectionRefusedError):
        pass  # no daemon yet: start one, and try again while it comes up
    daemon = _start_daemon(directory)
    deadline = time.monotonic() + START_WAIT
    while True:
        try:
            return _post(path, agent, body, hold, wait)
        except (FileNotFoundError, ConnectionRefusedError):
            # gone already: it could not start (its log says why), or another one runs
            # and is still coming up (the lock): only the deadline ends that wait
            if time.monotonic() > deadline or daemon.poll() not in (None, 0):
                raise
            time.sleep(0.05)


class _Parser(argparse.ArgumentParser):
    """argparse, but a wrong command line exits 1, never argparse's 2: both agents read a
    hook's status 2 as "block" (the tool call refused), and a typo in the settings must not
    stop every tool the agent runs."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_FAILED, f"{self.prog}: error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="aep-bridge hook",
        description="Run by the agent on each hook: hands the payload on stdin to the agent "
        "daemon and prints its decision. Never fails the agent: any problem ends with "
        "status 0 and no output.",
    )
    parser.add_argument("agent", choices=AGENTS, help="the agent whose hook this is")
    parser.add_argument(
        "--hold",
        type=float,
        default=DEFAULT_HOLD,
        help=f"seconds a permission prompt waits for an answer (default {DEFAULT_HOLD:g})",
    )
    return parser


def _bounded(hold: float) -> float:
    """`--hold` as the daemon takes it: 0 to `MAX_HOLD` seconds (not a number: the default)."""
    return DEFAULT_HOLD if hold != hold else max(0.0, min(hold, MAX_HOLD))


def _say_skipped(exc: BaseException) -> None:
    """One line on stderr for the person reading the agent's hook log, terminal-safe."""
    try:
        from ..text.terminal import visible  # only now: the hook that skips nothing stays quick

        line = visible(f"aep-bridge hook: skipped ({type(exc).__name__}: {exc})", one_line=True)
        print(line[:500], file=sys.stderr)
    except Exception:  # the hook never fails the agent, even here
        pass


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        body = sys.stdin.buffer.read(MAX_PAYLOAD + 1)
        if not body.strip() or len(body) > MAX_PAYLOAD:
            return EXIT_OK
        answer = json.loads(deliver(args.agent, body, hold=_bounded(args.hold)))
        output = answer.get("output") if isinstance(answer, dict) else None
        if output is not None:
            printed = json.dumps(output, separators=(",", ":")) + "\n"  # whole, or not at all
            sys.stdout.write(printed)
            sys.stdout.flush()
    except (Exception, KeyboardInterrupt) as exc:  # any error of its own: no opinion
        _say_skipped(exc)
    return EXIT_OK


__all__ = ["AGENTS", "DEFAULT_HOLD", "HELD_HOOKS", "STEERED_HOOKS", "deliver", "main"]
