"""The realistic rendering benchmark's session and measures (bench/realistic.py).

The session it replays is a valid AEP stream with what the benchmark says it has; and each
of the eight measures, on small hand-made channels, counts what it claims and can fail: a
measure that cannot fail measures nothing.
"""

from __future__ import annotations

import importlib.util
import io
import sys
from datetime import datetime
from pathlib import Path
from types import ModuleType

import pytest

from aep_bridge.cli import validate
from tests.sessions import realistic as session

BENCH = Path(__file__).resolve().parent.parent / "bench"


def _bench(name: str) -> ModuleType:
    """A bench/ module, imported as the benchmarks import it (their folder on the path)."""
    sys.path.insert(0, str(BENCH))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(BENCH))


m = _bench("realistic_measures")


# -- the session ---------------------------------------------------------------------------


def test_the_recorded_session_is_a_valid_stream() -> None:
    out, err = io.StringIO(), io.StringIO()
    status = validate([str(session.JSONL)], out=out, err=err)
    assert status == 0, (out.getvalue() + err.getvalue())[-2000:]
    assert "35 valid event(s), 1 session(s)" in out.getvalue() + err.getvalue()


def test_the_recorded_session_is_the_one_described() -> None:
    events = session.events()
    types = [e["type"] for e in events]
    assert events[0]["data"]["label"] == session.LABEL
    assert events[0]["data"]["cwd"] == session.FOLDER  # the home folder redacted, as hooks do
    tools = [e["data"]["tool"]["name"] for e in events if e["type"] == "tool.requested"]
    assert {"Glob", "Grep", "Read", "Edit", "Write", "Bash"} <= set(tools)
    assert all(
        e["data"]["tool"]["call_id"].startswith("toolu_")
        for e in events
        if "tool" in (e.get("data") or {})
    )
    failed = next(e for e in events if e["type"] == "tool.failed")
    assert session.FAILING_ASSERTION in failed["data"]["error"]["message"]
    at = types.index("attention.requested")
    request = events[at]["data"]
    assert f"{session.COMMAND} ({session.REASON})" in request["prompt"]
    assert next(o["id"] for o in request["options"]) == "allow"
    # the burst: the four before the request (two replies, a Read, an Edit) within a few ms
    burst = events[at - 7 : at + 1]
    assert [e["type"] for e in burst].count("message.agent.replied") == 2
    times = [datetime.fromisoformat(e["time"].replace("Z", "+00:00")) for e in burst]
    assert (times[-1] - times[0]).total_seconds() < 0.05
    # answered from a chat, as the daemon reports it, then more work and the end
    answered = events[types.index("attention.answered")]
    assert answered["data"]["via"] == "control"
    assert answered["subject"] == events[at]["id"]
    assert types.index("attention.resolved") < types.index("session.ended") == len(types) - 1
    assert any(
        (e["data"].get("args_redacted") or {}).get("command") == session.LONG_COMMAND
        for e in events
        if e["type"] == "tool.requested"
    )


# -- the measures ----------------------------------------------------------------------------

FACTS = m.Facts(
    failing="FAILED t.py::x - assert 1 == 2",
    edits=[("Edit a.py", "x = 1\n\ny = 2\n")],
    before=[("the reply", "looked at a.py"), ("the Grep call", "Grep")],
    agent=("claude-code",),
    label="Fix it",
    folder="~/src/app",
    command="pip install -e '.[test]'",
    reason="Install the extras",
    options=["Allow", "Deny"],
)
GOOD_CARD = m.Card(
    "claude-code asks permission · Fix it · ~/src/app\npip install -e '.[test]'\n"
    "Install the extras",
    ["pip install -e '.[test]'"],
    ["Allow", "Deny"],
)


def _good() -> m.Shown:
    return m.Shown(
        "chat",
        [
            m.Bubble(["I looked at a.py"]),
            m.Bubble(
                ["✅ Grep", "✅ Grep\n❌ Bash — FAILED t.py::x - assert 1 == 2\n+x = 1\n+y = 2"]
            ),
            m.Bubble(["the card"], card=True),
        ],
        ["the card rang"],
        GOOD_CARD,
    )


def _failed(shown: m.Shown) -> list[str]:
    figures = m.measure(shown, FACTS)
    return [name for name in m.MEASURES if not m.met(name, figures)]


def test_a_channel_that_shows_everything_well_meets_every_goal() -> None:
    figures = m.measure(_good(), FACTS)
    assert _failed(_good()) == []
    assert (figures["bubbles"], figures["pings"], figures["diffs"]) == (3, 1, 1)


def test_too_many_bubbles_or_pings_fail() -> None:
    shown = _good()
    shown.bubbles = [m.Bubble([f"line {i}"]) for i in range(6)] + shown.bubbles
    shown.pings = ["a", "b", "c"]
    assert _failed(shown) == ["bubbles", "pings"]


@pytest.mark.parametrize(
    "text",
    ["a **bold** word", "## Cause", "see [docs](https://x.org)", "| file | change |"],
)
def test_raw_markdown_is_counted(text: str) -> None:
    shown = _good()
    shown.bubbles.append(m.Bubble([text]))
    assert _failed(shown) == ["markdown"]


def test_a_glob_is_not_raw_markdown() -> None:
    shown = _good()
    shown.bubbles.append(m.Bubble(["✅ Glob invoices/**/*.py", "2 * 3 ** 2"]))
    assert _failed(shown) == []


@pytest.mark.parametrize(
    "text",
    [
        '{"stdout": "ok"}',
        "[{'a': 1}]",
        "tool.requested",
        "attention.requested by claude-code",
        "id 01JDEMQ5D3M000000000000000",
        "call toolu_01Glob",
        "evt_123",
        "{'stdout': 'ok'}",
        "userModified: False",
        "structuredPatch",
        "<Foo object at 0x7f00>",
    ],
)
def test_json_and_internal_names_are_counted(text: str) -> None:
    shown = _good()
    shown.bubbles.append(m.Bubble(["fine", text]))  # an earlier version counts too
    assert _failed(shown) == ["internal"]


def test_plain_words_with_dots_are_not_internal_names() -> None:
    shown = _good()
    shown.bubbles.append(m.Bubble(["from invoices.totals import line_total; the run started."]))
    assert _failed(shown) == []


def test_the_failing_assertion_and_every_edit_must_be_shown() -> None:
    shown = _good()
    shown.bubbles[1] = m.Bubble(["✅ Grep\n❌ Bash — 1 failed\n+x = 1"])  # y = 2 left out
    figures = m.measure(shown, FACTS)
    assert _failed(shown) == ["tool output", "diffs"]
    assert figures["edits"] == [("Edit a.py", False)]


def test_what_came_before_the_question_must_be_above_the_card() -> None:
    shown = _good()
    shown.bubbles = [shown.bubbles[2], shown.bubbles[0], shown.bubbles[1]]  # the card first
    figures = m.measure(shown, FACTS)
    assert figures["order"] == 2
    assert figures["out_of_order"] == [
        "the reply (below the card)",
        "the Grep call (below the card)",
    ]


def test_what_came_before_the_question_and_is_nowhere_counts_too() -> None:
    shown = _good()
    del shown.bubbles[0]
    assert m.measure(shown, FACTS)["out_of_order"] == ["the reply (not shown)"]
    shown.bubbles = [b for b in shown.bubbles if not b.card]  # no card in the thread at all
    assert m.measure(shown, FACTS)["order"] == 2


def test_the_card_must_carry_what_a_person_judges() -> None:
    shown = _good()
    shown.card = m.Card(
        "claude-code asks permission: Bash\nPermission requested: Bash — pip install -e "
        "'.[test]' (Install the extras)\nin /home/dev/src/app",
        [],  # the command only in running text, not in the code format
        ["Allow"],
    )
    figures = m.measure(shown, FACTS)
    assert figures["card_missing"] == ["session name", "folder", "command as code", "option Deny"]
    assert _failed(shown) == ["card"]
    shown.card = None
    assert m.measure(shown, FACTS)["card"] == 7


def test_a_command_cut_in_its_code_span_is_not_the_whole_command() -> None:
    shown = _good()
    shown.card = m.Card(GOOD_CARD.text, ["pip install -e"], GOOD_CARD.options)
    assert m.measure(shown, FACTS)["card_missing"] == ["command as code"]


# -- the readers' parts that need no platform ------------------------------------------------


def test_code_spans_are_read_from_markdown() -> None:
    r = _bench("realistic")
    assert r._codes("run `pip install x` now", "```sh\nls -la\n```") == [
        "pip install x",
        "ls -la\n",
    ]
    assert r._codes("no code here") == []


def test_the_console_is_read_as_a_person_reads_it() -> None:
    r = _bench("realistic")
    label = session.LABEL
    output = "\n".join(
        [
            f"session {label}",
            f"[{label}] \x1b[1mI looked\x1b[0m at it",
            "",
            "  further line",
            "aep-bridge: a log line",
            f"[{label}] ? claude-code asks permission: Bash",
            "  Permission requested: Bash — ls",
            "  answer with: k3f9 1 = Allow   k3f9 2 = Deny",
            f"! {label}: claude-code asks permission",
            "[another session] not ours",
        ]
    )
    shown = r.console_shown(output)
    assert [b.versions for b in shown.bubbles] == [
        ["I looked at it\n\nfurther line"],
        [
            "? claude-code asks permission: Bash\nPermission requested: Bash — ls\n"
            "answer with: k3f9 1 = Allow   k3f9 2 = Deny"
        ],
    ]
    assert [b.card for b in shown.bubbles] == [False, True]
    assert shown.pings == [f"! {label}: claude-code asks permission"]
    assert shown.card is not None
    assert shown.card.options == ["Allow", "Deny"]


def test_the_bubbles_goal_is_for_chat_channels_not_the_terminal() -> None:
    """Nine bubbles fail on a chat channel; the console's lines have no bubbles goal (the
    issue sets it for chat channels and the web page), every other goal still holds there."""
    import dataclasses

    good = _good()
    extra = [m.Bubble([f"✅ Read file_{n}.py"]) for n in range(9 - len(good.bubbles))]
    crowded = dataclasses.replace(good, bubbles=extra + good.bubbles)
    assert _failed(crowded) == ["bubbles"]
    assert _failed(dataclasses.replace(crowded, channel="console")) == []
    loud = dataclasses.replace(crowded, channel="console", pings=["a", "b", "c"])
    assert _failed(loud) == ["pings"]
