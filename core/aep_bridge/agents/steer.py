"""Steer from the chat: the held Stop, from the agent side (issue 33).

When the person is away (the bridge says so: `GET /away?session=ID`), the agent's Stop hook
is held: the daemon asks the chat "claude-code finished: what next?" as an
`attention.requested` marked with the extension attribute `aepbridgesteer: "stop"`
(AEP-0001 §5.4), and a text answer becomes the agent's next instruction. **Done**, or no
answer within the hold the bridge names, lets the agent stop.

The away question fails open: no answer within `AWAY_WAIT`, an error, a 404 (a bridge from
before away mode) or anything but a well-formed `{"away": true, ...}` is "not away", and the
agent stops as it always did. A bridge that is slow never holds the agent longer than that.
"""

from __future__ import annotations

import logging
import ssl
from typing import Any, Final

import httpx

from ..aep.envelope import Event
from ..aep.registry import CAPTURE_RANK
from .mapping import Ceiling, Emission, gated, text_of
from .shim import MAX_HOLD

log = logging.getLogger("aep_bridge.agentd")

#: the extension attribute (AEP-0001 §5.4) that marks a request whose text answer is an
#: instruction to the agent, and its value for a held Stop
STEER: Final = "aepbridgesteer"
STOP: Final = "stop"
#: the one option of a held Stop: let the agent stop
DONE: Final = "done"
#: the key a held Stop is kept under in the attention loop (no tool, no MCP server)
HELD_SUBJECT: Final = "aepbridgesteer:stop"
#: how long the daemon waits for the bridge's answer to "is this session away?"
AWAY_WAIT: Final = 1.0
#: the hold when the bridge says away but names none (its default, 30 minutes)
DEFAULT_STOP_HOLD: Final = 1800.0
#: Claude Code's cap on Stop blocks in a row when its CLAUDE_CODE_STOP_HOOK_BLOCK_CAP is unset
DEFAULT_BLOCK_CAP: Final = 8
#: hooks after which Claude Code counts Stop blocks from zero again: a tool call ran (the
#: counter is reset by a continuation that used a tool), or a new turn began
RESETS_BLOCKS: Final = frozenset(
    {"PreToolUse", "PostToolUse", "PostToolUseFailure", "UserPromptSubmit", "SessionStart"}
)
#: the most of the agent's last message a card carries (its end: where it asks or concludes)
MAX_SAID: Final = 3000


def away_url(socket_url: str) -> str:
    """The bridge's `/away` beside the WebSocket the daemon sends to (`ws://HOST/socket`)."""
    base = socket_url
    for ws, http in (("wss://", "https://"), ("ws://", "http://")):
        if base.startswith(ws):
            base = http + base.removeprefix(ws)
            break
    base = base.rstrip("/").removesuffix("/socket")
    return base + "/away"


async def hold_if_away(
    url: str, token: str | None, session: str, *, trust: ssl.SSLContext | None = None
) -> float | None:
    """The hold in seconds when the bridge says `session` is away; None otherwise (not away,
    or no usable answer within `AWAY_WAIT`: fail open). `trust`: an https bridge's
    certificates (`agent login --ca-file`)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    verify: ssl.SSLContext | bool = trust if trust is not None else True
    try:
        async with httpx.AsyncClient(timeout=AWAY_WAIT, trust_env=False, verify=verify) as client:
            response = await client.get(url, params={"session": session}, headers=headers)
    except (httpx.HTTPError, OSError) as exc:
        log.info("away mode unknown (%s): the agent stops", type(exc).__name__)
        return None
    if response.status_code != 200:
        if response.status_code != 404:  # 404: a bridge from before away mode, quietly
            log.warning("the bridge answered %d to the away question", response.status_code)
        return None
    try:
        body = response.json()
    except ValueError:
        return None
    if not isinstance(body, dict) or body.get("away") is not True:
        return None
    hold = body.get("hold_seconds")
    if isinstance(hold, bool) or not isinstance(hold, int | float) or hold != hold or hold <= 0:
        return DEFAULT_STOP_HOLD
    return float(min(hold, MAX_HOLD))


def question(agent: str) -> str:
    """The card's question, the same words at every capture level (structure only)."""
    return f"{agent} finished: what next?"


def _said(payload: dict[str, Any]) -> str | None:
    said = text_of(payload.get("last_assistant_message"))
    if said is None:
        return None
    said = said.strip()
    if len(said) > MAX_SAID:
        said = "…" + said[-(MAX_SAID - 1) :]
    return said or None


def stop_request(agent: str, payload: dict[str, Any], ceiling: Ceiling) -> Emission:
    """The held Stop's `attention.requested`.

    What the agent said last is capture-gated (AEP-0003 §9): at `full` it is
    `context.last_assistant_message` and the prompt is the question; at `redacted` (where
    `context` may not go) it is the prompt's first part, through the §9.4 pipeline, above the
    question; at `metadata` the card asks the question alone."""
    said = _said(payload)
    level = CAPTURE_RANK[ceiling.attention]
    data: dict[str, Any] = {
        "kind": "input",
        "prompt": question(agent),
        "options": [{"id": DONE, "label": "Done"}],
        "respond_via": ["control"],
    }
    if said is not None and level >= CAPTURE_RANK["full"]:
        data["context"] = {"last_assistant_message": said}
    elif said is not None and level >= CAPTURE_RANK["redacted"]:
        data["prompt"] = f"{said}\n\n{question(agent)}"  # redacted by `gated`
    kept, capture = gated("attention.requested", data, ceiling)
    return Emission("attention.requested", kept, None, capture, "notice")


def is_stop_request(event: Event) -> bool:
    """A held Stop's request: its text answer is the agent's next instruction."""
    return event.extensions.get(STEER) == STOP


__all__ = [
    "AWAY_WAIT",
    "DEFAULT_BLOCK_CAP",
    "DONE",
    "HELD_SUBJECT",
    "RESETS_BLOCKS",
    "STEER",
    "STOP",
    "away_url",
    "hold_if_away",
    "is_stop_request",
    "question",
    "stop_request",
]
