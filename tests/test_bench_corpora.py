"""Every stream the benchmarks feed the bridge is one `aep-bridge validate` accepts: a figure
measured on a stream the bridge should refuse (a request never resolved) measures nothing a
user runs."""

from __future__ import annotations

import importlib.util
import io
import sys
from pathlib import Path
from types import ModuleType

import pytest

from aep_bridge.cli import validate

BENCH = Path(__file__).resolve().parent.parent / "bench"


def _bench_core() -> ModuleType:
    """bench/core.py, loaded as the benchmarks load it (its folder on the path)."""
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location("bench_core", BENCH / "core.py")
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCH))


@pytest.mark.parametrize("name", ["mix", "golden"])
def test_each_core_benchmark_corpus_is_a_valid_stream(name: str, tmp_path: Path) -> None:
    core = _bench_core()
    for size in (core.EVENTS, core.PROFILE_EVENTS):  # throughput, and the profiled run
        log = tmp_path / f"{name}-{size}.jsonl"
        log.write_bytes(b"".join(line.rstrip(b"\n") + b"\n" for line in core.corpus(name, size)))
        out, err = io.StringIO(), io.StringIO()
        status = validate([str(log)], out=out, err=err)
        assert status == 0, (out.getvalue() + err.getvalue())[-2000:]
        said = out.getvalue() + err.getvalue()
        assert said.startswith(f"ok: {size} line(s), {size} valid event(s)"), said
