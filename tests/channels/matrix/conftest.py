"""What every Matrix test checks: mautrix logged no warning or error (it logs a sync that
failed, a handler that raised or an answer it could not parse, and carries on)."""

from __future__ import annotations

import logging

from aep_bridge.testing import library_logs_nothing_wrong

_mautrix_logs_nothing_wrong = library_logs_nothing_wrong("mau", level=logging.WARNING)
