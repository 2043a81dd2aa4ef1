"""The record of open requests a daemon leaves for the next one (ledger.py).

Each case starts a real `AgentDaemon` on a directory as a killed daemon left it; its link
is never started, so what it queues is exactly what the bridge would receive.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path

import pytest

from aep_bridge.aep.envelope import Event
from aep_bridge.aep.validation import parse_event
from aep_bridge.agents.daemon import AgentDaemon
from aep_bridge.agents.ledger import COMPACT_AFTER, LEDGER_FILE, LIMIT, Ledger, Left
from tests.agents.live import live, payload

URL = "ws://127.0.0.1:9/socket"


def _start(directory: Path) -> tuple[AgentDaemon, list[Event]]:
    daemon = AgentDaemon(directory, URL, None)
    return daemon, [parse_event(raw) for raw in daemon.link.queued()]


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


# -- what is in the daemon's directory is never followed elsewhere (issue 30) -------------------


def _victims(directory: Path) -> dict[str, Path]:
    """Files outside the directory, and a symlink to each planted where the daemon writes a
    temporary (the names it used: `open.tmp`, `epoch.tmp`)."""
    victims = {}
    for name in ("open.tmp", "epoch.tmp"):
        victim = directory.parent / f"victim-of-{name}"
        victim.write_text("precious\n")
        (directory / name).symlink_to(victim)
        victims[name] = victim
    return victims


def test_a_symlink_planted_as_a_temporary_is_never_written_through(tmp_path: Path):
    """`Ledger.save` truncated and then appended to the file a symlink `open.tmp` pointed
    to; the epoch's temporary was written the same way."""
    directory = tmp_path / "agentd"
    directory.mkdir()
    _journal(directory, {"open": ["01JREQUESTA", "claude-code", "s1"]})
    victims = _victims(directory)
    daemon, sent = _start(directory)
    assert [(e.type, e.subject) for e in sent] == [("attention.resolved", "01JREQUESTA")]
    daemon.ledger.add(Left("01JREQUESTB", "codex", "s2"))
    for victim in victims.values():
        assert victim.read_text() == "precious\n"
    journal = directory / LEDGER_FILE
    assert not journal.is_symlink()
    assert journal.read_text() == '{"open":["01JREQUESTB","codex","s2"]}\n'
    assert (directory / "epoch").read_text() == "0\n"
    assert not (directory / "epoch").is_symlink()


def test_a_journal_that_is_a_symlink_is_not_followed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    directory = tmp_path / "agentd"
    directory.mkdir()
    victim = tmp_path / "victim"
    victim.write_text(json.dumps({"open": ["01JSOMEONEELSE", "codex", "s"]}) + "\n")
    (directory / LEDGER_FILE).symlink_to(victim)
    daemon, sent = _start(directory)
    assert sent == []  # what it points to is not this daemon's record
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "symlink" in warnings[0]
    daemon.ledger.add(Left("01JREQUESTB", "codex", "s2"))
    assert victim.read_text() == json.dumps({"open": ["01JSOMEONEELSE", "codex", "s"]}) + "\n"
    assert not (directory / LEDGER_FILE).is_symlink()  # a journal of its own from now on
    [left] = Ledger(directory).left_open()
    assert left.id == "01JREQUESTB"  # so the next daemon closes what this one leaves open


@pytest.mark.parametrize("kind", ["fifo", "folder"])
def test_a_journal_that_is_not_a_regular_file_never_holds_the_daemon_up(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, kind: str
):
    """A FIFO in its place: reading it would wait for a writer for ever. A folder: it is
    refused in the same words (and cannot be replaced: the daemon says once that it cannot
    record its open requests, and goes on)."""
    if kind == "fifo":
        os.mkfifo(tmp_path / LEDGER_FILE)
    else:
        (tmp_path / LEDGER_FILE).mkdir()
    started: list[AgentDaemon] = []
    thread = threading.Thread(target=lambda: started.append(_start(tmp_path)[0]), daemon=True)
    thread.start()
    thread.join(10)
    assert started, "the daemon is stuck reading its journal"
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "not a regular file" in warnings[0]
    if kind == "fifo":
        assert len(warnings) == 1
        assert (tmp_path / LEDGER_FILE).is_file()  # a journal of its own from now on
    else:
        assert len(warnings) == 2
        assert "cannot record the open requests" in warnings[1]


async def test_a_killed_daemons_card_closes_though_its_temporaries_were_planted(tmp_path: Path):
    """The reviewer's case through real processes: the daemon is SIGKILLed with a prompt
    held, symlinks are planted where it writes its temporaries, and the next daemon starts:
    it closes the card, and the files the symlinks point to are as they were."""
    async with live(tmp_path) as running:
        hook = running.hook("claude-code", payload("claude-code", "PermissionRequest"))
        card = await running.card()
        await running.kill_daemon()
        await hook
        victims = _victims(running.directory)
        await running.start_daemon()
        assert "Dismissed" in await running.closed(card)
        for victim in victims.values():
            assert victim.read_text() == "precious\n"


@pytest.mark.parametrize("name", ["epoch", "instance"])
def test_a_folder_where_the_daemon_keeps_its_epoch_or_name_is_one_line(tmp_path: Path, name: str):
    """`aep-bridge agentd` as the hooks start it, on a directory where the file that counts
    its starts (`epoch`) or keeps its name (`instance`) is a folder: one line naming it and
    the way on, status 2, no traceback, and no pid file left to say it runs."""
    import subprocess
    import sys

    agentd = [sys.executable, "-m", "aep_bridge", "agentd"]
    directory = tmp_path / "agentd"
    directory.mkdir(mode=0o700)
    (directory / name).mkdir()
    ran = subprocess.run(
        [*agentd, "--dir", str(directory), "--url", URL, "--token", "t"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 2, ran.stderr
    assert ran.stderr.splitlines() == [
        f"aep-bridge agentd: cannot use {directory / name}: Is a directory (move it aside, "
        "or run with another --dir)"
    ]
    assert not (directory / "agentd.pid").exists()
