"""`make test`'s progress: one line per test file as it finishes, instead of a screen of dots.

Loaded with `-p tests.progress` (the Makefile's `test` target); a plain `pytest` keeps pytest's
own output. A line says how far the run is, the file, how its tests ended and how long they
took, and the time so far:

    [ 37%  1075/2904  4:12] tests/core/test_run.py: 23 passed in 41.2s

A failure is also said the moment it happens (`FAILED tests/...::test_x`), with its details
in pytest's summary at the end, as always. The end lists the slowest files (pytest's own
`--durations` lists the slowest tests). Under pytest-xdist it runs in the controller only,
which gets every worker's reports; each file's time is the sum of its tests' phases.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Generator, Iterable
from typing import Any

import pytest

#: how many of the slowest files the summary lists
SLOWEST_FILES = 10


class Progress:
    """Counts each file's tests as their reports arrive, and says a file once all are in."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.began = time.monotonic()
        self.per_file: Counter[str] = Counter()
        self.done: Counter[str] = Counter()
        self.outcomes: defaultdict[str, Counter[str]] = defaultdict(Counter)
        self.seconds: defaultdict[str, float] = defaultdict(float)
        self.total = 0
        self.finished = 0
        self.said: set[str] = set()

    def collected(self, nodeids: Iterable[str]) -> None:
        if self.total:  # every xdist worker collects the same tests: the first one counts
            return
        for nodeid in nodeids:
            self.per_file[nodeid.split("::", 1)[0]] += 1
        self.total = sum(self.per_file.values())

    def report(self, report: pytest.TestReport) -> None:
        path = report.nodeid.split("::", 1)[0]
        self.seconds[path] += report.duration
        if report.failed:
            self.outcomes[path]["failed" if report.when == "call" else "error"] += 1
            self._write(f"{'FAILED' if report.when == 'call' else 'ERROR'} {report.nodeid}")
        elif report.when == "call" or (report.when == "setup" and report.skipped):
            self.outcomes[path][_outcome(report)] += 1
        if report.when != "teardown":
            return
        self.finished += 1
        self.done[path] += 1
        if self.done[path] >= self.per_file.get(path, 0) and path not in self.said:
            self.said.add(path)
            self._write(self._line(path))

    def _line(self, path: str) -> str:
        total = self.total or self.finished
        percent = 100 * self.finished // max(total, 1)
        counts = ", ".join(f"{n} {what}" for what, n in sorted(self.outcomes[path].items()))
        return (
            f"[{percent:3d}% {self.finished:5d}/{total} {_clock(time.monotonic() - self.began)}] "
            f"{path}: {counts or 'no tests'} in {self.seconds[path]:.1f}s"
        )

    def _write(self, line: str) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.ensure_newline()
            reporter.write_line(line)

    def summary(self, reporter: Any) -> None:
        if not self.seconds:
            return
        reporter.section(f"slowest {SLOWEST_FILES} files")
        slowest = sorted(self.seconds.items(), key=lambda item: item[1], reverse=True)
        for path, seconds in slowest[:SLOWEST_FILES]:
            reporter.write_line(f"{seconds:8.1f}s  {path}")


def _outcome(report: pytest.TestReport) -> str:
    if hasattr(report, "wasxfail"):
        return "xfailed" if report.skipped else "xpassed"
    return report.outcome


def _clock(seconds: float) -> str:
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes:2d}:{rest:02d}"


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):  # an xdist worker: the controller says it all
        return
    config.pluginmanager.register(_Hooks(Progress(config)), "aep-bridge-progress")


class _Hooks:
    """The hooks, on the controller only."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if session.items:  # without xdist (with it, the controller collects nothing)
            self.progress.collected(item.nodeid for item in session.items)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        self.progress.collected(ids)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.progress.report(report)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_report_teststatus(
        self, report: pytest.TestReport, config: pytest.Config
    ) -> Generator[None, Any, None]:
        """No dot per test: the file's line says it (the category stays, for the summary)."""
        outcome = yield
        result = outcome.get_result()
        if config.get_verbosity() <= 0 and result:
            category, _, word = result
            outcome.force_result((category, "", word))

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        self.progress.summary(terminalreporter)
