"""One tool call as a person reads it: a line, a short fact, and what may be unfolded.

An agent's tool call is a name and arguments; its result is text or JSON. Shown as they come
they read like an audit log (`TodoWrite: todos=[{"content":...`). `render_tool` turns them
into a `ToolView`: the command as code, the file relative to the session's folder, an edit's
`+N −M` with its diff, a test run's `150 passed`, a failure's last lines (where the failing
assertion is), a plan as its entries, an MCP tool as `server › tool`. Claude Code's tools
are known by name, and so are the Codex, Gemini CLI and OpenCode equivalents; any other tool
gets a compact fallback that never prints JSON.

Pure: no I/O, no state, no logging. Strings are not redacted here: the renderer redacts
every string of the finished blocks. Nothing here raises on odd input: a value of the wrong
type is left out, and a renderer that fails anyway gives way to the fallback. Everything is
bounded: a title is one line of at most `MAX_TITLE` characters, details at most
`MAX_DETAILS`, keeping the last lines of an output (where the outcome is), not the first.
A plugin replaces any tool's rendering with the `render_tool` hook.
"""

from __future__ import annotations

import difflib
import json
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal
from urllib.parse import urlsplit

from .markup import (
    Block,
    Blocks,
    Code,
    Details,
    Diff,
    Paragraph,
    Span,
    Spans,
    parse_markdown,
    plain,
)

#: The longest title, in characters (one line).
MAX_TITLE: Final = 200
#: The longest details, in characters of their plain text.
MAX_DETAILS: Final = 4_000
#: The longest summary.
MAX_SUMMARY: Final = 80
#: How many of an output's last lines a failure (or `verbose`) shows.
TAIL_LINES: Final = 15
#: How many lines of a diff are shown before "… N more lines".
MAX_DIFF_LINES: Final = 200
#: The longest line of output or diff kept (a minified file is one line).
_MAX_LINE: Final = 300
#: An argument's value in a compact `key value` list.
_MAX_VALUE: Final = 40
_MAX_PAIRS: Final = 3
#: Diffs of one patch shown (a patch touching more files says how many more).
_MAX_FILES: Final = 10
_ELLIPSIS: Final = "…"
#: The most entries of a plan kept.
_MAX_PLAN: Final = 100


@dataclass(frozen=True)
class ToolCall:
    """A tool call as the agent made it."""

    #: the tool's name as the agent gave it ("Bash", "mcp__github__create_pull_request")
    name: str
    #: its arguments (may be empty: not captured)
    args: Mapping[str, Any]
    #: the session's working folder, to show paths relative to it
    cwd: str | None = None


@dataclass(frozen=True)
class ToolOutcome:
    """How a tool call ended."""

    status: Literal["success", "failed", "denied", "other"]
    #: the result (a string or a JSON value); for `failed`, the error message
    output: Any = None
    #: for `failed`: the error's type ("exit 1")
    error_type: str | None = None
    duration_ms: int | None = None


@dataclass(frozen=True)
class ToolView:
    """How one tool call reads: one line, a short summary, and what may be unfolded."""

    #: ONE line: what the call does (`Bash` and the command as code)
    title: Spans
    #: a short plain fact once it ran: "+3 −1", "150 passed in 6.12s", "12 matches", "exit 1"
    summary: str = ""
    #: under the line: a collapsible `Details` with the diff or the output's last lines
    details: Blocks = ()
    #: TodoWrite (and its equivalents) only: (content, status) per entry of the plan
    plan: tuple[tuple[str, str], ...] | None = None


def render_tool(call: ToolCall, outcome: ToolOutcome | None, *, verbose: bool = False) -> ToolView:
    """How `call` reads; `outcome` None: the call is running. Never raises."""
    name = call.name if isinstance(call.name, str) else str(call.name)
    args = call.args if isinstance(call.args, Mapping) else {}
    cwd = call.cwd if isinstance(call.cwd, str) and call.cwd.startswith("/") else None
    tool = _Tool(name, args, cwd, outcome, verbose)
    try:
        view = _renderer(name)(tool)
    except Exception:  # a value nobody foresaw: the fallback still says what ran
        try:
            view = _generic(tool)
        except Exception:
            view = ToolView(title=(Span(text=_line(name, 80) or "tool", bold=True),))
    return bound_view(view)


# -- the call, with what every renderer needs -------------------------------------------


@dataclass(frozen=True)
class _Tool:
    name: str
    args: Mapping[str, Any]
    cwd: str | None
    outcome: ToolOutcome | None
    verbose: bool

    @property
    def status(self) -> str:
        return self.outcome.status if self.outcome is not None else "running"

    def arg(self, *names: str) -> str | None:
        """The first of `names` whose value is a non-blank string."""
        for name in names:
            value = self.args.get(name)
            if isinstance(value, str) and value.strip():
                return value
        return None

    def number(self, *names: str) -> int | None:
        for name in names:
            value = self.args.get(name)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
        return None

    def path(self, *names: str) -> str | None:
        value = self.arg(*names)
        return display_path(value, self.cwd) if value is not None else None

    def text(self) -> str | None:
        """The outcome's output as text, when it has one."""
        return _text_of(self.outcome.output) if self.outcome is not None else None


_Renderer = Callable[[_Tool], ToolView]

_FILE_ARGS: Final = ("file_path", "filePath", "absolute_path", "path", "target_file", "file")


# -- paths and lines --------------------------------------------------------------------

_HOME: Final = re.compile(r"^/(?:home|Users)/[^/]+(?=/|$)|^/root(?=/|$)")


def display_path(path: str, cwd: str | None) -> str:
    """`path` as a person reads it: relative to the session's folder when under it, else
    `~/...` for a home folder, else as given."""
    if cwd:
        base = cwd.rstrip("/") or "/"
        if path == base:
            return "."
        prefix = base if base.endswith("/") else base + "/"
        if path.startswith(prefix) and len(path) > len(prefix):
            return path[len(prefix) :]
    home = _HOME.match(path)
    if home:
        return "~" + path[home.end() :]
    return path


def _line(text: str, limit: int) -> str:
    """`text` on one line (whitespace runs as one space), clipped to `limit` with "…"."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + _ELLIPSIS


def _first_line(text: str, limit: int) -> str:
    """The first line of `text`, clipped; "…" after it when more lines follow."""
    lines = text.strip().splitlines() or [""]
    first = _line(lines[0], limit)
    if len(lines) > 1 and not first.endswith(_ELLIPSIS):
        first += " " + _ELLIPSIS
    return first


def _meaningful(line: str) -> bool:
    """A line that says something: not blank, not decoration, not JSON."""
    stripped = line.strip()
    return bool(re.search(r"\w", stripped)) and '{"' not in stripped and "[{" not in stripped


def _looks_like_json(text: str) -> Any:
    """The JSON value `text` holds, or None when it is not JSON of an object or array."""
    stripped = text.strip()
    if not stripped or stripped[0] not in "[{":
        return None
    try:
        return json.loads(stripped)
    except ValueError:
        return None


def _text_of(output: Any) -> str | None:
    """The text a person reads in a tool's output: a string (a JSON string holding an
    output field is opened), `stdout` and `stderr`, `output`, MCP text content."""
    if isinstance(output, str):
        parsed = _looks_like_json(output)
        if isinstance(parsed, dict | list):
            inner = _text_of(parsed)
            if inner is not None:
                return inner
        return output
    if isinstance(output, dict):
        streams = [output.get(k) for k in ("stdout", "stderr")]
        if any(isinstance(s, str) for s in streams):
            return "\n".join(s for s in streams if isinstance(s, str) and s)
        for key in ("output", "content", "text", "result", "aggregated_output"):
            if key in output:
                inner = _text_of(output[key])
                if inner is not None:
                    return inner
        return None
    if isinstance(output, list) and output:
        texts = [
            item["text"]
            for item in output
            if isinstance(item, dict) and isinstance(item.get("text"), str)
        ]
        return "\n".join(texts) if texts else None
    return None


def _is_text_content(item: Any) -> bool:
    """An MCP content item of type text."""
    return isinstance(item, dict) and item.get("type") == "text"


def _json_of(output: Any) -> Any:
    """The JSON value in an output: as given, in a JSON string, or in MCP text content
    (None when that content is text)."""
    if isinstance(output, str):
        return _looks_like_json(output)
    if isinstance(output, dict) and isinstance(output.get("content"), list):
        return _json_of(output["content"])
    if isinstance(output, list) and output and all(_is_text_content(i) for i in output):
        joined = "\n".join(str(i.get("text", "")) for i in output)
        return _looks_like_json(joined)
    return output if isinstance(output, dict | list) else None


def _lines(text: str) -> list[str]:
    """The lines of `text` without the blank ones at either end."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    while lines and not lines[-1].strip():
        lines.pop()
    while lines and not lines[0].strip():
        lines.pop(0)
    return lines


def _clip_line(line: str) -> str:
    line = line.expandtabs(4)
    return line if len(line) <= _MAX_LINE else line[: _MAX_LINE - 1] + _ELLIPSIS


def _tail(text: str, count: int = TAIL_LINES, budget: int = MAX_DETAILS - 200) -> tuple[str, int]:
    """The last `count` lines of `text` (fewer when they would pass `budget` characters),
    and how many lines that is."""
    kept: list[str] = []
    size = 0
    for line in reversed(_lines(text)[-count:]):
        line = _clip_line(line)
        if kept and size + len(line) + 1 > budget:
            break
        kept.append(line)
        size += len(line) + 1
    kept.reverse()
    return "\n".join(kept), len(kept)


def _head(text: str, budget: int = MAX_DETAILS // 2) -> str:
    """`text` from its start, up to `budget` characters, saying how many lines are left."""
    lines = [_clip_line(line) for line in _lines(text)]
    kept: list[str] = []
    size = 0
    for line in lines:
        if kept and size + len(line) + 1 > budget:
            break
        kept.append(line)
        size += len(line) + 1
    left = len(lines) - len(kept)
    if left:
        kept.append(f"{_ELLIPSIS} {left} more line{'s' if left != 1 else ''}")
    return "\n".join(kept)


def _output_details(text: str, *, label: str = "output") -> Details | None:
    """A collapsible block with the last lines of `text`: "last N lines" when some are left
    out."""
    total = len(_lines(text))
    if total == 0:
        return None
    tail, shown = _tail(text)
    summary = f"last {shown} lines" if shown < total else label
    return Details(summary=summary, blocks=(Code(code=tail, language=""),))


# -- title spans ------------------------------------------------------------------------


def _label(text: str) -> Span:
    return Span(text=text, bold=True)


def _code(text: str, limit: int = 120) -> Span:
    return Span(text=_line(text, limit), code=True)


def _plain(text: str) -> Span:
    return Span(text=text)


def _title(label: str, *rest: Span | None) -> Spans:
    spans = [_label(label)]
    for span in rest:
        if span is not None and span.text:
            if not span.text.startswith(" "):
                spans.append(_plain(" "))
            spans.append(span)
    return tuple(spans)


def _named(tool: _Tool, claude: str, other: str) -> str:
    """Claude Code's own name (`Bash`) when the agent used it, else a plain word."""
    return claude if tool.name == claude else other


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


# -- files ------------------------------------------------------------------------------


def _read(tool: _Tool) -> ToolView:
    path = tool.path(*_FILE_ARGS)
    offset, limit = tool.number("offset", "start_line"), tool.number("limit")
    span = None
    if offset is not None and limit is not None and limit > 0:
        start = max(offset, 1)
        span = _plain(f" lines {start}–{start + limit - 1}")
    elif offset is not None:
        span = _plain(f" from line {max(offset, 1)}")
    elif limit is not None and limit > 0:
        span = _plain(f" lines 1–{limit}")
    title = _title("Read", _code(path) if path else None, span)
    summary = ""
    if tool.status == "success":
        text = tool.text()
        if isinstance(text, str):
            count = len(_lines(text))
            summary = "1 line" if count == 1 else f"{count} lines"
    else:
        summary = _other_summary(tool)
    return ToolView(title=title, summary=summary, details=_failure_details(tool))


@dataclass(frozen=True)
class _Change:
    """A change to one file: its unified lines (no `---`/`+++` header) and counts."""

    path: str
    lines: tuple[str, ...]
    added: int
    removed: int


def _count(lines: Sequence[str]) -> tuple[int, int]:
    added = sum(1 for x in lines if x.startswith("+") and not x.startswith("+++"))
    removed = sum(1 for x in lines if x.startswith("-") and not x.startswith("---"))
    return added, removed


def _snippet_diff(old: str, new: str) -> list[str]:
    """The unified lines turning `old` into `new` (two snippets of a file: their line
    numbers would mislead, so hunks are separated by a bare `@@`)."""
    lines: list[str] = []
    diff = difflib.unified_diff(old.splitlines(), new.splitlines(), n=2, lineterm="")
    for line in diff:
        if line.startswith(("--- ", "+++ ")):
            continue
        if line.startswith("@@"):
            if lines:
                lines.append("@@")
            continue
        lines.append(line)
    return lines


def _unified_lines(text: str) -> list[str] | None:
    """The lines of a unified diff an edit tool returned, without its file headers; None
    when `text` is not one."""
    lines = _lines(text)
    if not any(line.startswith("@@") for line in lines):
        return None
    if not (lines[0].startswith("--- ") or lines[0].startswith("@@")):
        return None
    return [x for x in lines if not x.startswith(("--- ", "+++ "))]


def _structured_patch(output: Any) -> list[str] | None:
    """Claude Code's `structuredPatch` (hunks with their lines) as unified lines."""
    if not isinstance(output, dict):
        return None
    hunks = output.get("structuredPatch")
    if not isinstance(hunks, list) or not hunks:
        return None
    lines: list[str] = []
    for hunk in hunks:
        if not isinstance(hunk, dict) or not isinstance(hunk.get("lines"), list):
            return None
        start = [hunk.get(k) for k in ("oldStart", "oldLines", "newStart", "newLines")]
        if all(isinstance(n, int) for n in start):
            lines.append(f"@@ -{start[0]},{start[1]} +{start[2]},{start[3]} @@")
        lines.extend(str(x) for x in hunk["lines"])
    return lines


def _returned_diff(tool: _Tool) -> list[str] | None:
    """The diff the tool itself returned, which knows the file's line numbers."""
    if tool.status != "success" or tool.outcome is None:
        return None
    found = _structured_patch(tool.outcome.output)
    if found is not None:
        return found
    text = tool.text()
    return _unified_lines(text) if text else None


def _diff_block(change: _Change, budget: int) -> Diff:
    """A `Diff` of `change`, whole up to `MAX_DIFF_LINES` lines and `budget` characters."""
    kept: list[str] = []
    size = 0
    for line in change.lines[:MAX_DIFF_LINES]:
        line = _clip_line(line)
        if kept and size + len(line) + 1 > budget:
            break
        kept.append(line)
        size += len(line) + 1
    left = len(change.lines) - len(kept)
    if left:
        kept.append(f"{_ELLIPSIS} {left} more line{'s' if left != 1 else ''}")
    return Diff(
        path=change.path, unified="\n".join(kept), added=change.added, removed=change.removed
    )


def _counts(added: int, removed: int) -> str:
    return f"+{added} −{removed}"


def _changes_view(
    tool: _Tool, label: str, path: str | None, changes: Sequence[_Change], note: str = ""
) -> ToolView:
    """A call that changes files: the counts once it ran, the diffs (while it waits, too:
    a card shows what it will change)."""
    title = _title(label, _code(path) if path else None, _plain(note) if note else None)
    if tool.status in ("failed", "denied", "other"):
        return ToolView(title=title, summary=_other_summary(tool), details=_failure_details(tool))
    added = sum(c.added for c in changes)
    removed = sum(c.removed for c in changes)
    summary = _counts(added, removed) if tool.status == "success" and changes else ""
    shown = [c for c in changes[:_MAX_FILES] if c.lines]
    # the details' budget shared by the files, less their headers
    budget = (MAX_DETAILS - 200) // max(len(shown), 1) - 100
    diffs: Blocks = tuple(_diff_block(c, budget) for c in shown)
    if len(changes) > _MAX_FILES:
        more = len(changes) - _MAX_FILES
        diffs += (Paragraph(spans=(_plain(f"{_ELLIPSIS} {more} more files"),)),)
    details = (Details(summary="diff", blocks=diffs),) if diffs else ()
    return ToolView(title=title, summary=summary, details=details)


def _write(tool: _Tool) -> ToolView:
    path = tool.path(*_FILE_ARGS)
    content = tool.args.get("content", tool.args.get("contents"))
    label = "Write"
    if not isinstance(content, str):
        return _changes_view(tool, label, path, ())
    lines = [f"+{line}" for line in content.splitlines()]
    returned = _returned_diff(tool)
    if returned is not None:
        lines = returned
    added, removed = _count(lines)
    change = _Change(path or "", tuple(lines), added, removed)
    view = _changes_view(tool, label, path, (change,))
    if tool.status == "success" and returned is None:  # a new file: its lines
        view = ToolView(title=view.title, summary=f"+{added}", details=view.details)
    return view


def _edits(tool: _Tool) -> list[tuple[str, str]] | None:
    """The (old, new) pairs of an edit call: one, or MultiEdit's `edits`."""
    edits = tool.args.get("edits")
    if isinstance(edits, list):
        pairs = []
        for edit in edits:
            if isinstance(edit, Mapping):
                old = _first_str(edit, "old_string", "oldString", "old_str", "old")
                new = _first_str(edit, "new_string", "newString", "new_str", "new")
                if old is not None or new is not None:
                    pairs.append((old or "", new or ""))
        return pairs
    old = _first_str(tool.args, "old_string", "oldString", "old_str")
    new = _first_str(tool.args, "new_string", "newString", "new_str")
    if old is None and new is None:
        return None
    return [(old or "", new or "")]


def _first_str(args: Mapping[str, Any], *names: str) -> str | None:
    for name in names:
        value = args.get(name)
        if isinstance(value, str):
            return value
    return None


def _edit(tool: _Tool) -> ToolView:
    path = tool.path(*_FILE_ARGS)
    pairs = _edits(tool)
    note = ""
    if pairs is not None and len(pairs) > 1:
        note = f" ({len(pairs)} edits)"
    elif tool.args.get("replace_all") is True or tool.args.get("replaceAll") is True:
        note = " (every occurrence)"
    lines = _returned_diff(tool)
    if lines is None:
        lines = []
        for old, new in pairs or ():
            if lines:
                lines.append("@@")
            lines.extend(_snippet_diff(old, new))
    added, removed = _count(lines)
    changes = (_Change(path or "", tuple(lines), added, removed),) if lines else ()
    return _changes_view(tool, "Edit", path, changes, note)


_PATCH_FILE: Final = re.compile(r"^\*\*\* (Update|Add|Delete) File: (.+)$")


def _parse_patch(text: str, cwd: str | None) -> list[_Change]:
    """The files a patch changes: Codex's `*** Update File:` form, or a unified diff."""
    changes: list[_Change] = []
    path: str | None = None
    body: list[str] = []

    def close() -> None:
        if path is not None:
            added, removed = _count(body)
            changes.append(_Change(display_path(path, cwd), tuple(body), added, removed))

    for line in text.replace("\r\n", "\n").split("\n"):
        header = _PATCH_FILE.match(line)
        if header or line.startswith("+++ "):
            close()
            name = header.group(2) if header else line[4:].split("\t")[0]
            path = name.strip().removeprefix("b/")
            body = []
            if header and header.group(1) == "Delete":
                body.append("(deleted)")
        elif line.startswith("*** Move to: ") and path is not None:
            path = f"{path} → {line.removeprefix('*** Move to: ').strip()}"
        elif line.startswith(("*** ", "--- ", "diff --git", "index ")):
            continue
        elif path is not None and line.startswith(("+", "-", " ", "@@")):
            body.append(line)
    close()
    return changes


def _patch_view(tool: _Tool, text: str) -> ToolView:
    changes = _parse_patch(text, tool.cwd)
    first = changes[0].path if changes else None
    more = len(changes) - 1
    note = f" and {more} more file{'s' if more != 1 else ''}" if more > 0 else ""
    # the first path is the title; each diff names its own file
    return _changes_view(tool, "Patch", first, changes, note)


def _patch(tool: _Tool) -> ToolView:
    text = tool.arg("input", "patch", "patchText", "patch_text", "diff")
    if text is None:
        return _generic(tool)
    return _patch_view(tool, text)


# -- search -----------------------------------------------------------------------------

_FOUND: Final = re.compile(r"^Found (\d+) (match|matches|file|files)\b", re.IGNORECASE)
_NOTHING: Final = re.compile(r"^No (?:files|matches)(?: found)?\b", re.IGNORECASE)
_MATCH_LINE: Final = re.compile(r"^[^:\n]+:\d+[:\-]")


def _filters(tool: _Tool) -> Span | None:
    shown = [_line(v, 40) for v in (tool.arg("glob", "include", "file_pattern"),) if v]
    kind = tool.arg("type")
    if kind:
        shown.append(f"type {_line(kind, 20)}")
    return _plain(f" ({', '.join(shown)})") if shown else None


def _where(tool: _Tool) -> Span | None:
    where = tool.path("path", "dir_path", "directory", "cwd")
    return _plain(f" in {_line(where, 80)}") if where and where != "." else None


def _plural(count: int, one: str, many: str) -> str:
    return f"{count} {one if count == 1 else many}"


def _grep(tool: _Tool) -> ToolView:
    pattern = tool.arg("pattern", "query", "regex")
    title = _title(
        "Grep",
        _code(pattern, 80) if pattern else None,
        _where(tool),
        _filters(tool),
    )
    summary = ""
    details: tuple[Block, ...] = ()
    text = tool.text()
    if tool.status == "success" and isinstance(text, str):
        lines = [x for x in _lines(text) if x.strip()]
        mode = tool.arg("output_mode")
        found = _FOUND.match(lines[0]) if lines else None
        if not lines or _NOTHING.match(lines[0]):
            summary = "no matches"
        elif found:
            count = int(found.group(1))
            many = found.group(2).lower() in ("file", "files")
            summary = (
                _plural(count, "file", "files") if many else _plural(count, "match", "matches")
            )
        elif mode == "count":
            counted = [int(m.group(1)) for x in lines if (m := re.search(r":(\d+)$", x))]
            summary = _plural(sum(counted), "match", "matches")
        elif mode == "content" or (
            mode is None and sum(bool(_MATCH_LINE.match(x)) for x in lines) * 2 > len(lines)
        ):
            summary = _plural(len(lines), "match", "matches")
        else:
            summary = _plural(len(lines), "file", "files")
        if tool.verbose:
            shown = _output_details(text)
            details = (shown,) if shown is not None else ()
    elif tool.status != "success":
        summary = _other_summary(tool)
        details = _failure_details(tool)
    return ToolView(title=title, summary=summary, details=details)


def _glob(tool: _Tool) -> ToolView:
    pattern = tool.arg("pattern", "glob")
    title = _title("Glob", _code(pattern, 80) if pattern else None, _where(tool))
    summary = ""
    details: tuple[Block, ...] = ()
    text = tool.text()
    if tool.status == "success" and isinstance(text, str):
        lines = [x for x in _lines(text) if x.strip()]
        found = _FOUND.match(lines[0]) if lines else None
        if not lines or _NOTHING.match(lines[0]):
            summary = "no files"
        elif found:
            summary = _plural(int(found.group(1)), "file", "files")
        else:
            summary = _plural(len(lines), "file", "files")
        if tool.verbose:
            shown = _output_details(text)
            details = (shown,) if shown is not None else ()
    elif tool.status != "success":
        summary = _other_summary(tool)
        details = _failure_details(tool)
    return ToolView(title=title, summary=summary, details=details)


# -- web --------------------------------------------------------------------------------

_URL: Final = re.compile(r"https?://[^\s<>\"'`]+")


def _link(url: str) -> Span:
    """A link whose text is the host and path, shortened; only http(s) is a link."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return _code(url, 80)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return _code(url, 80)
    text = (parts.netloc + parts.path).rstrip("/")
    return Span(text=_line(text, 60), url=url)


def _fetch(tool: _Tool) -> ToolView:
    url = tool.arg("url", "uri")
    if url is None:
        prompt = tool.arg("prompt") or ""
        match = _URL.search(prompt)
        url = match.group(0).rstrip(".,;:)") if match else None
    title = _title(_named(tool, "WebFetch", "Fetch"), _link(url) if url else None)
    summary = _other_summary(tool) if tool.status != "success" else ""
    return ToolView(title=title, summary=summary, details=_failure_details(tool))


def _search(tool: _Tool) -> ToolView:
    query = tool.arg("query", "q", "search_term")
    quoted = _plain(f"“{_line(query, 120)}”") if query else None
    title = _title(_named(tool, "WebSearch", "Search"), quoted)
    summary = ""
    text = tool.text()
    if tool.status == "success" and isinstance(text, str):
        links = re.search(r"Links: (\[.*?\])\s*$", text, re.MULTILINE)
        parsed = _looks_like_json(links.group(1)) if links else None
        if isinstance(parsed, list):
            summary = _plural(len(parsed), "result", "results")
    elif tool.status != "success":
        summary = _other_summary(tool)
    return ToolView(title=title, summary=summary, details=_failure_details(tool))


# -- plan and subagents -----------------------------------------------------------------


def _plan_entries(tool: _Tool) -> tuple[tuple[str, str], ...]:
    todos = tool.args.get("todos", tool.args.get("plan"))
    if not isinstance(todos, list):
        return ()
    entries = []
    for todo in todos[:_MAX_PLAN]:
        if isinstance(todo, Mapping):
            content = _first_str(todo, "content", "description", "step", "task", "title")
            status = _first_str(todo, "status") or "pending"
        elif isinstance(todo, str):
            content, status = todo, "pending"
        else:
            continue
        if content and content.strip():
            entries.append((_line(content, MAX_TITLE), _line(status, 20)))
    return tuple(entries)


def _todo(tool: _Tool) -> ToolView:
    plan = _plan_entries(tool)
    summary = ""
    if tool.status == "success" and plan:
        done = sum(1 for _, status in plan if status.lower() in ("completed", "done"))
        summary = f"{done} of {len(plan)} done"
    elif tool.status != "success":
        summary = _other_summary(tool)
    return ToolView(title=(_label("Updated the plan"),), summary=summary, plan=plan)


def _task(tool: _Tool) -> ToolView:
    description = tool.arg("description", "prompt")
    kind = tool.arg("subagent_type", "agent", "agent_type")
    title = _title(
        "Task",
        _plain(_line(description, 120)) if description else None,
        Span(text=f" ({_line(kind, 40)})", italic=True) if kind else None,
    )
    summary = ""
    text = tool.text()
    if tool.status == "success" and text:
        lines = [x for x in _lines(text) if _meaningful(x)]
        if lines:  # the subagent's report is markdown: its first line, without markers
            summary = _line(plain(parse_markdown(lines[0])), MAX_SUMMARY)
    elif tool.status != "success":
        summary = _other_summary(tool)
    return ToolView(title=title, summary=summary, details=_failure_details(tool))


# -- MCP and anything else --------------------------------------------------------------

#: Names of fields that are a tool's machinery, not what it did: never shown.
_INTERNAL: Final = frozenset(
    {
        "structuredpatch",
        "originalfile",
        "usermodified",
        "exit_code",
        "exitcode",
        "interrupted",
        "isimage",
        "returncodeinterpretation",
        "call_id",
        "tool_use_id",
        "metadata",
        "timeout",
        "timeout_ms",
    }
)
#: The argument that says what a call does, in order of preference (and how it shows).
_TELLING: Final = (
    ("command", "code"),
    ("cmd", "code"),
    ("file_path", "path"),
    ("filePath", "path"),
    ("path", "path"),
    ("pattern", "code"),
    ("query", "quote"),
    ("url", "link"),
    ("description", "text"),
    ("prompt", "text"),
)
#: Fields of a JSON result that say what came of it.
_RESULT_FIELDS: Final = ("title", "name", "message", "status", "url", "html_url", "id")


def _scalar(value: Any) -> str | None:
    """A value shown as words: strings (not JSON ones), numbers, booleans."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str) and value.strip() and _looks_like_json(value) is None:
        return _first_line(value, _MAX_VALUE)
    return None


def _pairs(args: Mapping[str, Any]) -> list[Span]:
    """Up to three `key value` pairs of scalar arguments, "…" when there are more."""
    spans: list[Span] = []
    shown = 0
    more = False
    for key, value in args.items():
        if not isinstance(key, str) or key.lower() in _INTERNAL or key.startswith("_"):
            continue
        text = _scalar(value)
        if text is None:
            if isinstance(value, list | dict) and value:
                more = True
            continue
        if shown == _MAX_PAIRS:
            more = True
            break
        spans += [_plain((", " if shown else " ") + _line(key, 30) + " "), _code(text, 60)]
        shown += 1
    if more:
        spans.append(_plain(" " + _ELLIPSIS))
    return spans


def _mcp_title(tool: _Tool) -> Spans:
    server, _, name = tool.name.removeprefix("mcp__").partition("__")
    label = f"{server} › {name}" if name else server
    return (_label(_line(label, 80)), *_pairs(tool.args))


def _result_summary(value: Any) -> tuple[str, Blocks]:
    """What a JSON result says: a number (`#42`), a title or name, a link to it; else
    `done`, or how many items a list has. Never the JSON."""
    if isinstance(value, list):
        return _plural(len(value), "item", "items"), ()
    if not isinstance(value, dict):
        return "done", ()
    words: list[str] = []
    number = value.get("number")
    if isinstance(number, int) and not isinstance(number, bool):
        words.append(f"#{number}")
    for key in _RESULT_FIELDS:
        text = _scalar(value.get(key))
        if text and not text.startswith("http"):
            words.append(_line(text, 60))
            break
    url = next(
        (v for k in ("html_url", "url", "web_url", "link") if isinstance(v := value.get(k), str)),
        None,
    )
    details: Blocks = ()
    if url and _URL.fullmatch(url):
        details = (Paragraph(spans=(_link(url),)),)
    return (_line(" ".join(words), MAX_SUMMARY) if words else "done"), details


def _mcp(tool: _Tool) -> ToolView:
    title = _mcp_title(tool)
    return _with_result(tool, title)


def _with_result(tool: _Tool, title: Spans) -> ToolView:
    """A view whose summary is what the output says: a JSON result's fields, or the first
    line of text."""
    if tool.status != "success" or tool.outcome is None:
        return ToolView(title=title, summary=_other_summary(tool), details=_failure_details(tool))
    value = _json_of(tool.outcome.output)
    if value is not None:
        summary, links = _result_summary(value)
        return ToolView(title=title, summary=summary, details=links)
    text = tool.text()
    summary = ""
    details: Blocks = ()
    if text:
        lines = [x for x in _lines(text) if _meaningful(x)]
        summary = _line(lines[0], MAX_SUMMARY) if lines else ""
        if tool.verbose:  # the text, but no line of JSON
            clean = [x for x in _lines(text) if '{"' not in x and "[{" not in x]
            shown = _output_details("\n".join(clean))
            details = (shown,) if shown is not None else ()
    return ToolView(title=title, summary=summary, details=details)


def _generic(tool: _Tool) -> ToolView:
    """Any other tool: its name and the argument that says what it does (or a few scalar
    `key value` pairs); never JSON."""
    rest: list[Span] = []
    for key, how in _TELLING:
        value = tool.arg(key)
        if value is None or _looks_like_json(value) is not None:
            continue
        if how == "code":
            rest = [_code(_first_line(value, 120))]
        elif how == "path":
            rest = [_code(display_path(value, tool.cwd))]
        elif how == "quote":
            rest = [_plain(f"“{_line(value, 120)}”")]
        elif how == "link":
            rest = [_link(value)]
        else:
            rest = [_plain(_first_line(value, 120))]
        break
    title = (
        _title(_line(tool.name, 80) or "tool", *rest)
        if rest
        else (
            _label(_line(tool.name, 80) or "tool"),
            *_pairs(tool.args),
        )
    )
    return _with_result(tool, title)


# -- how any call ended -----------------------------------------------------------------


def _other_summary(tool: _Tool) -> str:
    """The summary of a call that did not succeed: its error type, or its short message."""
    outcome = tool.outcome
    if outcome is None:
        return ""
    text = tool.text() or ""
    lines = [x for x in _lines(text) if _meaningful(x)]
    if outcome.status == "denied":
        return _line("denied" + (f": {lines[0]}" if lines else ""), MAX_SUMMARY)
    if outcome.status == "failed":
        kind = _line(outcome.error_type or "", 40)
        if len(lines) == 1 and len(lines[0]) <= MAX_SUMMARY:
            return _line(f"{kind}: {lines[0]}" if kind else lines[0], MAX_SUMMARY)
        return kind or "failed"
    return _line(lines[0], MAX_SUMMARY) if lines else ""


def _failure_details(tool: _Tool) -> Blocks:
    """A failure's last lines, when its message is longer than the summary shows."""
    if tool.status != "failed":
        return ()
    text = tool.text() or ""
    lines = [x for x in _lines(text) if _meaningful(x)]
    if len(lines) <= 1 and all(len(x) <= MAX_SUMMARY for x in lines):
        return ()
    shown = _output_details(text, label="error")
    return (shown,) if shown is not None else ()


# -- which renderer ---------------------------------------------------------------------

_BY_NAME: Final[dict[str, _Renderer]] = {
    **dict.fromkeys(
        (
            "bash",
            "shell",
            "local_shell",
            "exec_command",
            "shell_command",
            "run_shell_command",
            "execute_command",
            "container.exec",
        ),
        _shell,
    ),
    **dict.fromkeys(("read", "read_file", "readfile", "view_file"), _read),
    **dict.fromkeys(("write", "write_file", "create_file"), _write),
    **dict.fromkeys(
        ("edit", "multiedit", "multi_edit", "replace", "str_replace", "edit_file"), _edit
    ),
    **dict.fromkeys(("apply_patch", "patch"), _patch),
    **dict.fromkeys(("grep", "search_file_content", "grep_search", "ripgrep"), _grep),
    **dict.fromkeys(("glob", "find_files"), _glob),
    **dict.fromkeys(("webfetch", "web_fetch", "fetch_url"), _fetch),
    **dict.fromkeys(
        ("websearch", "web_search", "google_web_search", "web_search_preview"), _search
    ),
    **dict.fromkeys(("todowrite", "todo_write", "write_todos", "update_plan"), _todo),
    **dict.fromkeys(("task", "subagent", "delegate"), _task),
}


def _renderer(name: str) -> _Renderer:
    if name.startswith("mcp__"):
        return _mcp
    return _BY_NAME.get(name.strip().lower(), _generic)


# -- bounds -----------------------------------------------------------------------------


#: what `str.splitlines` breaks at, and tabs: a title stays on one line
_BREAKS: Final = re.compile("[\t\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def bound_view(view: ToolView) -> ToolView:
    """`view` held to its bounds: a title of one line and `MAX_TITLE` characters, details
    of `MAX_DETAILS` (the last lines kept), a summary of one line. For a plugin's view too:
    a plugin cannot flood a thread."""
    title: list[Span] = []
    room = MAX_TITLE
    for span in view.title:
        text = _BREAKS.sub(" ", span.text)
        if not text:
            continue
        if len(text) >= room:
            title.append(span.model_copy(update={"text": text[: max(room - 1, 0)] + _ELLIPSIS}))
            break
        title.append(span.model_copy(update={"text": text}))
        room -= len(text)
    details = view.details
    if len(plain(details)) > MAX_DETAILS:
        tail, _ = _tail(plain(details), 40, MAX_DETAILS - 100)
        details = (Details(summary="last lines", blocks=(Code(code=tail, language=""),)),)
    summary = _line(view.summary, MAX_SUMMARY) if view.summary else ""
    plan = view.plan
    if plan is not None:
        plan = tuple((_line(c, MAX_TITLE), _line(s, 20)) for c, s in plan[:_MAX_PLAN])
    return ToolView(title=tuple(title), summary=summary, details=details, plan=plan)


__all__ = [
    "MAX_DETAILS",
    "MAX_TITLE",
    "ToolCall",
    "ToolOutcome",
    "ToolView",
    "bound_view",
    "display_path",
    "render_tool",
]
