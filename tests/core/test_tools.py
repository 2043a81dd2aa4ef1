"""Tool calls as a person reads them (`aep_bridge.tools`), on the demo session's own calls.

What a person would notice: the pattern a Grep looked for, an edit's `+N −M` and its new
lines, the failing assertion of a failed test run, `150 passed` after the suite, paths
relative to the session's folder, an MCP tool as `github › create_pull_request`, the plan
as its entries, and never a line of JSON. A plugin's `render_tool` comes before all this.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aep_bridge import ToolCall, ToolOutcome, ToolView, hookimpl, markup
from aep_bridge.contract.plugins import PluginHost
from aep_bridge.demo import recorded
from aep_bridge.markup import Code, Details, Diff, Span
from aep_bridge.tools import MAX_DETAILS, MAX_TITLE, bound_view, render_tool

ROOT = Path(__file__).resolve().parents[2]

EVENTS = [json.loads(line) for line in recorded().splitlines() if line.strip()]
CWD = EVENTS[0]["data"]["cwd"]  # /home/dev/src/invoicer
FAILING_ASSERTION = "FAILED tests/test_totals.py::test_rounding - assert 10.0 == 10.01"


def demo_calls() -> list[tuple[ToolCall, ToolOutcome]]:
    """Every tool call of the demo with how it ended, as the renderer gets them."""
    requested = {e["id"]: e for e in EVENTS if e["type"] == "tool.requested"}
    found = []
    for event in EVENTS:
        if event["type"] not in ("tool.completed", "tool.failed"):
            continue
        start = requested[event["cause"]]
        call = ToolCall(start["data"]["tool"]["name"], start["data"]["args_redacted"], CWD)
        data = event["data"]
        if event["type"] == "tool.failed":
            outcome = ToolOutcome(
                "failed", data["error"]["message"], data["error"]["type"], data["duration_ms"]
            )
        else:
            outcome = ToolOutcome("success", data["result_redacted"], None, data["duration_ms"])
        found.append((call, outcome))
    return found


CALLS = demo_calls()


def demo(name: str, index: int = 0) -> tuple[ToolCall, ToolOutcome]:
    return [c for c in CALLS if c[0].name == name][index]


def title(view: ToolView) -> str:
    return markup.spans_text(view.title)


def shown(view: ToolView) -> str:
    """Everything a person can read of the view: the line, the summary, the details."""
    return "\n".join([title(view), view.summary, markup.plain(view.details)])


def diffs(view: ToolView) -> list[Diff]:
    found: list[Diff] = []
    for block in view.details:
        if isinstance(block, Details):
            found += [b for b in block.blocks if isinstance(b, Diff)]
        elif isinstance(block, Diff):
            found.append(block)
    return found


# -- the demo's calls ------------------------------------------------------------------


def test_grep_shows_its_pattern_where_it_looked_and_how_many_matches():
    view = render_tool(*demo("Grep"))
    assert Span(text="def line_total|round\\(", code=True) in view.title
    assert title(view) == "Grep def line_total|round\\( in src/invoicer"
    assert view.summary == "3 matches"


def test_read_shows_the_path_relative_to_the_session_folder_and_the_lines():
    view = render_tool(*demo("Read"))
    assert title(view) == "Read src/invoicer/totals.py"
    assert view.summary == "12 lines"
    second = render_tool(*demo("Read", 1))
    assert title(second) == "Read src/invoicer/export.py lines 40–59"


def test_the_command_is_inline_code_after_the_tool():
    call, outcome = demo("Bash")
    view = render_tool(call, outcome)
    assert view.title == (
        Span(text="Bash", bold=True),
        Span(text=" "),
        Span(text="git log --oneline -3 -- src/invoicer/totals.py", code=True),
    )
    assert view.summary == "2f5e611 Initial import"  # the last line of the output


def test_a_passing_suite_reads_150_passed():
    call, outcome = next(c for c in CALLS if c[0].args.get("command") == "python -m pytest -q")
    view = render_tool(call, outcome)
    assert view.summary == "150 passed in 6.12s"
    assert "=" not in view.summary
    assert view.details == ()  # normal: the line is enough
    verbose = render_tool(call, outcome, verbose=True)
    assert "tests/test_totals.py ...." in markup.plain(verbose.details)


def test_a_failing_run_shows_its_last_lines_with_the_failing_assertion():
    call, outcome = next(c for c in CALLS if c[1].status == "failed")
    view = render_tool(call, outcome)
    assert view.summary == "exit 1 · 1 failed, 3 passed in 0.38s"  # how it failed, at a glance
    (details,) = view.details
    assert isinstance(details, Details)
    assert isinstance(details.blocks[0], Code)
    assert FAILING_ASSERTION in details.blocks[0].code.splitlines()
    assert "1 failed, 3 passed in 0.38s" in details.blocks[0].code


def test_a_long_failing_run_keeps_its_end_where_the_assertion_is():
    call, outcome = next(c for c in CALLS if c[1].status == "failed")
    noisy = "\n".join(f"tests/test_{n}.py ........" for n in range(5000)) + "\n" + outcome.output
    view = render_tool(call, ToolOutcome("failed", noisy, "exit 1"))
    text = markup.plain(view.details)
    assert FAILING_ASSERTION in text
    assert "last 15 lines" in text
    assert "tests/test_0.py" not in text
    assert len(text) <= MAX_DETAILS


def test_write_counts_the_new_lines_and_shows_them_as_a_diff():
    view = render_tool(*demo("Write"))
    assert title(view) == "Write tests/test_totals.py"
    assert view.summary == "+8"
    (diff,) = diffs(view)
    assert (diff.path, diff.added, diff.removed) == ("tests/test_totals.py", 8, 0)
    assert "+    assert line_total(3, 3.335) == 10.01" in diff.unified.splitlines()


def test_edit_counts_its_change_and_the_diff_has_the_new_lines():
    view = render_tool(*demo("Edit"))
    assert title(view) == "Edit src/invoicer/totals.py"
    assert view.summary == "+3 −2"
    (diff,) = diffs(view)
    assert "+    return amount.quantize(CENT, rounding=ROUND_HALF_UP)" in diff.unified
    assert "-    return round(quantity * unit_price, 2)" in diff.unified
    assert "structuredPatch" not in shown(view)


def test_an_edit_waiting_for_approval_already_shows_its_change():
    """Without the tool's own diff (it has not run), the change comes from its strings."""
    call, _ = demo("Edit")
    view = render_tool(call, None)
    assert view.summary == ""
    (diff,) = diffs(view)
    assert (diff.added, diff.removed) == (3, 2)
    assert "+    amount = Decimal(str(quantity)) * Decimal(str(unit_price))" in diff.unified


def test_multiedit_sums_its_edits_in_one_diff():
    call, outcome = demo("MultiEdit")
    view = render_tool(call, outcome)
    assert title(view) == "Edit src/invoicer/export.py (2 edits)"
    assert view.summary == "+3 −1"
    (diff,) = diffs(view)
    assert "+from .totals import CENT" in diff.unified
    # from the arguments alone (while it waits), the same counts
    (waiting,) = diffs(render_tool(call, None))
    assert (waiting.added, waiting.removed) == (3, 1)
    assert '+f"{invoice.total.quantize(CENT)}"])' in waiting.unified.splitlines()


def test_an_mcp_tool_reads_server_then_tool_with_compact_arguments_and_its_result():
    view = render_tool(*demo("mcp__github__create_pull_request"))
    assert title(view).startswith("github › create_pull_request owner acme, repo invoicer")
    assert "mcp__" not in shown(view)
    assert "{" not in shown(view)
    assert "#42" in view.summary
    links = [s for b in view.details if isinstance(b, markup.Paragraph) for s in b.spans]
    assert links[0].url == "https://github.com/acme/invoicer/pull/42"


def test_todowrite_is_the_plan_never_its_json():
    call, outcome = demo("TodoWrite", 1)
    view = render_tool(call, outcome)
    assert title(view) == "Updated the plan"
    assert view.plan == (
        ("Reproduce the rounding bug with a failing test", "completed"),
        ("Round line totals half-up with Decimal", "completed"),
        ("Run the whole suite and open a PR", "completed"),
    )
    assert view.summary == "3 of 3 done"
    assert "{" not in shown(view)
    assert render_tool(call, None).plan == view.plan  # running: the plan already


def test_no_demo_call_shows_json_or_internal_names():
    for call, outcome in CALLS:
        for verbose in (False, True):
            for view in (render_tool(call, None), render_tool(call, outcome, verbose=verbose)):
                text = shown(view)
                for leak in ('{"', "[{", "exit_code", "structuredPatch", "mcp__"):
                    assert leak not in text, (call.name, leak)
                # the call's own paths are relative (an output is shown as it was)
                assert "/home/dev" not in title(view) + view.summary, call.name


# -- the other agents' names -----------------------------------------------------------


def test_codex_shell_unwraps_bash_lc_and_opens_its_json_output():
    call = ToolCall(
        "shell", {"command": ["bash", "-lc", "pytest -q"], "workdir": CWD, "timeout_ms": 1}, CWD
    )
    output = json.dumps({"output": "...\n5 passed in 0.2s\n", "metadata": {"exit_code": 0}})
    view = render_tool(call, ToolOutcome("success", output))
    assert title(view) == "Shell pytest -q"
    assert view.summary == "5 passed in 0.2s"
    argv = render_tool(ToolCall("local_shell", {"command": ["ls", "-la", "my dir"]}), None)
    assert title(argv) == "Shell ls -la 'my dir'"


def test_a_multi_line_command_is_one_line_and_the_whole_command_unfolds():
    command = "cd /home/dev/src/invoicer && for f in *.py; do\n  wc -l $f\ndone"
    view = render_tool(ToolCall("exec_command", {"cmd": command}, CWD), None)
    assert title(view) == "Shell for f in *.py; do …"
    assert "wc -l $f" in markup.plain(view.details)


def test_codex_apply_patch_counts_lines_per_file():
    patch = (
        "*** Begin Patch\n*** Update File: src/invoicer/totals.py\n@@ def line_total\n"
        "-    return round(quantity * unit_price, 2)\n+    return amount.quantize(CENT)\n"
        "*** Add File: tests/test_more.py\n+def test_more():\n+    assert True\n*** End Patch\n"
    )
    view = render_tool(ToolCall("apply_patch", {"input": patch}, CWD), ToolOutcome("success", ""))
    assert title(view) == "Patch src/invoicer/totals.py and 1 more file"
    assert view.summary == "+3 −1"
    assert [(d.path, d.added, d.removed) for d in diffs(view)] == [
        ("src/invoicer/totals.py", 1, 1),
        ("tests/test_more.py", 2, 0),
    ]


def test_gemini_and_opencode_names_get_the_same_renderers():
    path = f"{CWD}/src/invoicer/totals.py"
    edit = render_tool(
        ToolCall("edit", {"filePath": path, "oldString": "a = 1\n", "newString": "a = 2\n"}, CWD),
        None,
    )
    assert title(edit) == "Edit src/invoicer/totals.py"
    assert diffs(edit)[0].unified == "-a = 1\n+a = 2"
    replace = render_tool(
        ToolCall("replace", {"file_path": path, "old_string": "x", "new_string": "y\nz"}, CWD),
        ToolOutcome("success", "Successfully modified file"),
    )
    assert replace.summary == "+2 −1"
    grep = render_tool(
        ToolCall("search_file_content", {"pattern": "CENT", "include": "*.py"}, CWD),
        ToolOutcome("success", "Found 2 matches for pattern"),
    )
    assert (title(grep), grep.summary) == ("Grep CENT (*.py)", "2 matches")
    todos = render_tool(
        ToolCall("write_todos", {"todos": [{"description": "Fix it", "status": "in_progress"}]}),
        None,
    )
    assert todos.plan == (("Fix it", "in_progress"),)
    plan = render_tool(
        ToolCall("update_plan", {"plan": [{"step": "Test", "status": "pending"}]}), None
    )
    assert plan.plan == (("Test", "pending"),)
    shell = render_tool(ToolCall("run_shell_command", {"command": "make"}, CWD), None)
    assert title(shell) == "Shell make"


def test_glob_webfetch_websearch_and_task():
    glob = render_tool(
        ToolCall("Glob", {"pattern": "**/*.py", "path": f"{CWD}/src"}, CWD),
        ToolOutcome("success", f"{CWD}/src/a.py\n{CWD}/src/b.py"),
    )
    assert (title(glob), glob.summary) == ("Glob **/*.py in src", "2 files")
    url = "https://docs.python.org/3/library/decimal.html#decimal.ROUND_HALF_UP"
    fetch = render_tool(ToolCall("WebFetch", {"url": url, "prompt": "rounding modes"}), None)
    assert fetch.title[-1] == Span(text="docs.python.org/3/library/decimal.html", url=url)
    search = render_tool(ToolCall("WebSearch", {"query": "python round half up"}), None)
    assert title(search) == "WebSearch “python round half up”"
    task = render_tool(
        ToolCall(
            "Task", {"description": "Find callers", "prompt": "…", "subagent_type": "Explore"}
        ),
        ToolOutcome("success", "## Callers of `line_total`\n- export.py"),
    )
    assert title(task) == "Task Find callers (Explore)"
    assert task.summary == "Callers of line_total"  # the report's markdown, without markers


def test_paths_outside_the_session_folder():
    other = render_tool(ToolCall("Read", {"file_path": "/home/dev/notes/todo.md"}, CWD), None)
    assert title(other) == "Read ~/notes/todo.md"
    mac = render_tool(ToolCall("Read", {"file_path": "/Users/ann/x.py"}), None)
    assert title(mac) == "Read ~/x.py"
    system = render_tool(ToolCall("Read", {"file_path": "/etc/hosts"}, CWD), None)
    assert title(system) == "Read /etc/hosts"


# -- the fallback ----------------------------------------------------------------------


def test_the_fallback_never_shows_a_nested_json_argument_or_result():
    call = ToolCall(
        "Deploy",
        {
            "config": {"targets": [{"name": "eu", "weight": 2}]},
            "steps": [{"run": "migrate"}],
            "env": "staging",
            "payload": '{"force": true}',
            "exit_code": 0,
        },
        CWD,
    )
    for outcome in (
        None,
        ToolOutcome("success", {"deployment": {"id": 7, "steps": [{"ok": True}]}}),
        ToolOutcome("success", '[{"id": 1}, {"id": 2}]'),
        ToolOutcome("failed", '{"error": {"code": 500}}', "http_error"),
    ):
        view = render_tool(call, outcome)
        text = shown(view)
        assert '{"' not in text
        assert "[{" not in text
        assert "exit_code" not in text
        assert title(view).startswith("Deploy env staging")
    assert render_tool(call, ToolOutcome("success", '[{"id": 1}, {"id": 2}]')).summary == "2 items"


def test_the_fallback_shows_the_telling_argument_and_a_result_field():
    call = ToolCall("NotebookEdit", {"notebook_path": "x", "path": f"{CWD}/nb.ipynb"}, CWD)
    view = render_tool(call, ToolOutcome("success", {"message": "Updated cell 3", "ok": True}))
    assert title(view) == "NotebookEdit nb.ipynb"
    assert view.summary == "Updated cell 3"


def test_odd_input_never_raises():
    for args in ({"command": 3}, {"todos": "not a list"}, {"edits": [None, 3]}, {"path": None}):
        for name in ("Bash", "TodoWrite", "MultiEdit", "Grep", "mcp__x", "mcp__", "?"):
            render_tool(ToolCall(name, args, "relative/cwd"), ToolOutcome("other", 12))
    view = render_tool(ToolCall(None, None, 5), ToolOutcome("failed", None))  # type: ignore[arg-type]
    assert title(view) == "None"


# -- any input -------------------------------------------------------------------------

#: text without `{` or `[`: any `{"` or `[{` in what is shown was made by the renderer
TEXT = st.text(st.characters(blacklist_characters="{[", blacklist_categories=("Cs",)), max_size=60)
JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=12,
)
NAMES = st.sampled_from(
    [
        "Bash",
        "shell",
        "local_shell",
        "Read",
        "Write",
        "Edit",
        "MultiEdit",
        "apply_patch",
        "Grep",
        "Glob",
        "WebFetch",
        "WebSearch",
        "TodoWrite",
        "update_plan",
        "Task",
        "mcp__github__create_pull_request",
    ]
) | TEXT.filter(bool)
ARG_KEYS = (
    st.sampled_from(
        [
            "command",
            "file_path",
            "path",
            "pattern",
            "content",
            "old_string",
            "new_string",
            "edits",
            "todos",
            "plan",
            "input",
            "url",
            "query",
            "description",
            "offset",
            "limit",
        ]
    )
    | TEXT
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=NAMES,
    args=st.dictionaries(ARG_KEYS, JSONISH, max_size=6),
    status=st.sampled_from(["success", "failed", "denied", "other", None]),
    output=JSONISH | st.lists(TEXT, max_size=400).map("\n".join),
    verbose=st.booleans(),
)
def test_any_call_renders_bounded_without_json(
    name: str, args: dict[str, Any], status: Any, output: Any, verbose: bool
):
    outcome = None if status is None else ToolOutcome(status, output, "exit 1")
    view = render_tool(ToolCall(name, args, "/home/dev/src/x"), outcome, verbose=verbose)
    line = markup.spans_text(view.title)
    text = line + "\n" + markup.plain(view.details)
    assert '{"' not in text
    assert "[{" not in text
    assert '{"' not in view.summary
    assert "[{" not in view.summary
    assert len(line.splitlines()) <= 1
    assert len(line) <= MAX_TITLE
    assert len(markup.plain(view.details)) <= MAX_DETAILS
    assert len(view.summary) <= 80
    assert "\n" not in view.summary


# -- plugins ---------------------------------------------------------------------------


class ShoutingBash:
    """A vendor's own rendering of Bash; other tools are left to the default."""

    @hookimpl
    def render_tool(
        self, call: ToolCall, outcome: ToolOutcome | None, verbosity: str
    ) -> ToolView | None:
        if call.name != "Bash":
            return None
        return ToolView(title=(Span(text=f"RAN {call.args.get('command')}"),), summary=verbosity)


def test_a_plugin_render_tool_wins_over_the_default():
    host = PluginHost()  # built as the bridge builds it: the defaults registered first
    call, outcome = demo("Bash")
    before = host.hook.render_tool(call=call, outcome=outcome, verbosity="normal")
    assert title(before).startswith("Bash git log")
    record = host.register(ShoutingBash(), "shouting")
    assert record.status == "loaded", record.error
    view = host.hook.render_tool(call=call, outcome=outcome, verbosity="verbose")
    assert view == ToolView(
        title=(Span(text="RAN git log --oneline -3 -- src/invoicer/totals.py"),), summary="verbose"
    )
    # a tool the plugin leaves alone still gets the default
    grep = host.hook.render_tool(call=demo("Grep")[0], outcome=demo("Grep")[1], verbosity="normal")
    assert grep.summary == "3 matches"


@pytest.mark.parametrize("verbosity", ["quiet", "normal", "verbose"])
def test_the_default_hook_is_verbose_only_at_verbose(verbosity: str):
    host = PluginHost()
    call, outcome = next(c for c in CALLS if c[0].args.get("command") == "python -m pytest -q")
    view = host.hook.render_tool(call=call, outcome=outcome, verbosity=verbosity)
    assert bool(view.details) == (verbosity == "verbose")


def test_a_plugin_view_is_held_to_the_same_bounds():
    flood = ToolView(
        title=(Span(text="line one\nline two " + "x" * 5000),),
        summary="a\nb " * 100,
        details=(Details(summary="log", blocks=(Code(code="\n".join(map(str, range(9999)))),)),),
        plan=tuple((f"step {n}", "pending") for n in range(1000)),
    )
    view = bound_view(flood)
    assert len(title(view).splitlines()) == 1
    assert len(title(view)) <= MAX_TITLE
    assert len(markup.plain(view.details)) <= MAX_DETAILS
    assert "9998" in markup.plain(view.details)  # the end is kept
    assert len(view.summary) <= 80
    assert view.plan is not None
    assert len(view.plan) == 100


def test_the_documented_plugin_example_works():
    page = (ROOT / "docs" / "rendering.md").read_text()
    section = page.split("### A plugin's tool renderer", 1)[1]
    source = re.search(r"```python\n(.*?)```", section, flags=re.S)
    assert source is not None
    namespace: dict[str, Any] = {}
    exec(compile(source.group(1), "rendering.md", "exec"), namespace)
    host = PluginHost()
    plugin = type("DeployPlugin", (), {"render_tool": staticmethod(namespace["render_tool"])})
    assert host.register(plugin(), "deploy").status == "loaded"
    call = ToolCall("acme_deploy", {"target": "eu-1"})
    failed = host.hook.render_tool(
        call=call, outcome=ToolOutcome("failed", "boom", "exit 2"), verbosity="normal"
    )
    assert (title(failed), failed.summary) == ("Deploy eu-1", "exit 2")
    assert "boom" in markup.plain(failed.details)
    other = host.hook.render_tool(call=demo("Grep")[0], outcome=None, verbosity="normal")
    assert title(other).startswith("Grep")


def test_a_patch_of_many_large_files_keeps_a_diff_per_file_within_the_bounds():
    sections = "".join(
        f"*** Update File: src/m{n}.py\n" + "".join(f"+line {i} of m{n}\n" for i in range(300))
        for n in range(12)
    )
    call = ToolCall("apply_patch", {"input": f"*** Begin Patch\n{sections}*** End Patch"}, CWD)
    view = render_tool(call, ToolOutcome("success", "Done"))
    assert view.summary == "+3600 −0"
    assert title(view) == "Patch src/m0.py and 11 more files"
    assert [d.path for d in diffs(view)] == [f"src/m{n}.py" for n in range(10)]
    assert all(d.added == 300 for d in diffs(view))
    text = markup.plain(view.details)
    assert len(text) <= MAX_DETAILS
    assert "… 2 more files" in text
