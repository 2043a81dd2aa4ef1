"""The two-person rule (issue 34) against a model, in random orders.

Hypothesis drives a whole bridge (`Rig`: the real hub, store, bridge, outboxes and memory
channels) through questions that need two approvers (the route's `approvals`) or three (a
`require_approvals` rule on `git push --force*`), presses by approvers and a stranger in
either channel, on allows of different scope and on deny, and restarts of the bridge. After
every step the commands the agent received and the cards are compared with the rule's
promises: no command before the Nth distinct allow, never two, the same person counted once
(whichever channel they press in), one deny ends it at once, the narrowest allow goes when
the allows differ, and every card shows the progress ("1 of 2 approvals, by Alice"), after
a restart too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from hypothesis import strategies as st
from hypothesis.stateful import invariant, precondition, rule

from aep_bridge.aep import Event
from aep_bridge.contract.types import ChannelUser, ResolutionStatus

from .rig import ALICE, BOB, MALLORY, BridgeMachine, machine_settings, two_channels

CAROL = ChannelUser(id="carol", name="Carol")
CHANNELS = ("alpha", "beta")
PEOPLE = {"alice": ALICE, "bob": BOB, "carol": CAROL, "mallory": MALLORY}
APPROVERS = ["alice", "bob", "carol"]
#: allow once, allow for the session (broader), deny
OPTIONS = ("allow", "allow_session", "deny")
#: the command a rule asks three approvers for, and one only the route's two apply to
FORCE_PUSH = "git push --force origin main"
PLAIN = "make test"


@dataclass
class Asked:
    event: Event
    needed: int
    approvals: dict[str, int] = field(default_factory=dict)  # who -> option index
    state: str = "open"  # open, answered
    sent: str | None = None  # the option the command carried
    commands: int = 0


class QuorumLoop(BridgeMachine):
    rig_options: ClassVar[dict[str, Any]] = {
        "channels": two_channels(approvers=APPROVERS),
        "routes": [{"match": {}, "channels": list(CHANNELS), "approvals": 2}],
        "attention": {
            "require_approvals": [{"tool": "Bash", "command": "git push --force*", "approvals": 3}]
        },
    }

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[Asked] = []
        self.agent = self.rig.agent(instance="test-host/4242")
        self.agent.start()
        self._settle()

    @precondition(lambda self: len(self.asked) < 4)
    @rule(force=st.booleans())
    def ask(self, force: bool) -> None:
        command = FORCE_PUSH if force else PLAIN
        event = self.agent.ask(
            f"Run {command}?",
            options=OPTIONS,
            context={"tool_name": "Bash", "tool_input": {"command": command}},
        )
        self.asked.append(Asked(event, 3 if force else 2))
        self._settle()

    @precondition(lambda self: self.asked)
    @rule(
        data=st.data(),
        channel=st.sampled_from(CHANNELS),
        who=st.sampled_from(sorted(PEOPLE)),
        index=st.integers(min_value=0, max_value=len(OPTIONS) - 1),
    )
    def press(self, data: st.DataObject, channel: str, who: str, index: int) -> None:
        k = data.draw(st.integers(min_value=0, max_value=len(self.asked) - 1))
        asked = self.asked[k]
        card_id = self.rig.card(channel, k)[1].id
        result = self._run(self.rig.channel(channel).press(f"{card_id}:{index}", PEOPLE[who]))
        self._settle()
        if who == "mallory":
            expected = ResolutionStatus.NOT_ALLOWED
        elif asked.state != "open":
            expected = ResolutionStatus.ALREADY_ANSWERED
        elif OPTIONS[index] == "deny":  # one deny ends it at once
            expected = ResolutionStatus.ACCEPTED
            asked.state, asked.sent, asked.commands = "answered", "deny", asked.commands + 1
        elif who in asked.approvals:  # counted once
            expected = ResolutionStatus.REJECTED
            assert "approved this already" in (result.reason or ""), result
        else:
            asked.approvals[who] = index
            if len(asked.approvals) < asked.needed:
                expected = ResolutionStatus.COUNTED
            else:
                expected = ResolutionStatus.ACCEPTED
                chosen = set(asked.approvals.values())
                asked.sent = OPTIONS[chosen.pop()] if len(chosen) == 1 else "allow"
                asked.state, asked.commands = "answered", asked.commands + 1
        assert result.status is expected, (result, expected, asked)

    @rule()
    def restart(self) -> None:
        self._restart([self.agent])
        self._settle()

    @invariant()
    def one_command_at_the_nth_distinct_allow_or_a_deny_and_never_two(self) -> None:
        by_request: dict[str, list[Event]] = {}
        for command in self.agent.commands:
            by_request.setdefault(command.subject or "", []).append(command)
        for asked in self.asked:
            got = by_request.get(asked.event.id, [])
            assert len({c.id for c in got}) == asked.commands, (asked, got)
            if got:
                assert (got[0].data or {})["answer"] == {"option": asked.sent}, (asked, got)

    @invariant()
    def every_card_shows_the_progress(self) -> None:
        for k, asked in enumerate(self.asked):
            for name in CHANNELS:
                text = self.rig.card_text(name, k)
                buttons = self.rig.buttons(name, k)
                if asked.state == "open":
                    assert buttons, (name, text)
                    if asked.approvals:
                        names = ", ".join(PEOPLE[w].name for w in asked.approvals)
                        progress = f"{len(asked.approvals)} of {asked.needed} approvals, by"
                        assert f"{progress} {names}" in text, (name, text, asked)
                else:
                    assert not buttons, (name, text)
                    assert "Answered by" in text, (name, text)


TestQuorumLoop = QuorumLoop.TestCase
TestQuorumLoop.settings = machine_settings(examples=40, steps=20)
