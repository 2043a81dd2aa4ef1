"""The registries built into the bridge are the specification's, entry for entry."""

from __future__ import annotations

import json

from aep_bridge.aep import registry
from aep_bridge.aep.payloads import PAYLOAD_MODELS, RESERVED_MODELS
from tests.shared_data import AEP_REGISTRY, AEP_SCHEMAS


def _load(name: str) -> dict:
    return json.loads((AEP_REGISTRY / name).read_text())


def test_every_registered_type_with_status_and_scope():
    published = {
        t["type"]: (t["status"], t["scope"], t["schema"] is not None)
        for t in _load("types.json")["types"]
    }
    ours = {t: (r.status, r.scope, r.has_schema) for t, r in registry.REGISTERED_TYPES.items()}
    assert ours == published


def test_fourteen_mandatory_types():
    assert len(registry.MANDATORY_TYPES) == 14


def test_every_type_with_a_schema_has_a_payload_model_and_no_other():
    with_schema = {
        p.name.removesuffix(".schema.json") for p in (AEP_SCHEMAS / "types").glob("*.json")
    }
    assert set(PAYLOAD_MODELS) == with_schema
    assert set(RESERVED_MODELS) == {
        t for t, r in registry.REGISTERED_TYPES.items() if r.status == "reserved"
    }


def test_categories_severity_capture_and_nack_reasons():
    assert {
        c["name"]: c["scope"] for c in _load("categories.json")["categories"]
    } == registry.CATEGORIES
    assert list(registry.SEVERITY_ORDER) == _load("severity.json")["order"]
    assert _load("severity.json")["default"] == registry.DEFAULT_SEVERITY
    assert list(registry.CAPTURE_ORDER) == _load("capture.json")["order"]
    assert _load("capture.json")["default"] == registry.DEFAULT_CAPTURE
    assert list(registry.NACK_REASONS) == _load("nack-reasons.json")["reasons"]


def test_type_pattern_is_the_envelope_schemas():
    schema = json.loads((AEP_SCHEMAS / "aep-event.schema.json").read_text())
    published = schema["properties"]["type"]["pattern"].removeprefix("^").removesuffix("$")
    # Ours uses non-capturing groups; the language is the same.
    assert registry.TYPE_PATTERN.pattern == published.replace("(", "(?:").replace("(?:?:", "(?:")


def test_core_attributes_are_the_envelope_schemas_properties():
    schema = json.loads((AEP_SCHEMAS / "aep-event.schema.json").read_text())
    assert set(registry.CORE_ATTRIBUTES) == set(schema["properties"])
    assert len(registry.CORE_ATTRIBUTES) == 17  # sixteen context attributes plus data
