"""A fresh clone tests itself: nothing the README, the docs, `make` or CI name lies outside it.

The AEP data the tests read is in `tests/aep_data` (its own text may say anything, so it is not
searched). Everything else that a user or CI runs or reads must not point at a folder beside the
checkout (a `shared` folder one level up) or at the machine it was written on (an absolute path
under `work`).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Spelled in pieces so this file does not find itself.
OUTSIDE = re.compile(
    "|".join(
        (
            re.escape(".." + "/shared"),
            r"(?<![\w.~-])" + re.escape("/" + "work/"),  # at the root, not under /srv
        )
    )
)
FILES = ["README.md", "Makefile", "pyproject.toml"]
FOLDERS = ["docs", ".ci", "tests"]
SKIPPED = {"aep_data", "__pycache__", ".pytest_cache", ".hypothesis", ".mypy_cache", ".ruff_cache"}
BINARY = {".pyc", ".db", ".sqlite", ".png", ".jpg", ".gif"}


def _files() -> list[Path]:
    found = [ROOT / name for name in FILES]
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*")):
            parts = path.relative_to(ROOT).parts
            if path.is_file() and path.suffix not in BINARY and SKIPPED.isdisjoint(parts):
                found.append(path)
    return found


def test_the_files_searched_are_there():
    names = {path.relative_to(ROOT).as_posix() for path in _files()}
    assert {"README.md", "Makefile", "pyproject.toml", ".ci/run", "docs/cli.md"} <= names
    assert "tests/test_self_contained.py" in names
    assert not any(name.startswith("tests/aep_data/") for name in names)


def test_nothing_points_outside_the_repository():
    hits = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in _files()
        for number, line in enumerate(
            path.read_text(encoding="utf-8", errors="replace").splitlines(), 1
        )
        if OUTSIDE.search(line)
    ]
    assert not hits, "these name a folder outside the repository:\n" + "\n".join(hits)


def test_the_pattern_finds_what_it_should_and_only_that():
    assert OUTSIDE.search("emit " + ".." + "/shared/aep/fixtures/golden/golden.jsonl")
    assert OUTSIDE.search("cd " + "/" + "work/main && make test")
    assert OUTSIDE.search('"cwd": "' + "/" + 'work/app"')
    assert not OUTSIDE.search('"cwd": "/srv/' + 'work/aep-bridge/"')
    assert not OUTSIDE.search("tests/aep_data/fixtures/golden/golden.jsonl")
