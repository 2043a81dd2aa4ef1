"""Pydantic field types with JSON Schema meaning.

The official schemas are JSON Schema 2020-12, whose primitives differ from Python's in three
ways that decide verdicts: `integer` admits `3.0`, `number` refuses `true`, and a declared
property is never `null` even when it is optional. The types here carry exactly that meaning,
so a pydantic model reaches the schema's verdict on every input.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Final

from annotated_types import Ge, Le
from pydantic import AfterValidator, Field, StrictFloat, StrictInt
from pydantic.fields import FieldInfo

from .formats import is_rfc3339
from .registry import Capture

CAPTURE_KEY: Final = "x-aep-capture"


def _integral(value: float) -> int:
    if not value.is_integer():
        raise ValueError("a JSON Schema integer has no fractional part")
    return int(value)


def _date_time(value: str) -> str:
    if not is_rfc3339(value):
        raise ValueError("not an RFC 3339 date-time with a zone")
    return value


if TYPE_CHECKING:
    from typing import Optional as Opt

    JsonInt = int
    NonNegInt = int
else:

    class Opt:
        """`Opt[T]` is `T | None` to a type checker but `T` to pydantic.

        An absent optional field defaults to None and is omitted when serialised, while an
        explicit JSON `null` is refused, as the schemas refuse it.
        """

        def __class_getitem__(cls, item: Any) -> Any:
            return item

    #: JSON Schema `integer`: an int, or a float with no fractional part (kept as int).
    JsonInt = StrictInt | Annotated[StrictFloat, AfterValidator(_integral)]
    NonNegInt = (
        Annotated[StrictInt, Ge(0)] | Annotated[StrictFloat, Ge(0), AfterValidator(_integral)]
    )

#: JSON Schema `number` with `minimum: 0` (a strict float accepts ints and refuses booleans).
NonNegNumber = Annotated[float, Ge(0)]
#: `progress.status.percent`: a number from 0 to 100.
Percent = Annotated[float, Ge(0), Le(100)]
#: JSON Schema `format: date-time` (asserted: the official verdict uses a format checker).
DateTime = Annotated[str, AfterValidator(_date_time)]


def gated(level: Capture, *, alias: str | None = None) -> Any:
    """An optional payload field whose content needs capture `level` (AEP-0002 §5.1).

    Fields without this marker default to `metadata`, as the schemas' rule 4 says.
    """
    return Field(default=None, alias=alias, json_schema_extra={CAPTURE_KEY: level})


def opt(*, alias: str | None = None) -> Any:
    """An optional metadata-level field, needed only where the wire name is not a Python name."""
    return Field(default=None, alias=alias)


def capture_of(info: FieldInfo) -> Capture:
    """The capture level a field needs: its `gated()` marker, or `metadata`."""
    extra = info.json_schema_extra
    if isinstance(extra, dict):
        level = extra.get(CAPTURE_KEY)
        if level in ("none", "metadata", "redacted", "full"):
            return level  # type: ignore[return-value]
    return "metadata"


__all__ = [
    "CAPTURE_KEY",
    "DateTime",
    "JsonInt",
    "NonNegInt",
    "NonNegNumber",
    "Opt",
    "Percent",
    "capture_of",
    "gated",
    "opt",
]
