"""The two-person rule (issue 34): how many distinct approvers a question needs, and the
approvals it has so far.

A route's `approvals` and `attention.require_approvals` (a glob on the request's tool and
command) say how many; the highest that applies wins, fixed in the store when the request
opens. Each approver's allow is a row of the store (`approvals`), one per person, so a
restart loses none and counts none twice; the Nth distinct allow claims the request in the
same transaction, and the answer that goes is the narrowest the approvers chose. A deny is
never counted: it ends the question at once, as an answer does without the rule.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Final

from ..aep.envelope import Event
from ..aep.filters import Filter
from ..config.config import ApprovalRule, RouteConfig
from ..contract.types import ChannelUser, OutcomeStatus, Resolution, ResolutionStatus
from ..store import Store
from .attention_records import Outcome

#: an option whose id (or label) begins with one of these words says no: it ends the question
DENYING: Final = frozenset({"deny", "reject", "no", "refuse", "decline", "cancel", "abort"})
#: an allow for this once: the narrowest answer, which goes when the approvers' allows differ
ONCE: Final = frozenset({"allow", "allow_once", "yes", "approve", "ok", "once"})
#: what a card adds to who answered when the approvers chose different allows
NARROWED: Final = "their allows differed: the narrowest went"
#: why a text or a form cannot answer a question that needs several approvers
BUTTONS_ONLY: Final = "this question needs {needed} approvals: answer with its buttons"

_WORD = re.compile(r"[\s_\-:]+")


class QuorumPolicy:
    """How many distinct approvers a request needs, from the routes and the rules."""

    def __init__(self, routes: Sequence[RouteConfig] | None, rules: Sequence[ApprovalRule]) -> None:
        self._routes = [
            (Filter.parse(r.match), r.approvals) for r in routes or () if r.approvals > 1
        ]
        self._rules = list(rules)

    def needed(self, event: Event) -> int:
        """The count for `event` (an `attention.requested`): the highest of its session's
        routes (matched on what every event of a session shares, so the question itself
        stands for the session's first event) and of the rules its tool and command match."""
        needed = 1
        for match, approvals in self._routes:
            if approvals > needed and match.matches_event(event):
                needed = approvals
        data = event.data or {}
        if self._rules and data.get("kind") == "permission":
            tool, command = _tool_and_command(event)
            for rule in self._rules:
                if rule.approvals > needed and _applies(rule, tool, command):
                    needed = rule.approvals
        return needed


#: what is known of a request's tool or command: its words, ABSENT (it has none), or None
#: (withheld: the capture ceiling kept it back, so a rule on it applies, failing closed)
ABSENT: Final = ""


def _tool_and_command(event: Event) -> tuple[str | None, str | None]:
    data = event.data or {}
    context = data.get("context") if isinstance(data.get("context"), dict) else {}
    assert isinstance(context, dict)
    tool = context.get("tool_name")
    if not isinstance(tool, str) or not tool:
        tool = event.subject or None
    tool_input = context.get("tool_input")
    command: str | None
    if isinstance(tool_input, dict):
        given = tool_input.get("command")
        command = " ".join(given.split()) if isinstance(given, str) else ABSENT
    else:
        command = None
    return tool, command


def _applies(rule: ApprovalRule, tool: str | None, command: str | None) -> bool:
    """Whether `rule` covers a request; what the bridge cannot see counts as a match."""
    if rule.tool is not None and tool is not None and not fnmatchcase(tool, rule.tool):
        return False
    if rule.command is not None and command is not None:
        if command == ABSENT:
            return False
        return fnmatchcase(command, " ".join(rule.command.split()))
    return True


def _words(text: str) -> list[str]:
    return [w for w in _WORD.split(text.casefold()) if w]


def denies(event: Event, options: Sequence[str], index: int) -> bool:
    """Whether option `index` of request `event` says no (its id's or its label's first
    word): never counted, it ends the question."""
    given = (event.data or {}).get("options")
    option = given[index] if isinstance(given, list) and index < len(given) else None
    if not isinstance(option, dict):
        option = {"id": options[index]}
    for key in ("id", "label"):
        value = option.get(key)
        words = _words(value) if isinstance(value, str) else []
        if words and words[0] in DENYING:
            return True
    return False


#: who counts as one approver: `(channel, user)` -> a key (`approver_of`, or the person
#: `people` maps the user to: `approvers.RouteApprovers.approver_key`)
ApproverKey = Callable[[str, ChannelUser], str]


def approver_of(channel: str, user: ChannelUser) -> str:
    """Who counts as one approver: a chat user id, whichever channel it pressed in (one
    person in two channels of one workspace counts once; accounts on two platforms are two
    ids until the config links them to one person, `people`)."""
    return user.id


@dataclass(frozen=True, slots=True)
class Tally:
    """Where a request's approvals stand after one was given."""

    needed: int
    #: who approved, oldest first (their display names)
    by: tuple[str, ...]
    #: the option that goes once the count is met (the narrowest chosen)
    option_index: int
    #: whether the approvers chose different allows (the card says the narrowest went)
    narrowed: bool
    #: False when this person had approved already (counted once)
    counted: bool = True

    @property
    def met(self) -> bool:
        return len(self.by) >= self.needed

    def progress(self) -> str:
        """ "1 of 2 approvals", as every card shows it."""
        return f"{len(self.by)} of {self.needed} approvals"

    def outcome(self) -> Outcome:
        """What every card shows meanwhile: open, with the progress and who approved."""
        return Outcome(OutcomeStatus.APPROVING, by=", ".join(self.by), detail=self.progress())

    def resolution(self) -> Resolution:
        """What the person who pressed is told."""
        if self.counted:
            return Resolution(status=ResolutionStatus.COUNTED, reason=self.progress())
        return Resolution(
            status=ResolutionStatus.REJECTED,
            reason=f"you approved this already ({self.progress()}); another approver is needed",
        )

    def answered_by(self) -> str:
        """Who answered, as the card and the record say: every approver."""
        names = " and ".join(self.by)
        return f"{names} ({NARROWED})" if self.narrowed else names


def tally(
    store: Store,
    request_id: str,
    options: Sequence[str],
    needed: int,
    approver: str,
    display: str,
    option_index: int,
) -> Tally:
    """Record `approver`'s allow (once per person) and count, in the caller's transaction."""
    counted = store.add_approval(request_id, approver, display, option_index)
    rows = store.approvals(request_id)
    chosen = sorted({index for _, _, index in rows if 0 <= index < len(options)})
    return Tally(
        needed,
        tuple(name for _, name, _ in rows),
        narrowest(options, chosen or [option_index]),
        len(chosen) > 1,
        counted,
    )


def narrowest(options: Sequence[str], chosen: Sequence[int]) -> int:
    """The answer that goes when the approvers chose `chosen` (option indexes): the one they
    all chose; else an allow for this once (one of theirs, else the request's own); else the
    first on the card of those chosen."""
    if len(set(chosen)) == 1:
        return chosen[0]
    for index in sorted(chosen):
        if options[index].casefold() in ONCE:
            return index
    for index, option in enumerate(options):
        if option.casefold() in ONCE:
            return index
    return min(chosen)


__all__ = [
    "BUTTONS_ONLY",
    "NARROWED",
    "ApproverKey",
    "QuorumPolicy",
    "Tally",
    "approver_of",
    "denies",
    "narrowest",
    "tally",
]
