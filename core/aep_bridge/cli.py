"""The `aep-bridge` command."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, TextIO

from . import __version__, _startup
from .aep.jsonl import Finding, LogCheck
from .aep.validation import DEFAULT_MAX_EVENT_BYTES
from .client_endpoint import endpoint, running_bridge
from .config import (
    CONFIG_ENV,
    DEFAULT_HOST,
    DEFAULT_PORT,
    BridgeConfig,
    ChannelPlan,
    ConfigError,
    config_path,
    default_config_path,
    read_config,
    resolve_channels,
)
from .doctor import check_channel
from .plugins import PluginHost
from .scrub import scrub, secrets_in

if TYPE_CHECKING:
    import httpx

log = logging.getLogger("aep_bridge.cli")

#: `--config`: every command that reads a config finds it the same way (`config_path`)
CONFIG_HELP = (
    f"config file (default ${CONFIG_ENV}, else ~/.config/aep-bridge/config.json if it "
    "exists, else built-in; `aep-bridge config path` says which)"
)

EXIT_OK = 0
EXIT_VIOLATIONS = 1
EXIT_USAGE = 2


def _open(name: str) -> BinaryIO:
    return sys.stdin.buffer if name == "-" else open(name, "rb")


def validate(
    files: Sequence[str],
    *,
    as_json: bool = False,
    max_bytes: int = DEFAULT_MAX_EVENT_BYTES,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Check session logs as one stream; print each violation with file, line and rule."""
    out = out or sys.stdout
    err = err or sys.stderr
    check = LogCheck(max_bytes=max_bytes)
    findings: list[Finding] = []
    for name in files:
        label = "<stdin>" if name == "-" else name
        try:
            stream = _open(name)
        except OSError as exc:
            print(f"aep-bridge validate: cannot read {name}: {exc.strerror}", file=err)
            return EXIT_USAGE
        with stream if name != "-" else _noclose(stream):
            for finding in check.check(label, stream):
                findings.append(finding)
                if not as_json:
                    print(finding, file=out)
    summary = check.checker.summary()
    if as_json:
        json.dump(
            {
                "ok": not findings,
                "files": list(files),
                "lines": check.lines,
                "valid_events": check.valid,
                "redeliveries": summary.redeliveries,
                "sessions": summary.sessions,
                "violations": [f.to_dict() for f in findings],
            },
            out,
            indent=2,
            ensure_ascii=False,
        )
        out.write("\n")
    else:
        verdict = "ok" if not findings else f"{len(findings)} violation(s)"
        print(
            f"{verdict}: {check.lines} line(s), {check.valid} valid event(s), "
            f"{summary.sessions} session(s)",
            file=err,
        )
    return EXIT_VIOLATIONS if findings else EXIT_OK


class _noclose:
    """Use stdin in a `with` without closing it."""

    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream

    def __enter__(self) -> BinaryIO:
        return self.stream

    def __exit__(self, *exc: object) -> None:
        return None


def _load(config_file: str | None) -> tuple[BridgeConfig, PluginHost]:
    host = PluginHost()
    host.load()
    return read_config(config_path(config_file)), host


def run(
    config_file: str | None = None,
    host: str | None = None,
    port: int | None = None,
    *,
    log_level: str | None = None,
    verbose: bool = False,
    quiet: bool = False,
) -> int:
    """Serve the bridge: the embedded AEP endpoint and the configured channels."""
    from . import log_setup

    # the bridge at INFO (or as asked), the libraries at WARNING; httpx and httpcore at
    # WARNING unless DEBUG is asked for: their INFO lines are URLs, and URLs can hold tokens
    log_setup.configure(log_level, verbose=verbose, quiet=quiet)
    held: int | None = None
    try:  # until the bridge handles signals itself, Ctrl-C ends it here, in one line
        try:
            config, plugins = _load(config_file)
        except ConfigError as exc:
            print(exc, file=sys.stderr)
            return EXIT_USAGE
        listen = config.listen.model_copy(
            update={k: v for k, v in (("host", host), ("port", port)) if v is not None}
        )
        from .server import StartFailed, hold_state_dir, serve, state_dir_of

        try:
            # one bridge per state directory, for this process's life, before the store opens
            held = hold_state_dir(state_dir_of(config))
            try:
                asyncio.run(serve(config, plugins, listen.host, listen.port))
            except KeyboardInterrupt:  # before the bridge took its signals: it ends there
                log.info("interrupted while starting (Ctrl-C)")
                return _startup.EXIT_INTERRUPTED
        except StartFailed as failed:
            return failed.status
        finally:
            # stopped (or failing): a Ctrl-C pressed once more on the way out changes nothing
            for signum in (signal.SIGINT, signal.SIGTERM):
                signal.signal(signum, signal.SIG_IGN)
    except KeyboardInterrupt:
        log.info("interrupted while starting (Ctrl-C)")
        _startup.end_interrupted()
        return _startup.EXIT_INTERRUPTED
    finally:
        if held is not None:
            os.close(held)
    return EXIT_OK


def _state_dir(config: BridgeConfig) -> Path:
    from .server import state_dir_of

    return state_dir_of(config)


def token(config_file: str | None, *, rotate: bool = False) -> int:
    """Print the bridge's bearer token (made on first use); `rotate` replaces it."""
    from .intake.auth import load_or_create_token, rotate_token

    try:
        config = read_config(config_path(config_file))
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return EXIT_USAGE
    state_dir = _state_dir(config)
    print(rotate_token(state_dir) if rotate else load_or_create_token(state_dir))
    running = running_bridge(state_dir, "token")
    if running is not None:
        print(
            f"aep-bridge token: the bridge listening at {running} "
            + ("keeps using the old token until it is restarted" if rotate else "uses it"),
            file=sys.stderr,
        )
    return EXIT_OK


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
        from .demo import fresh_session

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
                    stream = _open(name)
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
                if reply.status_code != 202:
                    detail = reply.json().get("detail", reply.text) if reply.content else ""
                    line_no = start + int(reply.json().get("line", 1)) if reply.content else start
                    print(
                        f"{name}:{line_no}: refused ({reply.status_code}): {detail}",
                        file=sys.stderr,
                    )
                    return EXIT_VIOLATIONS
                sent += int(reply.json().get("accepted", 0))
    print(f"sent {sent} event(s) to {base}/events", file=sys.stderr)
    return EXIT_OK


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


def _unseen(config_file: str | None) -> list[str]:
    """Why a question put to the local bridge would be shown nowhere, or answered by
    nobody, going by the config it runs (the running bridge itself is not asked)."""
    try:
        config, host = _load(config_file)
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
    from .tinyagent import AgentError, Cancelled, TinyAgent

    try:
        base, secret = endpoint(config_file, url, token, "ask")
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return EXIT_USAGE
    if url is None:  # the local bridge: its config says whether anything can show the question
        for warning in _unseen(config_file):
            print(f"aep-bridge ask: warning: {warning}", file=sys.stderr)
    socket_url = base.replace("http://", "ws://", 1).replace("https://", "wss://", 1) + "/socket"

    async def go() -> int:
        async with TinyAgent(socket_url, secret) as agent:
            print(
                f"asking in session {agent.session}; waiting for an answer...",
                file=sys.stderr,
                flush=True,
            )
            answer = await agent.ask(question, options, kind=kind, timeout=timeout)
            print(answer)
            return EXIT_OK

    try:
        return asyncio.run(go())
    except AgentError as exc:
        if exc.code == "closed":  # the bridge stopped (or the network went) while we waited
            print(f"aep-bridge ask: {exc.detail}; no answer", file=sys.stderr)
        else:
            print(f"aep-bridge ask: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except Cancelled:
        print("aep-bridge ask: cancelled by control.cancel", file=sys.stderr)
        return EXIT_VIOLATIONS
    except TimeoutError:
        print("aep-bridge ask: no answer in time", file=sys.stderr)
        return 3


def demo(
    *,
    config_file: str | None,
    url: str | None,
    token: str | None,
    timeout: float,
    pace: float,
) -> int:
    """Play the scripted demo session against the bridge, printing each answer it gets."""
    from .demo_agent import DemoAgent
    from .tinyagent import AgentError, Cancelled

    try:
        base, secret = endpoint(config_file, url, token, "demo")
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return EXIT_USAGE
    if url is None:
        for warning in _unseen(config_file):
            print(f"aep-bridge demo: warning: {warning}", file=sys.stderr)
    socket_url = base.replace("http://", "ws://", 1).replace("https://", "wss://", 1) + "/socket"
    agent = DemoAgent(socket_url, secret, timeout=timeout, pace=pace, say=_say)
    try:
        asyncio.run(agent.run())
    except AgentError as exc:
        detail = exc.detail if exc.code == "closed" else str(exc)
        print(f"aep-bridge demo: {detail}", file=sys.stderr)
        return EXIT_USAGE
    except Cancelled:
        print("aep-bridge demo: cancelled by control.cancel", file=sys.stderr)
        return EXIT_VIOLATIONS
    except TimeoutError:
        print(f"aep-bridge demo: no answer within {timeout:g} s", file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        print("aep-bridge demo: stopped; the session has ended", file=sys.stderr)
        return 130
    print("demo finished: the session has ended", flush=True)
    return EXIT_OK


def _say(line: str) -> None:
    print(line, flush=True)


def check(config_file: str | None, *, out: TextIO | None = None) -> int:
    """Validate a config as `run` would use it; exit 1 if anything must be fixed."""
    out = out or sys.stdout
    try:
        config, plugins = _load(config_file)
    except ConfigError as exc:
        print(exc, file=out)
        return EXIT_VIOLATIONS
    source = config_file or str(config_path(None) or "embedded defaults")
    plan = resolve_channels(config, plugins)
    secrets = _secrets(config, plan)
    for problem in plan.problems:
        print(scrub(f"{source}: error: {problem}", secrets), file=out)
    for warning in plan.warnings:
        print(scrub(f"{source}: warning: {warning}", secrets), file=out)
    if plan.problems:
        print(f"{source}: {len(plan.problems)} problem(s) to fix", file=out)
        return EXIT_VIOLATIONS
    names = ", ".join(f"{c.name} ({c.registration.name})" for c in plan.channels) or "none"
    print(
        f"{source}: ok: listening on {config.listen.host}:{config.listen.port}; channels: {names}",
        file=out,
    )
    return EXIT_OK


def _secrets(config: BridgeConfig, plan: ChannelPlan) -> list[str]:
    """The secrets `check` and `doctor` keep out of what they print (`scrub`): every secret
    field of the config and of each channel's config."""
    return secrets_in(config, *(resolved.config for resolved in plan.channels))


def doctor(config_file: str | None, *, out: TextIO | None = None) -> int:
    """Check each channel's platform side (token, chat, rights) without running the bridge;
    print every check and the fix for each failure. Exit 1 if anything must be fixed."""
    out = out or sys.stdout
    try:
        config, host = _load(config_file)
    except ConfigError as exc:
        print(exc, file=out)
        return EXIT_VIOLATIONS
    plan = resolve_channels(config, host)
    secrets = _secrets(config, plan)
    failed = len(plan.problems)
    for problem in plan.problems:
        print(scrub(f"config: {problem}", secrets), file=out)
    for resolved in plan.channels:
        failures, lines = asyncio.run(check_channel(resolved))
        failed += failures
        for line in lines:
            print(scrub(line, secrets), file=out)
    if failed:
        print(f"{failed} problem(s) to fix", file=out)
        return EXIT_VIOLATIONS
    print("everything checked is ok", file=out)
    return EXIT_OK


def plugins(*, as_json: bool = False, out: TextIO | None = None) -> int:
    """List the plugins found, where they come from, and whether they loaded."""
    out = out or sys.stdout
    host = PluginHost()
    host.load()
    if as_json:
        json.dump(
            [
                {
                    "name": r.name,
                    "module": r.module,
                    "distribution": r.distribution,
                    "version": r.version,
                    "status": r.status,
                    "error": r.error,
                    "channels": r.channels,
                    "builtin": r.builtin,
                }
                for r in host.records
            ],
            out,
            indent=2,
        )
        out.write("\n")
        return EXIT_OK
    if not host.records:
        print("no plugins found", file=out)
    for r in host.records:
        origin = f"{r.distribution} {r.version}" if r.distribution else r.module
        kind = "built-in" if r.builtin else "plugin"
        if r.status == "loaded":
            print(
                f"{r.name}: loaded ({kind}, {origin}); channels: {', '.join(r.channels)}", file=out
            )
        else:
            print(f"{r.name}: FAILED ({kind}, {origin}): {r.error}", file=out)
    return EXIT_OK


def show_config_path(
    config_file: str | None = None, *, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """Print the config file the other commands would read; say on stderr where that choice
    comes from and whether the file exists."""
    out = out or sys.stdout
    err = err or sys.stderr
    chosen = config_file or os.environ.get(CONFIG_ENV)
    if config_file:
        path, origin = Path(config_file).expanduser(), "--config"
    elif chosen:
        path, origin = Path(chosen).expanduser(), f"${CONFIG_ENV}"
    else:
        path, origin = default_config_path(), "the default location"
    print(path, file=out)
    if path.exists():
        print(f"aep-bridge config path: exists (from {origin})", file=err)
    elif chosen:
        print(
            f"aep-bridge config path: does not exist (from {origin}): "
            "the commands that read it will say they cannot",
            file=err,
        )
    else:
        print(
            "aep-bridge config path: does not exist (the default location): the built-in "
            "defaults apply until you create it",
            file=err,
        )
    return EXIT_OK


NO_CHANNEL = (
    "no channel is running: nothing shows your agents' sessions; fix the channels listed "
    "(`aep-bridge check`, `aep-bridge doctor`, the bridge's log) and restart the bridge"
)


def _age(seconds: float | None) -> str:
    """45s, 3m 05s, 2h 10m, 3d 4h."""
    if seconds is None:
        return "-"
    whole = int(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m {whole % 60:02d}s"
    if whole < 86400:
        return f"{whole // 3600}h {whole % 3600 // 60:02d}m"
    return f"{whole // 86400}d {whole % 86400 // 3600}h"


def status(
    *,
    config_file: str | None,
    url: str | None,
    token: str | None,
    as_json: bool = False,
    out: TextIO | None = None,
) -> int:
    """Ask the running bridge for its sources, channels, pending questions and outboxes.

    Exit 0 when it runs with at least one channel and nothing failed, 1 when no channel is
    running or a channel or source failed, 2 when no bridge answers (or it refuses the token).
    """
    import httpx

    out = out or sys.stdout
    try:
        base, secret = endpoint(config_file, url, token, "status")
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return EXIT_USAGE
    try:
        reply = httpx.get(
            f"{base}/status", headers={"Authorization": f"Bearer {secret}"}, timeout=10.0
        )
    except httpx.HTTPError as exc:
        print(
            f"aep-bridge status: no bridge answers at {base} ({exc}); is `aep-bridge run` "
            "running (with this config)?",
            file=sys.stderr,
        )
        return EXIT_USAGE
    try:
        report = reply.json()
    except ValueError:
        report = None
    if reply.status_code != 200 or not isinstance(report, dict):
        detail = report.get("detail", "") if isinstance(report, dict) else reply.text[:200]
        print(
            f"aep-bridge status: {base}/status answered {reply.status_code}: {detail}",
            file=sys.stderr,
        )
        return EXIT_USAGE
    channels = report.get("channels", [])
    sources = report.get("sources", [])
    failed = [c for c in channels if c.get("state") in ("failed", "starting")] + [
        s for s in sources if s.get("state") == "failed"
    ]
    idle = not report.get("running_channels")
    if as_json:
        json.dump(report, out, indent=2, ensure_ascii=False)
        out.write("\n")
        if idle:
            print(f"aep-bridge status: {NO_CHANNEL}", file=sys.stderr)
        return EXIT_VIOLATIONS if idle or failed else EXIT_OK
    head = f"bridge at {base}"
    if report.get("version"):
        head += f": aep-bridge {report['version']}"
    if report.get("pid"):
        head += f", pid {report['pid']}"
    if report.get("uptime") is not None:
        head += f", up {_age(report['uptime'])}"
    print(head, file=out)
    if idle:
        print(f"\n  !!! {NO_CHANNEL}\n", file=out)
    print("sources:", file=out)
    for source in sources:
        line = f"  {source.get('name')}: {source.get('state')}"
        if source.get("reason"):
            line += f": {source['reason']}"
        if "files" in source:
            line += f" ({source['files']} log(s) open, {source.get('bad_lines', 0)} bad line(s))"
        print(line, file=out)
    print("channels:", file=out)
    if not channels:
        print("  none configured", file=out)
    for channel in channels:
        line = f"  {channel.get('name')} ({channel.get('type')}): {channel.get('state')}"
        if channel.get("state") == "failed":
            line = line.replace(": failed", ": FAILED")
        elif channel.get("state") == "starting":
            line = line.replace(": starting", ": NOT STARTED YET (trying again)")
        if channel.get("reason"):
            line += f": {channel['reason']}"
        if "outbox" in channel:
            line += f", outbox {channel['outbox'].get('queued', 0)} queued"
        print(line, file=out)
    pending = report.get("pending", {})
    sessions = pending.get("sessions", [])
    print(
        f"pending questions: {pending.get('count', 0)}"
        + (
            f" in {len(sessions)} session(s), oldest waiting {_age(pending.get('oldest_age'))}"
            if sessions
            else ""
        ),
        file=out,
    )
    for session in sessions:
        who = " ".join(str(part) for part in (session.get("agent"), session.get("session")) if part)
        name = session.get("name")
        named = f" {name!r}" if name and name != session.get("session") else ""
        print(
            f"  {who}{named}: {session.get('count')} waiting, the oldest for "
            f"{_age(session.get('oldest_age'))}",
            file=out,
        )
    return EXIT_VIOLATIONS if idle or failed else EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="aep-bridge",
        description="Watch and steer AI coding agents (AEP 0.1) from chat.",
    )
    parser.add_argument("--version", action="version", version=f"aep-bridge {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = commands.add_parser(
        "run", help="run the bridge: the embedded AEP endpoint and the configured channels"
    )
    serve.add_argument("--config", help=CONFIG_HELP)
    serve.add_argument("--host", help=f"listen address (default {DEFAULT_HOST})")
    serve.add_argument("--port", type=int, help=f"port (default {DEFAULT_PORT})")
    loudness = serve.add_mutually_exclusive_group()
    loudness.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="debug lines from the bridge, and the libraries' INFO lines (not httpx's)",
    )
    loudness.add_argument("-q", "--quiet", action="store_true", help="only warnings and errors")
    loudness.add_argument(
        "--log-level",
        type=str.upper,
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="the bridge's level (default INFO); DEBUG is everything, URLs with tokens included",
    )

    verify = commands.add_parser("check", help="validate a config file as `run` would use it")
    verify.add_argument("--config", metavar="FILE", help=CONFIG_HELP)
    verify.add_argument("file", nargs="?", metavar="FILE", help="the same as --config FILE")

    medic = commands.add_parser(
        "doctor",
        help="check each channel's platform side (token, chat, rights) and print the fixes",
    )
    medic.add_argument("--config", help=CONFIG_HELP)

    sender = commands.add_parser("emit", help="send events from JSONL files to an endpoint")
    sender.add_argument("files", nargs="*", metavar="FILE", help="a .jsonl file, or - for stdin")
    sender.add_argument(
        "--demo",
        action="store_true",
        help="send a recorded coding session (new ids and session each time; no FILE needed)",
    )
    question = commands.add_parser(
        "ask", help="ask a question as a tiny agent and print the answer it gets"
    )
    question.add_argument("question")
    question.add_argument("--option", action="append", default=[], help="an answer to offer")
    question.add_argument(
        "--kind", default="permission", choices=["permission", "input", "review", "other"]
    )
    question.add_argument("--timeout", type=float, help="seconds to wait (default: forever)")
    player = commands.add_parser(
        "demo",
        help="play a scripted coding session against the bridge; answer it in any channel",
    )
    player.add_argument(
        "--timeout",
        type=float,
        default=300.0,
        help="seconds each question waits for its answer (default 300)",
    )
    player.add_argument(
        "--pace",
        type=float,
        default=0.3,
        metavar="SECONDS",
        help="pause between the session's steps (default 0.3; 0 for none)",
    )
    report = commands.add_parser(
        "status",
        help="ask the running bridge for its sources, channels, pending questions, outboxes",
    )
    report.add_argument("--json", action="store_true", help="print the bridge's JSON report")
    for client in (sender, question, player, report):
        client.add_argument(
            "--url",
            help="the endpoint (default: where the running bridge listens, from its "
            "listen.json, else the config's listen address)",
        )
        client.add_argument("--token", help="the endpoint's token (default: this bridge's)")
        client.add_argument("--config", help=CONFIG_HELP + "; for listen and state_dir")

    secret = commands.add_parser("token", help="print the bridge's bearer token")
    secret.add_argument("--config", help=CONFIG_HELP + "; for its state_dir")
    secret.add_argument("--rotate", action="store_true", help="replace the token with a new one")

    configs = commands.add_parser(
        "config", help="where the config file is (`aep-bridge config path`)"
    )
    config_commands = configs.add_subparsers(dest="config_command", required=True, metavar="WHAT")
    where = config_commands.add_parser(
        "path",
        help="print the config file the other commands read (whether it exists: on stderr)",
    )
    where.add_argument("--config", help=CONFIG_HELP)

    listing = commands.add_parser("plugins", help="list plugins, their packages and status")
    listing.add_argument("--json", action="store_true", help="print JSON")

    installer = commands.add_parser(
        "install",
        help="connect Claude Code or Codex: write its hook entries into a project",
        description="Merge `aep-bridge hook AGENT` entries into the project's "
        ".claude/settings.json (claude-code) or .codex/hooks.json (codex), keeping "
        "everything else in the file; --uninstall removes exactly those entries.",
    )
    installer.add_argument("agent", choices=["claude-code", "codex"])
    installer.add_argument(
        "--project",
        metavar="DIR",
        help="the project (default: the git work tree of the current folder, else the folder)",
    )
    installer.add_argument(
        "--uninstall", action="store_true", help="remove the entries install wrote"
    )
    installer.add_argument(
        "--hold",
        type=float,
        metavar="SECONDS",
        help="how long a permission prompt waits for an answer from chat (default 55): "
        "the held hooks' timeout is this plus 10 s",
    )

    from . import setup_command

    setup_command.add_parser(commands)  # `setup NAME ...`: the wizard parses its own options
    hook = commands.add_parser(
        "hook",
        help="run by a coding agent on each hook: hands the payload to the agent daemon",
        add_help=False,  # `aep-bridge hook` never reaches this parser (see launch.py)
    )
    hook.add_argument("rest", nargs=argparse.REMAINDER)
    from .agents import daemon as agent_daemon

    agent_daemon.add_parser(commands)

    show = commands.add_parser(
        "preview",
        help="a recorded session as the HTML page a channel's thread would be",
        description="Run the bridge, in this process and without any network, token or "
        "config file, over a recorded session (AEP JSONL) at its recorded pace, with a "
        "channel of type NAME that records instead of sending; write what that channel "
        "would end up showing as a standalone HTML page.",
    )
    show.add_argument("file", nargs="?", metavar="SESSION.jsonl", help="a recording, - for stdin")
    show.add_argument(
        "--demo", action="store_true", help="the built-in reference session instead of a file"
    )
    show.add_argument(
        "--channel",
        required=True,
        metavar="NAME",
        help="a channel type a plugin provides (telegram, console, ...), or web",
    )
    show.add_argument("--verbosity", default="normal", choices=["quiet", "normal", "verbose"])
    show.add_argument(
        "--capture",
        default="redacted",
        choices=["none", "metadata", "redacted", "full"],
        help="the channel's capture ceiling (default redacted)",
    )
    show.add_argument(
        "--out",
        metavar="FILE",
        help="where to write the page (default: SESSION.NAME.html beside the file, "
        "reference.NAME.html here with --demo; - for stdout)",
    )
    show.add_argument(
        "--text",
        action="store_true",
        help="a plain-text transcript (SESSION.NAME.txt) instead of the page",
    )

    check = commands.add_parser(
        "validate",
        help="check AEP session logs (JSONL) against the specification",
        description="Check AEP session logs line by line: envelope, payload and the stream "
        "rules across lines. The files are read in order, as one stream. Exit status is 1 "
        "when anything is wrong.",
    )
    check.add_argument("files", nargs="+", metavar="FILE", help="a .jsonl log, or - for stdin")
    check.add_argument("--json", action="store_true", help="print one JSON report on stdout")
    check.add_argument(
        "--max-bytes",
        type=int,
        default=DEFAULT_MAX_EVENT_BYTES,
        help=f"largest event accepted, in bytes (default {DEFAULT_MAX_EVENT_BYTES})",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()  # imports the plugins' setup wizards: still `_startup`'s Ctrl-C
    args = parser.parse_args(argv)
    if args.command != "run":
        _startup.release()  # from here, Ctrl-C is a KeyboardInterrupt each command handles
    # `run` keeps `_startup`'s Ctrl-C (one line, status 130) until the bridge takes SIGINT
    # over to stop in its own order (server.py): a KeyboardInterrupt raised among the imports
    # it still makes can be swallowed by Python's import machinery ("Exception ignored in
    # ... _get_module_lock"), and the bridge would then start as if nobody had pressed it
    try:
        if args.command == "validate":
            return validate(args.files, as_json=args.json, max_bytes=args.max_bytes)
        if args.command == "run":
            return run(
                args.config,
                args.host,
                args.port,
                log_level=args.log_level,
                verbose=args.verbose,
                quiet=args.quiet,
            )
        if args.command == "check":
            if args.config and args.file:
                parser.error("check: give the config file once, as --config FILE or as CONFIG")
            return check(args.config or args.file)
        if args.command == "config":
            return show_config_path(args.config)
        if args.command == "status":
            return status(
                config_file=args.config, url=args.url, token=args.token, as_json=args.json
            )
        if args.command == "doctor":
            return doctor(args.config)
        if args.command == "plugins":
            return plugins(as_json=args.json)
        if args.command == "preview":
            from . import log_setup, preview_command

            log_setup.configure(quiet=True)  # the bridge's warnings and errors, as `run -q`
            return preview_command.main(
                args.file,
                demo=args.demo,
                channel=args.channel,
                verbosity=args.verbosity,
                capture=args.capture,
                out=args.out,
                text=args.text,
            )
        if args.command == "setup":
            from . import setup_command

            return setup_command.main(args)
        if args.command == "install":
            from .agents import install

            return install.main(
                args.agent, project=args.project, uninstall=args.uninstall, hold=args.hold
            )
        if args.command == "hook":
            from .agents.shim import main as hook_main

            return hook_main(args.rest)
        if args.command == "agentd":
            from .agents import daemon as agent_daemon

            return agent_daemon.main(args)
        if args.command == "token":
            return token(args.config, rotate=args.rotate)
        if args.command == "emit":
            return emit(
                args.files, config_file=args.config, url=args.url, token=args.token, demo=args.demo
            )
        if args.command == "demo":
            return demo(
                config_file=args.config,
                url=args.url,
                token=args.token,
                timeout=args.timeout,
                pace=args.pace,
            )
        if args.command == "ask":
            return ask(
                args.question,
                args.option,
                kind=args.kind,
                config_file=args.config,
                url=args.url,
                token=args.token,
                timeout=args.timeout,
            )
    except BrokenPipeError:  # `aep-bridge validate x.jsonl | head` is not an error
        sys.stderr.close()
        return EXIT_OK
    return EXIT_USAGE  # pragma: no cover - argparse refuses unknown commands


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
