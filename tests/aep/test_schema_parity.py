"""Our validator reaches the official JSON Schemas' verdict on generated events.

The reference verdict is `jsonschema` (Draft 2020-12 with its format checker, which uses
rfc3339-validator and rfc3986-validator) applied to the envelope schema and, when `data` is
present, to the type's payload schema. Hypothesis mutates the golden and invalid fixtures
(changing, removing and adding attributes and payload fields, at every depth) and the two
verdicts must agree on every example.

One documented exception is excluded from generation: strings ending in a newline. Python's
`re` lets `$` match before a final newline, so jsonschema accepts `"run.started\\n"`; the
schemas are written in ECMA-262, where it does not, and we follow the schema's meaning.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aep_bridge.aep.errors import InvalidEvent
from aep_bridge.aep.registry import CORE_ATTRIBUTES
from aep_bridge.aep.validation import parse_event, validate_event
from tests import official
from tests.shared_data import AEP_FIXTURES, load_json

BASES: list[dict[str, Any]] = [
    json.loads(line) for line in (AEP_FIXTURES / "golden" / "golden.jsonl").read_text().splitlines()
]
for case in load_json("invalid/cases.json")["cases"]:  # type: ignore[index]
    BASES += case.get("events") or [case["event"]]


def our_verdict(event: Any) -> bool:
    try:
        validate_event(event)
    except InvalidEvent:
        return False
    return True


def test_format_checkers_are_installed():
    """Without them jsonschema ignores `format` and the comparison below would be hollow."""
    assert not official.ENVELOPE.is_valid({**BASES[0], "time": "yesterday"})
    assert not official.ENVELOPE.is_valid({**BASES[0], "source": "not a uri"})


@pytest.mark.parametrize("event", BASES, ids=[e["id"] for e in BASES])
def test_fixture_events_agree(event: dict[str, Any]):
    assert our_verdict(event) == official.is_valid(event)


@pytest.mark.parametrize(
    ("expires_at", "valid"),
    [
        ("2026-07-03T10:20:00Z", True),
        ("2026-07-03T10:20:00.5+02:00", True),
        ("", False),  # found by the mutation test below: it was accepted
        ("in ten minutes", False),
        ("2026-07-03T10:20:00", False),  # no zone
        ("2026-02-30T10:20:00Z", False),
    ],
)
def test_a_payload_date_time_is_checked_as_the_schema_says(expires_at: str, valid: bool):
    """`attention.requested.expires_at` is `format: date-time`, asserted like the envelope's
    `time`: a card must not take a string it cannot read for an expiry."""
    request = next(e for e in BASES if e["type"] == "attention.requested" and "data" in e)
    event = {**request, "data": {**request["data"], "expires_at": expires_at}}
    assert official.is_valid(event) is valid
    assert our_verdict(event) is valid


TYPES = [
    *sorted(official.PAYLOADS),
    "x.acme.session.thing",
    "progress.some_future_member",
    "agent.x",
]
TEXT = st.text(max_size=12).filter(lambda s: not s.endswith("\n"))
INTERESTING = st.sampled_from(
    [
        None,
        "",
        "x",
        "0.1",
        "0.2",
        "1.0",
        0,
        1,
        -1,
        1.0,
        1.5,
        -0.5,
        100,
        101,
        True,
        False,
        {},
        [],
        ["control"],
        [{}],
        {"name": "Bash"},
        "2026-07-03T10:00:00Z",
        "2026-02-30T10:00:00Z",
        "2026-07-03t10:00:00z",
        "2026-07-03T10:00:00",
        "aep://h/a",
        "not a uri",
        "select",
        "form",
        "permission",
        "online",
        "info",
        "fatal",
        "full",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "USD",
    ]
)
SCALARS = st.one_of(
    INTERESTING,
    TEXT,
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(
            st.sampled_from(["id", "label", "type", "name", "choices", "x"]), inner, max_size=3
        ),
    ),
    max_leaves=6,
)
KEYS = st.one_of(
    st.sampled_from(
        [
            *CORE_ATTRIBUTES,
            "acmeregion",
            "kind",
            "prompt",
            "options",
            "fields",
            "tool",
            "cost",
            "answer",
            "values",
            "state",
            "status",
            "reason",
            "scope",
            "percent",
            "duration_ms",
            "choices",
            "label",
            "other",
            "required",
            "currency",
            "total",
            "name",
            "gen_ai.usage.input_tokens",
            "documents",
            "citations",
            "guardrail",
            "verdict",
            "respond_via",
            "expires_at",
            "delta",
            "result",
            "Bad_Key",
            "averyveryverylongextension",
        ]
    ),
    TEXT,
)


def _containers(value: Any, out: list[Any]) -> list[Any]:
    if isinstance(value, dict | list):
        out.append(value)
        for child in value.values() if isinstance(value, dict) else value:
            _containers(child, out)
    return out


@st.composite
def mutated_events(draw: st.DrawFn) -> dict[str, Any]:
    event = copy.deepcopy(draw(st.sampled_from(BASES)))
    if draw(st.booleans()):
        event["type"] = draw(st.sampled_from(TYPES))
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        target = draw(st.sampled_from(_containers(event, [])))
        action = draw(st.sampled_from(["set", "delete", "set"]))
        if isinstance(target, dict):
            keys = list(target)
            if action == "delete" and keys:
                del target[draw(st.sampled_from(keys))]
            else:
                key = draw(st.one_of(st.sampled_from(keys), KEYS) if keys else KEYS)
                target[key] = copy.deepcopy(draw(VALUES))
        elif target:
            index = draw(st.integers(min_value=0, max_value=len(target) - 1))
            if action == "delete":
                del target[index]
            else:
                target[index] = copy.deepcopy(draw(VALUES))
    return event


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_events())
def test_mutated_events_agree_with_the_official_schemas(event: dict[str, Any]):
    assert our_verdict(event) == official.is_valid(event), json.dumps(event)


@settings(max_examples=300, deadline=None)
@given(mutated_events())
def test_bytes_and_objects_get_the_same_verdict(event: dict[str, Any]):
    """`parse_event` (the wire path) and `validate_event` (objects) never disagree."""
    raw = json.dumps(event).encode()
    try:
        parse_event(raw)
        from_bytes = True
    except InvalidEvent:
        from_bytes = False
    assert from_bytes == our_verdict(event)
