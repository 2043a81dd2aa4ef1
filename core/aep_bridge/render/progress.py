"""`progress.*`: the status line, the session's plan card and artifacts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from ..aep.payloads import (
    ProgressArtifactProduced,
    ProgressStatus,
    ProgressTaskCompleted,
    ProgressTaskPlanned,
)
from ..markup import Blocks, Paragraph, Span
from .base import RendererBase
from .draft import Draft
from .helpers import NORMAL, SHORT, VERBOSE, _size, _typed

MAX_PLAN_LINES: Final = 40
#: Bound on the renderer's memory: tasks per plan.
MAX_TASKS: Final = 200
_DONE: Final = frozenset({"completed", "complete", "done", "success", "succeeded", "ok"})
_FAILED: Final = frozenset({"failed", "failure", "error", "errored"})
_SKIPPED: Final = frozenset({"skipped", "cancelled", "canceled", "abandoned"})


class ProgressMixin(RendererBase):
    """`progress.status`, `progress.task.*` (the plan card), `progress.artifact.produced`."""

    def _progress_status(self, d: Draft) -> None:
        ev = d.event
        p = _typed(ev, ProgressStatus)
        text = "Status"
        if p is not None and p.message:
            text += ": " + self._line(p.message, SHORT)
        facts = []
        if p is not None and p.phase:
            facts.append(self._line(p.phase, 40))
        if p is not None and p.percent is not None:
            facts.append(f"{p.percent:g}%")
        if facts:
            text += f" ({', '.join(facts)})"
        d.add(VERBOSE, "system_message", text, key=f"status:{ev.session or ev.agent}")

    def _task_planned(self, d: Draft) -> None:
        ev = d.event
        p = _typed(ev, ProgressTaskPlanned)
        task = p.task if p is not None else None
        task_key = (task.id if task is not None and task.id else None) or ev.id
        plan = self._plan(ev, d.ceiling)
        title = self._line(task.title, SHORT) if task is not None and task.title else ""
        same = next((k for k, e in plan.items() if title and e.get("content") == title), None)
        task_key = same or task_key  # the plan a TodoWrite showed already has it
        entry = plan.get(task_key)
        if entry is None:
            if len(plan) >= MAX_TASKS:
                plan.popitem(last=False)
            entry = plan[task_key] = {"status": "pending"}
        if title:
            entry["content"] = title
        entry.setdefault("content", self._line(task.id) if task and task.id else "a task")
        if p is not None and p.parent:
            entry["parent"] = p.parent
        self._plan_card(d)

    def _task_completed(self, d: Draft) -> None:
        ev = d.event
        p = _typed(ev, ProgressTaskCompleted)
        task = p.task if p is not None else None
        plan = self._plan(ev, d.ceiling)
        title = self._line(task.title, SHORT) if task is not None and task.title else ""
        found = next((k for k, e in plan.items() if title and e.get("content") == title), None)
        if found is None and task is not None and task.id:
            found = task.id
        if found is None and ev.cause is not None and ev.cause in plan:
            found = ev.cause
        task_key = found or ev.id
        entry = plan.get(task_key)
        if entry is None:
            if len(plan) >= MAX_TASKS:
                plan.popitem(last=False)
            entry = plan[task_key] = {"content": title or (self._line(task_key) or "a task")}
        if title:
            entry["content"] = title
        entry["status"] = (p.status if p is not None and p.status else "completed").lower()
        self._plan_card(d)

    def _todo_plan(self, d: Draft, todos: Sequence[tuple[str, str]]) -> None:
        """A to-do list the agent wrote (TodoWrite): the session's plan, whole."""
        plan = self._plan(d.event, d.ceiling)
        plan.clear()
        for content, status in todos[:MAX_TASKS]:
            title = self._line(content, SHORT)
            if title:
                plan[f"todo:{title}"] = {"content": title, "status": (status or "pending").lower()}
        self._plan_card(d)

    def _plan_card(self, d: Draft) -> None:
        ev = d.event
        plan = self._plan(ev, d.ceiling)
        lines = []
        entries = []
        for task_key, entry in plan.items():
            indent = "  " if entry.get("parent") in plan and entry.get("parent") != task_key else ""
            status = str(entry.get("status", "pending"))
            lines.append(f"{indent}{_mark(status)} {entry.get('content', '')}")
            entries.append({"content": entry.get("content", ""), "status": _plan_status(status)})
        if len(lines) > MAX_PLAN_LINES:
            more = len(lines) - MAX_PLAN_LINES
            lines = [*lines[:MAX_PLAN_LINES], f"… and {more} more"]
        blocks: Blocks = (
            Paragraph(spans=(Span(text="Plan", bold=True), Span(text="\n" + "\n".join(lines)))),
        )
        d.add(
            NORMAL,
            "plan",
            "",
            key=f"plan:{ev.session or ev.agent}",
            metadata={"entries": entries},
            blocks=blocks,
        )

    def _artifact(self, d: Draft) -> None:
        p = _typed(d.event, ProgressArtifactProduced)
        artifact = p.artifact if p is not None else None
        text = "Artifact"
        if artifact is not None:
            name = self._line(artifact.name, 120) or self._line(artifact.id, 120)
            if name:
                text += f": {name}"
            facts = [self._line(artifact.mime, 60) if artifact.mime else ""]
            if artifact.bytes is not None:
                facts.append(_size(artifact.bytes))
            if any(facts):
                text += f" ({', '.join(x for x in facts if x)})"
            if artifact.uri:
                text += "\n" + self._line(artifact.uri, SHORT)
        d.add(
            NORMAL,
            "attachment",
            text,
            metadata={
                "artifact_id": artifact.id if artifact else None,
                "mime": artifact.mime if artifact else None,
                "bytes": artifact.bytes if artifact else None,
            },
        )


def _mark(status: str) -> str:
    """A plan step's mark, by the status it is shown as (`_plan_status`)."""
    return _MARKS[_plan_status(status)]


#: a plan step's mark by its status as shown
_MARKS: Final = {
    "completed": "✅",
    "failed": "❌",
    "skipped": "➖",
    "in_progress": "🔄",
    "pending": "⬜",
}


def _plan_status(status: str) -> str:
    if status in _DONE:
        return "completed"
    if status in _FAILED:
        return "failed"
    if status in _SKIPPED:
        return "skipped"
    if status in ("in_progress", "running", "started"):
        return "in_progress"
    return "pending"
