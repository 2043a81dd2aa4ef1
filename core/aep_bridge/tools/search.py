"""Searches in files (grep, glob) and on the web (fetch, search)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final

from ..markup import Block, Span, Spans
from .call import (
    _URL,
    _code,
    _failure_details,
    _link,
    _named,
    _other_summary,
    _plain,
    _plural,
    _title,
    _Tool,
)
from .lines import _line, _lines, _looks_like_json, _output_details
from .view import ToolView

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


def _listing(
    tool: _Tool, title: Spans, nothing: str, counted: Callable[[list[str]], str]
) -> ToolView:
    """A search's view: `nothing` when it found nothing, else what `counted` makes of its
    output's lines; the output itself when verbose, the error when it failed."""
    summary = ""
    details: tuple[Block, ...] = ()
    text = tool.text()
    if tool.status == "success" and isinstance(text, str):
        lines = [x for x in _lines(text) if x.strip()]
        summary = nothing if not lines or _NOTHING.match(lines[0]) else counted(lines)
        if tool.verbose:
            shown = _output_details(text)
            details = (shown,) if shown is not None else ()
    elif tool.status != "success":
        summary = _other_summary(tool)
        details = _failure_details(tool)
    return ToolView(title=title, summary=summary, details=details)


def _grep(tool: _Tool) -> ToolView:
    pattern = tool.arg("pattern", "query", "regex")
    title = _title(
        "Grep",
        _code(pattern, 80) if pattern else None,
        _where(tool),
        _filters(tool),
    )
    mode = tool.arg("output_mode")

    def counted(lines: list[str]) -> str:
        found = _FOUND.match(lines[0])
        if found:
            count = int(found.group(1))
            many = found.group(2).lower() in ("file", "files")
            return _plural(count, "file", "files") if many else _plural(count, "match", "matches")
        if mode == "count":
            counts = [int(m.group(1)) for x in lines if (m := re.search(r":(\d+)$", x))]
            return _plural(sum(counts), "match", "matches")
        if mode == "content" or (
            mode is None and sum(bool(_MATCH_LINE.match(x)) for x in lines) * 2 > len(lines)
        ):
            return _plural(len(lines), "match", "matches")
        return _plural(len(lines), "file", "files")

    return _listing(tool, title, "no matches", counted)


def _glob(tool: _Tool) -> ToolView:
    pattern = tool.arg("pattern", "glob")
    title = _title("Glob", _code(pattern, 80) if pattern else None, _where(tool))

    def counted(lines: list[str]) -> str:
        found = _FOUND.match(lines[0])
        return _plural(int(found.group(1)) if found else len(lines), "file", "files")

    return _listing(tool, title, "no files", counted)


# -- web --------------------------------------------------------------------------------


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
