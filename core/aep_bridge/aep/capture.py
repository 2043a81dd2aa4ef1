"""Capture gating (AEP-0001 §8.2, AEP-0002 §5.1, AEP-0003 §6.4 and §9.2).

Chat platforms are third parties, so everything the bridge shows passes through here first:
`downlevel` lowers an event to a ceiling by dropping every payload field whose
`x-aep-capture` level is above it, and degrades the `[metadata*]` fields (the attention
prompt and labels, form answer values) to structure instead of dropping them.
`held_to_declared` holds an event to the level it claims for itself: a party that shows the
event (the renderer) does not trust data richer than its declared capture.

The per-field levels come from the payload models (`gated(...)` markers), and a test holds
them equal to the annotations of the official schemas.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable
from functools import cache
from typing import Any, Final, Protocol

from pydantic import BaseModel

from ._types import capture_of
from .envelope import Event
from .payloads import payload_model
from .registry import CAPTURE_RANK, Capture

_REDACTED: Final = CAPTURE_RANK["redacted"]


class ValueRedactor(Protocol):
    """What a redacting re-emitter needs: the §9.4 pipeline over any JSON value."""

    def value(self, value: Any) -> Any: ...


def _nested(annotation: Any) -> list[tuple[type[BaseModel], bool]]:
    """The models inside a field annotation, each with whether it sits in a list."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [(annotation, False)]
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is list and args:
        return [(model, True) for model, _ in _nested(args[0])]
    if origin in (typing.Union, types.UnionType, typing.Annotated):
        found: list[tuple[type[BaseModel], bool]] = []
        for arg in args:
            found += _nested(arg)
        return found
    return []


def _walk(model: type[BaseModel], prefix: str, out: dict[str, Capture]) -> None:
    for name, info in model.model_fields.items():
        key = info.alias or name
        path = f"{prefix}.{key}" if prefix else key
        out[path] = capture_of(info)
        for inner, in_list in _nested(info.annotation):
            _walk(inner, path + "[]" if in_list else path, out)


@cache
def field_levels(type_: str) -> dict[str, Capture] | None:
    """`{path: level}` for a type's payload (`a.b`, `a[].b` for list items), None if unknown."""
    model = payload_model(type_)
    if model is None:
        return None
    out: dict[str, Capture] = {}
    _walk(model, "", out)
    return out


def mechanical_target(declared: Capture, ceiling: Capture) -> Capture:
    """The level a hop that does not redact lands on: never `redacted` from `full` (§8.2e)."""
    if CAPTURE_RANK[ceiling] >= CAPTURE_RANK[declared]:
        return declared
    if ceiling == "redacted" and declared == "full":
        return "metadata"
    return ceiling


#: what a `_by_field` visit returns to leave the field out
_DROP: Final = object()


def _by_field(value: Any, path: str, visit: Callable[[str, Any], Any]) -> Any:
    """`value` with each field of its objects (in lists too) as `visit(its path, it)`
    makes it (`_DROP`: left out), its path as the capture tables write it (`a.b`, `a[].b`)."""
    if isinstance(value, list):
        return [_by_field(item, path + "[]", visit) for item in value]
    if not isinstance(value, dict):
        return value
    out = {}
    for key, item in value.items():
        child = f"{path}.{key}" if path else key
        made = visit(child, item)
        if made is not _DROP:
            out[key] = made
    return out


def _prune(value: Any, path: str, table: dict[str, Capture], rank: int) -> Any:
    def keep(child: str, item: Any) -> Any:
        if CAPTURE_RANK[table.get(child, "metadata")] > rank:
            return _DROP
        return _by_field(item, child, keep)

    return _by_field(value, path, keep)


@cache
def _above(type_: str, rank: int) -> tuple[frozenset[str], frozenset[str]]:
    """The paths of a type's fields above `rank` (`rank` at least `metadata`), and the paths
    that lead to them: what `_fits` looks at."""
    table = field_levels(type_) or {}
    above = frozenset(path for path, level in table.items() if CAPTURE_RANK[level] > rank)
    # every path `_prune` builds on its way to one of them: up to a "." or a "[]" (a key may
    # hold either itself, so no path is assumed to be made of field names)
    leads = {
        path[:end]
        for path in above
        for end in range(1, len(path))
        if path[end] == "." or path.startswith("[]", end)
    }
    return above, frozenset(leads)


def _fits(value: Any, path: str, above: frozenset[str], leads: frozenset[str]) -> bool:
    """Whether `_prune` at the rank `above` was made for (at least `metadata`) would keep
    `value` whole: no key on a path above it, at any depth."""
    if not above:
        return True
    if isinstance(value, list):
        path += "[]"
        return all(_fits(item, path, above, leads) for item in value)
    if not isinstance(value, dict):
        return True
    for key, item in value.items():
        child = f"{path}.{key}" if path else key
        if child in above:
            return False
        if child in leads and not _fits(item, child, above, leads):
            return False
    return True


def synthesize_prompt(agent: str, kind: str, subject: str | None) -> str:
    """The §9.2 metadata prompt: structure only, never the agent's words."""
    return f"{agent} requests {kind}: {subject}" if subject else f"{agent} requests {kind}"


def _structural_labels(items: Any) -> Any:
    if not isinstance(items, list):
        return items
    out = []
    for item in items:
        if isinstance(item, dict) and "id" in item:
            item = {**item, "label": str(item["id"])}
            if isinstance(item.get("choices"), list):
                item["choices"] = _structural_labels(item["choices"])
        out.append(item)
    return out


def _structural_values(values: dict[str, Any]) -> dict[str, Any]:
    """Without the request's field_spec a hop keeps only numbers and booleans (§8.2b)."""
    return {k: v for k, v in values.items() if isinstance(v, bool | int | float)}


def degrade_to_metadata(event: Event, data: dict[str, Any]) -> dict[str, Any]:
    """Apply the `[metadata*]` exceptions of AEP-0002 §5.3 to data already pruned to metadata."""
    if event.type == "attention.requested":
        out = dict(data)
        if isinstance(out.get("prompt"), str):
            out["prompt"] = synthesize_prompt(
                event.agent, str(out.get("kind", "attention")), event.subject
            )
        for key in ("options", "fields"):
            if key in out:
                out[key] = _structural_labels(out[key])
        return out
    answer = data.get("answer")
    if (
        event.type in ("attention.answered", "control.attention.respond")
        and isinstance(answer, dict)
        and isinstance(answer.get("values"), dict)
    ):
        return {**data, "answer": {**answer, "values": _structural_values(answer["values"])}}
    return data


def downlevel(event: Event, ceiling: Capture, *, redactor: ValueRedactor | None = None) -> Event:
    """`event` as a hop with this ceiling may pass it on (AEP-0001 §8.2, AEP-0003 §6.4).

    Events at or below the ceiling come back unchanged (the same object, original bytes).
    Without a `redactor` the hop is mechanical and a `full` event at a `redacted` ceiling
    lands on `metadata`; with one, the hop is a redacting re-emitter (§8.2e): it keeps the
    `redacted`-gated fields after passing them through the §9.4 pipeline.
    """
    declared = event.capture
    if CAPTURE_RANK[ceiling] >= CAPTURE_RANK[declared]:
        return event
    redacting = redactor is not None and ceiling == "redacted" and declared == "full"
    target: Capture = "redacted" if redacting else mechanical_target(declared, ceiling)
    data: dict[str, Any] | None = None
    table = field_levels(event.type)
    if target != "none" and event.data is not None and table is not None:
        rank = CAPTURE_RANK[target]
        data = _prune(event.data, "", table, rank)
        if redacting:
            assert redactor is not None
            data = _redact_gated(data, "", table, redactor)
        if rank < _REDACTED:
            data = degrade_to_metadata(event, data)
    return event.reshaped(data, target)


def held_to_declared(event: Event) -> Event:
    """`event` held to its own declared capture (AEP-0002 §5.1): a field above what the event
    claims is dropped, and below `redacted` the `[metadata*]` fields are the structural
    placeholders, whatever the emitter wrote there.

    `downlevel` trusts the declared level (a hop passes on what it is given); a party that
    shows the event does not. An event that keeps to its level comes back as the same object.
    """
    data = event.data
    table = field_levels(event.type)
    if data is None or table is None:
        return event
    rank = CAPTURE_RANK[event.capture]
    honest: dict[str, Any] | None = None
    if rank > 0:
        # Most events keep to their level: check that without copying (`_fits`), and prune
        # only when something would go. Degrading does not change its input.
        above, leads = _above(event.type, rank)
        honest = data if _fits(data, "", above, leads) else _prune(data, "", table, rank)
        if rank < _REDACTED:
            honest = degrade_to_metadata(event, honest)
    if honest is data or honest == data:
        return event
    return event.reshaped(honest)  # the capture as it came (set or not): only the data changes


def _redact_gated(value: Any, path: str, table: dict[str, Capture], redactor: ValueRedactor) -> Any:
    """Run every content-bearing field (and the `[metadata*]` text) through the pipeline."""

    def redact(child: str, item: Any) -> Any:
        if table.get(child, "metadata") != "metadata" or child in METADATA_STAR:
            return redactor.value(item)
        return _by_field(item, child, redact)

    return _by_field(value, path, redact)


#: Fields that stay `metadata` in the schemas but may carry agent or user text at `redacted`+.
METADATA_STAR: Final = frozenset(
    {"prompt", "options[].label", "fields[].label", "fields[].choices[].label", "answer.values"}
)


def gate_form_values(
    fields: list[dict[str, Any]] | None, values: dict[str, Any] | None, ceiling: Capture
) -> dict[str, Any]:
    """Form answer values a party that knows the request may show at `ceiling` (AEP-0006).

    Numbers, booleans and closed-choice ids are structure and always pass; a string field's
    value or `other` free text is user-authored and needs `redacted`. Keys the request did
    not ask for are dropped. Dropping the whole `data` at `none` is the caller's business.
    """
    content_ok = CAPTURE_RANK[ceiling] >= _REDACTED
    specs = {f.get("id"): f for f in fields or [] if isinstance(f, dict)}
    out: dict[str, Any] = {}
    for key, value in (values or {}).items():
        spec = specs.get(key)
        if spec is None:
            continue
        kind = spec.get("type")
        if kind in ("number", "boolean"):
            out[key] = value
        elif kind == "select":
            ids = {c.get("id") for c in spec.get("choices") or [] if isinstance(c, dict)}
            chosen = value if isinstance(value, list) else [value]
            if content_ok or all(isinstance(c, str) and c in ids for c in chosen):
                out[key] = value
        elif content_ok:
            out[key] = value
    return out
