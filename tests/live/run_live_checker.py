"""Run the official AEP black-box checker (`conformance/live.js`) against the embedded endpoint.

    python tests/live/run_live_checker.py --live PATH/TO/agent-event-protocol/conformance/live.js

The checker is not part of this repository: fetch agenteventprotocol/agent-event-protocol and
point `--live` at it (Node 20 runs it with `--experimental-websocket`). Two runs cover every
check: one with the token, a small replay buffer (`--evict`) and a control target (the tiny
agent of `aep-bridge ask`, `--control-session`, `--control-cancel`), and one without the token
against a loopback endpoint that takes events without it, which is the only posture where
`control-auth-gate` applies. The full output of both goes to docs/conformance.md.
"""

from __future__ import annotations

import argparse
import json
import re
import socket
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BRIDGE = [sys.executable, "-m", "aep_bridge"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_bridge(config: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [*BRIDGE, "run", "--config", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    port = json.loads(config.read_text())["listen"]["port"]
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"the bridge did not start: {proc.stderr.read() if proc.stderr else ''}")


def checker(live: Path, base: str, *args: str) -> tuple[int, str]:
    command = ["node", "--experimental-websocket", str(live), base, *args]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    shown = " ".join(command[2:])
    return (
        result.returncode,
        f"$ node --experimental-websocket {shown}\n{result.stdout}{result.stderr}",
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--live", required=True, type=Path, help="path to conformance/live.js")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "conformance.md")
    args = parser.parse_args()
    outputs: list[str] = []
    codes: list[int] = []
    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp) / "state"
        locked = Path(tmp) / "locked.json"
        locked.write_text(
            json.dumps(
                {
                    "state_dir": str(state),
                    "listen": {"port": free_port()},
                    "intake": {"replay_buffer": 64},
                    "channels": {},
                }
            )
        )
        bridge = start_bridge(locked)
        agent = None
        try:
            token = subprocess.run(
                [*BRIDGE, "token", "--config", str(locked)],
                check=True,
                capture_output=True,
                text=True,
            ).stdout.strip()
            agent = subprocess.Popen(
                [
                    *BRIDGE,
                    "ask",
                    "Live-check control target: allow?",
                    "--option",
                    "allow",
                    "--option",
                    "deny",
                    "--config",
                    str(locked),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            assert agent.stderr is not None
            said = agent.stderr.readline()
            while said.startswith("aep-bridge ask: warning: "):  # this bridge has no channel
                said = agent.stderr.readline()
            session = re.search(r"session (\S+);", said)
            if session is None:
                raise RuntimeError("the tiny agent did not start")
            base = f"http://127.0.0.1:{json.loads(locked.read_text())['listen']['port']}"
            code, text = checker(
                args.live,
                base,
                "--token",
                token,
                "--evict",
                "--control-session",
                session.group(1),
                "--control-cancel",
                "r1",
            )
            codes.append(code)
            outputs.append(text.replace(token, "<token>"))
        finally:
            for proc in (agent, bridge):
                if proc is not None:
                    proc.terminate()
                    proc.wait(10)
        open_config = Path(tmp) / "open.json"
        open_config.write_text(
            json.dumps(
                {
                    "state_dir": str(Path(tmp) / "open-state"),
                    "listen": {"port": free_port()},
                    "intake": {"open_on_loopback": True},
                    "channels": {},
                }
            )
        )
        bridge = start_bridge(open_config)
        try:
            base = f"http://127.0.0.1:{json.loads(open_config.read_text())['listen']['port']}"
            code, text = checker(args.live, base)
            codes.append(code)
            outputs.append(text)
        finally:
            bridge.terminate()
            bridge.wait(10)
    node = subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip()
    report = [
        "# AEP conformance: the official live checker",
        "",
        "The embedded endpoint (`aep-bridge run`) checked with `conformance/live.js` from",
        "[agenteventprotocol/agent-event-protocol](https://github.com/agenteventprotocol/"
        "agent-event-protocol), the specification's black-box endpoint checker, on "
        f"{datetime.now(UTC):%Y-%m-%d} with Node {node}. Regenerate with",
        "",
        "```sh",
        "python tests/live/run_live_checker.py --live PATH/TO/conformance/live.js",
        "```",
        "",
        "Run 1 is authenticated (`--token`), floods a 64-event replay buffer (`--evict`) and",
        "drives a control target: the tiny agent behind `aep-bridge ask`, which declares",
        "`control.attention.respond` and `control.cancel` and owns run `r1`",
        "(`--control-session`, `--control-cancel r1`). Run 2 has no token, against an endpoint",
        "configured with `intake.open_on_loopback`: the only posture in which `control-auth-gate`",
        "applies (events may flow without the token there; control never does). Between them,",
        "every check passes; each run's skips are the checks the other run covers.",
        "",
    ]
    for title, text in zip(
        (
            "Run 1: authenticated, eviction, control target",
            "Run 2: no token, loopback open for events",
        ),
        outputs,
        strict=True,
    ):
        report += [f"## {title}", "", "```", text.rstrip(), "```", ""]
    args.out.write_text("\n".join(report))
    print("\n\n".join(outputs))
    return max(codes)


if __name__ == "__main__":
    sys.exit(main())
