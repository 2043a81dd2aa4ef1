"""A form's modal (`views.open`) and what comes back from it (`view_submission`).

`modal_view` lays a request's fields out as Block Kit inputs within Slack's limits (a text
box for words and numbers, a menu for choices and yes/no, a box beside a choice that also
takes words); `form_values` reads the submitted `view.state.values` back into the values the
core's `answer_form` takes, or the errors to show under the fields (`FormErrors`). The card
that opens it is `look.card_look`'s.
"""

from __future__ import annotations

import math
from typing import Any

from aep_bridge import FormField, PermissionRequest

from .look import (
    FORM_CALLBACK,
    INPUT_ACTION,
    MAX_INPUT,
    MAX_LABEL,
    MAX_MODAL_BLOCKS,
    MAX_MODAL_BUTTON,
    MAX_MODAL_TITLE,
    MAX_OPTION_TEXT,
    MAX_OPTIONS,
    MAX_PLACEHOLDER,
    asked_lines,
    one_line,
    plain_text,
    section,
    shorten,
)


def _label(text: str) -> dict[str, Any]:
    return plain_text(one_line(text) or "…", MAX_LABEL)


def _choices(field: FormField) -> list[tuple[str, str]]:
    """A menu's (text, value) pairs: yes and no, or the choices by index."""
    if field.type == "boolean":
        return [("Yes", "y"), ("No", "n")]
    return [(c.label or c.id, str(i)) for i, c in enumerate(field.choices[:MAX_OPTIONS])]


def _option(text: str, value: str) -> dict[str, Any]:
    return {"text": plain_text(one_line(text), MAX_OPTION_TEXT), "value": value}


def _as_words(field: FormField) -> bool:
    """A choice answered in a text box: one with no choices, or more than a menu holds."""
    return field.type == "select" and not 0 < len(field.choices) <= MAX_OPTIONS


def _element(field: FormField) -> dict[str, Any]:
    if field.type == "string" or _as_words(field):
        element: dict[str, Any] = {
            "type": "plain_text_input",
            "action_id": INPUT_ACTION,
            "multiline": field.type == "string",
            "max_length": MAX_INPUT,
        }
        if field.type == "select" and field.choices:
            hint = "e.g. " + ", ".join(c.label or c.id for c in field.choices)
            element["placeholder"] = plain_text(shorten(hint, MAX_PLACEHOLDER), MAX_PLACEHOLDER)
        return element
    if field.type == "number":
        element = {"type": "number_input", "action_id": INPUT_ACTION, "is_decimal_allowed": True}
        for bound in ("min", "max"):
            value = getattr(field, bound)
            if value is not None and math.isfinite(value):
                element[f"{bound}_value"] = _number(value)
        return element
    multi = field.type == "select" and field.multi
    return {
        "type": "multi_static_select" if multi else "static_select",
        "action_id": INPUT_ACTION,
        "placeholder": plain_text("Pick several" if multi else "Pick one", MAX_PLACEHOLDER),
        "options": [_option(text, value) for text, value in _choices(field)],
    }


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def modal_view(request: PermissionRequest, card_key: str) -> dict[str, Any]:
    """The form as a modal (`views.open`'s view): the question, then an input a field
    (block `f{index}`, action `v`): words as text inputs, numbers as number inputs, choices
    and yes/no as menus; a choice that takes words also gets an optional box (`o{index}`)."""
    blocks: list[dict[str, Any]] = []
    asked = asked_lines(request)
    if asked:
        blocks.append(section(asked[0]))
    for index, field in enumerate(request.fields):
        other = field.type == "select" and field.other and not _as_words(field)
        block: dict[str, Any] = {
            "type": "input",
            "block_id": f"f{index}",
            "label": _label(field.label or field.id),
            "element": _element(field),
            "optional": not field.required or other,
        }
        if field.type == "number" and (field.min is not None or field.max is not None):
            low = "" if field.min is None else _number(field.min)
            high = "" if field.max is None else _number(field.max)
            block["hint"] = plain_text(f"A number from {low or '…'} to {high or '…'}", MAX_LABEL)
        blocks.append(block)
        if other:
            blocks.append(
                {
                    "type": "input",
                    "block_id": f"o{index}",
                    "label": _label(f"{field.label or field.id}: or in your words"),
                    "element": {
                        "type": "plain_text_input",
                        "action_id": INPUT_ACTION,
                        "max_length": MAX_INPUT,
                    },
                    "optional": True,
                }
            )
    return {
        "type": "modal",
        "callback_id": FORM_CALLBACK,
        "private_metadata": card_key,
        "title": plain_text(one_line(request.title) or "Answer", MAX_MODAL_TITLE),
        "submit": plain_text("Send", MAX_MODAL_BUTTON),
        "close": plain_text("Cancel", MAX_MODAL_BUTTON),
        "blocks": blocks[:MAX_MODAL_BLOCKS],
    }


class FormErrors(dict[str, str]):
    """What `form_values` returns when the form cannot be sent as it is: block id -> what
    to fix, as Slack's `response_action: "errors"` takes it. A class of its own, because a
    block id (`f1`) can look like a field id (`f1`): tell them apart with `isinstance`."""


def form_values(
    request: PermissionRequest, view_state: dict[str, Any]
) -> dict[str, Any] | FormErrors:
    """The submitted modal's `view.state` (or its `values`) read into the core's form values
    (field id -> words, a number, yes/no, a choice's id or a list of them), or, when
    something is missing or wrong, `FormErrors` (`{block_id: what to fix}`) to send back
    with `ack(response_action="errors", errors=...)`."""
    state = view_state.get("values", view_state) if isinstance(view_state, dict) else {}
    found: dict[str, Any] = {}
    errors = FormErrors()
    for index, field in enumerate(request.fields):
        block = f"f{index}"
        raw = _input(state, block)
        words = _words(_input(state, f"o{index}"))
        if field.type == "string" or _as_words(field):
            text = _words(raw)
            if not text:
                if field.required:
                    errors[block] = "Required"
            elif field.type == "string":
                found[field.id] = text
            elif field.other or _named(field, text) is not None:
                # a choice typed (more choices than a menu holds), or words where it takes them
                found[field.id] = _choice_or_words(field, text)
            else:
                errors[block] = "Not one of the choices: write one as it is listed"
        elif field.type == "number":
            text = _words(raw)
            if not text:
                if field.required:
                    errors[block] = "Required"
                continue
            try:
                number = float(text)
            except ValueError:
                errors[block] = "A number, please"
                continue
            if not math.isfinite(number):
                errors[block] = "A number, please"
            elif (field.min is not None and number < field.min) or (
                field.max is not None and number > field.max
            ):
                errors[block] = _range(field)
            else:
                found[field.id] = int(number) if number.is_integer() and "." not in text else number
        else:
            picked = _picked(raw)
            if field.type == "boolean":
                if picked:
                    found[field.id] = picked[0] == "y"
                elif field.required:
                    errors[block] = "Required"
                continue
            chosen = [field.choices[int(v)].id for v in picked if _is_index(v, field)]
            if words:
                found[field.id] = _choice_or_words(field, words)
            elif chosen:
                found[field.id] = chosen if field.multi else chosen[0]
            elif field.required:
                errors[block] = "Pick one or write your own" if field.other else "Required"
    return errors if errors else found


def _range(field: FormField) -> str:
    low = None if field.min is None else _number(field.min)
    high = None if field.max is None else _number(field.max)
    if low is not None and high is not None:
        return f"A number from {low} to {high}, please"
    return f"A number of at least {low}, please" if low else f"A number up to {high}, please"


def _input(state: Any, block: str) -> dict[str, Any]:
    found = state.get(block) if isinstance(state, dict) else None
    if not isinstance(found, dict):
        return {}
    value = found.get(INPUT_ACTION)
    if not isinstance(value, dict):
        value = next((v for v in found.values() if isinstance(v, dict)), {})
    return value


def _words(raw: dict[str, Any]) -> str:
    value = raw.get("value")
    return value.strip() if isinstance(value, str) else ""


def _picked(raw: dict[str, Any]) -> list[str]:
    options = raw.get("selected_options")
    if isinstance(options, list):
        return [str(o.get("value")) for o in options if isinstance(o, dict)]
    option = raw.get("selected_option")
    if isinstance(option, dict) and option.get("value") is not None:
        return [str(option["value"])]
    return []


def _is_index(value: str, field: FormField) -> bool:
    return value.isdigit() and int(value) < len(field.choices)


def _named(field: FormField, text: str) -> str | None:
    """The id of the choice `text` names (its label or id, in any case), or None."""
    wanted = text.casefold()
    for choice in field.choices:
        if wanted in (choice.label.casefold(), choice.id.casefold()):
            return choice.id
    return None


def _choice_or_words(field: FormField, text: str) -> str | list[str]:
    """Words typed for a choice field: a choice's id when they name one, else the words
    themselves, as the agent asked for with `other`."""
    value = _named(field, text) or text
    return [value] if field.multi else value


__all__ = ["FormErrors", "form_values", "modal_view"]
