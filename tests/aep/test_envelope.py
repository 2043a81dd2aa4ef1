"""The envelope as users meet it: what is kept, what is refused, what goes back on the wire."""

from __future__ import annotations

import json

import pytest

from aep_bridge.aep.build import make_event
from aep_bridge.aep.errors import InvalidEvent
from aep_bridge.aep.ids import new_id, parse_source, source_uri
from aep_bridge.aep.payloads import AttentionRequested
from aep_bridge.aep.validation import parse_event, validate_event

BASE = {
    "aep": "0.1",
    "id": "E1",
    "type": "run.started",
    "time": "2026-07-03T10:00:00Z",
    "source": "aep://h/agent/a/session/s1",
    "agent": "a",
    "session": "s1",
    "seq": 0,
}


def test_defaults_apply_but_are_not_invented_on_the_wire():
    event = validate_event(BASE)
    assert (event.epoch, event.severity, event.capture) == (0, "info", "metadata")
    assert event.to_dict() == BASE


@pytest.mark.parametrize("attribute", ["subject", "run", "step", "cause", "traceparent", "data"])
def test_null_is_never_an_absent_optional(attribute: str):
    with pytest.raises(InvalidEvent) as caught:
        validate_event({**BASE, attribute: None})
    assert caught.value.first.path == attribute


def test_received_bytes_are_kept_exactly():
    line = (
        b'{ "seq":0, "aep":"0.1","id":"E1","type":"run.started","time":"2026-07-03T10:00:00Z",'
        b'"source":"aep://h/agent/a/session/s1","agent":"a","session":"s1",'
        b'"data":{"prompt":"caf\\u00e9"}, "acmeregion":"eu-1"}'
    )
    event = parse_event(line)
    assert event.raw == line
    assert event.extensions == {"acmeregion": "eu-1"}
    assert event.to_dict()["acmeregion"] == "eu-1"


def test_json_schema_integers_admit_a_zero_fraction():
    assert validate_event({**BASE, "seq": 3.0}).seq == 3
    with pytest.raises(InvalidEvent, match="seq"):
        validate_event({**BASE, "seq": 3.5})
    with pytest.raises(InvalidEvent, match="seq"):
        validate_event({**BASE, "seq": True})
    with pytest.raises(InvalidEvent, match="seq"):
        validate_event({**BASE, "seq": "3"})


def test_unknown_and_vendor_types_keep_their_data_as_is():
    vendor = {
        **BASE,
        "type": "x.claude-code.session.config_change",
        "data": {"k": [1, {"a": None}]},
    }
    assert validate_event(vendor).payload == {"k": [1, {"a": None}]}
    future = {**BASE, "type": "progress.some_future_member", "data": {"anything": "goes"}}
    assert validate_event(future).payload == {"anything": "goes"}


def test_registered_types_get_a_typed_payload():
    request = {
        **BASE,
        "type": "attention.requested",
        "capture": "redacted",
        "data": {
            "kind": "permission",
            "prompt": "Run rm -rf build/?",
            "options": [{"id": "allow", "label": "Allow"}, {"id": "deny", "label": "Deny"}],
        },
    }
    payload = validate_event(request).payload
    assert isinstance(payload, AttentionRequested)
    assert [o.id for o in payload.options] == ["allow", "deny"]


def test_message_facts_are_read_leniently():
    """0.1 reserves message.* with no schema: any data passes, data that fits is typed."""
    replied = {
        **BASE,
        "type": "message.agent.replied",
        "subject": "m1",
        "capture": "redacted",
        "data": {"message_id": "m1", "text": "Done.", "chars": 5},
    }
    assert validate_event(replied).payload.text == "Done."
    odd = {**replied, "data": {"no_message_id": True}}
    assert validate_event(odd).payload == {"no_message_id": True}


@pytest.mark.parametrize(
    ("raw", "rule", "words"),
    [
        (b"{not json", "RFC 8259", "not valid JSON"),
        (b"[1, 2]", "AEP-0001 §5", "not a JSON array"),
        (b'"text"', "AEP-0001 §5", "not a JSON string"),
        (json.dumps({**BASE, "aep": "1.0"}).encode(), "AEP-0003 §3.1", "major version"),
        (b"\xff\xfe", "RFC 8259", "not valid JSON"),
    ],
)
def test_bad_input_gets_a_clear_named_error(raw: bytes, rule: str, words: str):
    with pytest.raises(InvalidEvent) as caught:
        parse_event(raw)
    assert caught.value.first.rule == rule
    assert words in caught.value.first.message


def test_oversized_event_is_refused_before_parsing():
    big = json.dumps({**BASE, "data": {"prompt": "x" * 2000}}).encode()
    with pytest.raises(InvalidEvent, match="over the 1000 limit"):
        parse_event(big, max_bytes=1000)


def test_every_violation_is_reported_not_just_the_first():
    with pytest.raises(InvalidEvent) as caught:
        validate_event({**BASE, "severity": "fatal", "seq": -1, "traceparent": "nope"})
    assert {v.path for v in caught.value.violations} == {"severity", "seq", "traceparent"}


def test_built_events_refuse_extensions_that_collide_with_core_attributes():
    with pytest.raises(ValueError, match="collide"):
        make_event("agent.heartbeat", source="aep://h/agent/a", agent="a", extensions={"seq": 1})
    built = make_event(
        "agent.heartbeat", source="aep://h/agent/a", agent="a", extensions={"acmeregion": "eu"}
    )
    assert built.extensions == {"acmeregion": "eu"}


def test_ids_are_unique_time_sortable_ulids():
    ids = [new_id() for _ in range(1000)]
    assert len(set(ids)) == 1000
    assert all(len(i) == 26 for i in ids)
    assert ids[0][:6] <= ids[-1][:6]  # the millisecond prefix never goes back


def test_source_uris_encode_untrusted_session_ids_and_parse_back():
    uri = source_uri("host-a", "claude-code", "s/../x y")
    assert uri == "aep://host-a/agent/claude-code/session/s%2F..%2Fx%20y"
    parts = parse_source(uri)
    assert parts is not None
    assert parts.session == "s/../x y"
    assert validate_event({**BASE, "source": uri}).source == uri
    assert parse_source("https://example.com/x") is None
