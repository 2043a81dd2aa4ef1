"""`aep-bridge away on|off [--session ID]`: switch away mode on the running bridge (`POST
/away`), and the lines `aep-bridge status` prints of it (`away_lines`).

Away, an agent's stop is held by the agent daemon, which asks the chat what next
(docs/agents.md#steer-from-your-phone). Every line printed goes through `visible`: a session's
name is the agent's words.
"""

from __future__ import annotations

import sys
from typing import Any, TextIO

from ..text.terminal import visible
from .common import EXIT_OK, EXIT_USAGE, EXIT_VIOLATIONS, ask_bridge


def away_lines(state: dict[str, Any]) -> list[str]:
    """What `status` says of away mode: the everywhere switch, automatic away, and each
    session that is away or has its own switch."""
    minutes = max(1, round(int(state.get("hold_seconds") or 0) / 60))
    head = "away: everywhere" if state.get("everywhere") else "away: off"
    after = state.get("after_minutes")
    if after is not None:
        head += f"; automatic after {after:g} min without a prompt in the terminal"
    head += f"; a held stop waits up to {minutes} min"
    lines = [head]
    people = state.get("people")
    for name, switch in people.items() if isinstance(people, dict) else []:
        if isinstance(switch, dict):
            lines.append(f"  {name}: {'away' if switch.get('away') else 'back'} (their switch)")
    for session in state.get("sessions") or []:
        if not isinstance(session, dict):
            continue
        if not session.get("away") and session.get("switch") is None:
            continue
        name = session.get("name")
        named = f" {name!r}" if name and name != session.get("session") else ""
        if session.get("owned_by"):
            named += f", owner {session.get('owned_by')}"
        why = {
            "session": "its own switch",
            "person": f"{session.get('owner')}'s switch",
            "everywhere": "everywhere",
            "automatic": "automatic",
        }
        said = why.get(str(session.get("why")), "") if session.get("away") else "its own switch"
        lines.append(
            f"  {session.get('agent')} {session.get('session')}{named} ({session.get('id')}): "
            f"{'away' if session.get('away') else 'back'}" + (f" ({said})" if said else "")
        )
    return lines


def away(
    on: bool,
    *,
    session: str | None,
    config_file: str | None,
    person: str | None = None,
    url: str | None,
    token: str | None,
    out: TextIO | None = None,
) -> int:
    """Switch away mode: 0 when the bridge did, 1 when it refused (an unknown session), 2
    when no bridge answers (or it refuses the token)."""
    out = out or sys.stdout
    body = {"on": on, "session": session, "person": person}
    reply = ask_bridge("away", "/away", config_file=config_file, url=url, token=token, send=body)
    if reply is None:
        return EXIT_USAGE
    state = reply.body
    if reply.status == 404 and state is not None and state.get("error") == "not-found":
        print(
            f"aep-bridge away: the bridge at {reply.base} has no away mode (an older aep-bridge)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if reply.status != 200 or state is None:
        detail = state.get("detail", "") if state is not None else reply.text[:200]
        print(
            visible(f"aep-bridge away: {detail or reply.status}", one_line=True),
            file=sys.stderr,
        )
        return EXIT_VIOLATIONS if reply.status == 404 else EXIT_USAGE
    switched = state.get("person")
    person = person or (switched if isinstance(switched, str) else None)
    if person is not None:
        said = f"{person}'s sessions are " + ("away" if on else "back")
    elif session is None:
        said = "every session is away" if on else "every session is back: no stop is held"
    else:
        said = f"session {session} is " + ("away" if on else "back")
    print(visible(said, one_line=True), file=out)
    for line in away_lines(state):
        print(visible(line, one_line=True), file=out)
    return EXIT_OK
