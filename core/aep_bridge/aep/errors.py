"""Violations: what broke, where, and which rule of the specification says so.

Every error the protocol layer reports names its rule (`AEP-0001 §5.2`), so a user reading
`aep-bridge validate` output, or an emitter reading a 400 from the bridge, can look it up.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Violation:
    """One broken rule.

    `rule` is the section that states it (`AEP-0001 §5.2`), `message` says what is wrong in
    plain words, and `path` points into the event (`data.fields[0].choices`) when it can.
    """

    rule: str
    message: str
    path: str = ""

    def __str__(self) -> str:
        where = f" at {self.path}" if self.path else ""
        return f"{self.rule}: {self.message}{where}"

    def to_dict(self) -> dict[str, str]:
        out = {"rule": self.rule, "message": self.message}
        if self.path:
            out["path"] = self.path
        return out


@dataclass(eq=False)
class InvalidEvent(ValueError):
    """An event that fails the envelope, its payload schema, or the JSON it came in."""

    violations: list[Violation]
    raw: Any = field(default=None, repr=False)
    #: the 1-based line of a log or batch the event came from, when there was one
    line: int | None = None

    def __post_init__(self) -> None:
        ValueError.__init__(self, str(self))

    def __str__(self) -> str:
        return "; ".join(str(v) for v in self.violations)

    @property
    def first(self) -> Violation:
        return self.violations[0]


class InvalidFilter(ValueError):
    """An attr-match filter that must be refused (AEP-0003 §6.2 rule 1, fail closed)."""

    rule = "AEP-0003 §6.2"
