"""The commands that act as an agent of a running bridge: `emit` (events from files),
`ask` (one question, its answer printed) and `demo` (a scripted session)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Coroutine, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from ..config.config import ConfigError, resolve_channels
from ..process.client_endpoint import endpoint
from ..process.exit_status import EXIT_INTERRUPTED, EXIT_NO_ANSWER
from ..text.terminal import visible
from .common import EXIT_OK, EXIT_USAGE, EXIT_VIOLATIONS, load, open_input

if TYPE_CHECKING:
    import httpx


def emit(
    files: Sequence[str],
    *,
    config_file: str | None,
    url: str | None,
    token: str | None,
    batch: int = 500,
    demo: bool = False,
) -> int:
    """Send events from JSONL files (or stdin) to an endpoint's POST /events; with `demo`,
    first a recorded coding session (`aep_bridge.demo`), with fresh ids each time."""
    import httpx

    if not files and not demo:
        print(
            "aep-bridge emit: give the FILE.jsonl to send (- for stdin), or --demo", file=sys.stderr
        )
        return EXIT_USAGE
    given: list[tuple[str, list[bytes] | None]] = [(name, None) for name in files]
    if demo:
        from ..demo import fresh_session

        given.insert(0, ("the demo session", fresh_session()))
    try:
        base, secret = endpoint(config_file, url, token, "emit")
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return EXIT_USAGE
    sent = 0
    headers = {
        "AEP-Version": "0.1",
        "Content-Type": "application/x-ndjson",
        "Authorization": f"Bearer {secret}",
    }
    with httpx.Client(base_url=base, headers=headers, timeout=30) as client:
        for name, lines in given:
            if lines is None:
                try:
                    stream = open_input(name)
                except OSError as exc:
                    print(f"aep-bridge emit: cannot read {name}: {exc.strerror}", file=sys.stderr)
                    return EXIT_USAGE
                lines = [line for line in stream.read().splitlines() if line.strip()]
                if name != "-":
                    stream.close()
            for start in range(0, len(lines), batch):
                body = b"\n".join(lines[start : start + batch]) + b"\n"
                try:
                    reply = _post_events(client, body)
                except httpx.HTTPError as exc:
                    print(f"aep-bridge emit: cannot reach {base}: {exc}", file=sys.stderr)
                    return EXIT_VIOLATIONS
                answer = _answer_of(reply)
                if reply.status_code != 202:
                    detail = str(answer.get("detail", reply.text[:200]))
                    line = answer.get("line", 1)
                    line_no = start + (line if isinstance(line, int) else 1)
                    said = f": {detail}" if detail.strip() else ""
                    _line(f"{name}:{line_no}: refused ({reply.status_code}){said}", sys.stderr)
                    return EXIT_VIOLATIONS
                accepted = answer.get("accepted", 0)
                sent += accepted if isinstance(accepted, int) else 0
    print(f"sent {sent} event(s) to {base}/events", file=sys.stderr)
    return EXIT_OK


def _answer_of(reply: httpx.Response) -> dict[str, object]:
    """The endpoint's JSON answer, or `{}` for one that is none (a proxy's page, a server
    error's plain text): said, never a traceback."""
    try:
        answer = reply.json() if reply.content else {}
    except ValueError:
        return {}
    return answer if isinstance(answer, dict) else {}


#: how often `emit` sends a batch again that the bridge answered 503 (busy catching up)
EMIT_BUSY_RETRIES = 30


def _post_events(client: httpx.Client, body: bytes) -> httpx.Response:
    """POST a batch; a `503` (the bridge is catching up) is sent again, the same events, after
    its `Retry-After`, as AEP-0003 §3.2 asks of an emitter (the bridge dedupes a repeat)."""
    import time

    reply = client.post("/events", content=body)
    for _ in range(EMIT_BUSY_RETRIES):
        if reply.status_code != 503:
            return reply
        wait = reply.headers.get("retry-after", "1")
        time.sleep(min(30.0, float(wait)) if wait.isdigit() else 1.0)
        reply = client.post("/events", content=body)
    return reply


def _agent_socket(
    command: str, config_file: str | None, url: str | None, token: str | None
) -> tuple[str, str] | None:
    """The bridge's agent socket URL and its token for `command` (`ask`, `demo`), the local
    bridge's warnings printed when its config shows the question nowhere; None (the error
    printed) when there is no endpoint to reach."""
    try:
        base, secret = endpoint(config_file, url, token, command)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return None
    if url is None:  # the local bridge: its config says whether anything can show the question
        for warning in _unseen(config_file):
            print(f"aep-bridge {command}: warning: {warning}", file=sys.stderr)
    ws_base = base.replace("http://", "ws://", 1).replace("https://", "wss://", 1)
    return ws_base + "/socket", secret


def _unseen(config_file: str | None) -> list[str]:
    """Why a question put to the local bridge would be shown nowhere, or answered by
    nobody, going by the config it runs (the running bridge itself is not asked)."""
    try:
        config, host = load(config_file)
    except ConfigError:
        return []
    plan = resolve_channels(config, host)
    if not plan.channels:
        return [
            "the bridge's config runs no channel, so nothing will show this question and "
            "nobody can answer it: set one up with `aep-bridge setup telegram`, or run the "
            "bridge in a terminal with the console channel (`aep-bridge check` says what is "
            "configured)"
        ]
    if not any(c.config.approvers or c.config.approver_roles for c in plan.channels):
        return [
            "no channel in the bridge's config lists an approver, so nobody can answer this "
            "question: add your platform user id to a channel's approvers (`aep-bridge check`)"
        ]
    return []


def ask(
    question: str,
    options: Sequence[str],
    *,
    kind: str,
    config_file: str | None,
    url: str | None,
    token: str | None,
    timeout: float | None,
) -> int:
    """Put one question through the whole loop and print the answer."""
    from ..commands.tinyagent import TinyAgent

    found = _agent_socket("ask", config_file, url, token)
    if found is None:
        return EXIT_USAGE
    socket_url, secret = found

    async def go() -> int:
        async with TinyAgent(socket_url, secret) as agent:
            print(
                f"asking in session {agent.session}; waiting for an answer...",
                file=sys.stderr,
                flush=True,
            )
            answer = await agent.ask(question, options, kind=kind, timeout=timeout)
            _line(str(answer), sys.stdout)  # a typed answer's newline shown as \n
            return EXIT_OK

    # `closed`: the bridge stopped (or the network went) while we waited
    return _as_agent("ask", go(), closed="; no answer", late="no answer in time")


def demo(
    *,
    config_file: str | None,
    url: str | None,
    token: str | None,
    timeout: float,
    pace: float,
) -> int:
    """Play the scripted demo session against the bridge, printing each answer it gets."""
    from ..commands.demo_agent import DemoAgent

    found = _agent_socket("demo", config_file, url, token)
    if found is None:
        return EXIT_USAGE
    socket_url, secret = found
    agent = DemoAgent(socket_url, secret, timeout=timeout, pace=pace, say=_say)

    async def go() -> int:
        await agent.run()
        return EXIT_OK

    try:
        done = _as_agent("demo", go(), late=f"no answer within {timeout:g} s")
    except KeyboardInterrupt:
        print("aep-bridge demo: stopped; the session has ended", file=sys.stderr)
        return EXIT_INTERRUPTED
    if done == EXIT_OK:
        print("demo finished: the session has ended", flush=True)
    return done


def _as_agent(
    command: str, session: Coroutine[Any, Any, int], *, closed: str = "", late: str
) -> int:
    """Run a tiny agent's `session` to its exit status; the ways it ends without an answer
    as `command`'s error line and status (`closed`: what follows the reason the connection
    closed; `late`: what a timeout says)."""
    from ..commands.tinyagent import AgentError, Cancelled

    try:
        return asyncio.run(session)
    except AgentError as exc:
        detail = exc.detail + closed if exc.code == "closed" else str(exc)
        _line(f"aep-bridge {command}: {detail}", sys.stderr)
        return EXIT_USAGE
    except Cancelled:
        print(f"aep-bridge {command}: cancelled by control.cancel", file=sys.stderr)
        return EXIT_VIOLATIONS
    except TimeoutError:
        print(f"aep-bridge {command}: {late}", file=sys.stderr)
        return EXIT_NO_ANSWER


def _say(line: str) -> None:
    """The demo's lines name answers and who gave them: one line each."""
    print(visible(line, one_line=True), flush=True)


def _line(text: str, stream: TextIO) -> None:
    """Print `text` as one line: an answer, a refusal's detail or an error frame quotes words
    from elsewhere (an approver's, an agent's, another endpoint's), and a newline in them
    would print a line of its own."""
    print(visible(text, one_line=True), file=stream)
