"""`make test` says where it is: pytest run with the Makefile's own options on a small suite
prints a line per finished file (how far, the outcomes, the time), no dots, a failure the
moment it happens, and the slowest files and tests at the end."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from tests.bridge_process import ROOT


def make_test_options() -> list[str]:
    """The options `make test` gives pytest (`TEST_OPTIONS` in the Makefile)."""
    found = re.search(r"^TEST_OPTIONS := (.+)$", (ROOT / "Makefile").read_text(), re.M)
    assert found is not None, "the Makefile has no TEST_OPTIONS"
    return shlex.split(found[1])


def test_make_test_prints_a_line_per_file_and_the_slowest_at_the_end(tmp_path: Path) -> None:
    (tmp_path / "test_one.py").write_text(
        "def test_a():\n    pass\n\ndef test_b():\n    pass\n\ndef test_c():\n    pass\n"
    )
    (tmp_path / "test_two.py").write_text(
        "def test_good():\n    pass\n\ndef test_bad():\n    assert 1 == 2\n"
    )
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", *make_test_options(), "-p", "no:cacheprovider"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    out = run.stdout
    assert run.returncode == 1, out + run.stderr
    lines = out.splitlines()
    one = re.compile(r"\[ *\d+% +\d/5 +\d+:\d\d\] test_one\.py: 3 passed in \d+\.\ds")
    two = re.compile(r"\[ *\d+% +\d/5 +\d+:\d\d\] test_two\.py: 1 failed, 1 passed in \d+\.\ds")
    assert any(one.fullmatch(line) for line in lines), out
    assert any(two.fullmatch(line) for line in lines), out
    assert lines.index("FAILED test_two.py::test_bad") < next(
        i for i, line in enumerate(lines) if two.fullmatch(line)
    ), out
    assert not any(re.fullmatch(r"[.FEsx]+\s*(\[.*\])?", line) for line in lines), out  # no dots
    assert "slowest 10 files" in out, out
    assert "slowest 15 durations" in out, out
