"""`aep-bridge validate`: session logs (JSONL) checked against the specification."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import BinaryIO, TextIO

from ..aep.jsonl import Finding, LogCheck
from ..aep.validation import DEFAULT_MAX_EVENT_BYTES
from ..text.terminal import visible
from .common import EXIT_OK, EXIT_USAGE, EXIT_VIOLATIONS, open_input


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
            stream = open_input(name)
        except OSError as exc:
            print(f"aep-bridge validate: cannot read {name}: {exc.strerror}", file=err)
            return EXIT_USAGE
        with stream if name != "-" else _noclose(stream):
            for finding in check.check(label, stream):
                findings.append(finding)
                if not as_json:  # one line, whatever the agent's words quoted in it hold
                    print(visible(str(finding), one_line=True), file=out)
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
