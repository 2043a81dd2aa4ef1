"""The call every renderer reads (`_Tool`), the spans of a title, and how a call that did not
succeed reads."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit

from ..markup import Blocks, Span, Spans
from .lines import _line, _lines, _meaningful, _output_details, _text_of, display_path
from .view import MAX_SUMMARY, ToolOutcome, ToolView

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


def _first_str(args: Mapping[str, Any], *names: str) -> str | None:
    for name in names:
        value = args.get(name)
        if isinstance(value, str):
            return value
    return None


def _plural(count: int, one: str, many: str) -> str:
    return f"{count} {one if count == 1 else many}"


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
