"""The ntfy plugin end to end through the real bridge: an agent's session reaches a phone.

aep-bridge's `bridge` fixture runs the real core (store on disk, hub, `LocalSource`, `Bridge`
with this channel registered, the real outbox) and serves the channel's press route on a
loopback port, at the `public_url` the buttons name. An agent scripted on the bridge's hub
plays the session; the channel publishes to the fake ntfy server on another loopback port;
the phone reads the topic as a subscriber does and taps the buttons exactly as the ntfy app
does, which POSTs back to the bridge.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from fake_ntfy import FakeNtfy, Phone
from ntfy_probe import NtfyProbe
from support import ntfy_block

from aep_bridge import Event
from aep_bridge.testing.fixture import BridgeFixture, RunningBridge, ScriptedAgent
from aep_bridge_ntfy import NtfyChannel

LABEL = "Fix the login test"
QUESTION = "Run `pytest tests/test_login.py`?"
#: the options a question offers: the ids are the labels, as `aep-bridge ask` sends them
ALLOW_DENY = [("Allow", "Allow"), ("Deny", "Deny")]
#: long enough for a press that should not count to have reached the agent if it did
GRACE = 0.3


async def start(
    bridge: BridgeFixture, ntfy: FakeNtfy, **overrides: Any
) -> RunningBridge[NtfyChannel]:
    """The bridge with an ntfy channel whose buttons call back to it."""
    running = await bridge.start(NtfyChannel, ntfy_block(ntfy, bridge.url, **overrides))
    assert running.view.running == ["ntfy"]
    return running


def texts(notifications: list[dict[str, Any]]) -> list[str]:
    return [n["message"] for n in notifications]


def card_of(notifications: list[dict[str, Any]]) -> dict[str, Any]:
    cards = [n for n in notifications if n.get("actions")]
    assert len(cards) == 1, f"expected one notification with buttons, got {len(cards)}"
    return cards[0]


def ask(agent: ScriptedAgent) -> Event:
    """What `aep-bridge ask` does: a session named after the question, then the question."""
    agent.start(QUESTION)
    return agent.ask(QUESTION, ALLOW_DENY)


# -- a session, mirrored --------------------------------------------------------------------

SECRET = "ghp_" + "Zx8Kq2Lm9Vb4Nc7Rt1Yw5Pa3Sd6Fg0Hj2Kl4"


async def test_a_session_arrives_on_the_phone_titled_in_order_and_once(
    bridge: BridgeFixture, ntfy: FakeNtfy, probe: NtfyProbe
) -> None:
    running = await start(bridge, ntfy)
    agent = running.agent(agent="tiny-agent")
    agent.emit(
        "session.started",
        {"label": LABEL, "client": {"name": "tiny-agent"}},
        capture="redacted",
    )
    agent.emit("run.started", {"trigger": "user"}, run="r1")
    agent.emit(
        "tool.requested",
        {
            "tool": {"name": "Bash", "call_id": "call-1"},
            "args_redacted": {"command": "pytest tests/test_login.py"},
        },
        capture="redacted",
        run="r1",
    )
    # the tool runs for a while: the phone shows the call before it finishes
    await running.settle()
    assert texts(await probe.notifications())[-1] == "⏳ Bash pytest tests/test_login.py"
    agent.emit(
        "tool.completed",
        {"tool": {"name": "Bash", "call_id": "call-1"}, "status": "success", "duration_ms": 1200},
        capture="redacted",
        run="r1",
    )
    agent.emit(
        "message.agent.replied",
        {"text": f"The login test passes now. I used the token {SECRET} to fetch it."},
        capture="redacted",
        run="r1",
    )
    agent.emit("run.finished", {}, run="r1")
    agent.end()
    await running.settle()
    phone = await probe.notifications()

    assert {n["title"] for n in phone} == {LABEL}, "every notification names the session"
    # ntfy has no threads: each message is the notification, in the agent's order, once (no
    # second "heads-up" ringing for the same thing)
    assert texts(phone) == [
        "Session started: Fix the login test\n\ntiny-agent",
        "⏳ Bash pytest tests/test_login.py",
        "✅ Bash pytest tests/test_login.py",
        "The login test passes now. I used the token [REDACTED:secret] to fetch it.",
        "Finished",
        "Session ended (normal).",
    ]
    assert all(SECRET not in json.dumps(n) for n in phone), "the secret left the machine"
    assert not any(n.get("actions") for n in phone), "nothing here asked a question"


# -- a question, answered from the phone ----------------------------------------------------


async def test_a_tap_on_allow_answers_the_agent_once(
    bridge: BridgeFixture, ntfy: FakeNtfy, probe: NtfyProbe, phone: Phone
) -> None:
    running = await start(bridge, ntfy)
    agent = running.agent()
    request = ask(agent)
    await running.settle()
    card = card_of(await probe.notifications())
    assert card["title"] == QUESTION
    # the prompt is the agent's markdown: a plain-text phone gets its plain rendering
    assert "Run pytest tests/test_login.py?" in card["message"]
    assert card["priority"] == 4, "a question rings"
    assert [a["label"] for a in card["actions"]] == ["Allow", "Deny"]
    allow = card["actions"][0]
    assert allow["url"] == f"{bridge.url}/channels/ntfy/press"

    tapped = await phone.tap(allow)
    assert tapped.status_code == 200
    assert tapped.json() == {"status": "accepted", "message": "Sent to the agent"}
    await running.settle()

    assert agent.answers == [{"option": "Allow"}]
    [command] = agent.commands
    assert command.type == "control.attention.respond"
    assert command.subject == request.id
    assert command.data == {"answer": {"option": "Allow"}}
    assert [(a.type, a.cause) for a in agent.acks.values()] == [("control.accepted", command.id)]

    outcome = "Answered by ntfy: Allow"
    shown = await probe.notifications()
    [done] = [n for n in shown if outcome in n["message"]]
    assert done["title"] == QUESTION
    assert "actions" not in done, "an answered question offers no buttons"

    # the same button again: told, and nothing more reaches the agent
    again = await phone.tap(allow)
    assert again.status_code == 200
    closed = f"This question is closed: {outcome}"
    assert again.json() == {"status": "already_answered", "message": closed}
    await running.settle()
    assert closed in texts(await probe.notifications())
    # a replayed press (anyone reading the topic can send one) costs no more publishes
    for _ in range(20):
        assert (await phone.tap(allow)).json()["status"] == "already_answered"
    await asyncio.sleep(GRACE)
    await running.settle()
    phone_shows = texts(await probe.notifications())

    assert len(agent.commands) == 1
    assert sum(outcome in t for t in phone_shows if t != closed) == 1, "the outcome is shown once"
    assert phone_shows.count(closed) == 1


async def test_a_button_from_before_a_restart_answers_the_agent(
    bridge: BridgeFixture, ntfy: FakeNtfy, probe: NtfyProbe, phone: Phone
) -> None:
    """The bridge restarts between the card and the tap: the button still answers, with
    nothing of the card kept by the channel (the core signed it and knows the card)."""
    running = await start(bridge, ntfy)
    agent = running.agent()
    ask(agent)
    await running.settle()
    deny = card_of(await probe.notifications())["actions"][1]

    await running.restart()
    tapped = await phone.tap(deny)
    await running.settle()

    assert tapped.json() == {"status": "accepted", "message": "Sent to the agent"}
    assert agent.answers == [{"option": "Deny"}]
    assert any("Answered by ntfy: Deny" in t for t in texts(await probe.notifications()))


# -- presses that must not count ------------------------------------------------------------


async def no_command(running: RunningBridge[NtfyChannel], agent: ScriptedAgent) -> None:
    """Give a wrongly accepted press the time to reach the agent, then check it did not."""
    await asyncio.sleep(GRACE)
    await running.settle()
    assert agent.commands == [], "a refused press reached the agent"
    assert agent.acks == {}, "the agent was asked nothing"


async def test_a_press_from_a_topic_that_may_not_answer_is_refused(
    bridge: BridgeFixture, ntfy: FakeNtfy, probe: NtfyProbe, phone: Phone
) -> None:
    """The topic's presses are reported as `identity`; with it not an approver, none counts."""
    running = await start(bridge, ntfy, identity="ntfy-guest", approvers=["ntfy-owner"])
    agent = running.agent()
    ask(agent)
    await running.settle()
    card = card_of(await probe.notifications())
    refused = "Refused: you are not an approver for this channel"
    tapped = await phone.tap(card["actions"][0])
    assert tapped.status_code == 200
    assert tapped.json() == {"status": "not_allowed", "message": refused}
    await running.settle()
    [note] = [n for n in await probe.notifications() if n["message"] == refused]
    assert note["title"] == QUESTION
    await no_command(running, agent)


async def test_a_forged_press_is_refused_before_the_bridge_decides(
    bridge: BridgeFixture, ntfy: FakeNtfy, probe: NtfyProbe, phone: Phone
) -> None:
    """With the topic an approver, only a press the bridge signed can answer."""
    running = await start(bridge, ntfy)
    agent = running.agent()
    ask(agent)
    await running.settle()
    allow, deny = card_of(await probe.notifications())["actions"]
    genuine = json.loads(deny["body"])
    forged = [
        {**genuine, "press": json.loads(allow["body"])["press"][:-2] + "xx"},  # altered
        {**genuine, "press": "A" * len(genuine["press"])},  # made up
        {"session": genuine["session"]},  # unsigned
    ]
    for body in forged:
        tapped = await phone.tap({**allow, "body": json.dumps(body)})
        assert tapped.status_code == 403, body
    before = await probe.notifications()
    await no_command(running, agent)
    assert await probe.notifications() == before, "a forged press is not answered"

    # the forgeries used nothing up: the genuine Deny button still answers
    assert (await phone.tap(deny)).json()["status"] == "accepted"
    await running.settle()
    assert agent.answers == [{"option": "Deny"}]
    assert [c.data for c in agent.commands] == [{"answer": {"option": "Deny"}}]
