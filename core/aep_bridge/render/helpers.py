"""The renderer's levels and limits, and the pure helpers every event family uses: typed
payloads, clipping, numbers and sizes.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final, TypeVar

from pydantic import BaseModel

from ..aep.envelope import Event
from ..aep.payloads import Cost
from ..markup import Blocks, Details, Paragraph, Span, plain, split

QUIET: Final = 0
NORMAL: Final = 1
VERBOSE: Final = 2
LEVELS: Final[dict[str, int]] = {"quiet": QUIET, "normal": NORMAL, "verbose": VERBOSE}
#: The longest text of one message; adapters split long text at their platform's limit.
MAX_TEXT: Final = 12_000
#: A one-line thing: a tool's arguments, a status, a title.
SHORT: Final = 200
#: A prompt or a reason, shown whole but not without end.
MEDIUM: Final = 600
MAX_THREAD_NAME: Final = 100
MAX_SUMMARY: Final = 200
MAX_LABEL: Final = 64
#: What the redaction pipeline puts in place of what it removes.
_MARKERS: Final = re.compile(r"\[REDACTED:[a-z]+\]")
M = TypeVar("M", bound=BaseModel)


def _typed(event: Event, model: type[M]) -> M | None:
    """The event's payload if it is a `model`, else None (no data, or data that does not fit)."""
    payload = event.payload
    return payload if isinstance(payload, model) else None


def _unfold(block: Any) -> Blocks:
    """A collapsible block's content (a card shows what it asks about unfolded)."""
    return tuple(block.blocks) if isinstance(block, Details) else (block,)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _clip_blocks(blocks: Blocks, limit: int) -> Blocks:
    """`blocks` whose plain text is at most `limit` characters: the first part, and "…"."""
    if len(plain(blocks)) <= limit:
        return blocks
    ellipsis = Paragraph(spans=(Span(text="…"),))
    head = split(blocks, max(limit - 3, 1), lambda part: len(plain(part)))[0]
    return (*head, ellipsis)


def _said_by(who: str, blocks: Blocks) -> Blocks:
    """`blocks` led by `who` (`User:`), on the first paragraph's line when it has one."""
    label = Span(text=who, bold=True)
    if not blocks:
        return ()
    first = blocks[0]
    if isinstance(first, Paragraph):
        spans = (label, Span(text=" "), *first.spans)
        return (first.model_copy(update={"spans": spans}), *blocks[1:])
    return (Paragraph(spans=(label,)), *blocks)


def _compact(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list) and all(isinstance(v, str | int | float) for v in value):
        return ", ".join(_compact(v) for v in value)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def _last_folder(path: str) -> str:
    parts = [p for p in re.split(r"[\\/]+", path.strip()) if p.strip()]
    if not parts:
        return ""
    last = parts[-1].strip()
    if last == "~" or _MARKERS.search(last) or re.fullmatch(r"[A-Za-z]:", last):
        return ""
    return last


def _number(n: float) -> str:
    return f"{n:,}" if isinstance(n, int) else f"{n:,.2f}"


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    size = n / 1024
    for unit in ("KB", "MB"):
        if size < 1024:
            return f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"


def _money(cost: Cost) -> str:
    if cost.total is None:
        return ""
    amount = f"{cost.total:.2f}" if cost.total >= 1 else f"{cost.total:.4f}"
    return f"${amount}" if cost.currency == "USD" else f"{amount} {cost.currency}"


def _usage_text(p: BaseModel) -> str:
    """`9,214 tokens in, 3,480 out · $0.0483`, or "" when there is nothing to say."""
    tokens_in = getattr(p, "input_tokens", None)
    tokens_out = getattr(p, "output_tokens", None)
    cost = getattr(p, "cost", None)
    parts = []
    if tokens_in is not None and tokens_out is not None:
        parts.append(f"{_number(tokens_in)} tokens in, {_number(tokens_out)} out")
    elif tokens_in is not None:
        parts.append(f"{_number(tokens_in)} tokens in")
    elif tokens_out is not None:
        parts.append(f"{_number(tokens_out)} tokens out")
    if isinstance(cost, Cost):
        money = _money(cost)
        if money:
            parts.append(money)
    return " · ".join(parts)
