"""Test-wide fixtures, and the conformance case counts in the report.

Conformance tests carry the `conformance` marker with the fixture class they check; the
terminal summary prints how many cases of each class ran and passed, so a report shows at a
glance that every official case was counted.
"""

from __future__ import annotations

from collections import Counter

import pytest

_passed: Counter[str] = Counter()
_ran: Counter[str] = Counter()


@pytest.fixture(autouse=True, scope="session")
def _no_user_config(tmp_path_factory: pytest.TempPathFactory):
    """A config at the default location (`~/.config/aep-bridge/config.json`) is read by every
    command without `--config`: the tests (and the processes they start) see an empty one."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("xdg-config")))
        yield


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "conformance(kind): a case from the official AEP conformance fixtures"
    )


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when != "call" and not (report.when == "setup" and report.outcome != "passed"):
        return
    kind = getattr(report, "conformance_kind", None)
    if kind is None:
        return
    _ran[kind] += 1
    if report.outcome == "passed":
        _passed[kind] += 1


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    outcome = yield
    marker = item.get_closest_marker("conformance")
    if marker is not None:
        outcome.get_result().conformance_kind = marker.args[0]


def pytest_terminal_summary(terminalreporter) -> None:  # type: ignore[no-untyped-def]
    if not _ran:
        return
    terminalreporter.section("AEP conformance cases")
    for kind in sorted(_ran):
        terminalreporter.write_line(f"{kind:<28} {_passed[kind]:>4} passed of {_ran[kind]:>4}")
