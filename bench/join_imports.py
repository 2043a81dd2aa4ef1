"""Join each parenthesized `from X import (...)` into one line, in place, below a folder.

For counting duplicated code with the tool library's `duplicates`: it passes over import lines
but not the names of a multi-line import list, and every channel writes out the same sorted
names from `aep_bridge`. Run it on a copy (`git archive HEAD core channels plugins`), never on
the checkout: `python bench/join_imports.py /tmp/copy`.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

IMPORT_LIST = re.compile(r"^(\s*from\s+\S+\s+import\s*)\(([^)]*)\)", re.MULTILINE)


def joined(match: re.Match[str]) -> str:
    names = (line.split("#", 1)[0] for line in match.group(2).splitlines())
    parts = [name.strip() for line in names for name in line.split(",") if name.strip()]
    return match.group(1) + ", ".join(parts)


def main(folder: str) -> None:
    for path in Path(folder).rglob("*.py"):
        text = path.read_text()
        new = IMPORT_LIST.sub(joined, text)
        if new != text:
            path.write_text(new)


if __name__ == "__main__":
    main(sys.argv[1])
