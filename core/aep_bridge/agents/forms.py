"""Agent-neutral form helpers (AEP-0006): questions and MCP elicitations as `kind: "form"`.

Two native shapes become one `attention.requested` payload, and the validated answer goes
back the other way:

- Claude Code's `AskUserQuestion` tool input (`questions[]` of `question`, `header`,
  `multiSelect`, `options[]` of `label`/`description`) -> one field per question: a
  `select` with `other: true` (the tool always offers a free "Other" answer), `multi`
  mirroring `multiSelect`, field and choice ids the 1-based positions, so answer values
  stay structural at any ceiling. Pinned by `mappings/claude-code.json` `ask_user_question`.
  A question without options becomes a `string` field. Option descriptions are not carried:
  the field_spec has no place for them.
- An MCP `elicitation/create` request (`message` + a flat `requestedSchema`) -> one field
  per property, keyed by the property name, enum choices keyed by the enum value, so the
  accepted values map back to the elicitation content verbatim. MCP enums are closed (no
  `other`). Pinned by `mappings/claude-code.json` `elicitation`. Shapes handled: `string`,
  `number`/`integer` (`minimum`/`maximum` -> `min`/`max`), `boolean`, `enum` (+ `enumNames`),
  titled `oneOf` of `{const, title}`, and arrays of enums (a `multi` select). Any other
  shape (nested objects, arrays of free values) is skipped: the chat cannot render it and a
  guessed string would send the server a value of the wrong type. If a skipped property is
  required, the form cannot be completed from the chat, so it goes out `respond_via:
  ["oob"]` (an informational card; the person answers in the agent's own dialog).

Capture: labels and the prompt are `[metadata*]` (AEP-0006): the text passes the §9.4
redactor at `redacted`, stays raw at `full`, and at `metadata` becomes structure (the
field or choice id, a prompt that only counts). At `none` there is no payload.

Answer checks: `form_problem` is the AEP-0002 §5.3 MUST-reject rule an emitter applies to
`answer.values` (the held loop calls it); `value_problem` is its part on value types.
(`attention._form_problem`, the bridge's check on a chat answer, makes only the first two
checks; it could call this one.)
"""

from __future__ import annotations

from typing import Any, Final

from ..aep.form_values import form_problem, is_number, value_problem
from ..aep.redaction import Redactor
from ..aep.registry import CAPTURE_RANK, Capture

_METADATA: Final = CAPTURE_RANK["metadata"]
_REDACTED: Final = CAPTURE_RANK["redacted"]


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _shown(text: str, level: Capture, redactor: Redactor) -> str:
    """Agent or server text as it may leave at `level` (redacted+ only; callers check)."""
    return redactor.text(text) if CAPTURE_RANK[level] == _REDACTED else text


def _questions(tool_input: Any) -> list[tuple[str, dict[str, Any]]]:
    """(field id, question) for every well-formed question, ids by position from 1."""
    items = tool_input.get("questions") if isinstance(tool_input, dict) else None
    if not isinstance(items, list):
        return []
    return [(str(i), q) for i, q in enumerate(items, 1) if isinstance(q, dict)]


def _options(question: dict[str, Any]) -> list[tuple[str, str]]:
    """(choice id, label) for every option with a label, ids by position from 1."""
    items = question.get("options")
    if not isinstance(items, list):
        return []
    out = []
    for i, option in enumerate(items, 1):
        label = option.get("label") if isinstance(option, dict) else None
        if isinstance(label, str) and label:
            out.append((str(i), label))
    return out


def _question_label(question: dict[str, Any], field_id: str) -> str:
    text = question.get("question")
    header = question.get("header")
    text = text if isinstance(text, str) and text else ""
    if isinstance(header, str) and header:
        return f"{header}: {text}" if text else header
    return text or field_id


def ask_user_question(
    tool_input: Any, ceiling_level: Capture, redactor: Redactor, *, agent: str = "claude-code"
) -> dict[str, Any]:
    """The `attention.requested` data for an `AskUserQuestion` call, at `ceiling_level`."""
    if CAPTURE_RANK[ceiling_level] < _METADATA:
        return {}
    words = CAPTURE_RANK[ceiling_level] >= _REDACTED
    fields: list[dict[str, Any]] = []
    for field_id, question in _questions(tool_input):
        label = _shown(_question_label(question, field_id), ceiling_level, redactor)
        options = _options(question)
        field: dict[str, Any] = {
            "id": field_id,
            "type": "select" if options else "string",
            "label": label if words else field_id,
            "required": True,
        }
        if options:
            field["other"] = True
            field["choices"] = [
                {"id": cid, "label": _shown(text, ceiling_level, redactor) if words else cid}
                for cid, text in options
            ]
            if question.get("multiSelect") is True:
                field["multi"] = True
        fields.append(field)
    prompt = f"{agent} asks {_plural(len(fields), 'question')}"
    return {"kind": "form", "prompt": prompt, "fields": fields, "respond_via": ["control"]}


def _enum_choices(prop: dict[str, Any]) -> list[tuple[str, str]] | None:
    """(value, display name) of a closed choice, or None when `prop` is not one."""
    enum = prop.get("enum")
    if isinstance(enum, list):
        names = prop.get("enumNames")
        names = names if isinstance(names, list) and len(names) == len(enum) else enum
        return [
            (value, name if isinstance(name, str) and name else value)
            for value, name in zip(enum, names, strict=True)
            if isinstance(value, str)
        ]
    for key in ("oneOf", "anyOf"):
        titled = prop.get(key)
        if isinstance(titled, list):
            out = []
            for item in titled:
                const = item.get("const") if isinstance(item, dict) else None
                if isinstance(const, str):
                    title = item.get("title")
                    out.append((const, title if isinstance(title, str) and title else const))
            return out
    return None


def _elicitation_field(key: str, prop: dict[str, Any]) -> dict[str, Any] | None:
    """The field_spec (labels still raw) for one schema property, None if not representable."""
    kind = prop.get("type")
    field: dict[str, Any] = {"id": key}
    if kind == "array":
        items = prop.get("items")
        choices = _enum_choices(items) if isinstance(items, dict) else None
        if not choices:
            return None
        field.update(type="select", choices=choices, multi=True)
    elif kind in ("string", None) and (choices := _enum_choices(prop)) is not None:
        if not choices:
            return None
        field.update(type="select", choices=choices)
    elif kind == "string":
        field["type"] = "string"
    elif kind in ("number", "integer"):
        field["type"] = "number"
        for source, target in (("minimum", "min"), ("maximum", "max")):
            bound = prop.get(source)
            if isinstance(bound, int | float) and not isinstance(bound, bool):
                field[target] = bound
    elif kind == "boolean":
        field["type"] = "boolean"
    else:
        return None
    title = prop.get("title")
    field["label"] = title if isinstance(title, str) and title else key
    return field


def _properties(requested_schema: Any) -> tuple[dict[str, Any], set[str]]:
    if not isinstance(requested_schema, dict):
        return {}, set()
    props = requested_schema.get("properties")
    required = requested_schema.get("required")
    return (
        {k: v for k, v in props.items() if isinstance(v, dict)} if isinstance(props, dict) else {},
        {r for r in required if isinstance(r, str)} if isinstance(required, list) else set(),
    )


def elicitation(
    message: Any,
    requested_schema: Any,
    ceiling_level: Capture,
    redactor: Redactor,
    *,
    agent: str = "claude-code",
) -> dict[str, Any]:
    """The `attention.requested` data for an MCP elicitation, at `ceiling_level`."""
    if CAPTURE_RANK[ceiling_level] < _METADATA:
        return {}
    words = CAPTURE_RANK[ceiling_level] >= _REDACTED
    props, required = _properties(requested_schema)
    fields: list[dict[str, Any]] = []
    unanswerable = False
    for key, prop in props.items():
        raw = _elicitation_field(key, prop)
        if raw is None:
            unanswerable = unanswerable or key in required
            continue
        label = _shown(raw["label"], ceiling_level, redactor) if words else key
        field: dict[str, Any] = {"id": key, "type": raw["type"], "label": label}
        field["required"] = key in required
        if "choices" in raw:
            field["choices"] = [
                {"id": value, "label": _shown(name, ceiling_level, redactor) if words else value}
                for value, name in raw["choices"]
            ]
        for extra in ("multi", "min", "max"):
            if extra in raw:
                field[extra] = raw[extra]
        fields.append(field)
    if words and isinstance(message, str) and message:
        prompt = _shown(message, ceiling_level, redactor)
    else:
        prompt = f"{agent} requests input ({_plural(len(fields), 'field')})"
    via = ["oob"] if unanswerable else ["control"]
    return {"kind": "form", "prompt": prompt, "fields": fields, "respond_via": via}


def ask_user_question_answers(tool_input: Any, values: dict[str, Any]) -> dict[str, str]:
    """Validated form values as `AskUserQuestion`'s `answers`: question text -> label(s).

    A choice id becomes its option label, free ("Other") text stays verbatim, and a
    multi-select's labels are joined with ", ". The Claude Code hooks reference (2.1.240,
    PreToolUse input, AskUserQuestion) defines `answers` as "question text -> selected
    option label; multi-select answers join labels with commas", supplied via
    `updatedInput` next to the original `questions`; the Agent SDK's user-input page gives
    the same shape for `canUseTool` (and the ", " separator).
    """
    answers: dict[str, str] = {}
    for field_id, question in _questions(tool_input):
        text = question.get("question")
        if not isinstance(text, str) or field_id not in values:
            continue
        labels = dict(_options(question))
        value = values[field_id]
        chosen = value if isinstance(value, list) else [value]
        parts = [labels.get(v, v) for v in chosen if isinstance(v, str) and v]
        if parts:
            answers[text] = ", ".join(parts)
    return answers


def _content_value(prop: dict[str, Any], value: Any) -> Any:
    if prop.get("type") == "integer" and is_number(value) and float(value).is_integer():
        return int(value)
    return value


def elicitation_content(requested_schema: Any, values: dict[str, Any]) -> dict[str, Any]:
    """Validated form values as MCP elicitation `content` (integers as int, the rest as is).

    Keys the schema does not define are dropped; enum values are already the ids.
    """
    props, _ = _properties(requested_schema)
    return {k: _content_value(props[k], v) for k, v in values.items() if k in props}


__all__ = [
    "ask_user_question",
    "ask_user_question_answers",
    "elicitation",
    "elicitation_content",
    "form_problem",
    "value_problem",
]
