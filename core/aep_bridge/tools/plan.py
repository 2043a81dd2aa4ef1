"""The plan (TodoWrite and its equivalents) and subagents (Task)."""

from __future__ import annotations

from collections.abc import Mapping

from ..markup import Span, parse_markdown, plain
from .call import _failure_details, _first_str, _label, _other_summary, _plain, _title, _Tool
from .lines import _line, _lines, _meaningful
from .view import _MAX_PLAN, MAX_SUMMARY, MAX_TITLE, ToolView

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
