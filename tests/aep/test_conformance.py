"""The official AEP conformance fixtures, one test per case (read from tests/aep_data).

Golden events must validate and fold with no violation, twice over with nothing changing;
invalid cases must be rejected, or reported by the stream checker, under the rule the case
names; down-levelling and form-value gating must produce exactly the expected output.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from aep_bridge.aep.capture import downlevel, gate_form_values
from aep_bridge.aep.errors import InvalidEvent, Violation
from aep_bridge.aep.stream import StreamChecker
from aep_bridge.aep.validation import parse_event, validate_event
from tests.shared_data import AEP_FIXTURES, load_json

GOLDEN_LINES = (AEP_FIXTURES / "golden" / "golden.jsonl").read_bytes().splitlines()
INVALID = load_json("invalid/cases.json")["cases"]  # type: ignore[index]
DOWNLEVEL = load_json("downlevel/cases.json")["cases"]  # type: ignore[index]
GATING = load_json("capture-gating/cases.json")["cases"]  # type: ignore[index]


def test_fixture_counts_are_the_published_ones():
    """A fixture file that shrank would silently weaken every test below."""
    assert len(GOLDEN_LINES) == 64
    assert len(INVALID) == 35
    assert len(DOWNLEVEL) == 18
    assert len(GATING) == 6


@pytest.mark.conformance("golden")
@pytest.mark.parametrize("line", GOLDEN_LINES, ids=[f"golden[{i}]" for i in range(64)])
def test_golden_event_is_valid_and_keeps_its_bytes(line: bytes):
    event = parse_event(line)
    assert event.raw == line


def test_golden_stream_folds_without_violation_and_twice_changes_nothing():
    checker = StreamChecker()
    first = [v for line in GOLDEN_LINES for v in checker.fold(parse_event(line))]
    assert first == []
    once = checker.summary()
    second = [v for line in GOLDEN_LINES for v in checker.fold(parse_event(line))]
    assert second == []
    twice = checker.summary()
    assert twice.redeliveries == 64
    assert (twice.sessions, twice.pending_attention, twice.violations) == (
        once.sessions,
        once.pending_attention,
        0,
    )


_SECTION = re.compile(r"(?:(AEP-\d{4})\s*)?§\s*([0-9][0-9.]*(?:\s*#\d+)?)")


def _refs(rule: str) -> list[tuple[str, tuple[str, ...]]]:
    """`AEP-0002 §4.2/§5 payload` -> [("AEP-0002", ("4", "2")), ("AEP-0002", ("5",))]."""
    refs, doc = [], ""
    for found_doc, section in _SECTION.findall(rule):
        doc = found_doc or doc
        refs.append((doc, tuple(re.split(r"[.\s#]+", section.strip(" .")))))
    return refs


def _cites(case_rule: str, violation: Violation) -> bool:
    """The violation's rule is the case's rule, or a subsection of it."""
    ours = _refs(violation.rule)
    if violation.rule.startswith("AEP-") and not ours:
        ours = [(violation.rule, ())]
    return any(
        doc == our_doc and our_sec[: len(sec)] == sec
        for doc, sec in _refs(case_rule)
        for our_doc, our_sec in ours
    )


def _violations_of_case(case: dict[str, Any]) -> list[Violation]:
    checker = StreamChecker()
    found: list[Violation] = []
    for obj in case.get("events") or [case["event"]]:
        try:
            found += checker.fold(validate_event(obj))
        except InvalidEvent as exc:
            found += exc.violations
    return found


@pytest.mark.conformance("invalid")
@pytest.mark.parametrize("case", INVALID, ids=[c["name"] for c in INVALID])
def test_invalid_case_is_reported_under_its_rule(case: dict[str, Any]):
    found = _violations_of_case(case)
    assert found, f"{case['name']} passed, but it breaks {case['rule']}"
    assert any(_cites(case["rule"], v) for v in found), (case["rule"], [str(v) for v in found])


def test_rule_matching_is_not_lenient():
    """The matcher used above must refuse a wrong section, or the rule checks prove nothing."""
    assert _cites("AEP-0002 §4.2/§5 payload schema", Violation("AEP-0002 §5.4", "x"))
    assert _cites("AEP-0001 §5.1 #2 / §7.4", Violation("AEP-0001 §7.4", "x"))
    assert not _cites("AEP-0001 §5.2", Violation("AEP-0001 §5.4", "x"))
    assert not _cites("AEP-0001 §5.1 #14", Violation("AEP-0001 §5.1 #1", "x"))
    assert not _cites("AEP-0002 §7.2", Violation("AEP-0001 §7.2", "x"))


@pytest.mark.conformance("downlevel")
@pytest.mark.parametrize("case", DOWNLEVEL, ids=[c["name"] for c in DOWNLEVEL])
def test_downlevel_case(case: dict[str, Any]):
    out = downlevel(validate_event(case["event"]), case["ceiling"])
    assert out.capture == case["expect_capture"]
    if case["expect_data"] is None:
        assert out.data is None
    else:
        assert out.data == case["expect_data"]
    assert "data" not in out.to_dict() or out.data is not None


@pytest.mark.conformance("capture-gating")
@pytest.mark.parametrize("case", GATING, ids=[c["name"] for c in GATING])
def test_capture_gating_case(case: dict[str, Any]):
    assert gate_form_values(case["fields"], case["values"], case["ceiling"]) == case["expect"]
