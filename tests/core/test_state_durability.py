"""A channel's `ChannelState` write is durable when the call returns: a process killed with
SIGKILL right after it (with the bridge's group commit open, as it is while events flow)
still has the value on the next start."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from aep_bridge.store import Store, StoreState

_WRITER = textwrap.dedent(
    """
    import asyncio, sys, time
    from pathlib import Path
    from aep_bridge.store import Store, StoreState

    async def main(state_dir, how):
        store = Store.open(Path(state_dir))
        store.group_until_idle()  # a burst of events is being handled: a group is open
        if how == "contract":
            await StoreState(store, "channel:tg").set("card:c1", "message 42")
        else:  # a bare write into the open group, never committed
            store.kv_set("channel:tg", "card:c1", "message 42")
        print("written", flush=True)
        time.sleep(60)  # the loop never runs again: only the write itself can have committed

    asyncio.run(main(sys.argv[1], sys.argv[2]))
    """
)


def _write_then_kill(state_dir: Path, how: str) -> str | None:
    writer = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(state_dir), how],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert writer.stdout is not None
        assert writer.stdout.readline().strip() == "written"
        os.kill(writer.pid, signal.SIGKILL)
        writer.wait(timeout=10)
    finally:
        if writer.poll() is None:
            writer.kill()
    store = Store.open(state_dir)
    try:
        return store.kv_get("channel:tg", "card:c1")
    finally:
        store.close()


def test_a_state_write_survives_a_kill_right_after_it_returns(tmp_path):
    assert _write_then_kill(tmp_path / "state", "contract") == "message 42"


def test_the_kill_test_can_fail_a_write_left_in_an_open_group(tmp_path):
    """The same kill loses a write that was not committed: the test above can fail."""
    assert _write_then_kill(tmp_path / "state", "bare") is None


@pytest.mark.parametrize("op", ["set", "delete"])
async def test_state_writes_commit_an_open_group(tmp_path, op):
    store = Store.open(tmp_path)
    try:
        state = StoreState(store, "channel:x")
        await state.set("k", "v")
        store.group_until_idle()
        await (state.set("k", "w") if op == "set" else state.delete("k"))
        assert store.group is None, "the contract's write committed the group it joined"
    finally:
        store.close()
