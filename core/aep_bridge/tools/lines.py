"""Text as a tool view shows it: paths relative to the session's folder, one clipped line,
the last lines of an output, and the text or JSON inside an output."""

from __future__ import annotations

import json
import re
from typing import Any, Final

from ..markup import Code, Details
from .view import _ELLIPSIS, _MAX_LINE, MAX_DETAILS, TAIL_LINES

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
