"""The record of open requests a daemon leaves for the next one (ledger.py).

Each case starts a real `AgentDaemon` on a directory as a killed daemon left it; its link
is never started, so what it queues is exactly what the bridge would receive.
"""

from __future__ import annotations

import json
from pathlib import Path

from aep_bridge.aep.envelope import Event
from aep_bridge.aep.validation import parse_event
from aep_bridge.agents.daemon import AgentDaemon
from aep_bridge.agents.ledger import COMPACT_AFTER, LEDGER_FILE, LIMIT, Ledger, Left

URL = "ws://127.0.0.1:9/socket"


def _start(directory: Path) -> tuple[AgentDaemon, list[Event]]:
    daemon = AgentDaemon(directory, URL, None)
    return daemon, [parse_event(raw) for raw in daemon.link._outbox]


def _journal(directory: Path, *records: object) -> None:
    (directory / LEDGER_FILE).write_text("".join(json.dumps(r) + "\n" for r in records))


def test_a_new_daemon_closes_what_the_last_one_left_open_once(tmp_path: Path):
    _journal(
        tmp_path,
        {"open": ["01JREQUESTA", "claude-code", "s1"]},
        {"open": ["01JREQUESTC", "claude-code", "s1"]},
        {"open": ["01JREQUESTB", "codex", "s2"]},
        {"closed": "01JREQUESTC"},  # answered before the kill
    )
    daemon, sent = _start(tmp_path)
    assert daemon.closed_at_start == 2
    assert [(e.type, e.subject, e.agent, e.session, e.data) for e in sent] == [
        ("attention.resolved", "01JREQUESTA", "claude-code", "s1", {"resolution": "dismissed"}),
        ("attention.resolved", "01JREQUESTB", "codex", "s2", {"resolution": "dismissed"}),
    ]
    assert (tmp_path / LEDGER_FILE).read_text() == ""  # nothing of the last daemon's is open
    _, again = _start(tmp_path)  # the one after finds nothing to close
    assert again == []


def test_a_record_it_cannot_read_starts_the_daemon_all_the_same(tmp_path: Path):
    for junk in (
        b"[" * 200_000,
        b"\xff\xfe not json\n",
        b'{"open": "x"}\n[1]\n{"closed": 7}\n',
        b'{"open": ["", "codex", "s"]}\n',
        b'{"open": ["r", "../../etc", "s"]}\n',  # not an agent it serves: no path made of it
        b'{"open": ["r", "codex", "' + b"s" * 2000 + b'"]}\n',
    ):
        (tmp_path / LEDGER_FILE).write_bytes(junk)
        daemon, sent = _start(tmp_path)
        assert (daemon.closed_at_start, sent) == (0, []), junk
    assert not (tmp_path / "logs" / "etc").exists()


def test_a_line_cut_short_loses_only_itself(tmp_path: Path):
    """A kill (or a full disk) in the middle of an append: the lines before it stand."""
    good = json.dumps({"open": ["01JREQUESTA", "codex", "s1"]}).encode() + b"\n"
    (tmp_path / LEDGER_FILE).write_bytes(good + b'{"open": ["01JREQ')
    _, sent = _start(tmp_path)
    assert [e.subject for e in sent] == ["01JREQUESTA"]


def test_the_record_is_bounded(tmp_path: Path):
    _journal(tmp_path, *({"open": [f"req-{n}", "codex", "s"]} for n in range(LIMIT + 50)))
    daemon, sent = _start(tmp_path)
    assert daemon.closed_at_start == LIMIT
    assert sent[0].subject == "req-50"  # the newest are kept


def test_the_journal_is_compacted_as_it_grows(tmp_path: Path):
    """Two in three requests are closed: the journal stays short, and reads back as what is
    open (the newest LIMIT at most, as the daemon held them)."""
    ledger = Ledger(tmp_path)
    ledger.save()
    expected: dict[str, None] = {}
    for n in range(COMPACT_AFTER * 2):
        ledger.add(Left(f"req-{n}", "codex", "s"))
        expected[f"req-{n}"] = None
        while len(expected) > LIMIT:
            del expected[next(iter(expected))]
        if n % 3:
            ledger.forget(f"req-{n}")
            expected.pop(f"req-{n}", None)
    lines = (tmp_path / LEDGER_FILE).read_text().splitlines()
    assert len(lines) <= COMPACT_AFTER + LIMIT
    assert [o.id for o in Ledger(tmp_path).left_open()] == list(expected)
    assert len(ledger) == len(expected)
