"""Who is on the other end of a connection: the principal a bearer token names.

The bridge's own token (`state_dir/token`) is `local`, an admin; a connection admitted
without a token (`intake.open_on_loopback`) is `anonymous`, an agent. Named tokens (`aep-bridge
token create NAME`) are kept in the store as the sha256 of the token only, so the store's file
never holds a usable token; one is shown once, when it is made. Roles: a `reader` subscribes
and consumes only; an `agent` emits events on its own sessions and takes their commands; an
`admin` may do everything (send commands, the bridge's own HTTP routes).
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass, field
from typing import Final, Literal

Role = Literal["agent", "reader", "admin"]
ROLES: Final[tuple[Role, ...]] = ("agent", "reader", "admin")

#: a token's name: what `token create` takes and the logs show
NAME_RULE: Final = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
NAME_RULE_TEXT: Final = (
    "1 to 64 characters: lower-case letters, digits, '.', '_' or '-', "
    "starting with a letter or a digit"
)
#: names the bridge gives principals of its own
RESERVED: Final = frozenset({"local", "anonymous"})


@dataclass(frozen=True, slots=True)
class Principal:
    """The one a connection acts for: a token's name and its role."""

    name: str
    role: Literal["agent", "reader", "admin"]
    #: the digest of the named token presented (None: the bridge's own, or none): a
    #: connection is cut when this token is no longer live, even if its name is live again
    token_digest: str | None = field(default=None, compare=False)

    @property
    def emits(self) -> bool:
        """May send events (a reader may not)."""
        return self.role != "reader"

    @property
    def commands(self) -> bool:
        """May send commands (`control.*`) to an agent: only an admin."""
        return self.role == "admin"

    def __str__(self) -> str:
        return f"{self.name} ({self.role})"


LOCAL: Final = Principal("local", "admin")
ANONYMOUS: Final = Principal("anonymous", "agent")


class BadName(ValueError):
    """A token name that breaks `NAME_RULE` or is reserved."""


def check_name(name: str) -> str:
    """`name` if a token may have it; else `BadName` saying the rule."""
    if not NAME_RULE.fullmatch(name):
        raise BadName(f"token name {name!r} is not valid: use {NAME_RULE_TEXT}")
    if name in RESERVED:
        raise BadName(f"token name {name!r} is reserved for the bridge's own principals")
    return name


def check_role(role: str) -> Role:
    """`role` as a `Role`; else `BadName` listing the roles."""
    for known in ROLES:
        if known == role:
            return known
    raise BadName(f"role {role!r} is not one of {', '.join(ROLES)}")


def new_token(size: int = 32) -> str:
    """A fresh token: `size` random bytes, URL-safe base64, never starting with "-": one in
    64 would, and pasted after `--token` on a command line (`aep-bridge demo --token T`)
    argparse reads it as an option and refuses it ("expected one argument")."""
    while True:
        token = secrets.token_urlsafe(size)
        if not token.startswith("-"):
            return token


def digest(token: str) -> str:
    """What the store keeps of a token: its sha256, hex."""
    return hashlib.sha256(token.encode()).hexdigest()
