"""An answer given while its agent is away waits for the agent, kept in the store.

Right after a restart (of the bridge or of the agent) the agent may not have claimed its
session yet, and an agent blocked on a question may post nothing until it is answered. A
press then finds no route to it. The answer is kept, the cards say it waits for the agent,
and it is sent once, as soon as the agent claims its session again; a restart meanwhile
keeps it. When the agent does not come back within `attention.answer_hold` (or the
request's `expires_at`), the answer is never sent and the card says why.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

from aep_bridge.aep import Event
from aep_bridge.contract.types import ResolutionStatus
from tests.core.doubles import LocalAgent

from .rig import ALICE, BOB, Rig, memory_host

WAITING = "waiting for the agent to reconnect"


async def _until(check: Any, seconds: float = 5.0) -> None:
    """Wait (real time, generously) until `check()` is true."""
    for _ in range(int(seconds / 0.02)):
        if check():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("it did not happen in time")


def _away(agent: LocalAgent) -> None:
    """The agent's connection is gone: the hub it was on forgets its claims."""
    agent.hub.leave(agent.participant)


def _reconnect(agent: LocalAgent, rig: Rig, question: Event) -> None:
    """The agent connects to `rig`'s endpoint again and, as an emitter does for events it
    is not sure were taken, sends its question again: that claims its session."""
    agent.hub = rig.hub
    rig.hub.join(agent.participant)
    rig.hub.admit([question], origin=agent.participant)


async def test_an_answer_given_before_the_agent_reconnects_waits_and_is_sent_once(tmp_path):
    state = tmp_path / "state"
    host = memory_host()  # the memory "platform" outlives the bridge, as a real one does
    rig = Rig(state, host=host)
    await rig.__aenter__()
    agent = rig.agent()
    agent.start()
    question = agent.ask()
    await rig.settle()
    allow = rig.buttons("alpha")[0][1]
    _away(agent)
    await rig.stop()

    # the bridge is back first; the agent, blocked on its question, has not posted yet
    again = Rig(state, host=host)
    await again.__aenter__()
    result = await again.channel("alpha").press(allow, ALICE)
    await again.settle()
    assert result.status is ResolutionStatus.ACCEPTED
    for name in ("alpha", "beta"):
        assert WAITING in again.card_text(name), again.card_text(name)
        assert "did not reach the agent" not in again.card_text(name)
        assert again.buttons(name) == []  # answered: nobody answers it twice meanwhile
    late = await again.channel("beta").press(f"{again.card('beta')[1].id}:1", BOB)
    assert (late.status, late.answered_by) == (ResolutionStatus.ALREADY_ANSWERED, "Alice")

    # a restart while it waits keeps the answer
    await again.stop()
    async with Rig(state, host=host) as third:
        await third.settle()
        assert WAITING in third.card_text("alpha")
        assert agent.commands == []

        _reconnect(agent, third, question)
        await _until(lambda: agent.answers)
        await third.settle()
        assert agent.answers == [{"option": "allow"}]
        assert len({command.id for command in agent.commands}) == 1  # one answer, one id
        for name in ("alpha", "beta"):
            assert "Answered by Alice: Allow" in third.card_text(name)
            assert WAITING not in third.card_text(name)


async def test_an_agent_that_does_not_come_back_in_time_never_gets_the_answer(tmp_path):
    async with Rig(tmp_path, attention={"answer_hold": 0.3}) as rig:
        agent = rig.agent()
        agent.start()
        question = agent.ask()
        await rig.settle()
        _away(agent)
        await rig.channel("alpha").press(rig.buttons("alpha")[0][1], ALICE)
        await rig.settle()
        assert WAITING in rig.card_text("alpha")

        await _until(lambda: "did not reconnect in time" in rig.card_text("alpha"))
        await rig.settle()
        # the answer is dropped (fail closed) and the question can be answered again
        assert "The answer did not reach the agent: answer again" in rig.card_text("beta")
        assert len(rig.buttons("beta")) == 2

        _reconnect(agent, rig, question)
        await rig.settle()
        await asyncio.sleep(0.3)
        await rig.settle()
        assert agent.commands == []  # the stale answer is never sent


async def test_an_answer_waits_no_longer_than_its_request_lives(tmp_path):
    """A request's `expires_at` ends the wait before the hold does: the card says the
    request expired, and why."""
    async with Rig(tmp_path) as rig:  # the default hold: minutes
        agent = rig.agent()
        agent.start()
        soon = datetime.now(UTC) + timedelta(seconds=0.6)
        agent.ask(expires_at=soon.isoformat().replace("+00:00", "Z"))
        await rig.settle()
        _away(agent)
        await rig.channel("alpha").press(rig.buttons("alpha")[0][1], ALICE)
        await rig.settle()
        assert WAITING in rig.card_text("alpha")
        await _until(lambda: "Expired" in rig.card_text("alpha"))
        await rig.settle()
        for name in ("alpha", "beta"):
            text = rig.card_text(name)
            assert "Expired without an answer (the agent did not reconnect in time)" in text
            assert rig.buttons(name) == []
