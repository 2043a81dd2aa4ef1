"""Calls that read or change files: a read's lines, a write's or an edit's `+N −M` and its diff,
a patch's files."""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ..markup import Blocks, Details, Diff, Paragraph
from .call import (
    _FILE_ARGS,
    _code,
    _failure_details,
    _first_str,
    _other_summary,
    _plain,
    _title,
    _Tool,
)
from .generic import _generic
from .lines import _clip_line, _lines, display_path
from .view import _ELLIPSIS, _MAX_FILES, MAX_DETAILS, MAX_DIFF_LINES, ToolView

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
