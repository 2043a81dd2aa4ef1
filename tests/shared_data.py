"""Where the AEP specification's data lives for tests: `tests/aep_data`, inside the repository.

An unmodified copy of the specification's schemas, registries and conformance fixtures
(`tests/aep_data/SOURCE.md` names the commit). A missing directory is an error, not a skip:
conformance that was not checked must not look like conformance.
"""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
AEP_DATA = ROOT / "tests" / "aep_data"
AEP_FIXTURES = AEP_DATA / "fixtures"
AEP_SCHEMAS = AEP_DATA / "schemas"
AEP_REGISTRY = AEP_DATA / "registry"

if not AEP_FIXTURES.is_dir():
    raise RuntimeError(f"the AEP conformance data is missing: expected {AEP_FIXTURES}")


def load_json(relative: str) -> object:
    return json.loads((AEP_FIXTURES / relative).read_text(encoding="utf-8"))
