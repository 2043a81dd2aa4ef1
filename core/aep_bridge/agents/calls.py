"""Which tool call a permission request gates: the request's `cause`.

Neither Claude Code's nor Codex's `PermissionRequest` hook names the call it asks about
(no `tool_use_id`; claude_code.py and codex.py say so), yet the card a person judges draws
the command, the diff or the URL from that call's `tool.requested` when the request's
`cause` names it (render/cards.py). Both agents run `PreToolUse` before they ask, with the
same `tool_name` and `tool_input`, so a session remembers its last few calls that have not
ended, and a request is linked to the most recent one with the same tool name and the same
input (compared by digest, AEP-0003 §9.3) that no other request has taken. No such call, no
link: the card falls back to the request's own words, never to another call's command.

The daemon and the realistic session generator (tests/sessions/realistic.py) both link
through `OpenCalls`, so the recorded session carries the cause as the daemon sends it.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any, Final

from ..aep.redaction import digest
from .bounds import bounded_id
from .mapping import text_of

#: calls remembered per session: a request follows its PreToolUse at once, so a few cover
#: parallel calls; the oldest is forgotten first
KEPT: Final = 8
#: hooks that end a call (its `tool_use_id`)
ENDS: Final = frozenset({"PostToolUse", "PostToolUseFailure", "PermissionDenied"})
#: hooks after which no call of the session is still waiting to be asked about
OVER: Final = frozenset({"UserPromptSubmit", "Stop", "StopFailure", "SessionEnd"})


@dataclass(slots=True)
class _Call:
    tool: str
    input_digest: str
    call_id: str | None
    event: str
    taken: bool = False


def _key(payload: dict[str, Any]) -> tuple[str, str] | None:
    """(tool name, digest of its input): what a call and the request about it share."""
    tool = text_of(payload.get("tool_name"))
    if tool is None or not isinstance(payload.get("tool_input"), dict):
        return None
    return bounded_id(tool), digest(payload["tool_input"])


class OpenCalls:
    """One session's calls requested (`tool.requested` sent) and not ended yet, newest last."""

    def __init__(self, kept: int = KEPT) -> None:
        self._calls: deque[_Call] = deque(maxlen=kept)

    def __len__(self) -> int:
        return len(self._calls)

    def requested(self, payload: dict[str, Any], event_id: str) -> None:
        """A PreToolUse became the `tool.requested` `event_id`."""
        key = _key(payload)
        if key is None:
            return
        call_id = text_of(payload.get("tool_use_id"))
        self._calls.append(_Call(*key, None if call_id is None else bounded_id(call_id), event_id))

    def ended(self, payload: dict[str, Any]) -> None:
        """A call completed, failed or was denied: no request can be about it any more."""
        call_id = text_of(payload.get("tool_use_id"))
        if call_id is None:
            return
        call_id = bounded_id(call_id)
        for call in [c for c in self._calls if c.call_id == call_id]:
            self._calls.remove(call)

    def clear(self) -> None:
        """The turn is over (a new prompt, a stop, the session's end)."""
        self._calls.clear()

    def cause(self, payload: dict[str, Any]) -> str | None:
        """The `tool.requested` id of the call this PermissionRequest gates, or None: the
        most recent open call with the same tool name and input not linked already."""
        key = _key(payload)
        if key is None:
            return None
        for call in reversed(self._calls):
            if not call.taken and (call.tool, call.input_digest) == key:
                call.taken = True
                return call.event
        return None

    def hook(self, name: Any, payload: dict[str, Any]) -> None:
        """What a hook other than PreToolUse / PermissionRequest says about the open calls."""
        if name in ENDS:
            self.ended(payload)
        elif name in OVER:
            self.clear()


__all__ = ["ENDS", "KEPT", "OVER", "OpenCalls"]
