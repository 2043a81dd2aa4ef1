"""The attr-match filter dialect (AEP-0003 §6): the official corpus, then what it leaves open.

Every `match` case must give the published verdict and every `invalid` filter must be refused.
Beyond the corpus: comparison without coercion, error messages that name the key, and
`matches_event` (on a validated `Event`) agreeing with `matches` (on the decoded object).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from aep_bridge.aep.envelope import Event
from aep_bridge.aep.errors import InvalidEvent, InvalidFilter
from aep_bridge.aep.filters import MATCH_ALL, Filter
from aep_bridge.aep.validation import validate_event
from tests.shared_data import AEP_FIXTURES, load_json

CORPUS: dict[str, Any] = load_json("attr-match/cases.json")  # type: ignore[assignment]
MATCH: list[dict[str, Any]] = CORPUS["match"]
INVALID: list[dict[str, Any]] = CORPUS["invalid"]
GOLDEN: list[dict[str, Any]] = [
    json.loads(line)
    for line in (AEP_FIXTURES / "golden" / "golden.jsonl").read_text(encoding="utf-8").splitlines()
]

_BASE: dict[str, Any] = {
    "aep": "0.1",
    "id": "01JX9YB3P4T90000000000TEST",
    "time": "2026-07-03T10:15:04.221Z",
    "source": "aep://host-a/agent/codex/session/s1",
    "agent": "codex",
}


def _event(**attrs: Any) -> dict[str, Any]:
    """A valid session-scoped event (or agent-scoped for `agent.*`) with `attrs` on top."""
    event = {**_BASE, "type": "run.started", **attrs}
    if not event["type"].startswith("agent."):
        event.setdefault("session", "s1")
        event.setdefault("seq", 1)
    return event


def _validated(event: dict[str, Any]) -> Event | None:
    try:
        return validate_event(event)
    except InvalidEvent:
        return None


def test_corpus_counts_are_the_published_ones():
    """A corpus that shrank would silently weaken every case test below."""
    assert (len(MATCH), len(INVALID)) == (14, 10)


@pytest.mark.conformance("attr-match")
@pytest.mark.parametrize("case", MATCH, ids=[c["name"] for c in MATCH])
def test_match_case(case: dict[str, Any]):
    flt = Filter.parse(case["filter"])
    assert flt.matches(case["event"]) is case["match"]
    event = _validated(case["event"])
    if event is not None:
        assert flt.matches_event(event) is case["match"]


@pytest.mark.conformance("attr-match")
@pytest.mark.parametrize("case", INVALID, ids=[c["name"] for c in INVALID])
def test_invalid_case_is_refused(case: dict[str, Any]):
    with pytest.raises(InvalidFilter):
        Filter.parse(case["filter"])


@pytest.mark.parametrize("case", MATCH, ids=[c["name"] for c in MATCH])
def test_match_case_on_a_validated_event(case: dict[str, Any]):
    """The corpus events are fragments; completed into valid events, both paths agree."""
    completed = _event(**case["event"])
    event = validate_event(completed)
    flt = Filter.parse(case["filter"])
    added = set(completed) - set(case["event"])
    assert flt.matches_event(event) is flt.matches(completed)
    if not added & set(case["filter"]):
        assert flt.matches(completed) is case["match"]


_AGREEMENT_FILTERS = [
    {},
    {"type": ["tool.*", "attention.*"]},
    {"type": "session.started", "acmeregion": "eu-1"},
    {"acmeregion": "eu-1"},
    {"severity": {"gte": "warning"}},
    {"severity": {"lte": "info"}, "capture": "metadata"},
    {"capture": ["redacted", "full"]},
    {"epoch": 0, "agent": "claude-code"},
    {"step": "turn-3"},
    {"subject": "Bash", "run": "r_0042"},
    {"session": ["s_8f2c"], "cause": "01JX9YB2Z1QK0000000000GOLD"},
]


@pytest.mark.parametrize("spec", _AGREEMENT_FILTERS, ids=json.dumps)
def test_matches_event_agrees_with_matches_on_the_golden_stream(spec: dict[str, Any]):
    flt = Filter.parse(spec)
    verdicts = [flt.matches(obj) for obj in GOLDEN]
    assert [flt.matches_event(validate_event(obj)) for obj in GOLDEN] == verdicts
    if spec:
        assert 0 < sum(verdicts) < len(GOLDEN), "a filter here should split the stream"


# -- no coercion -----------------------------------------------------------------------------


def test_a_boolean_never_equals_an_integer():
    one = _event(epoch=1)
    assert Filter.parse({"epoch": 1}).matches(one)
    assert not Filter.parse({"epoch": True}).matches(one)
    assert not Filter.parse({"epoch": True}).matches_event(validate_event(one))
    assert not Filter.parse({"epoch": [True, "1"]}).matches(one)
    assert not Filter.parse({"epoch": False}).matches(_event())  # default 0 is not false


def test_an_integer_never_equals_a_string():
    assert not Filter.parse({"agent": 1}).matches(_event(agent="1"))
    assert Filter.parse({"agent": "1"}).matches(_event(agent="1"))
    ext = _event(acmeshard=1)
    assert not Filter.parse({"acmeshard": "1"}).matches(ext)
    assert not Filter.parse({"acmeshard": "1"}).matches_event(validate_event(ext))
    assert Filter.parse({"acmeshard": 1}).matches_event(validate_event(ext))


def test_extension_booleans_and_integers_stay_apart():
    flag = validate_event(_event(acmeflag=True))
    assert Filter.parse({"acmeflag": True}).matches_event(flag)
    assert not Filter.parse({"acmeflag": 1}).matches_event(flag)
    count = validate_event(_event(acmecount=1))
    assert not Filter.parse({"acmecount": True}).matches_event(count)


def test_an_integral_json_number_is_that_integer():
    """JSON has one number type: `3.0` in an event is the integer 3, as the schemas read it."""
    assert Filter.parse({"acmecount": 3}).matches({"type": "run.started", "acmecount": 3.0})
    assert not Filter.parse({"acmecount": 3}).matches({"type": "run.started", "acmecount": 3.5})


# -- the grammar -----------------------------------------------------------------------------


def test_type_patterns_need_the_dot():
    flt = Filter.parse({"type": "attention.*"})
    assert flt.matches({"type": "attention.requested"})
    assert not flt.matches({"type": "attention"})
    assert not flt.matches({"type": "attentions.requested"})
    vendor = Filter.parse({"type": ["x.acme.*"]})
    assert vendor.matches({"type": "x.acme.tool.ran"})
    assert not vendor.matches({"type": "x.acmecorp.tool.ran"})


def test_patterns_and_exact_types_compose_in_one_array():
    flt = Filter.parse({"type": ["tool.*", "run.started"]})
    assert flt.matches({"type": "tool.failed"})
    assert flt.matches({"type": "run.started"})
    assert not flt.matches({"type": "run.finished"})


def test_severity_bounds_are_inclusive_and_absent_severity_is_info():
    band = Filter.parse({"severity": {"gte": "notice", "lte": "error"}})
    verdicts = {
        level: band.matches({"type": "run.started", "severity": level})
        for level in ("debug", "info", "notice", "warning", "error", "critical")
    }
    assert verdicts == {
        "debug": False,
        "info": False,
        "notice": True,
        "warning": True,
        "error": True,
        "critical": False,
    }
    assert Filter.parse({"severity": {"lte": "info"}}).matches({"type": "run.started"})
    assert Filter.parse({"severity": "info"}).matches({"type": "run.started"})


def test_an_unknown_severity_in_an_event_never_matches_a_comparison():
    flt = Filter.parse({"severity": {"gte": "debug"}})
    assert not flt.matches({"type": "run.started", "severity": "urgent"})
    assert not flt.matches({"type": "run.started", "severity": 3})


def test_capture_defaults_to_metadata():
    assert Filter.parse({"capture": "metadata"}).matches({"type": "run.started"})
    assert not Filter.parse({"capture": "full"}).matches({"type": "run.started"})
    assert Filter.parse({"capture": "metadata"}).matches_event(validate_event(_event()))


def test_absent_attributes_and_extensions_never_match():
    event = _event()
    for spec in ({"run": "r1"}, {"subject": "Bash"}, {"acmeregion": "eu-1"}, {"cause": "x"}):
        assert not Filter.parse(spec).matches(event), spec
        assert not Filter.parse(spec).matches_event(validate_event(event)), spec


def test_null_in_a_decoded_event_counts_as_absent():
    assert not Filter.parse({"run": "r1"}).matches({"type": "run.started", "run": None})
    assert Filter.parse({"epoch": 0}).matches({"type": "run.started", "epoch": None})


def test_conjunction_needs_every_member():
    flt = Filter.parse({"agent": "codex", "session": "s1", "type": "run.*"})
    assert flt.matches(_event())
    assert not flt.matches(_event(session="s2"))
    assert not flt.matches(_event(agent="claude-code"))


def test_the_empty_filter_matches_everything():
    assert MATCH_ALL.spec == {}
    assert MATCH_ALL.matches({})
    assert MATCH_ALL.matches_event(validate_event(_event(type="agent.heartbeat")))
    assert Filter.parse({}) == MATCH_ALL


# -- refusals --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "key"),
    [
        ({"seq": 1}, "seq"),
        ({"data": {}}, "data"),
        ({"NotAnAttr": "x"}, "NotAnAttr"),
        ({"acme-region": "x"}, "acme-region"),
        ({"abcdefghijklmnopqrstu": "x"}, "abcdefghijklmnopqrstu"),
        ({"agent": None}, "agent"),
        ({"agent": 1.5}, "agent"),
        ({"epoch": 0.0}, "epoch"),
        ({"session": {"eq": "s1"}}, "session"),
        ({"session": [["s1"]]}, "session"),
        ({"session": ["s1", None]}, "session"),
        ({"run": []}, "run"),
        ({"subject": "Ba*"}, "subject"),
        ({"type": "*"}, "type"),
        ({"type": ["tool.*", "attention*"]}, "type"),
        ({"type": "*.completed"}, "type"),
        ({"type": "Tool.*"}, "type"),
        ({"severity": {}}, "severity"),
        ({"severity": {"gt": "info"}}, "severity"),
        ({"severity": {"gte": "urgent"}}, "severity"),
        ({"severity": {"gte": 2}}, "severity"),
    ],
    ids=json.dumps,
)
def test_refusal_names_the_key(spec: dict[str, Any], key: str):
    with pytest.raises(InvalidFilter) as caught:
        Filter.parse(spec)
    assert repr(key) in str(caught.value)
    assert caught.value.rule == "AEP-0003 §6.2"


def test_refusal_says_why():
    with pytest.raises(InvalidFilter, match="resume"):
        Filter.parse({"seq": 5})
    with pytest.raises(InvalidFilter, match="gte"):
        Filter.parse({"severity": {"gt": "info"}})
    with pytest.raises(InvalidFilter, match="type"):
        Filter.parse({"agent": "claude*"})


@pytest.mark.parametrize("spec", [None, [], "type", 1, [{"type": "x"}]], ids=repr)
def test_a_filter_must_be_an_object(spec: object):
    with pytest.raises(InvalidFilter, match="JSON object"):
        Filter.parse(spec)


def test_a_bad_member_fails_the_whole_filter_rather_than_being_skipped():
    with pytest.raises(InvalidFilter, match="seq"):
        Filter.parse({"session": "s1", "seq": 3})


def test_legal_extension_names_are_accepted_even_if_no_event_carries_them():
    flt = Filter.parse({"zz9": "x"})
    assert not flt.matches(_event())


# -- the object itself -----------------------------------------------------------------------


def test_spec_is_the_filter_as_given_and_a_copy():
    given: dict[str, Any] = {"type": ["tool.*"], "severity": {"gte": "notice"}}
    flt = Filter.parse(given)
    assert flt.spec == given
    flt.spec["type"].append("run.*")
    given["type"].append("run.*")
    assert flt.spec == {"type": ["tool.*"], "severity": {"gte": "notice"}}
    assert not flt.matches({"type": "run.started", "severity": "error"})


def test_equal_filters_are_equal_and_coercion_does_not_make_them_so():
    assert Filter.parse({"a1": 1, "agent": "x"}) == Filter.parse({"agent": "x", "a1": 1})
    assert Filter.parse({"a1": 1}) != Filter.parse({"a1": True})
    assert len({Filter.parse({"a1": 1}), Filter.parse({"a1": 1})}) == 1
