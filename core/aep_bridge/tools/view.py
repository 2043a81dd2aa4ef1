"""What a tool call is, how it ended, how it reads (`ToolView`), and the bounds every view
is held to."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from ..markup import Blocks, Spans

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
    #: the AEP `args_digest` of its arguments (AEP-0003 §9.3), when the agent sent one: it
    #: lets a card check a command read from a prompt against the call it is about
    args_digest: str | None = None


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
