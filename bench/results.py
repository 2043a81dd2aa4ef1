"""bench/RESULTS.md, section by section: a benchmark run on its own replaces only its part."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"


def record(heading: str, lines: list[str]) -> None:
    """Put `lines` (a section starting with `heading`) into RESULTS.md in place of the last."""
    text = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n"
    start = text.find(heading)
    if start < 0:
        text = text.rstrip("\n") + "\n\n" + "\n".join(lines)
    else:
        end = text.find("\n## ", start + len(heading))
        rest = "" if end < 0 else text[end + 1 :]
        text = text[:start] + "\n".join(lines) + ("\n" + rest if rest else "")
    RESULTS.write_text(text)


def run_alone(heading: str, main: Callable[[], Any], section: Callable[[Any], list[str]]) -> None:
    """A benchmark run on its own (`python bench/X.py`): on one core, as run.py pins it;
    its section printed and recorded in place of the last."""
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    lines = section(main())
    print("\n".join(lines))
    record(heading, lines)
