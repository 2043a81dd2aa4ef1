"""The link of a permission request to the call it gates (agents/calls.py)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from aep_bridge.agents.calls import KEPT, OpenCalls


def _hook(name: str, tool: str = "Bash", command: str = "npm test", **more: Any) -> dict[str, Any]:
    return {"hook_event_name": name, "tool_name": tool, "tool_input": {"command": command}, **more}


def _pre(calls: OpenCalls, event: str, call: str, **kw: Any) -> None:
    calls.requested(_hook("PreToolUse", tool_use_id=call, **kw), event)


def test_a_request_is_linked_to_its_call_once():
    calls = OpenCalls()
    _pre(calls, "ev1", "toolu_1")
    assert calls.cause(_hook("PermissionRequest")) == "ev1"
    assert calls.cause(_hook("PermissionRequest")) is None  # one request per call


def test_the_most_recent_open_call_with_that_input_is_the_cause():
    calls = OpenCalls()
    _pre(calls, "ev1", "toolu_1")
    _pre(calls, "ev2", "toolu_2", command="ls")
    _pre(calls, "ev3", "toolu_3")
    assert calls.cause(_hook("PermissionRequest")) == "ev3"
    assert calls.cause(_hook("PermissionRequest", command="ls")) == "ev2"
    assert calls.cause(_hook("PermissionRequest")) == "ev1"


def test_another_tool_or_input_is_never_linked():
    calls = OpenCalls()
    _pre(calls, "ev1", "toolu_1")
    assert calls.cause(_hook("PermissionRequest", tool="Write")) is None
    assert calls.cause(_hook("PermissionRequest", command="npm test ")) is None
    assert calls.cause({"hook_event_name": "PermissionRequest", "tool_name": "Bash"}) is None
    assert calls.cause(_hook("PermissionRequest")) == "ev1"


def test_an_ended_call_and_a_finished_turn_are_forgotten():
    calls = OpenCalls()
    _pre(calls, "ev1", "toolu_1")
    calls.hook("PostToolUseFailure", _hook("PostToolUseFailure", tool_use_id="toolu_1"))
    assert calls.cause(_hook("PermissionRequest")) is None
    _pre(calls, "ev2", "toolu_2")
    calls.hook("Stop", {"hook_event_name": "Stop"})
    assert len(calls) == 0
    assert calls.cause(_hook("PermissionRequest")) is None


def test_memory_is_bounded_per_session():
    calls = OpenCalls()
    for n in range(KEPT * 10):
        _pre(calls, f"ev{n}", "x" * 5000, command=f"echo {n}" * 100)
    assert len(calls) == KEPT
    assert calls.cause(_hook("PermissionRequest", command="echo 0" * 100)) is None
    last = KEPT * 10 - 1
    assert calls.cause(_hook("PermissionRequest", command=f"echo {last}" * 100)) == f"ev{last}"


_steps = st.lists(
    st.tuples(
        st.sampled_from(["pre", "post", "ask", "stop"]),
        st.sampled_from(["Bash", "Edit"]),
        st.sampled_from(["a", "b", "c"]),
        st.integers(0, 3),
    ),
    max_size=40,
)


@given(_steps)
def test_a_cause_is_the_newest_open_untaken_call_of_the_same_tool_and_input(steps):
    """Against a model: the open calls (the last KEPT), each taken at most once."""
    calls = OpenCalls()
    model: list[dict[str, Any]] = []  # oldest first
    for n, (step, tool, command, call) in enumerate(steps):
        if step == "pre":
            model = [*model, {"ev": f"ev{n}", "key": (tool, command), "id": f"c{call}"}][-KEPT:]
            _pre(calls, f"ev{n}", f"c{call}", tool=tool, command=command)
        elif step == "post":
            calls.hook("PostToolUse", _hook("PostToolUse", tool_use_id=f"c{call}"))
            model = [c for c in model if c["id"] != f"c{call}"]
        elif step == "stop":
            calls.hook("Stop", {})
            model = []
        else:
            found = [c for c in model if c["key"] == (tool, command) and not c.get("taken")]
            expected = found[-1]["ev"] if found else None
            if found:
                found[-1]["taken"] = True
            assert calls.cause(_hook("PermissionRequest", tool=tool, command=command)) == expected
