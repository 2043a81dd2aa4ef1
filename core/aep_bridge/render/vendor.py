"""Vendor and unknown types: the plugins' rendering, else `aep_bridge.contract.defaults`."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from ..contract import defaults
from ..contract.types import OutgoingMessage
from .base import RendererBase
from .draft import Draft
from .helpers import QUIET

log = logging.getLogger(__name__)


class VendorMixin(RendererBase):
    """Types the renderer does not map itself (`RENDERED_TYPES`)."""

    def _vendor(self, draft: Draft, verbosity: str) -> None:
        """A vendor or unknown event: the plugins' rendering (`render_vendor_event`), whose
        last resort is `aep_bridge.contract.defaults`; that default, too, if the plugins fail."""
        event = draft.event
        shown: Sequence[OutgoingMessage] | None = None
        if self.vendor is not None:
            try:
                shown = self.vendor(event, verbosity)
            except Exception:
                log.exception("rendering %s: the vendor renderer failed", event.type)
            if shown is not None and not all(isinstance(m, OutgoingMessage) for m in shown):
                log.warning("rendering %s: the vendor renderer returned a non-message", event.type)
                shown = None
        if shown is None:
            shown = defaults.render_vendor_event(event, verbosity)
        draft.items.extend((QUIET, m) for m in shown)
