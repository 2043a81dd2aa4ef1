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

The modules: `view` (the types and bounds), `lines` (text and outputs), `call` (what every
renderer reads and shares), then one per family: `shell`, `files` (read, write, edit, patch),
`search` (grep, glob, web), `plan` (the plan, subagents), `generic` (MCP, anything else).
Names with an underscore are the package's own, shared among those modules only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

from ..markup import Code, Details, Span, plain
from .call import _Renderer, _Tool
from .files import _edit, _patch, _read, _write
from .generic import _generic, _mcp
from .lines import _line, _tail, display_path
from .plan import _task, _todo
from .search import _fetch, _glob, _grep, _search
from .shell import _shell
from .view import (
    _ELLIPSIS,
    _MAX_PLAN,
    MAX_DETAILS,
    MAX_DIFF_LINES,
    MAX_SUMMARY,
    MAX_TITLE,
    TAIL_LINES,
    ToolCall,
    ToolOutcome,
    ToolView,
)


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
        # a span already on one line is kept as it is (a copy would be equal)
        title.append(span if text == span.text else span.model_copy(update={"text": text}))
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
    "MAX_DIFF_LINES",
    "MAX_SUMMARY",
    "MAX_TITLE",
    "TAIL_LINES",
    "ToolCall",
    "ToolOutcome",
    "ToolView",
    "bound_view",
    "display_path",
    "render_tool",
]
