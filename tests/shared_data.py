"""Where the AEP specification's data lives for tests: `../shared/aep` beside the checkout.

Tests read the official fixtures from there and never copy them. A missing directory is an
error, not a skip: conformance that was not checked must not look like conformance.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("AEP_SHARED", ROOT.parent / "shared")).resolve()
AEP_DATA = SHARED / "aep"
AEP_FIXTURES = AEP_DATA / "fixtures"
AEP_SCHEMAS = AEP_DATA / "schemas"
AEP_REGISTRY = AEP_DATA / "registry"

if not AEP_FIXTURES.is_dir():
    raise RuntimeError(
        f"the AEP conformance data is missing: expected {AEP_FIXTURES} "
        "(set AEP_SHARED to the shared/ folder)"
    )


def load_json(relative: str) -> object:
    return json.loads((AEP_FIXTURES / relative).read_text(encoding="utf-8"))
