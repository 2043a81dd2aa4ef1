"""A realistic Claude Code session ("Fix invoice rounding"), as our hooks emit it.

Not the demo: a session as the agent daemon sends it from Claude Code's hooks, each hook
payload through the real mapping (`aep_bridge.agents.claude_code.map_hook`, the daemon's
`agents.capture` at `redacted`: commands, paths and text with the home folder replaced), the
"for this session" options as the daemon adds them (`grants`), the permission request's
`expires_at` as the daemon sets it and its `cause` as the daemon links it (`calls`), and
the answer from a chat as the daemon's attention loop reports it (`control.accepted`,
`attention.answered` via `control`, `attention.resolved`). The agent's markdown replies are
`message.agent.replied`, as in the demo (Claude Code's hooks carry none).
`python -m tests.sessions.realistic` writes realistic.jsonl beside this file (`aep-bridge
validate` passes it); the rendering bench (bench/realistic.py) replays it.

The session: a prompt; a markdown reply; Glob, Grep and Read; a new test written; pytest
failing on an assertion; a markdown reply; an Edit; a burst of four (a reply, a Read, an
Edit, a reply) within a few ms right before the permission request for
`pip install -e '.[test]' hypothesis==6.112.0` (with its reason, in ~/src/invoices) that a
person answers from a chat; then the install's output, a Write, one long shell command, a
closing reply with a table, the run's end and the session's end.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

from aep_bridge.aep.build import make_event
from aep_bridge.aep.ids import new_id, source_uri
from aep_bridge.agents import grants
from aep_bridge.agents.calls import OpenCalls
from aep_bridge.agents.claude_code import map_hook, session_grants
from aep_bridge.agents.mapping import Ceiling

HERE: Final = Path(__file__).resolve().parent
JSONL: Final = HERE / "realistic.jsonl"
AGENT: Final = "claude-code"
SESSION: Final = "5b1e0c7a-9d42-4f3e-a8c1-2e6f0b9d7c31"
HOST: Final = "dev-laptop"
LABEL: Final = "Fix invoice rounding"
HOME: Final = "/home/dev"
CWD: Final = f"{HOME}/src/invoices"
#: the working folder as a person should read it on the card (relative to home)
FOLDER: Final = "~/src/invoices"
COMMAND: Final = "pip install -e '.[test]' hypothesis==6.112.0"
REASON: Final = "Install the test extras and Hypothesis for the property test"
#: the line of pytest's output a person must see (the failing assertion)
FAILING_ASSERTION: Final = (
    "FAILED tests/test_totals.py::test_half_cent_rounds_up - assert 1000 == 1001"
)
LONG_COMMAND: Final = (
    "python -m pytest -q -p no:cacheprovider --hypothesis-seed=0 --hypothesis-show-statistics "
    "tests/test_totals.py tests/test_totals_property.py tests/test_export.py "
    "&& ruff check invoices tests && mypy --strict invoices"
)
CEILING: Final = Ceiling(events="redacted", attention="redacted")
START: Final = datetime(2026, 12, 1, 9, 14, 2, tzinfo=UTC)

TOTALS_OLD = "    return round(quantity * unit_price, 2)\n"
TOTALS_NEW = (
    "    cents = (Decimal(quantity) * Decimal(unit_price) * 100).quantize(\n"
    '        Decimal("1"), rounding=ROUND_HALF_UP\n'
    "    )\n"
    "    return int(cents)\n"
)
TEST_FILE = (
    "from invoices.totals import line_total\n"
    "\n"
    "\n"
    "def test_half_cent_rounds_up():\n"
    '    assert line_total(3, "3.335") == 1001\n'
)
PROPERTY_TEST = (
    "from hypothesis import given, strategies as st\n"
    "\n"
    "from invoices.totals import line_total\n"
    "\n"
    "\n"
    "@given(st.integers(1, 1000), st.decimals('0.001', '999.999', places=3))\n"
    "def test_line_total_is_whole_cents(quantity, price):\n"
    "    assert isinstance(line_total(quantity, str(price)), int)\n"
)
PYPROJECT_OLD = 'test = ["pytest>=8"]\n'
PYPROJECT_NEW = 'test = ["pytest>=8", "hypothesis>=6.100"]\n'
FAILED_RUN = (
    "F                                                                        [100%]\n"
    "=================================== FAILURES ===================================\n"
    "___________________________ test_half_cent_rounds_up ___________________________\n"
    "\n"
    "    def test_half_cent_rounds_up():\n"
    '>       assert line_total(3, "3.335") == 1001\n'
    "E       assert 1000 == 1001\n"
    "\n"
    "tests/test_totals.py:5: AssertionError\n"
    "=========================== short test summary info ============================\n"
    f"{FAILING_ASSERTION}\n"
    "1 failed in 0.04s"
)
INSTALL_OUTPUT = (
    "Obtaining file:///home/dev/src/invoices\n"
    "  Installing build dependencies ... done\n"
    "Collecting hypothesis==6.112.0\n"
    "  Downloading hypothesis-6.112.0-py3-none-any.whl (467 kB)\n"
    "Collecting pytest>=8\n"
    "  Using cached pytest-8.3.3-py3-none-any.whl (342 kB)\n"
    "Installing collected packages: sortedcontainers, attrs, hypothesis, invoices\n"
    "Successfully installed attrs-24.2.0 hypothesis-6.112.0 invoices-0.4.1 "
    "sortedcontainers-2.4.0"
)

#: what the agent says, in markdown, by its place in the session
REPLIES: Final = {
    "plan": (
        "I'll find where line totals are rounded, reproduce the off-by-a-cent case with a "
        "**failing test**, then fix it.\n\n1. Look at `invoices/totals.py`\n2. Add a test "
        "for `3 x 3.335`\n3. Round half-up with `Decimal`"
    ),
    "cause": (
        "## Cause\n\n`line_total` rounds a binary float: `3 * 3.335` is "
        "`10.004999…`, so `round(…, 2)` gives **10.00**, not 10.01. I'll compute in "
        "`Decimal` cents with `ROUND_HALF_UP`."
    ),
    "burst-1": "The fix works for the example. To be sure for **every** price I'll add a "
    "property test with [Hypothesis](https://hypothesis.readthedocs.io/).",
    "burst-2": "Hypothesis is not installed here: I'll add it to the `test` extra and "
    "install the extras.",
    "summary": (
        "## Fixed: invoice totals off by a cent\n\n**Cause:** float rounding in "
        "`line_total`.\n\n| file | change |\n|---|---|\n| `invoices/totals.py` | "
        "`Decimal` cents, half-up |\n| `tests/test_totals.py` | the 3.335 case |\n\n"
        "All checks pass: pytest, ruff and mypy."
    ),
}


def _hook(name: str, **fields: Any) -> dict[str, Any]:
    return {
        "session_id": SESSION,
        "transcript_path": f"{HOME}/.claude/projects/-home-dev-src-invoices/{SESSION}.jsonl",
        "cwd": CWD,
        "permission_mode": "default",
        "hook_event_name": name,
        **fields,
    }


def _tool(name: str, call: str, tool_input: dict[str, Any], response: Any) -> list[Any]:
    """PreToolUse then PostToolUse of one call."""
    common = {"tool_name": name, "tool_input": tool_input, "tool_use_id": call}
    return [
        _hook("PreToolUse", **common),
        _hook("PostToolUse", **common, tool_response=response, duration_ms=40),
    ]


def _edit_response(path: str, old: str, new: str) -> dict[str, Any]:
    """Claude Code's Edit `tool_response` (its `structuredPatch` included, as it sends it)."""
    patch = [
        {
            "oldStart": 12,
            "oldLines": old.count("\n"),
            "newStart": 12,
            "newLines": new.count("\n"),
            "lines": [f"-{line}" for line in old.splitlines()]
            + [f"+{line}" for line in new.splitlines()],
        }
    ]
    return {
        "filePath": path,
        "oldString": old,
        "newString": new,
        "originalFile": None,
        "structuredPatch": patch,
        "userModified": False,
        "replaceAll": False,
    }


def steps() -> list[tuple[float, str, Any]]:
    """(seconds after the start, what, its hook payload or reply text), in order. `what` is
    `hook`, `reply` (a markdown reply), or `answer` (the person answers from a chat)."""
    totals = f"{CWD}/invoices/totals.py"
    test = f"{CWD}/tests/test_totals.py"
    pyproject = f"{CWD}/pyproject.toml"
    prompt = (
        "Invoice totals are off by a cent: 3 x 3.335 shows 10.00, it should be 10.01. "
        "Fix the rounding in invoices/totals.py and add a test."
    )
    out: list[tuple[float, str, Any]] = [
        (0.0, "hook", _hook("SessionStart", source="startup", model="claude-sonnet-4-5")),
        (4.2, "hook", _hook("UserPromptSubmit", prompt=prompt)),
        (9.8, "reply", REPLIES["plan"]),
    ]
    at = 11.0
    calls: list[list[Any]] = [
        _tool(
            "Glob",
            "toolu_01Glob",
            {"pattern": "invoices/**/*.py"},
            {
                "filenames": [f"{CWD}/invoices/totals.py", f"{CWD}/invoices/export.py"],
                "numFiles": 2,
                "truncated": False,
                "durationMs": 6,
            },
        ),
        _tool(
            "Grep",
            "toolu_02Grep",
            {"pattern": r"round\(", "path": "invoices", "output_mode": "content", "-n": True},
            {
                "mode": "content",
                "numLines": 1,
                "content": "invoices/totals.py:14:    return round(quantity * unit_price, 2)",
            },
        ),
        _tool(
            "Read",
            "toolu_03Read",
            {"file_path": totals},
            {
                "type": "text",
                "file": {
                    "filePath": totals,
                    "numLines": 15,
                    "startLine": 1,
                    "totalLines": 15,
                    "content": "from decimal import ROUND_HALF_UP, Decimal\n"
                    "\n\ndef line_total(quantity, unit_price):\n" + TOTALS_OLD,
                },
            },
        ),
        _tool(
            "Write",
            "toolu_04Write",
            {"file_path": test, "content": TEST_FILE},
            {
                "type": "create",
                "filePath": test,
                "content": TEST_FILE,
                "structuredPatch": [],
                "originalFile": None,
            },
        ),
    ]
    for pair in calls:
        out += [(at, "hook", pair[0]), (at + 0.6, "hook", pair[1])]
        at += 3.0
    failing = {
        "command": "python -m pytest -q tests/test_totals.py",
        "description": "Run the new test",
    }
    out += [
        (
            at,
            "hook",
            _hook("PreToolUse", tool_name="Bash", tool_input=failing, tool_use_id="toolu_05Bash"),
        ),
        (
            at + 1.4,
            "hook",
            _hook(
                "PostToolUseFailure",
                tool_name="Bash",
                tool_input=failing,
                tool_use_id="toolu_05Bash",
                error=f"Exit code 1\n{FAILED_RUN}",
                duration_ms=1400,
            ),
        ),
        (at + 8.0, "reply", REPLIES["cause"]),
    ]
    at += 10.0
    for hook in _tool(
        "Edit",
        "toolu_06Edit",
        {"file_path": totals, "old_string": TOTALS_OLD, "new_string": TOTALS_NEW},
        _edit_response(totals, TOTALS_OLD, TOTALS_NEW),
    ):
        out.append((at, "hook", hook))
        at += 0.5
    # the burst: four within a few ms, then the permission request
    at += 12.0
    read = _tool(
        "Read",
        "toolu_07Read",
        {"file_path": pyproject},
        {
            "type": "text",
            "file": {
                "filePath": pyproject,
                "numLines": 1,
                "startLine": 30,
                "totalLines": 42,
                "content": PYPROJECT_OLD,
            },
        },
    )
    edit = _tool(
        "Edit",
        "toolu_08Edit",
        {"file_path": pyproject, "old_string": PYPROJECT_OLD, "new_string": PYPROJECT_NEW},
        _edit_response(pyproject, PYPROJECT_OLD, PYPROJECT_NEW),
    )
    install = {"command": COMMAND, "description": REASON}
    burst: list[tuple[str, Any]] = [
        ("reply", REPLIES["burst-1"]),
        ("hook", read[0]),
        ("hook", read[1]),
        ("hook", edit[0]),
        ("hook", edit[1]),
        ("reply", REPLIES["burst-2"]),
        (
            "hook",
            _hook("PreToolUse", tool_name="Bash", tool_input=install, tool_use_id="toolu_09Bash"),
        ),
        (
            "hook",
            _hook(
                "PermissionRequest",
                tool_name="Bash",
                tool_input=install,
                permission_suggestions=[
                    {
                        "type": "addRules",
                        "rules": [{"toolName": "Bash", "ruleContent": "pip install:*"}],
                        "behavior": "allow",
                        "destination": "localSettings",
                    }
                ],
            ),
        ),
    ]
    for what, item in burst:
        out.append((at, what, item))
        at += 0.002
    at += 14.0
    out.append((at, "answer", "allow"))
    at += 0.01
    out.append(
        (
            at + 9.0,
            "hook",
            _hook(
                "PostToolUse",
                tool_name="Bash",
                tool_input=install,
                tool_use_id="toolu_09Bash",
                duration_ms=8900,
                tool_response={
                    "stdout": INSTALL_OUTPUT,
                    "stderr": "",
                    "interrupted": False,
                    "isImage": False,
                },
            ),
        )
    )
    at += 12.0
    prop = f"{CWD}/tests/test_totals_property.py"
    for hook in _tool(
        "Write",
        "toolu_10Write",
        {"file_path": prop, "content": PROPERTY_TEST},
        {
            "type": "create",
            "filePath": prop,
            "content": PROPERTY_TEST,
            "structuredPatch": [],
            "originalFile": None,
        },
    ):
        out.append((at, "hook", hook))
        at += 0.4
    at += 3.0
    long = {"command": LONG_COMMAND, "description": "Run the tests, ruff and mypy"}
    passed = (
        "...                                                                      [100%]\n"
        "3 passed in 2.31s\nAll checks passed!\nSuccess: no issues found in 3 source files"
    )
    out += [
        (
            at,
            "hook",
            _hook("PreToolUse", tool_name="Bash", tool_input=long, tool_use_id="toolu_11Bash"),
        ),
        (
            at + 6.5,
            "hook",
            _hook(
                "PostToolUse",
                tool_name="Bash",
                tool_input=long,
                tool_use_id="toolu_11Bash",
                duration_ms=6500,
                tool_response={
                    "stdout": passed,
                    "stderr": "",
                    "interrupted": False,
                    "isImage": False,
                },
            ),
        ),
        (at + 12.0, "reply", REPLIES["summary"]),
        (
            at + 12.3,
            "hook",
            _hook("Stop", stop_hook_active=False, last_assistant_message=REPLIES["summary"]),
        ),
        (at + 40.0, "hook", _hook("SessionEnd", reason="prompt_input_exit")),
    ]
    return out


def _stamp(seconds: float) -> str:
    at = START + timedelta(seconds=seconds)
    return at.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def build(answered_by: str = "alice") -> list[dict[str, Any]]:
    """The session's events as the daemon emits them (new ids each call)."""
    source = source_uri(HOST, AGENT, SESSION)
    events: list[dict[str, Any]] = []
    run: str | None = None
    request: dict[str, Any] | None = None
    replies = 0
    calls = OpenCalls()  # the daemon's link of a permission request to its call

    def emit(type_: str, data: dict[str, Any], at: float, **envelope: Any) -> dict[str, Any]:
        event = make_event(
            type_,
            source=source,
            agent=AGENT,
            session=SESSION,
            seq=len(events),
            epoch=0,
            run=run,
            data=data,
            time=_stamp(at),
            **envelope,
        )
        events.append(json.loads(event.raw))
        return events[-1]

    for at, what, item in steps():
        if what == "reply":
            replies += 1
            emit(
                "message.agent.replied",
                {"message_id": f"msg_{replies:02d}", "role": "assistant", "text": item},
                at,
                capture="redacted",
            )
        elif what == "answer":
            assert request is not None
            command = new_id()  # the bridge's control.attention.respond
            ack = emit("control.accepted", {}, at, cause=command)
            answered = emit(
                "attention.answered",
                {"answer": {"option": item}, "via": "control", "by": answered_by},
                at,
                subject=request["id"],
                cause=command,
            )
            del ack
            emit(
                "attention.resolved",
                {"resolution": "answered", "latency_ms": 14000},
                at,
                subject=request["id"],
                cause=answered["id"],
            )
        else:
            if item["hook_event_name"] == "UserPromptSubmit":
                run = f"run-1-{new_id().lower()}"
            hook = item["hook_event_name"]
            calls.hook(hook, item)
            for emission in map_hook(item, CEILING):
                data = emission.data
                extra: dict[str, Any] = {}
                if emission.type == "attention.requested" and hook == "PermissionRequest":
                    extra["cause"] = calls.cause(item)
                if emission.type == "attention.requested":
                    offered = grants.options(session_grants(item), CEILING)
                    data = grants.with_options(data, offered)
                    data = {**data, "expires_at": _stamp(at + 600)}
                emitted = emit(
                    emission.type,
                    data,
                    at,
                    subject=emission.subject,
                    capture=emission.capture,
                    severity=emission.severity,
                    **extra,
                )
                if emission.type == "attention.requested":
                    request = emitted
                if emission.type == "tool.requested" and hook == "PreToolUse":
                    calls.requested(item, emitted["id"])
                if emission.type == "session.started":
                    emitted["data"]["label"] = LABEL  # the session's name (re-validated below)
            if item["hook_event_name"] == "Stop":
                run = None
    return events


def events() -> list[dict[str, Any]]:
    """The recorded session, as committed."""
    return [json.loads(line) for line in JSONL.read_text().splitlines() if line]


def main() -> None:
    JSONL.write_text("".join(json.dumps(e, ensure_ascii=False) + "\n" for e in build()))
    print(f"wrote {JSONL}")


if __name__ == "__main__":
    main()
