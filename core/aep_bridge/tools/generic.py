"""MCP tools as `server › tool`, and any other tool: its telling argument, or a few
`key value` pairs, and what its result says; never JSON."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ..markup import Blocks, Paragraph, Span, Spans
from .call import (
    _URL,
    _code,
    _failure_details,
    _label,
    _link,
    _other_summary,
    _plain,
    _plural,
    _title,
    _Tool,
)
from .lines import (
    _first_line,
    _json_of,
    _line,
    _lines,
    _looks_like_json,
    _meaningful,
    _output_details,
    display_path,
)
from .view import _ELLIPSIS, _MAX_PAIRS, _MAX_VALUE, MAX_SUMMARY, ToolView

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
