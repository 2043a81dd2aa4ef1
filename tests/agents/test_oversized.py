"""One hook of megabytes never cuts the agent daemon off from the bridge (issue 30).

A 3 MB Bash command, a 2 MB elicitation message or a 2 MB session id made an event over the
bridge's limit: the bridge closed the daemon's WebSocket (1009), the daemon reconnected and
sent the same event again at once, and no later prompt of any session reached the chat
until the daemon restarted. Real processes: the agent daemon and each hook run as the agent
runs them, against the real endpoint (tests/agents/live.py, whose bridge takes events of at
most 16,000 bytes and closes on a frame over 32,000), and against a real `aep-bridge run`
at its default limit (1 MiB).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from aep_bridge.agents.bounds import MAX_ID
from tests.agents.live import Live, live, payload
from tests.agents.real import real

CC = "claude-code"
ALLOW = {
    "hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "allow"}}
}
COMMAND = "echo " + "C" * 3_000_000
MESSAGE = "Deploy? " + "D" * 2_000_000
SESSION = "s" * 2_000_000


def _requests(running: Live) -> list[dict[str, Any]]:
    return [e for e in running.events(CC) if e["type"] == "attention.requested"]


async def test_megabytes_in_a_hook_never_keep_a_later_prompt_from_the_chat(tmp_path: Path) -> None:
    async with live(tmp_path) as running:
        # a Bash command of 3 MB: its card comes, the command cut to fit, and says so
        bash = payload(CC, "PermissionRequest", session_id="huge-bash")
        bash["tool_input"] = {"command": COMMAND, "description": "print a lot"}
        hook = running.hook(CC, bash, "--hold", "30")
        card = await running.card(1, timeout=30)
        await running.press(card, "Deny")
        assert (await hook).output["hookSpecificOutput"]["decision"]["behavior"] == "deny"
        # an MCP server's elicitation whose message is 2 MB: its card comes too
        elicit = running.hook(
            CC, payload(CC, "Elicitation", session_id="huge-elicit", message=MESSAGE), "--hold", "3"
        )
        await running.card(2, timeout=30)
        assert (await elicit).output is None  # nobody answered: the terminal asks
        # a session id of 2 MB (Claude Code waits for input: a heads-up card)
        assert (await running.hook(CC, payload(CC, "Notification", session_id=SESSION))).status == 0
        await running.card(3, timeout=30)

        # an ordinary prompt in another session gets its card, and its answer
        ordinary = running.hook(
            CC, payload(CC, "PermissionRequest", session_id="ordinary"), "--hold", "30"
        )
        card = await running.card(4, timeout=30)
        assert running.labels(card)[0] == "Allow"
        await running.press(card, "Allow")
        assert (await ordinary).output == ALLOW

        requests = {r["session"]: r for r in _requests(running)}
        bash_prompt = requests["huge-bash"]["data"]["prompt"]
        # what was cut says how much more there was, and every event fits the bridge
        assert bash_prompt.startswith("Permission requested: Bash — echo CCC")
        assert "more characters)" in bash_prompt
        assert "more characters)" in requests["huge-elicit"]["data"]["prompt"]
        for event in running.events(CC):
            assert len(json.dumps(event, separators=(",", ":"), ensure_ascii=False)) <= 16_000
        # the long session is one session of a short, stable name
        [long] = [session for session in requests if session.startswith("sss")]
        assert len(long) <= MAX_ID
        # the daemon never lost the bridge: one connection all along, no storm of retries
        lines = (tmp_path / "agentd.err").read_text().splitlines()
        assert sum("connected to the bridge" in line for line in lines) == 1, lines[:5]
        assert len(lines) < 20, lines[:20]


async def test_the_same_against_a_real_bridge_at_its_default_limit(tmp_path: Path) -> None:
    """`aep-bridge run` takes events of 1 MiB and closes the socket on a frame 4 KiB over
    it; its web page is where the cards are answered."""
    async with real(tmp_path) as running:
        discovery = (await running.client.get(f"{running.base}/.well-known/aep")).json()
        assert discovery["capabilities"]["experimental"]["max_event_bytes"] == 1024 * 1024
        daemon = await running.daemon("agentd")
        bash = payload(CC, "PermissionRequest", session_id="huge-bash")
        bash["tool_input"] = {"command": COMMAND}
        hook = daemon.hook(bash)
        await running.press(await running.card("echo CCC"), "Deny")
        denied = await hook
        assert denied["hookSpecificOutput"]["decision"]["behavior"] == "deny"
        elicit = payload(CC, "Elicitation", session_id="huge-elicit", message=MESSAGE)
        assert await daemon.hook(elicit, "3") is None
        await daemon.hook(payload(CC, "Notification", session_id=SESSION))

        hook = daemon.hook(payload(CC, "PermissionRequest", session_id="ordinary"))
        await running.press(await running.card("npm test"), "Allow")
        assert await hook == ALLOW
        lines = daemon.lines()
        assert sum("connected to the bridge" in line for line in lines) == 1, lines[:5]
