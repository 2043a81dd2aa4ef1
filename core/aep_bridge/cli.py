"""The `aep-bridge` command."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import BinaryIO, TextIO

from . import __version__
from .aep.jsonl import Finding, LogCheck
from .aep.validation import DEFAULT_MAX_EVENT_BYTES

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


DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8787


def run(host: str = DEFAULT_HOST, port: int = DEFAULT_PORT) -> int:
    """Serve the embedded AEP endpoint and show every event that reaches it."""
    import uvicorn

    from .console import ConsoleSink
    from .intake.endpoint import create_app

    app = create_app(ConsoleSink())
    print(
        f"aep-bridge {__version__}: AEP endpoint on http://{host}:{port}/events "
        "(POST events with header AEP-Version: 0.1); Ctrl-C stops",
        file=sys.stderr,
        flush=True,
    )
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="aep-bridge",
        description="Watch and steer AI coding agents (AEP 0.1) from chat.",
    )
    parser.add_argument("--version", action="version", version=f"aep-bridge {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = commands.add_parser(
        "run",
        help="run the bridge: the embedded AEP endpoint, with events shown on the console",
    )
    serve.add_argument("--host", default=DEFAULT_HOST, help=f"listen address ({DEFAULT_HOST})")
    serve.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port ({DEFAULT_PORT})")

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
            return run(args.host, args.port)
    except BrokenPipeError:  # `aep-bridge validate x.jsonl | head` is not an error
        sys.stderr.close()
        return EXIT_OK
    return EXIT_USAGE  # pragma: no cover - argparse refuses unknown commands


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
