"""People: who is who across channels (the config's `people`).

A team's bridge takes agents from many people, each with a token of their own (a principal,
`intake.principals`), and shows them in several chat platforms where each person has one
user id per platform. `people` links them: a person's name is the principal's name (a
token's NAME; `local` is the bridge's own token), and each of their identities is the user id
one channel gives `ChannelUser.id`. The approver policy (`approvers.py`) admits a session's
owner by it; heads-ups go to the owner privately by it; and the two-person rule counts a
person once whichever platform they press in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Annotated

from pydantic import StringConstraints

#: in a route's `approvers`: the session's owner
OWNER = "owner"

#: one person's identities: channel name (a key under `channels`) -> that channel's user id
PersonConfig = dict[str, Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]]


class People:
    """The config's `people`, looked up both ways."""

    def __init__(self, people: Mapping[str, Mapping[str, str]] | None = None) -> None:
        self._identities: dict[str, dict[str, str]] = {
            name: dict(ids) for name, ids in (people or {}).items()
        }
        self._by_identity: dict[tuple[str, str], str] = {}
        for name, ids in self._identities.items():
            for channel, user_id in ids.items():
                self._by_identity.setdefault((channel, user_id), name)

    def __contains__(self, person: object) -> bool:
        return person in self._identities

    def __bool__(self) -> bool:
        return bool(self._identities)

    def names(self) -> list[str]:
        return list(self._identities)

    def person_of(self, channel: str, user_id: str) -> str | None:
        """The person whose identity on `channel` is `user_id`, or None."""
        return self._by_identity.get((channel, user_id))

    def identity(self, person: str, channel: str) -> str | None:
        """`person`'s user id on `channel`, or None (no such person, or none there)."""
        return self._identities.get(person, {}).get(channel)


def approver_names(approvers: str | list[str] | None) -> list[str]:
    """A route's `approvers` as a list: `"owner"` is `["owner"]`; None is none."""
    if approvers is None:
        return []
    return [approvers] if isinstance(approvers, str) else list(approvers)


def problems(
    people: Mapping[str, Mapping[str, str]], channels: Iterable[str]
) -> list[tuple[str, str, str]]:
    """What is wrong with `people` against the configured channels: `(key, message, fix)`
    for an identity under a key that names no channel, and for one user id claimed by two
    people on one channel (a press there would be either's)."""
    known = list(channels)
    found: list[tuple[str, str, str]] = []
    seen: dict[tuple[str, str], str] = {}
    for name, ids in people.items():
        for channel, user_id in ids.items():
            key = f"people.{name}.{channel}"
            if channel not in known:
                found.append(
                    (
                        key,
                        f"names no channel: {channel!r}",
                        f"use a key under channels ({', '.join(known) or 'none'})",
                    )
                )
                continue
            other = seen.setdefault((channel, user_id), name)
            if other != name:
                found.append(
                    (
                        key,
                        f"is also people.{other}.{channel}: one user id is one person",
                        "give each person their own user id on that channel",
                    )
                )
    return found


__all__ = ["OWNER", "People", "PersonConfig", "approver_names", "problems"]
