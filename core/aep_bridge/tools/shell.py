"""Shell commands: the command as code, a test run's summary, a failure's last lines."""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from typing import Final

from ..markup import Block, Code, Details
from .call import _code, _named, _other_summary, _plain, _title, _Tool
from .files import _patch_view
from .lines import _head, _line, _lines, _output_details
from .view import _ELLIPSIS, MAX_SUMMARY, ToolView

# -- shell ------------------------------------------------------------------------------

_SHELLS: Final = frozenset({"bash", "sh", "zsh", "dash", "ksh", "fish"})
#: a test runner's summary line: pytest, unittest, jest, mocha, cargo, go
_TEST_SUMMARY: Final = re.compile(
    r"\b\d+ (?:passed|failed|passing|failing|errors?|tests? passed|tests? failed)\b"
    r"|^(?:OK|FAILED)(?: \(.*\))?$|\btest result: "
)


def _command(tool: _Tool) -> str | None:
    """The command, a list of argv joined as a shell would read it, `bash -lc CMD` as CMD,
    and a leading `cd <session folder> &&` left out."""
    value = tool.args.get("command", tool.args.get("cmd", tool.args.get("argv")))
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        argv = [str(v) for v in value]
        shell = argv[0].rsplit("/", 1)[-1]
        if len(argv) == 3 and shell in _SHELLS and argv[1] in ("-c", "-lc", "-cl", "-ic"):
            command = argv[2]
        else:
            command = shlex.join(argv)
    elif isinstance(value, str) and value.strip():
        command = value
    else:
        return None
    command = command.strip()
    if tool.cwd:
        for form in (tool.cwd, shlex.quote(tool.cwd)):
            lead = f"cd {form} && "
            if command.startswith(lead):
                command = command[len(lead) :].lstrip()
                break
    return command


def _test_summary(lines: Sequence[str]) -> str | None:
    """A test runner's summary line, without pytest's `====` decoration."""
    for line in reversed(lines):
        stripped = line.strip()
        if _TEST_SUMMARY.search(stripped):
            return _line(re.sub(r"^[=\-_* ]+|[=\-_* ]+$", "", stripped), MAX_SUMMARY)
    return None


def _output_summary(text: str) -> str:
    """The most telling line of an output: a test summary, else the last line that says
    something."""
    lines = _lines(text)
    found = _test_summary(lines)
    if found:
        return found
    for line in reversed(lines):
        if re.search(r"\w", line):
            return _line(line, MAX_SUMMARY)
    return ""


def _shell(tool: _Tool) -> ToolView:
    argv = tool.args.get("command")
    if isinstance(argv, list) and len(argv) == 2 and argv[0] == "apply_patch":
        # Codex runs its patches through the shell tool
        return _patch_view(tool, str(argv[1]))
    command = _command(tool)
    if command is not None and command.startswith("apply_patch") and "*** Begin Patch" in command:
        return _patch_view(tool, command)
    label = _named(tool, "Bash", "Shell")
    where = tool.path("workdir", "directory", "cwd", "dir_path")
    place = _plain(f" in {where}") if where and where != "." else None
    details: list[Block] = []
    if command is None:
        title = _title(label, place)
    else:
        lines = command.splitlines()
        shown = lines[0] if lines else command
        clipped = len(lines) > 1 or len(" ".join(shown.split())) > 120
        title = _title(label, _code(shown + (" " + _ELLIPSIS if len(lines) > 1 else "")), place)
        if clipped:  # the whole command, as it runs (from its start: it is what runs)
            details.append(
                Details(summary="command", blocks=(Code(code=_head(command), language="bash"),))
            )
    summary = ""
    text = tool.text()
    if tool.status == "success":
        summary = _output_summary(text or "")
        if tool.verbose and text:
            shown_output = _output_details(text)
            if shown_output is not None:
                details.append(shown_output)
    elif tool.status == "failed":
        error_type = tool.outcome.error_type if tool.outcome is not None else None
        summary = _line(error_type or "", MAX_SUMMARY) or "failed"
        tests = _test_summary(_lines(text or ""))  # "1 failed, 3 passed": what failed
        if tests:
            summary = _line(f"{summary} · {tests}", MAX_SUMMARY)
        failure = _output_details(text or "")
        if failure is not None:
            details.append(failure)
    else:
        summary = _other_summary(tool)
    return ToolView(title=title, summary=summary, details=tuple(details))
