"""The `aep-bridge` command."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, BinaryIO, TextIO

from . import __version__
from .aep.jsonl import Finding, LogCheck
from .aep.validation import DEFAULT_MAX_EVENT_BYTES
from .config import (
    CONFIG_ENV,
    DEFAULT_HOST,
    DEFAULT_PORT,
    BridgeConfig,
    ConfigError,
    config_path,
    read_config,
    resolve_channels,
)
from .plugins import PluginHost

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


def run(config_file: str | None = None, host: str | None = None, port: int | None = None) -> int:
    """Serve the bridge: the embedded AEP endpoint and the configured channels."""
    logging.basicConfig(level=logging.INFO, format="aep-bridge: %(message)s", stream=sys.stderr)
    for noisy in ("httpx", "httpcore"):  # their INFO lines print URLs, and URLs can hold tokens
        logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        config, plugins = _load(config_file)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return EXIT_USAGE
    listen = config.listen.model_copy(
        update={k: v for k, v in (("host", host), ("port", port)) if v is not None}
    )
    from .server import serve

    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(serve(config, plugins, listen.host, listen.port))
    finally:
        # stopped (or failing): a Ctrl-C pressed once more on the way out changes nothing
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, signal.SIG_IGN)
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
    return EXIT_OK


def _endpoint(config_file: str | None, url: str | None, token: str | None) -> tuple[str, str]:
    """The base URL and token a client command uses: flags, else the local bridge's own."""
    from .intake.auth import load_or_create_token

    config = read_config(config_path(config_file))
    base = url or f"http://{config.listen.host}:{config.listen.port}"
    return base.rstrip("/"), token or load_or_create_token(_state_dir(config))


def emit(
    files: Sequence[str],
    *,
    config_file: str | None,
    url: str | None,
    token: str | None,
    batch: int = 500,
) -> int:
    """Send events from JSONL files (or stdin) to an endpoint's POST /events."""
    import httpx

    try:
        base, secret = _endpoint(config_file, url, token)
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
        for name in files:
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
                    reply = client.post("/events", content=body)
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
        base, secret = _endpoint(config_file, url, token)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return EXIT_USAGE
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
    for problem in plan.problems:
        print(f"{source}: error: {problem}", file=out)
    for warning in plan.warnings:
        print(f"{source}: warning: {warning}", file=out)
    if plan.problems:
        print(f"{source}: {len(plan.problems)} problem(s) to fix", file=out)
        return EXIT_VIOLATIONS
    names = ", ".join(f"{c.name} ({c.registration.name})" for c in plan.channels) or "none"
    print(
        f"{source}: ok: listening on {config.listen.host}:{config.listen.port}; channels: {names}",
        file=out,
    )
    return EXIT_OK


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
    failed = len(plan.problems)
    for problem in plan.problems:
        print(f"config: {problem}", file=out)
    for resolved in plan.channels:
        print(f"{resolved.name}:", file=out)
        try:
            adapter = resolved.registration.factory(_OfflineCore(), resolved.config)
            checks = list(asyncio.run(adapter.doctor()))
        except Exception as exc:  # a plugin's doctor must not hide the other channels
            print(f"  FAIL  {type(exc).__name__}: {exc}", file=out)
            failed += 1
            continue
        if not checks:
            print("  ok    nothing to check for this channel type", file=out)
        for item in checks:
            print(f"  {'ok  ' if item.ok else 'FAIL'}  {item.name}: {item.detail}", file=out)
            if not item.ok:
                failed += 1
                if item.fix:
                    print(f"        fix: {item.fix}", file=out)
    if failed:
        print(f"{failed} problem(s) to fix", file=out)
        return EXIT_VIOLATIONS
    print("everything checked is ok", file=out)
    return EXIT_OK


class _OfflineCore:
    """The core a channel gets for `doctor`: it is checked, never run."""

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(f"a channel's doctor() may not use the core ({name})")


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
    serve.add_argument("--config", help=f"config file (default ${CONFIG_ENV}, else built-in)")
    serve.add_argument("--host", help=f"listen address (default {DEFAULT_HOST})")
    serve.add_argument("--port", type=int, help=f"port (default {DEFAULT_PORT})")

    verify = commands.add_parser("check", help="validate a config file as `run` would use it")
    verify.add_argument("config", nargs="?", help=f"the file (default ${CONFIG_ENV})")

    medic = commands.add_parser(
        "doctor",
        help="check each channel's platform side (token, chat, rights) and print the fixes",
    )
    medic.add_argument("--config", help=f"config file (default ${CONFIG_ENV}, else built-in)")

    sender = commands.add_parser("emit", help="send events from JSONL files to an endpoint")
    sender.add_argument("files", nargs="+", metavar="FILE", help="a .jsonl file, or - for stdin")
    question = commands.add_parser(
        "ask", help="ask a question as a tiny agent and print the answer it gets"
    )
    question.add_argument("question")
    question.add_argument("--option", action="append", default=[], help="an answer to offer")
    question.add_argument(
        "--kind", default="permission", choices=["permission", "input", "review", "other"]
    )
    question.add_argument("--timeout", type=float, help="seconds to wait (default: forever)")
    for client in (sender, question):
        client.add_argument("--url", help="the endpoint (default: this bridge's listen address)")
        client.add_argument("--token", help="the endpoint's token (default: this bridge's)")
        client.add_argument("--config", help="config file (for listen and state_dir)")

    secret = commands.add_parser("token", help="print the bridge's bearer token")
    secret.add_argument("--config", help="config file (for its state_dir)")
    secret.add_argument("--rotate", action="store_true", help="replace the token with a new one")

    listing = commands.add_parser("plugins", help="list plugins, their packages and status")
    listing.add_argument("--json", action="store_true", help="print JSON")

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
    args = build_parser().parse_args(argv)
    try:
        if args.command == "validate":
            return validate(args.files, as_json=args.json, max_bytes=args.max_bytes)
        if args.command == "run":
            return run(args.config, args.host, args.port)
        if args.command == "check":
            return check(args.config)
        if args.command == "doctor":
            return doctor(args.config)
        if args.command == "plugins":
            return plugins(as_json=args.json)
        if args.command == "token":
            return token(args.config, rotate=args.rotate)
        if args.command == "emit":
            return emit(args.files, config_file=args.config, url=args.url, token=args.token)
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
