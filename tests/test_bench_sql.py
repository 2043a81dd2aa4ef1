"""The core benchmark's own instruments: the SQL it counts an event and the durable floor it
compares the core with. A wrong count or a floor that skips work would make bench/RESULTS.md
say something false about the core."""

from __future__ import annotations

import importlib.util
import sqlite3
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parent.parent / "bench"


def _bench_core() -> ModuleType:
    """bench/core.py, loaded as the benchmarks load it (its folder on the path)."""
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location("bench_core_sql", BENCH / "core.py")
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCH))


def test_the_sql_count_counts_each_statement_and_each_commit() -> None:
    core = _bench_core()
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.execute("CREATE TABLE t (a INTEGER)")
    count = core.SqlCount()
    conn.set_trace_callback(count)

    conn.execute("BEGIN IMMEDIATE")  # one transaction, a savepoint inside: one commit
    conn.execute("SAVEPOINT sp1")
    conn.executemany("INSERT INTO t VALUES (?)", [(1,), (2,), (3,)])
    conn.execute("RELEASE sp1")
    conn.execute("COMMIT")
    assert (count.statements, count.commits) == (7, 1)

    conn.execute("SAVEPOINT outer")  # a savepoint outside a transaction is one
    conn.execute("SAVEPOINT inner")
    conn.execute("INSERT INTO t VALUES (4)")
    conn.execute("RELEASE inner")
    conn.execute("RELEASE SAVEPOINT outer")
    assert (count.statements, count.commits) == (12, 2)

    conn.executemany("DELETE FROM t WHERE a = ?", [(1,), (2,)])  # each its own transaction
    conn.execute("SELECT count(*) FROM t").fetchone()  # a read commits nothing
    assert (count.statements, count.commits) == (15, 4)

    conn.execute("BEGIN")  # undone: no commit
    conn.execute("SAVEPOINT sp1")
    conn.execute("INSERT INTO t VALUES (5)")
    conn.execute("ROLLBACK TO sp1")
    conn.execute("RELEASE sp1")  # still inside BEGIN
    conn.execute("ROLLBACK")
    assert (count.statements, count.commits) == (21, 4)
    conn.set_trace_callback(None)
    conn.close()


def test_a_core_run_reports_its_statements_and_commits_an_event() -> None:
    core = _bench_core()
    counts = core.sql_counts(core.corpus("mix", 260))
    # every event writes at least its delivery record; a burst shares its commits
    assert counts["statements"] >= 1.0, counts
    assert 0 < counts["commits"] < 1.0, counts


def test_the_floor_makes_each_channels_calls_and_leaves_no_outbox_row() -> None:
    core = _bench_core()
    lines = core.corpus("mix", 2 * core.BATCH + 60)
    # the floor asserts it made exactly these calls in each channel and deleted every row
    assert core.floor_rate(lines, [700, 650]) > 0
    assert core.floor_rate(lines, 1301) > 0  # a total: split over the two channels


def test_the_stage_table_accounts_for_every_statement_and_puts_the_core_back() -> None:
    core = _bench_core()
    core.PROFILE_EVENTS = 260
    originals = {(o, a): o.__dict__.get(a) for _, methods in core.STAGES for o, a in methods}
    costs = core.stage_costs("mix")
    rows = {stage: (statements, commits) for stage, _, statements, commits in costs["rows"]}
    assert abs(sum(s for s, _ in rows.values()) - costs["statements"]) < 1e-9
    assert abs(sum(c for _, c in rows.values()) - costs["commits"]) < 1e-9
    assert rows["dedupe: the delivery record (seen, position)"][0] >= 1.0  # the `seen` row
    # the timing wrappers are gone: the classes hold their own methods again
    assert {(o, a): o.__dict__.get(a) for o, a in originals} == originals


def test_the_render_count_matches_each_message_sent_to_its_rendering() -> None:
    core = _bench_core()
    from aep_bridge.aep.redaction import Redactor
    from aep_bridge.render import Renderer

    started, _, requested, _, completed = list(core.session_events(0))[:5]
    assert (requested.type, completed.type) == ("tool.requested", "tool.completed")
    originals = {a: Renderer.__dict__.get(a) for a in ("render", "_card_or_none", "thread_name")}
    renderer = Renderer(Redactor())
    count = core.RenderCount()
    look = {"ceiling": "redacted", "verbosity": "normal"}
    with count.counting():
        renderer.render(started, **look)
        line = renderer.render(requested, **look).messages
        edit = renderer.render(completed, **look).messages
        again = renderer.render(completed, **look).messages  # its memo: no work
    # the tool's line, then its edit (same key): the line is replaced before its call
    assert [m.key for m in line] == [m.key for m in edit]
    assert again == edit
    count.sent(edit[0])
    count.sent(edit[0])  # the second channel: the same message, counted once
    assert (count.events, count.memo, count.names) == (3, 1, 1)  # session.started names it
    assert count.messages == 3
    assert count.unsent == 2  # the header, and the line replaced
    assert count.unsent_by_type() == {"session.started": 1, "tool.requested": 1}
    total, wasted = count.wasted()
    assert 0 < wasted < total
    # the wrappers are gone: the renderer's own methods again
    assert {a: Renderer.__dict__.get(a) for a in originals} == originals


def test_under_a_limit_the_outbox_replaces_what_was_rendered() -> None:
    core = _bench_core()
    lines = core.corpus("mix", 500)
    free = core.render_counts(lines)
    limited = core.limited_counts(lines, core.LIMITED_RATE)
    for counted in (free, limited):
        assert counted["renders"] >= 1.0, counted  # every event of the mix is rendered
        assert 0 < counted["renders_per_call"] < counted["renders"], counted
    # one call a second in a chat: a tool's line waits for its slot, and its edit replaces it
    assert limited["unsent"] > free["unsent"], (free, limited)
    assert limited["calls"] < free["calls"], (free, limited)
