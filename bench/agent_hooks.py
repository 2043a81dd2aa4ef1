"""The agent side: a hook process's cost, and what the held permission loop adds to an answer.

The pieces are the agent tests' (tests/agents/live.py): a real bridge in this process (the
core with a file-backed store and a memory channel, `phone`, behind the real AEP endpoint on
a loopback port, `tests.intake.conftest.serve`), and `aep-bridge agentd --dir --url --token`
as its own process, connected to it. Every hook is the venv's `aep-bridge` console script
run as the agent runs it: `aep-bridge hook claude-code`, a recorded payload of Claude Code's
on stdin (tests/agents/payloads/claude_code/), `AEP_AGENTD_DIR` naming the daemon's
directory. The agent's side (the daemon, the hooks, the processes that time them) runs on
the core(s) this process does not use. All times are CLOCK_MONOTONIC, one clock for the
machine, read in the process nearest to the moment measured.

Hook overhead, per non-blocking hook call: from just before a process is started to its
exit, timed by a driver process of its own (`subprocess.run`, nothing else running in it),
with `PostToolUse.json` on stdin, the session started first (`SessionStart`,
`UserPromptSubmit`). Each round runs, in a rotating order: `python -c pass` (the
interpreter's floor: the venv's Python with its site packages, the same `.pth` files),
`python -c "import aep_bridge.launch, aep_bridge.agents.shim"` (the floor plus the hook's
imports), the same ending in `os._exit(0)` (without the interpreter's finalization, which
tears those modules down again), `aep-bridge hook claude-code`, and
`python -m aep_bridge hook claude-code`. Each
hook must exit 0 with nothing on stdout or stderr (the shim fails open quietly only on
stdout, and says why on stderr: a skipped hook would be fast for the wrong reason), and the
daemon must have logged every payload as an event. Three warm-up rounds, then 100 counted;
p99 is the slowest. Goal: p50 and p99 <= 150 ms (the agent waits on every hook).

The held loop's added latency: a `PermissionRequest` hook is started, the card reaches the
phone, the bridge settles, and 50 ms later the person presses Allow (`MemoryChannel.press`,
which hands the press to the core); the time runs from just before that call to the moment
the hook's decision line reaches a reader process (its stdout is a pipe into a small
process, blocked in `read`, that reads the clock as the line arrives), and to the hook's
exit (the pipe's end). Each decision must be Claude Code's allow. The baseline, in the same
run, interleaved sample by sample: the same press on the same phone, through the same
endpoint, of a `TinyAgent` (aep_bridge/commands/tinyagent.py) in a process of its own on the agent's
core(s) that asks with the same three options and reads the clock when the
`control.attention.respond` arrives over its WebSocket (then acks and reports the answer, as
the daemon does). The difference is what the daemon and the hook process add: the command's
way into the daemon, its ack, `attention.answered` and `attention.resolved` logged and sent,
its answer to the hook over the socket, and the hook's printing. Two warm-up samples each,
then 40 counted; p99 is the slowest. Goal: p99 <= 50 ms (press to the decision printed).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))  # for tests.*

import results

HEADING = "## Agent hooks (Claude Code's hook process, the agent daemon, a real bridge)"

AGENT = "claude-code"
OVERHEAD_SAMPLES = 100
OVERHEAD_WARMUP = 3
LOOP_SAMPLES = 40
LOOP_WARMUP = 2
QUIET = 0.05  # seconds between the bridge settling and the press
WAIT = 30.0  # seconds any one step may take before the benchmark gives up
GOALS = {"overhead_ms": 150.0, "added_p99_ms": 50.0}

DRIVER_TAG = "--driver"  # this file, run as the hook-overhead driver
TINY_TAG = "--tiny"  # this file, run as the baseline's TinyAgent

FLOOR = "python -c pass"
IMPORTS = "python -c 'import the hook's modules'"
UNFINALIZED = "the same, then os._exit(0)"
SCRIPT = "aep-bridge hook claude-code"
MODULE = "python -m aep_bridge hook claude-code"
HOOKS = (SCRIPT, MODULE)
#: what UNFINALIZED appends: the process ends without tearing its modules down
_EXIT = "; import os; os._exit(0)"

#: the reader at the end of a held hook's stdout: "ready", then the clock at its first line
#: and at the pipe's end, and the line
_STAMP = """
import json, os, sys, time
sys.stdout.write("ready\\n"); sys.stdout.flush()
line = b""
while not line.endswith(b"\\n"):
    chunk = os.read(0, 65536)
    if not chunk:
        break
    line += chunk
printed = time.monotonic_ns() if line else None
while os.read(0, 65536):
    pass
closed = time.monotonic_ns()
sys.stdout.write(json.dumps({"printed": printed, "closed": closed, "line": line.decode()}))
"""


def _script() -> str:
    """The venv's `aep-bridge` console script (beside this Python), else the one on PATH."""
    beside = Path(sys.executable).parent / "aep-bridge"
    found = os.fspath(beside) if beside.exists() else shutil.which("aep-bridge")
    if found is None:
        raise SystemExit("aep-bridge is not installed: run `make venv` first")
    return found


def _cores() -> tuple[set[int], set[int]]:
    """(this process's cores: the bridge's, the agent side's): every core but ours."""
    if not hasattr(os, "sched_getaffinity"):
        return set(), set()
    mine = os.sched_getaffinity(0)
    others = set(range(os.cpu_count() or 1)) - mine
    return mine, others or mine


async def _spawn(*argv: str, **options: Any) -> asyncio.subprocess.Process:
    """A process of the agent's side, on the agent's core(s) (it inherits them at fork)."""
    mine, theirs = _cores()
    if theirs != mine:
        os.sched_setaffinity(0, theirs)
    try:
        return await asyncio.create_subprocess_exec(*argv, **options)
    finally:
        if theirs != mine:
            os.sched_setaffinity(0, mine)


def _percentiles(ns: Sequence[int]) -> dict[str, float]:
    ms = sorted(n / 1e6 for n in ns)
    return {
        "n": len(ms),
        "p50": statistics.median(ms),
        "p99": ms[min(len(ms) - 1, int(len(ms) * 0.99))],
        "max": ms[-1],
    }


# -- 1. hook overhead (the driver, a process of its own) -------------------------------------


def _drive(spec: dict[str, Any]) -> None:
    """Time each command `samples` times, rotating their order; print the times as JSON."""
    payload = Path(spec["payload"]).read_bytes()
    commands: dict[str, list[str]] = spec["commands"]
    names = list(commands)
    times: dict[str, list[int]] = {name: [] for name in names}
    for i in range(spec["warmup"] + spec["samples"]):
        shift = i % len(names)
        for name in names[shift:] + names[:shift]:
            started = time.monotonic_ns()
            done = subprocess.run(commands[name], input=payload, capture_output=True, check=False)
            took = time.monotonic_ns() - started
            if done.returncode or done.stdout or done.stderr:
                raise SystemExit(
                    f"{name}: status {done.returncode}, {done.stdout!r} {done.stderr!r}"
                )
            if i >= spec["warmup"]:
                times[name].append(took)
    # where a hook's start goes: its imports, once, as Python reports them (-X importtime)
    traced = subprocess.run(
        [*commands[MODULE][:1], "-X", "importtime", *commands[MODULE][1:]],
        input=payload,
        capture_output=True,
        check=True,
    )
    print(json.dumps({"times": times, "importtime": traced.stderr.decode()}))


def _imports(trace: str) -> dict[str, float]:
    """Cumulative ms of the top-level imports in a `-X importtime` trace, and of http.client."""
    found: dict[str, float] = {}
    for line in trace.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cumulative, name = line.split("|", 2)
        if not cumulative.strip().isdigit():
            continue
        stripped = name.strip()
        if (name.startswith(" ") and not name.startswith("  ")) or stripped == "http.client":
            found[stripped] = found.get(stripped, 0.0) + int(cumulative) / 1000
    return found


async def _overhead(running: Any, script: str) -> dict[str, Any]:
    from tests.agents.live import PAYLOADS

    py = sys.executable
    spec = {
        "payload": os.fspath(PAYLOADS / "claude_code" / "PostToolUse.json"),
        "samples": OVERHEAD_SAMPLES,
        "warmup": OVERHEAD_WARMUP,
        "commands": {
            FLOOR: [py, "-c", "pass"],
            IMPORTS: [py, "-c", "import aep_bridge.launch, aep_bridge.agents.shim"],
            UNFINALIZED: [py, "-c", f"import aep_bridge.launch, aep_bridge.agents.shim{_EXIT}"],
            SCRIPT: [script, "hook", AGENT],
            MODULE: [py, "-m", "aep_bridge", "hook", AGENT],
        },
    }
    before = _logged(running, "tool.completed")
    driver = await _spawn(
        py,
        __file__,
        DRIVER_TAG,
        json.dumps(spec),
        env=running.env(),
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await driver.communicate()
    if driver.returncode:
        raise SystemExit(f"the hook-overhead driver failed ({driver.returncode})")
    report = json.loads(out)
    hooks = (OVERHEAD_WARMUP + OVERHEAD_SAMPLES) * len(HOOKS) + 1  # and the traced one
    logged = _logged(running, "tool.completed") - before
    if logged != hooks:
        raise SystemExit(f"{hooks} PostToolUse hooks ran, the daemon logged {logged} events")
    return {
        "times": {name: _percentiles(ns) for name, ns in report["times"].items()},
        "imports": _imports(report["importtime"]),
        "logged": logged,
    }


def _logged(running: Any, kind: str) -> int:
    return sum(1 for event in running.events(AGENT) if event["type"] == kind)


# -- 2. the held loop ---------------------------------------------------------------------------


async def _tiny(url: str, token: str) -> None:
    """The baseline's agent: one session; on each line of stdin it asks, and prints the
    clock when the answer's command arrives over its WebSocket."""
    from aep_bridge.agents.mapping import ALLOW, ALLOW_SESSION, DENY
    from aep_bridge.commands.tinyagent import TinyAgent

    options = [
        {"id": ALLOW, "label": "Allow"},
        {"id": ALLOW_SESSION, "label": "Allow for this session"},
        {"id": DENY, "label": "Deny"},
    ]
    async with TinyAgent(url, token, agent="tinyagent", session="bench-baseline") as agent:
        await agent.emit("session.started", {"label": "baseline"}, capture="redacted")
        agent.run = "r1"
        await agent.emit("run.started", {"trigger": "user"})
        while (await asyncio.to_thread(sys.stdin.readline)).strip():
            await agent.emit(
                "attention.requested",
                {
                    "kind": "permission",
                    "prompt": "Run npm test?",
                    "options": options,
                    "respond_via": ["control"],
                },
                severity="notice",
                capture="redacted",
            )
            command = await agent.next_command()
            arrived = time.monotonic_ns()
            sys.stdout.write(f"{arrived} {command.type}\n")
            sys.stdout.flush()
            await agent.report_answer(command)


async def _card(running: Any, seen: int) -> str:
    """The next card on the phone once it is there, the bridge settled and quiet."""
    async with asyncio.timeout(WAIT):
        while len(running.channel.cards) <= seen:
            await asyncio.sleep(0.002)
    await running.rig.settle()
    await asyncio.sleep(QUIET)
    return list(running.channel.cards)[seen]


async def _baseline_sample(running: Any, tiny: asyncio.subprocess.Process) -> int:
    assert tiny.stdin is not None
    assert tiny.stdout is not None
    seen = len(running.channel.cards)
    tiny.stdin.write(b"ask\n")
    await tiny.stdin.drain()
    card = await _card(running, seen)
    pressed = time.monotonic_ns()
    resolution = await running.press(card, "Allow")
    async with asyncio.timeout(WAIT):
        arrived, kind = (await tiny.stdout.readline()).decode().split()
    if resolution.status != "accepted" or kind != "control.attention.respond":
        raise SystemExit(f"the baseline's press: {resolution}, {kind}")
    await running.rig.settle()
    return int(arrived) - pressed


async def _hook_sample(running: Any, script: str, i: int) -> tuple[int, int]:
    """One held `PermissionRequest`: (press -> decision printed, press -> hook exited)."""
    from tests.agents.live import payload

    body = payload(AGENT, "PermissionRequest", tool_input={"command": f"npm test -- --bail={i}"})
    read, write = os.pipe()
    try:
        stamp = await _spawn(
            sys.executable, "-c", _STAMP, stdin=read, stdout=asyncio.subprocess.PIPE
        )
    finally:
        os.close(read)
    try:
        hook = await _spawn(
            script,
            "hook",
            AGENT,
            env=running.env(),
            stdin=asyncio.subprocess.PIPE,
            stdout=write,
            stderr=asyncio.subprocess.PIPE,
        )
    finally:
        os.close(write)
    assert hook.stdin is not None
    assert stamp.stdout is not None
    hook.stdin.write(json.dumps(body).encode())
    hook.stdin.close()
    seen = len(running.channel.cards)
    async with asyncio.timeout(WAIT):
        ready = await stamp.stdout.readline()
    card = await _card(running, seen)
    if ready != b"ready\n":
        raise SystemExit(f"the stamp process said {ready!r}")
    pressed = time.monotonic_ns()
    resolution = await running.press(card, "Allow")
    async with asyncio.timeout(WAIT):
        out, _ = await stamp.communicate()
        _, err = await hook.communicate()
    seen_by = json.loads(out)
    decision = json.loads(seen_by["line"] or "null")
    allowed = {
        "hookSpecificOutput": {
            "hookEventName": "PermissionRequest",
            "decision": {"behavior": "allow"},
        }
    }
    if resolution.status != "accepted" or hook.returncode or err or decision != allowed:
        raise SystemExit(f"the hook's press: {resolution}, {hook.returncode}, {err!r}, {decision}")
    await running.rig.settle()
    return seen_by["printed"] - pressed, seen_by["closed"] - pressed


async def _held(running: Any, script: str) -> dict[str, Any]:
    from tests.intake.conftest import TOKEN

    tiny = await _spawn(
        sys.executable,
        __file__,
        TINY_TAG,
        running.served.ws,
        TOKEN,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    base: list[int] = []
    printed: list[int] = []
    exited: list[int] = []
    try:
        for i in range(LOOP_WARMUP + LOOP_SAMPLES):
            b = await _baseline_sample(running, tiny)
            p, e = await _hook_sample(running, script, i)
            if i >= LOOP_WARMUP:
                base.append(b)
                printed.append(p)
                exited.append(e)
    finally:
        assert tiny.stdin is not None
        tiny.stdin.write(b"\n")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(tiny.wait(), 10)
        if tiny.returncode is None:
            tiny.kill()
            await tiny.wait()
    return {
        "baseline": _percentiles(base),
        "printed": _percentiles(printed),
        "exited": _percentiles(exited),
        "added": _percentiles([p - b for p, b in zip(printed, base, strict=True)]),
    }


# -- the run ------------------------------------------------------------------------------------


async def _main(root: Path) -> dict[str, Any]:
    from tests.agents.live import live, payload
    from tests.intake.conftest import TOKEN

    script = _script()
    async with live(root, daemon=False) as running:
        errors = open(root / "agentd.err", "ab")  # noqa: SIM115
        try:
            running.daemon = await _spawn(
                script,
                "agentd",
                "--dir",
                os.fspath(running.directory),
                "--url",
                running.served.http,
                "--token",
                TOKEN,
                env=running.env(),
                stdout=asyncio.subprocess.DEVNULL,
                stderr=errors,
            )
            await running.wait_relay(True)
            for name in ("SessionStart", "UserPromptSubmit"):
                done = await running.hook(AGENT, payload(AGENT, name))
                if done.status or done.stdout or done.stderr:
                    raise SystemExit(f"{name}: {done}")
            overhead = await _overhead(running, script)
            print(_overhead_lines(overhead)[-1], flush=True)
            held = await _held(running, script)
        finally:
            errors.close()
    return {"overhead": overhead, "held": held}


def main() -> dict[str, Any]:
    started = time.monotonic()
    mine, theirs = _cores()
    with tempfile.TemporaryDirectory(prefix="aep-bench-agents-") as tmp:
        figures = asyncio.run(_main(Path(tmp)))
    figures["cores"] = (sorted(mine), sorted(theirs))
    figures["wall"] = time.monotonic() - started
    print(f"agent hooks benchmark: {figures['wall']:.0f} s", flush=True)
    return figures


# -- the report ---------------------------------------------------------------------------------


def _pf(ok: bool) -> str:
    return "met" if ok else "NOT met"


def _overhead_lines(o: dict[str, Any]) -> list[str]:
    t = o["times"]
    floor = t[FLOOR]
    goal = GOALS["overhead_ms"]
    lines = [
        f"| process, start to exit, {floor['n']} samples | p50 ms | p99 ms | max ms "
        f"| p50 vs `python -c pass` | p99 vs `python -c pass` | goal p50 and p99 <= {goal:g} ms |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    labels = {
        IMPORTS: "`python -c 'import aep_bridge.launch, aep_bridge.agents.shim'`",
        UNFINALIZED: "the same, ending in `os._exit(0)` (no finalization)",
    }
    for name in (FLOOR, IMPORTS, UNFINALIZED, *HOOKS):
        p = t[name]
        verdict = _pf(p["p50"] <= goal and p["p99"] <= goal) if name in HOOKS else ""
        label = labels.get(name, f"`{name}`")
        lines.append(
            f"| {label} | {p['p50']:.1f} | {p['p99']:.1f} | {p['max']:.1f} "
            f"| {p['p50'] / floor['p50']:.2f}x | {p['p99'] / floor['p99']:.2f}x | {verdict} |"
        )
    return lines


def section(r: dict[str, Any]) -> list[str]:
    """The RESULTS.md section for these figures."""
    o, h = r["overhead"], r["held"]
    mine, theirs = r["cores"]
    t = o["times"]
    floor, imports, hook, bare = t[FLOOR], t[IMPORTS], t[SCRIPT], t[UNFINALIZED]
    imp = o["imports"]
    top = sorted(
        ((name, ms) for name, ms in imp.items() if name != "http.client"),
        key=lambda item: -item[1],
    )[:4]
    goal = GOALS["added_p99_ms"]
    base, printed = h["baseline"], h["printed"]
    lines = [
        HEADING,
        "",
        " ".join(__doc__.strip().split("\n\n", 1)[1].split()) if __doc__ else "",
        "",
        f"The bridge ran on core(s) {mine}, the daemon, the hooks and the processes timing "
        f"them on {theirs}.",
        "",
        *_overhead_lines(o),
        "",
        f"The daemon logged all {o['logged']} PostToolUse payloads as `tool.completed`. Where "
        f"a hook's {hook['p50']:.0f} ms go, in p50s: the interpreter with the venv's site "
        f"packages, {floor['p50']:.1f} ms; the hook's imports, "
        f"{imports['p50'] - floor['p50']:.1f} ms more, of which "
        f"{imports['p50'] - bare['p50']:.1f} ms are spent at exit tearing them down again "
        "(the interpreter's finalization, which `os._exit` skips); reading the payload, the "
        "daemon's "
        f"answer over its socket and the exit, {hook['p50'] - imports['p50']:.1f} ms more. "
        "One `-X importtime` trace of the hook, cumulative ms of its top-level imports: "
        + ", ".join(f"`{name}` {ms:.1f}" for name, ms in top)
        + (f" (of which `http.client`, {imp['http.client']:.1f})" if "http.client" in imp else "")
        + ".",
        "",
        f"| held loop, {printed['n']} samples | p50 ms | p99 ms | max ms | p50 vs the baseline "
        f"| p99 vs the baseline | goal p99 <= {goal:g} ms |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    rows = (
        ("baseline", "baseline: press -> a TinyAgent's command over its WebSocket"),
        ("printed", "press -> the hook's decision printed"),
        ("exited", "press -> the hook's exit"),
        ("added", "what the daemon and the hook add (printed - baseline, sample by sample)"),
    )
    for name, text in rows:
        p = h[name]
        ratio = ratio99 = verdict = ""
        if name in ("printed", "exited"):
            ratio = f"{p['p50'] / base['p50']:.2f}x"
            ratio99 = f"{p['p99'] / base['p99']:.2f}x"
        if name == "printed":
            verdict = _pf(p["p99"] <= goal)
        lines.append(
            f"| {text} | {p['p50']:.1f} | {p['p99']:.1f} | {p['max']:.1f} | {ratio} | {ratio99} "
            f"| {verdict} |"
        )
    lines += [
        "",
        f"Goals: a hook call p50 and p99 <= {GOALS['overhead_ms']:g} ms "
        f"({_pf(hook['p50'] <= GOALS['overhead_ms'] and hook['p99'] <= GOALS['overhead_ms'])}: "
        f"p50 {hook['p50']:.1f}, p99 {hook['p99']:.1f} ms, `aep-bridge hook claude-code`); the "
        f"held loop's press to the decision printed p99 <= {goal:g} ms "
        f"({_pf(printed['p99'] <= goal)}: {printed['p99']:.1f} ms, of which the daemon and the "
        f"hook add {h['added']['p50']:.1f} ms at p50 over the TinyAgent's "
        f"{base['p50']:.1f} ms). The agent reads a hook's output when the process ends: its "
        f"exit came {h['exited']['p50'] - printed['p50']:.1f} ms after the decision at p50 "
        f"(p99 of press -> exit {h['exited']['p99']:.1f} ms, "
        f"{_pf(h['exited']['p99'] <= goal)} against the same goal), the interpreter's "
        "finalization while the daemon, on the same core(s), sends the answer's events.",
        "",
        f"The agent hooks benchmark took {r['wall']:.0f} s.",
        "",
    ]
    return lines


if __name__ == "__main__":
    if sys.argv[1:2] == [DRIVER_TAG]:  # the hook-overhead driver, started by `_overhead`
        _drive(json.loads(sys.argv[2]))
    elif sys.argv[1:2] == [TINY_TAG]:  # the baseline's agent, started by `_held`
        asyncio.run(_tiny(sys.argv[2], sys.argv[3]))
    else:
        results.run_alone(HEADING, main, section)
