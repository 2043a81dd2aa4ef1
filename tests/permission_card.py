"""A realistic permission card, built as the bridge builds it (issue 32, item 2): Claude
Code's recorded `PermissionRequest` hook payload through the real hook mapping (attention at
capture `full`, so the request carries its `context`) into the real renderer. The channels'
tests draw it on their fake platforms and read it back as a person sees it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from aep_bridge.aep.build import make_event
from aep_bridge.aep.envelope import Event
from aep_bridge.aep.redaction import Redactor
from aep_bridge.agents.claude_code import map_hook
from aep_bridge.agents.mapping import Ceiling, Emission
from aep_bridge.contract.types import PermissionRequest
from aep_bridge.render import Renderer

PAYLOADS = Path(__file__).parent / "agents" / "payloads" / "claude_code"
AGENT = "claude-code"
SESSION_NAME = "Fix invoice rounding"
CWD = "/home/ana/src/shop"
FOLDER = "~/src/shop"
#: a long command (over a thousand characters, on one line): shown whole, never cut
COMMAND = "pip install -e '.[test]' hypothesis==6.112.0 && " + " && ".join(
    f"python -m pytest tests/test_part_{n:03}.py -q" for n in range(30)
)
#: the agent's reason, with markdown in it: shown rendered, never as raw backticks
REASON = "Install the package with its `test` extras, then run **every** part"
REASON_SHOWN = "Install the package with its test extras, then run every part"


def hook_payload(name: str, **changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((PAYLOADS / f"{name}.json").read_text())
    data.update(changes)
    return data


def request_event(payload: dict[str, Any], attention: str = "full") -> Event:
    """The `attention.requested` the agent daemon sends for `payload`."""
    (emission,) = map_hook(payload, Ceiling(events="metadata", attention=attention))  # type: ignore[arg-type]
    return as_sent(emission)


def as_sent(emission: Emission) -> Event:
    """One of Claude Code's emissions as the daemon sends it (session `s1`, run `r1`)."""
    return make_event(
        emission.type,
        source="urn:aep:agent:claude-code",
        agent=AGENT,
        session="s1",
        seq=1,
        run="r1",
        subject=emission.subject,
        severity=emission.severity,
        capture=emission.capture,
        data=emission.data,
    )


def card_of(
    payload: dict[str, Any], *, attention: str = "full", card: str = "k1"
) -> PermissionRequest:
    """`payload`'s card as a channel at capture `full` gets it, in the session `SESSION_NAME`."""
    request, _ = Renderer(Redactor()).permission_request(
        request_event(payload, attention), card, ceiling="full", session_name=SESSION_NAME
    )
    return request


def bash_card(card: str = "k1") -> PermissionRequest:
    """A Bash permission with a long command, a folder under home and a reason in markdown."""
    tool_input = {"command": COMMAND, "description": REASON}
    return card_of(hook_payload("PermissionRequest", cwd=CWD, tool_input=tool_input), card=card)


def edit_card(card: str = "k2") -> PermissionRequest:
    """An Edit permission: its card shows the change as a diff."""
    return card_of(hook_payload("PermissionRequest-Edit"), card=card)


def in_order(text: str, *parts: str) -> bool:
    """Whether every part is in `text`, each after the one before it."""
    at = -1
    for part in parts:
        found = text.find(part, at + 1)
        if found < 0:
            return False
        at = found
    return True
