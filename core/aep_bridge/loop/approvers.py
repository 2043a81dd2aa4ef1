"""Who may answer a session: its route's `approvers`, the owner rule, and why a press is refused.

A team's bridge mirrors everyone's agents into one chat space, where "any approver of the
channel may answer anyone's agent" is not acceptable. A route's `approvers` replaces the
channel's `approvers`/`approver_roles` for the cards of its sessions: `"owner"` admits only
the session's owner (the principal whose token sent its first event) by their identities
under `people`, and a person's name admits that person. Every refusal says why: the reason
is shown to the person, logged, and on the audit trail. Fails closed: a session whose owner
is unknown, or has no identity on the channel, is answered by no one but the named people.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from ..aep.envelope import Event
from ..aep.filters import Filter
from ..aep.ids import parse_source
from ..config.config import RouteConfig
from ..config.people import OWNER, People, approver_names
from ..contract.types import ChannelUser
from .sessions import Owner, SessionRecord

#: the refusal of someone the channel's approvers leave out (the default policy)
NOT_APPROVER: Final = "you are not an approver for this channel"
#: the refusal of someone else than the owner, on a route whose approvers are "owner"
NOT_OWNER: Final = "only the session's owner may answer"
#: the refusal of someone a route's list of people leaves out
NOT_LISTED: Final = "you are not one of this session's approvers"
#: the extension attribute a daemon names its OS user in (the host is its source's)
OS_USER_EXTENSION: Final = "osuser"
#: the longest OS user or host kept of what a daemon says
MAX_PART: Final = 64


def owner_of(principal: str | None, event: Event) -> Owner | None:
    """A session's owner from its first event: `principal` (its source's `principal_of`),
    the OS user its daemon names (`osuser`) and the host of its `source`. None when the
    source names no principal (a followed log, a relay)."""
    if principal is None:
        return None
    user = event.extensions.get(OS_USER_EXTENSION)
    parts = parse_source(event.source)
    return Owner(
        principal,
        user[:MAX_PART] if isinstance(user, str) and user else None,
        parts.host[:MAX_PART] if parts is not None and parts.host else None,
    )


class RouteApprovers:
    """The routes' `approvers`, and the people they name."""

    def __init__(self, routes: Sequence[RouteConfig] | None, people: People) -> None:
        self.people = people
        self._routes = [
            (Filter.parse(route.match), approver_names(route.approvers))
            for route in routes or ()
            if route.approvers is not None
        ]

    def names_for(self, session: SessionRecord) -> list[str] | None:
        """Who may answer `session` by its routes (names and "owner"), or None when no route
        of it sets `approvers` (the channel's own approvers decide). A route's match names
        only what every event of a session shares (`RouteConfig`), so the session's source,
        id and agent decide it for questions and session control alike."""
        if not self._routes:
            return None
        shared = {"source": session.source, "session": session.session, "agent": session.agent}
        names: list[str] | None = None
        for match, approvers in self._routes:
            if match.matches(shared):
                names = (names or []) + approvers
        return names

    def refusal(
        self, channel: str, user: ChannelUser, session: SessionRecord, names: list[str]
    ) -> str | None:
        """Why `user` on `channel` may not answer `session`, whose routes admit `names`; None
        if they may. Nothing is changed: the caller asks before anything is written."""
        person = self.people.person_of(channel, user.id)
        if person is not None and person in names:
            return None
        if OWNER not in names:
            return NOT_LISTED
        owner = session.owner
        if owner is None:
            return (
                f"{NOT_OWNER}, and this session's owner is not known (its agent sent it without "
                "a named token): give its agent a token of its own (aep-bridge token create)"
            )
        if self.people.identity(owner.principal, channel) is None:
            return (
                f"{NOT_OWNER}, and the owner {owner.principal!r} has no identity on {channel}: "
                f"add their user id as people.{owner.principal}.{channel}"
            )
        if person == owner.principal:
            return None
        return NOT_OWNER

    def recipients(self, channel: str, session: SessionRecord) -> tuple[str, ...]:
        """Who is told of `session`'s heads-ups privately on `channel`: its owner's identity
        there, when the owner is mapped under `people`."""
        if session.owner is None:
            return ()
        identity = self.people.identity(session.owner.principal, channel)
        return () if identity is None else (identity,)

    def approver_key(self, channel: str, user: ChannelUser) -> str:
        """Who counts as one approver for the two-person rule: the person, when `people`
        maps `user` on `channel` (Ada on Slack and on Telegram is one approval), else the
        chat user id."""
        person = self.people.person_of(channel, user.id)
        return user.id if person is None else f"person:{person}"


__all__ = [
    "MAX_PART",
    "NOT_APPROVER",
    "NOT_LISTED",
    "NOT_OWNER",
    "OS_USER_EXTENSION",
    "RouteApprovers",
    "owner_of",
]
