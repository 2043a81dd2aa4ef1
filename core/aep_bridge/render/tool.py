"""`tool.*`: each call's line in the thread's activity message (under the reply that announced
the calls, where there is one), or a message of its own."""

from __future__ import annotations

import json
import logging
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Final

from pydantic import BaseModel

from ..aep.envelope import Event
from ..aep.payloads import Cost, ToolCompleted, ToolDenied, ToolFailed, ToolRequested
from ..markup import Blocks
from ..tools import ToolCall, ToolOutcome, ToolView
from .activity import Activity, ToolLine
from .draft import Draft
from .helpers import NORMAL, VERBOSE, _typed, _usage_text
from .progress import ProgressMixin

log = logging.getLogger(__name__)

#: a tool call's arguments kept after its event: each value, and all of them together
KEPT_ARG: Final = 4_096
KEPT_ARGS: Final = 16_384
#: arguments kept (cut) whatever their size: what the call does
_TELLING_ARGS: Final = frozenset(
    {"command", "cmd", "file_path", "filePath", "path", "pattern", "url", "description", "query"}
)
#: A call's state, as the messages' metadata says it.
_TOOL_STATUS: Final = {"success": "completed", "other": "completed"}


class ToolMixin(ProgressMixin):
    """`tool.requested`, `tool.completed`, `tool.failed`, `tool.denied`; a to-do list a
    call writes (TodoWrite) is the session's plan (`ProgressMixin`)."""

    def _tool_key(self, ev: Event, call_id: str | None, name: str, *, start: bool) -> str:
        if call_id:
            return f"tool:{call_id}"
        if ev.data is None:  # ceiling none: pair on the envelope (AEP-0002 §2 convention 1)
            if start:
                return f"tool:@{ev.id}"
            if ev.cause:
                return f"tool:@{ev.cause}"
        return f"tool:{ev.subject or name}"

    def _tool_name(self, ev: Event, tool_name: str | None) -> str:
        return self._line(tool_name or ev.subject or "tool", 80) or "tool"

    def _tool_requested(self, d: Draft) -> None:
        ev = d.event
        p = _typed(ev, ToolRequested)
        raw_name = p.tool.name if p is not None else None
        call_id = p.tool.call_id if p is not None else None
        name = self._tool_name(ev, raw_name)
        key = self._tool_key(ev, call_id, name, start=True)
        args = (p.args if p.args is not None else p.args_redacted) if p is not None else None
        call = ToolCall(name=name, args=dict(args or {}), cwd=self._cwd(ev, d.ceiling))
        digest = p.args_digest if p is not None else None
        kept = ToolCall(name=name, args=_kept_args(call.args), cwd=call.cwd, args_digest=digest)
        self._keep_call(ev, d.ceiling, f"event:{ev.id}", kept)  # a card it causes names it
        self._keep_call(ev, d.ceiling, key, kept)
        d.thread.held = None  # quiet: the reply before this call was not the run's last
        view = self._view(call, None, d.verbosity)
        if view.plan is not None:  # TodoWrite and the like: the plan, not a line
            self._todo_plan(d, view.plan)
            return
        self._show_tool(d, key, call_id, view, "running", None, name)

    def _tool_done(
        self,
        d: Draft,
        tool_name: str | None,
        call_id: str | None,
        outcome: ToolOutcome,
        status: str,
    ) -> None:
        """A call finished: its line shows what came of it (where it was shown)."""
        ev = d.event
        name = self._tool_name(ev, tool_name)
        key = self._tool_key(ev, call_id, name, start=False)
        call = self._call(ev, d.ceiling, key) or ToolCall(name=name, args={})
        call = ToolCall(name=call.name, args=call.args, cwd=self._cwd(ev, d.ceiling))
        view = self._view(call, outcome, d.verbosity)
        if view.plan is not None:
            if status != "success":
                self._show_tool(d, key, call_id, view, status, outcome.duration_ms, name)
            return
        self._show_tool(d, key, call_id, view, status, outcome.duration_ms, name)

    def _show_tool(
        self,
        d: Draft,
        key: str,
        call_id: str | None,
        view: ToolView,
        status: str,
        duration_ms: int | None,
        call_name: str = "",
    ) -> None:
        """A tool call's line: in the thread's activity message where the channel edits
        messages in place, else a message of its own."""
        thread = d.thread
        if not d.edits:
            single = ToolLine(call_id or key, view, status, duration_ms, call_name)
            blocks = _activity_blocks((single,), durations=d.verbosity >= VERBOSE)
            d.add(
                NORMAL,
                "tool_call" if status == "running" else "tool_update",
                "",
                blocks=blocks,
                metadata={"call_id": call_id, "status": _TOOL_STATUS.get(status, status)},
            )
            return
        activity = thread.calls.get(key)
        if activity is None or key not in activity.lines:
            # at quiet the calls are not shown: the reply stays as it is, for the footer
            activity = thread.place(key, view, d.event.id, under=d.verbosity >= NORMAL)
        elif not view.details and activity.lines[key].view.details:
            # the call's arguments were too large to keep whole (`_kept_args`): what it
            # showed when it started (the change it makes) stays under its line
            view = replace(view, details=activity.lines[key].view.details)
        activity.lines[key] = ToolLine(call_id or key, view, status, duration_ms, call_name)
        blocks = activity.blocks(durations=d.verbosity >= VERBOSE)
        d.add(
            NORMAL,
            activity.message_type,
            "",
            key=activity.key,
            blocks=blocks,
            metadata=activity.metadata(),
        )

    def _tool_completed(self, d: Draft) -> None:
        p = _typed(d.event, ToolCompleted)
        status = p.status if p is not None and p.status else "success"
        result = (p.result if p.result is not None else p.result_redacted) if p else None
        outcome = ToolOutcome(
            status="success" if status == "success" else "other",
            output=result if result is not None or status == "success" else status,
            error_type=None if status == "success" else status,
            duration_ms=p.duration_ms if p is not None else None,
        )
        name = p.tool.name if p is not None else None
        call_id = p.tool.call_id if p is not None else None
        self._tool_done(d, name, call_id, outcome, "success" if status == "success" else "other")
        self._usage(d, p, self._tool_name(d.event, name))

    def _tool_failed(self, d: Draft) -> None:
        p = _typed(d.event, ToolFailed)
        outcome = ToolOutcome(
            status="failed",
            output=p.error.message if p is not None else None,
            error_type=p.error.type if p is not None else None,
            duration_ms=p.duration_ms if p is not None else None,
        )
        name = p.tool.name if p is not None else None
        self._tool_done(d, name, p.tool.call_id if p else None, outcome, "failed")

    def _tool_denied(self, d: Draft) -> None:
        p = _typed(d.event, ToolDenied)
        why = f"by {p.by}" if p is not None else ""
        if p is not None and p.rule:
            why += ": " + self._line(p.rule, 120)
        outcome = ToolOutcome(status="denied", output=why or None)
        name = p.tool.name if p is not None else None
        self._tool_done(d, name, p.tool.call_id if p else None, outcome, "denied")

    def _usage(self, d: Draft, p: BaseModel | None, what: str) -> None:
        """A usage message at verbose, for payloads that carry token counts or cost."""
        if p is None:
            return
        usage = _usage_text(p)
        if not usage:
            return
        cost: Cost | None = getattr(p, "cost", None)
        d.add(
            VERBOSE,
            "usage",
            f"{what}: {usage}",
            metadata={
                "input_tokens": getattr(p, "input_tokens", None),
                "output_tokens": getattr(p, "output_tokens", None),
                "cost": cost.to_data() if cost is not None else None,
            },
        )


def _activity_blocks(lines: Sequence[ToolLine], *, durations: bool) -> Blocks:
    lines_by_id = OrderedDict((line.call_id, line) for line in lines)
    return Activity(key="", lines=lines_by_id).blocks(durations=durations)


def _kept_args(args: Mapping[str, Any]) -> dict[str, Any]:
    """A tool call's arguments as the renderer keeps them after the call's event (for its
    line's update and the card it may cause), bounded: a string over `KEPT_ARG` characters
    is kept only when it says what the call does (cut), other large values are dropped, and
    at most `KEPT_ARGS` characters in all. An event is up to a megabyte; thousands are kept."""
    kept: dict[str, Any] = {}
    room = KEPT_ARGS
    for name, value in list(args.items())[:32]:
        if isinstance(value, str):
            if len(value) > KEPT_ARG:
                if name not in _TELLING_ARGS:
                    continue
                value = value[:KEPT_ARG]
            size = len(value)
        else:
            size = len(json.dumps(value, ensure_ascii=False, default=str))
            if size > KEPT_ARG:
                continue
        if size > room:
            break
        kept[name] = value
        room -= size
    return kept
