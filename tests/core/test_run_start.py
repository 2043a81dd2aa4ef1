"""`aep-bridge run` at start: one bridge per state directory, and the failures a person
meets there (a second bridge, a damaged store, a state directory that cannot be written,
Ctrl-C while it loads, a relay URL with a credential in it) each end it at once with one
line naming the fix and a documented exit status (docs/cli.md), never a traceback."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import websockets

from aep_bridge.process.server import EXIT_BUSY, EXIT_STATE_DIR, EXIT_STORE
from tests.bridge_process import ROOT, BridgeProcess, free_port, write_config

ROOT_DEFEATS_CHMOD = pytest.mark.skipif(
    os.geteuid() == 0, reason="root writes to a read-only directory anyway (chmod does not stop it)"
)


def finished(bridge: BridgeProcess, timeout: float = 20) -> tuple[int, list[str]]:
    """Wait for the process to end; its status and the lines it wrote."""
    assert bridge.proc is not None
    try:
        status = bridge.proc.wait(timeout)
    except subprocess.TimeoutExpired:
        bridge.kill()
        raise AssertionError(f"the bridge did not stop:\n{bridge.tail()}") from None
    return status, bridge.log.read_text(errors="replace").splitlines()


def one_line_failure(lines: list[str], *words: str) -> None:
    assert not any("Traceback" in line for line in lines), "\n".join(lines)
    errors = [line for line in lines if line.startswith("aep-bridge: error: ")]
    assert len(errors) == 1, "\n".join(lines)
    for word in words:
        assert word in errors[0], errors[0]


def run_once(folder: Path, config: Path, name: str = "run.log") -> tuple[int, list[str]]:
    bridge = BridgeProcess(config, folder / name)
    bridge.spawn()
    return finished(bridge)


async def test_a_second_bridge_on_the_same_state_dir_stops_and_the_first_keeps_serving(
    tmp_path: Path,
):
    port = free_port()
    first = BridgeProcess(write_config(tmp_path, port), tmp_path / "first.log")
    base = f"http://127.0.0.1:{port}"
    await first.start(base)
    try:
        await first.until("listen.json", (tmp_path / "state" / "listen.json").exists, 10)
        # another port, the same state directory
        second = BridgeProcess(
            write_config(tmp_path, free_port(), name="second.json"), tmp_path / "second.log"
        )
        second.spawn()
        status, lines = finished(second)
        assert status == EXIT_BUSY, "\n".join(lines)
        assert lines == [
            f"aep-bridge: error: another aep-bridge (pid {first.proc.pid}, listening on "
            f"127.0.0.1:{port}) is using {tmp_path / 'state'}"
        ]
        # the first still serves, and a reader of the state directory still works
        import httpx

        async with httpx.AsyncClient() as client:
            assert (await client.get(f"{base}/.well-known/aep")).status_code == 200
        assert first.token()
        assert first.proc is not None
        assert first.proc.poll() is None
    finally:
        assert await first.aclose() == 0
    # once the first has stopped, the state directory is free again
    port = free_port()
    again = BridgeProcess(write_config(tmp_path, port), tmp_path / "again.log")
    await again.start(f"http://127.0.0.1:{port}")
    assert await again.aclose() == 0


def test_the_busy_line_copes_without_a_pid_or_an_address(tmp_path: Path):
    """A holder that wrote neither its pid nor listen.json (another tool, a bridge still
    starting): the line says what it does not know."""
    from aep_bridge.process.listening import LOCK_FILE

    state = tmp_path / "state"
    state.mkdir()
    (state / LOCK_FILE).write_text("")
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDWR); "
            "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)",
            str(state / LOCK_FILE),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        status, lines = run_once(tmp_path, write_config(tmp_path, free_port()))
    finally:
        holder.kill()
        holder.wait()
    assert status == EXIT_BUSY
    assert lines == [
        f"aep-bridge: error: another aep-bridge (pid unknown, not listening yet) is using {state}"
    ]


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
async def test_a_damaged_store_is_one_line_naming_the_fix(tmp_path: Path, damage: str):
    config = write_config(tmp_path, free_port())
    db = tmp_path / "state" / "state.db"
    if damage == "garbage":
        db.parent.mkdir()
        db.write_bytes(b"this is not a database, " * 400)
    else:  # a real store, cut short
        port = json.loads(config.read_text())["listen"]["port"]
        bridge = BridgeProcess(config, tmp_path / "first.log")
        await bridge.start(f"http://127.0.0.1:{port}")
        assert await bridge.aclose() == 0
        assert db.stat().st_size > 8192
        os.truncate(db, 4096)
    status, lines = run_once(tmp_path, config)
    assert status == EXIT_STORE, "\n".join(lines)
    one_line_failure(lines, f"the store {db} is damaged", "move it aside")


CONSOLE = {"console": {"approvers": ["local"], "read_input": False}}


@pytest.fixture(scope="module")
def made_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store a real bridge (with the console channel) made and left, to copy and damage."""
    folder = tmp_path_factory.mktemp("made")
    port = free_port()
    bridge = BridgeProcess(write_config(folder, port, CONSOLE), folder / "made.log")
    asyncio.run(bridge.start(f"http://127.0.0.1:{port}"))
    assert bridge.stop() == 0, bridge.tail()
    return folder / "state" / "state.db"


def damage(db: Path, part: str) -> None:
    """Overwrite `part` of the store with random bytes: the root page of a table or an
    index (named as in sqlite_master), or pages 2 to 4 (the outside review's case)."""
    page_size = 4096
    if part == "pages 2-4":
        start, count = 2, 3
    else:
        conn = sqlite3.connect(db)
        [(root,)] = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (part,))
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        conn.close()
        start, count = root - 1, 1
    with db.open("r+b") as file:
        file.seek(start * page_size)
        file.write(os.urandom(count * page_size))


#: what the bridge reads of its store before it serves, and where: the replay buffers (the
#: hub's restore), the sessions and their threads (the core), the questions (the answers to
#: re-send) and the outbox (each channel's queued calls, as its outbox starts)
@pytest.mark.parametrize(
    "part", ["pages 2-4", "relay_buffer", "sessions", "threads", "requests", "outbox_by_channel"]
)
def test_damage_found_while_the_store_is_restored_is_one_line_and_status_6(
    tmp_path: Path, made_store: Path, part: str
):
    """A store whose header is sound but whose pages are not opens, then fails the first
    time a damaged page is read: it is the same damaged store (status 6, which the systemd
    unit does not restart every 5 s for ever), said in one line naming the file and the fix,
    never a traceback (status 1)."""
    config = write_config(tmp_path, free_port(), CONSOLE)
    db = tmp_path / "state" / "state.db"
    db.parent.mkdir()
    shutil.copy(made_store, db)
    damage(db, part)
    status, lines = run_once(tmp_path, config)
    assert status == EXIT_STORE, "\n".join(lines)
    one_line_failure(
        lines, f"the store {db} is damaged", "restore it from a backup", "move it aside"
    )


def emit_demo(config: Path) -> subprocess.CompletedProcess[str]:
    """`aep-bridge emit --demo` to the bridge of `config`, as a person would send one."""
    return subprocess.run(
        [sys.executable, "-m", "aep_bridge", "emit", "--demo", "--config", str(config)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("part", ["seen", "positions"])
async def test_damage_found_while_the_bridge_runs_ends_it_with_one_line_and_status_6(
    tmp_path: Path, made_store: Path, part: str
):
    """The store damaged where the bridge reads only once events come (the dedupe window,
    the resume positions), as a disk fault leaves it: the bridge says so in one line and
    stops with status 6, which the systemd unit does not restart, rather than living on with
    a traceback for every event it then refuses (every agent's events lost while `status`
    looks alive)."""
    port = free_port()
    config = write_config(tmp_path, port, CONSOLE)
    db = tmp_path / "state" / "state.db"
    db.parent.mkdir()
    shutil.copy(made_store, db)
    damage(db, part)
    bridge = BridgeProcess(config, tmp_path / "run.log")
    try:
        await bridge.start(f"http://127.0.0.1:{port}")  # nothing read the damage yet
        sent = await asyncio.to_thread(emit_demo, config)
        status, lines = await asyncio.to_thread(finished, bridge)
    finally:
        if bridge.proc is not None and bridge.proc.poll() is None:
            bridge.kill()
    assert status == EXIT_STORE, "\n".join(lines)
    one_line_failure(
        lines, f"the store {db} is damaged", "restore it from a backup", "move it aside"
    )
    # the emitter's batches went in before the consumer met the damage, or met a bridge
    # already gone: said in one line either way
    assert "Traceback" not in sent.stderr, sent.stderr


def test_a_state_db_that_is_a_directory_is_said_so(tmp_path: Path):
    """Not "cannot use the state directory" (it can be used): the store's file is a
    directory, and the line says so and what to do."""
    config = write_config(tmp_path, free_port())
    db = tmp_path / "state" / "state.db"
    db.mkdir(parents=True)
    status, lines = run_once(tmp_path, config)
    assert status == EXIT_STORE, "\n".join(lines)
    one_line_failure(lines, f"the store {db} is a directory, not a database file", "move it aside")
    assert not any("cannot use the state directory" in line for line in lines), lines


async def test_a_store_from_a_newer_version_is_one_line_and_status_6(tmp_path: Path):
    """Going back to an older aep-bridge after an upgrade: it refuses the migrated store with
    the store's status (which the systemd unit does not restart), naming both versions."""
    config = write_config(tmp_path, free_port())
    port = json.loads(config.read_text())["listen"]["port"]
    bridge = BridgeProcess(config, tmp_path / "first.log")
    await bridge.start(f"http://127.0.0.1:{port}")
    assert await bridge.aclose() == 0
    db = tmp_path / "state" / "state.db"
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    status, lines = run_once(tmp_path, config)
    assert status == EXIT_STORE, "\n".join(lines)
    one_line_failure(lines, "the store cannot be used", "schema version 99", "newer aep-bridge")
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 99  # left as it was
    conn.close()


def test_a_state_dir_that_cannot_be_created_is_one_line(tmp_path: Path):
    """A path through a regular file: not even root can make it a directory."""
    (tmp_path / "a-file").write_text("")
    config = tmp_path / "bridge.json"
    state = tmp_path / "a-file" / "state"
    config.write_text(
        json.dumps({"state_dir": str(state), "listen": {"port": free_port()}, "channels": {}})
    )
    status, lines = run_once(tmp_path, config)
    assert status == EXIT_STATE_DIR, "\n".join(lines)
    one_line_failure(lines, f"cannot use the state directory {state}", "set state_dir")


@ROOT_DEFEATS_CHMOD
@pytest.mark.parametrize("first_run", [True, False])
async def test_a_read_only_state_dir_is_one_line(tmp_path: Path, first_run: bool):
    config = write_config(tmp_path, free_port())
    state = tmp_path / "state"
    if first_run:
        state.mkdir()
    else:  # a state directory a bridge used, made read-only since
        port = json.loads(config.read_text())["listen"]["port"]
        bridge = BridgeProcess(config, tmp_path / "first.log")
        await bridge.start(f"http://127.0.0.1:{port}")
        assert await bridge.aclose() == 0
    state.chmod(0o500)
    try:
        status, lines = run_once(tmp_path, config)
    finally:
        state.chmod(0o700)
    assert status == EXIT_STATE_DIR, "\n".join(lines)
    one_line_failure(lines, f"cannot use the state directory {state}")


#: the only code of ours a Ctrl-C can interrupt before `_startup.guard` takes SIGINT: the
#: imports at the top of the package and of `_startup` itself
BEFORE_THE_GUARD = ("/aep_bridge/__init__.py", "/aep_bridge/_startup.py")


def in_pythons_own_start(status: int, lines: list[str]) -> bool:
    """Whether the Ctrl-C landed before `_startup.guard` ran (before Python took SIGINT, in
    its site import, in runpy finding the module, or in the imports the guard needs): that
    much is Python's (aep_bridge/_startup.py), and a busy machine (the suite in parallel
    workers) can take longer than the delay to get past it."""
    if status == -signal.SIGINT and not lines:
        return True
    if "KeyboardInterrupt" not in "\n".join(lines):
        return False
    ours = [line for line in lines if line.lstrip().startswith("File ") and "/aep_bridge/" in line]
    return all(
        line.endswith("in <module>") and any(name in line for name in BEFORE_THE_GUARD)
        for line in ours
    )


@pytest.mark.parametrize("delay", [0.15, 0.4, 0.7])
def test_ctrl_c_while_starting_is_no_traceback(tmp_path: Path, delay: float):
    for attempt in range(5):  # each time Python itself was still starting: press again
        bridge = BridgeProcess(write_config(tmp_path, free_port()), tmp_path / f"run{attempt}.log")
        proc = bridge.spawn()
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        status, lines = finished(bridge)
        if not in_pythons_own_start(status, lines):
            break
    assert "Traceback" not in "\n".join(lines), "\n".join(lines)
    assert "KeyboardInterrupt" not in "\n".join(lines), "\n".join(lines)
    if status == 130:  # while it loaded
        assert lines[-1] == "aep-bridge: interrupted while starting (Ctrl-C)", lines
    else:  # it had got as far as stopping in its own order
        assert (status, lines[-1]) == (0, "aep-bridge: stopped"), lines


SECRET = "hunter2-secret"


@pytest.mark.parametrize(
    ("url", "words"),
    [
        (f"wss://me:{SECRET}@relay.example/socket", "user:pass@"),
        (f"wss://relay.example/socket?session=1&token={SECRET}", "?token="),
    ],
)
def test_a_relay_url_with_a_credential_is_refused(tmp_path: Path, url: str, words: str):
    config = tmp_path / "bridge.json"
    config.write_text(
        json.dumps(
            {
                "state_dir": str(tmp_path / "state"),
                "listen": {"port": free_port()},
                "channels": {},
                "intake": {"relays": [{"url": url}]},
            }
        )
    )
    env = BridgeProcess(config, tmp_path / "x.log").env()
    for command, expected in (("check", 1), ("run", 2)):
        done = subprocess.run(
            [sys.executable, "-m", "aep_bridge", command, "--config", str(config)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
        )
        out = done.stdout + done.stderr
        assert done.returncode == expected, out
        assert "intake.relays[0].url: carries" in out, out
        assert words in out, out
        assert "`token` field instead" in out, out
        assert SECRET not in out, out
        assert "Traceback" not in out, out
    assert not (tmp_path / "state").exists()  # run started nothing


async def test_a_refused_websocket_is_not_an_error_in_the_log(tmp_path: Path):
    port = free_port()
    bridge = BridgeProcess(write_config(tmp_path, port), tmp_path / "run.log")
    await bridge.start(f"http://127.0.0.1:{port}")
    try:
        for headers in ({"Authorization": "Bearer wrong"}, {"Origin": "https://evil.example"}):
            with pytest.raises(websockets.InvalidStatus):
                async with websockets.connect(
                    f"ws://127.0.0.1:{port}/socket", additional_headers=headers
                ):
                    pass
        await asyncio.sleep(0.3)
    finally:
        assert await bridge.aclose() == 0
    log = bridge.log.read_text()
    assert "without completing handshake" not in log, log
    assert "error:" not in log, log


def test_an_open_store_can_still_be_read_while_a_bridge_holds_the_lock(tmp_path: Path):
    """The lock is `run`'s alone: opening the store (a test, a tool) does not take it."""
    from aep_bridge.process.listening import lock_state_dir
    from aep_bridge.store import Store

    state = tmp_path / "state"
    held = lock_state_dir(state)
    try:
        with Store.open(state) as store:
            assert store.schema_version > 0
        conn = sqlite3.connect(f"file:{state / 'state.db'}?mode=ro", uri=True)
        conn.close()
    finally:
        os.close(held)


def test_another_program_run_with_dash_m_keeps_its_own_ctrl_c(tmp_path):
    """A program of its own (`python -m tool`) that imports aep_bridge while it starts keeps
    Python's KeyboardInterrupt: only the `aep-bridge` command itself ends in one line."""
    package = tmp_path / "tool"
    package.mkdir()
    (package / "__init__.py").write_text(
        "import signal\nimport aep_bridge\n"
        "print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)\n"
    )
    (package / "__main__.py").write_text("")
    done = subprocess.run(
        [sys.executable, "-m", "tool"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.stdout.strip() == "True", done.stdout + done.stderr
