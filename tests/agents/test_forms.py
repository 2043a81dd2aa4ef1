"""Questions and MCP elicitations as AEP-0006 forms, and their answers going back.

The `claude-code.json` mapping pins are checked exactly, at every ceiling they name.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from aep_bridge.aep.build import make_event
from aep_bridge.aep.redaction import Redactor
from aep_bridge.agents.forms import (
    ask_user_question,
    ask_user_question_answers,
    elicitation,
    elicitation_content,
    form_problem,
)
from tests.official import assert_valid
from tests.shared_data import AEP_FIXTURES

PINS = json.loads((AEP_FIXTURES / "mappings" / "claude-code.json").read_text())
ASK = PINS["ask_user_question"]
ELICIT = PINS["elicitation"]
SECRET = "ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789"


def _valid(data: dict[str, Any], capture: str) -> None:
    """The data makes an `attention.requested` both our builder and the schemas accept."""
    event = make_event(
        "attention.requested",
        source="urn:aep:test",
        agent="claude-code",
        session="s1",
        seq=1,
        capture=capture,  # type: ignore[arg-type]
        data=data,
    )
    assert_valid(event.to_dict())


@pytest.mark.conformance("mappings")
@pytest.mark.parametrize("level", ["redacted", "full"])
def test_ask_user_question_pin_with_words(level: str) -> None:
    data = ask_user_question(ASK["input"], level, Redactor())  # type: ignore[arg-type]
    assert data == ASK["expected_data"]
    _valid(data, level)


@pytest.mark.conformance("mappings")
def test_ask_user_question_pin_at_metadata() -> None:
    data = ask_user_question(ASK["input"], "metadata", Redactor())
    assert data == ASK["expected_data_metadata"]
    _valid(data, "metadata")


@pytest.mark.conformance("mappings")
@pytest.mark.parametrize("level", ["redacted", "full"])
def test_elicitation_pin_with_words(level: str) -> None:
    given = ELICIT["input"]
    data = elicitation(given["message"], given["requestedSchema"], level, Redactor())  # type: ignore[arg-type]
    assert data == ELICIT["expected_data"]
    _valid(data, level)


@pytest.mark.conformance("mappings")
def test_elicitation_pin_at_metadata() -> None:
    given = ELICIT["input"]
    data = elicitation(given["message"], given["requestedSchema"], "metadata", Redactor())
    assert data == ELICIT["expected_data_metadata"]
    _valid(data, "metadata")


def test_one_question_is_counted_in_the_singular() -> None:
    one = {"questions": ASK["input"]["questions"][:1]}
    assert ask_user_question(one, "metadata", Redactor())["prompt"] == "claude-code asks 1 question"
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    prompt = elicitation("", schema, "redacted", Redactor())["prompt"]
    assert prompt == "claude-code requests input (1 field)"


def test_a_question_without_options_is_a_free_text_field() -> None:
    data = ask_user_question({"questions": [{"question": "Name?"}]}, "redacted", Redactor())
    assert data["fields"] == [{"id": "1", "type": "string", "label": "Name?", "required": True}]


def test_secrets_in_questions_never_survive_the_redacted_ceiling() -> None:
    leaky = {
        "questions": [
            {
                "question": f"Use the token {SECRET}?",
                "header": "Auth",
                "multiSelect": False,
                "options": [{"label": f"yes, {SECRET}"}, {"label": "no"}],
            }
        ]
    }
    for level in ("redacted", "metadata"):
        data = ask_user_question(leaky, level, Redactor())  # type: ignore[arg-type]
        assert SECRET not in json.dumps(data)
        _valid(data, level)
    full = ask_user_question(leaky, "full", Redactor())
    assert SECRET in full["fields"][0]["label"]  # `full` is the operator's explicit choice


def test_secrets_in_an_elicitation_never_survive_the_redacted_ceiling() -> None:
    schema = {
        "type": "object",
        "properties": {
            "env": {"type": "string", "enum": ["a"], "enumNames": [SECRET], "title": SECRET}
        },
    }
    for level in ("redacted", "metadata"):
        data = elicitation(f"Paste {SECRET}", schema, level, Redactor())  # type: ignore[arg-type]
        assert SECRET not in json.dumps(data)


def test_nothing_leaves_at_capture_none() -> None:
    assert ask_user_question(ASK["input"], "none", Redactor()) == {}
    given = ELICIT["input"]
    assert elicitation(given["message"], given["requestedSchema"], "none", Redactor()) == {}


def test_elicitation_schema_shapes_beyond_the_pin() -> None:
    """Multi-select arrays, titled oneOf and bounds map; nested objects and free arrays
    are skipped, and a skipped required one leaves the form answerable only in the agent."""
    schema = {
        "type": "object",
        "properties": {
            "regions": {"type": "array", "items": {"enum": ["us", "eu"]}, "title": "Regions"},
            "tier": {
                "type": "string",
                "oneOf": [{"const": "s", "title": "Small"}, {"const": "l", "title": "Large"}],
            },
            "count": {"type": "integer", "minimum": 1, "maximum": 9},
            "address": {"type": "object", "properties": {"city": {"type": "string"}}},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["regions"],
    }
    data = elicitation("Pick", schema, "redacted", Redactor())
    assert data["fields"] == [
        {
            "id": "regions",
            "type": "select",
            "label": "Regions",
            "required": True,
            "choices": [{"id": "us", "label": "us"}, {"id": "eu", "label": "eu"}],
            "multi": True,
        },
        {
            "id": "tier",
            "type": "select",
            "label": "tier",
            "required": False,
            "choices": [{"id": "s", "label": "Small"}, {"id": "l", "label": "Large"}],
        },
        {"id": "count", "type": "number", "label": "count", "required": False, "min": 1, "max": 9},
    ]
    assert data["respond_via"] == ["control"]
    _valid(data, "redacted")
    schema["required"] = ["regions", "address"]
    assert elicitation("Pick", schema, "redacted", Redactor())["respond_via"] == ["oob"]


@pytest.mark.parametrize("schema", [None, "x", {"properties": []}, {"properties": {"a": 3}}])
def test_a_malformed_elicitation_schema_is_an_empty_form(schema: Any) -> None:
    data = elicitation(None, schema, "redacted", Redactor())
    assert data["fields"] == []
    _valid(data, "redacted")


@pytest.mark.parametrize("tool_input", [None, [], {"questions": "x"}, {"questions": [1, None]}])
def test_a_malformed_question_batch_never_raises(tool_input: Any) -> None:
    data = ask_user_question(tool_input, "redacted", Redactor())
    assert data["fields"] == []
    assert ask_user_question_answers(tool_input, {"1": "1"}) == {}


ASK_FIELDS = ask_user_question(ASK["input"], "redacted", Redactor())["fields"]
ELICIT_FIELDS = ELICIT["expected_data"]["fields"]


@pytest.mark.parametrize(
    ("fields", "values", "refused"),
    [
        (ASK_FIELDS, {"1": "1", "2": ["1", "2"]}, False),
        (ASK_FIELDS, {"1": "Redis", "2": ["2", "Asia"]}, False),  # other: true takes free text
        (ASK_FIELDS, {"1": "1"}, True),  # a required field missing
        (ASK_FIELDS, {"1": ["1"], "2": ["1"]}, True),  # a list for a single select
        (ASK_FIELDS, {"1": "1", "2": "1"}, True),  # a multi select takes a list
        (ASK_FIELDS, {"1": "1", "2": [1]}, True),  # a list of non-strings
        (ELICIT_FIELDS, {"environment": "staging", "confirm": True, "replicas": 3}, False),
        (ELICIT_FIELDS, {"environment": "dev", "confirm": True}, True),  # closed select
        (ELICIT_FIELDS, {"environment": "staging", "confirm": "yes"}, True),  # not a bool
        (ELICIT_FIELDS, {"environment": "staging", "confirm": True, "replicas": "3"}, True),
        (ELICIT_FIELDS, {"environment": "staging", "confirm": True, "replicas": True}, True),
        (ELICIT_FIELDS, {"environment": "staging", "confirm": True, "reason": 5}, True),
        (ELICIT_FIELDS, {"environment": "staging"}, True),  # required boolean missing
    ],
)
def test_form_problem_applies_the_must_reject_rule(
    fields: list[dict[str, Any]], values: dict[str, Any], refused: bool
) -> None:
    problem = form_problem(fields, values)
    assert (problem is not None) is refused
    assert problem is None or (isinstance(problem, str) and problem)


def test_form_problem_holds_numbers_to_their_bounds() -> None:
    fields = [{"id": "n", "type": "number", "label": "n", "min": 1, "max": 9}]
    assert form_problem(fields, {"n": 5}) is None
    assert form_problem(fields, {"n": 0}) is not None
    assert form_problem(fields, {"n": 10.5}) is not None
    assert form_problem(fields, {"n": float("nan")}) is not None


def test_answers_go_back_as_claude_code_labels() -> None:
    values = {"1": "2", "2": ["1", "2"]}
    assert ask_user_question_answers(ASK["input"], values) == {
        "Which database should the new service use?": "SQLite",
        "Which regions should we roll out to?": "us-east, eu-west",
    }


def test_free_text_answers_go_back_verbatim_and_unanswered_questions_are_left_out() -> None:
    values = {"1": "CockroachDB, please"}
    assert ask_user_question_answers(ASK["input"], values) == {
        "Which database should the new service use?": "CockroachDB, please"
    }
    mixed = ask_user_question_answers(ASK["input"], {"2": ["2", "ap-south"]})
    assert mixed == {"Which regions should we roll out to?": "eu-west, ap-south"}


def test_elicitation_content_has_the_schema_types() -> None:
    schema = ELICIT["input"]["requestedSchema"]
    values = {"environment": "production", "replicas": 3.0, "confirm": False, "x": 1}
    content = elicitation_content(schema, values)
    assert content == {"environment": "production", "replicas": 3, "confirm": False}
    assert type(content["replicas"]) is int
    assert elicitation_content(None, values) == {}
