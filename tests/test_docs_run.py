"""The docs' shell blocks marked runnable, run against a bridge this test starts, and what the
docs say of a first run checked against that bridge.

A block is marked by an HTML comment on the line before it, which GitHub does not show:

    <!-- runnable -->
    ```sh
    .venv/bin/aep-bridge token
    ```

The bridge is `aep-bridge run` on its embedded defaults, in a fresh home folder, on a free
port; each block runs in bash (`-e -o pipefail`) in a folder that stands for the clone (its
`.venv` is this checkout's), with the bridge's URL and token in `$AEP_BRIDGE_URL` and
`$AEP_BRIDGE_TOKEN`, `aep-bridge` on PATH, and `127.0.0.1:8787` read as the bridge's address.
Mark only blocks that are safe and quick there: no platform token, no question that waits for
an answer, nothing outside the home folder.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.bridge_process import ROOT, free_port

DOCS = sorted(
    [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "docs").glob("channels/*.md")]
)
MARK = "<!-- runnable -->"
RUNNABLE = re.compile(r"^<!-- runnable -->\n```(?P<info>[^\n]*)\n(?P<body>.*?)^```", re.M | re.S)


def runnable_blocks() -> list[tuple[str, str]]:
    """Each marked block: where it is (`doc:line`) and its text."""
    found = []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for block in RUNNABLE.finditer(text):
            line = text.count("\n", 0, block.start()) + 2
            found.append((f"{path.relative_to(ROOT)}:{line}", block["body"]))
    return found


def test_every_mark_is_on_a_shell_block():
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        marks = text.count(MARK)
        blocks = [b for b in RUNNABLE.finditer(text) if b["info"].strip() == "sh"]
        assert marks == len(blocks), f"{path.name}: a {MARK} not right before a ```sh block"
    assert len(runnable_blocks()) >= 4


@dataclass
class Bridge:
    url: str
    port: int
    home: Path
    clone: Path
    log: Path
    env: dict[str, str]

    def shown(self) -> str:
        return self.log.read_text(errors="replace")


@pytest.fixture(scope="module")
def bridge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bridge]:
    """`aep-bridge run` on its embedded defaults in a fresh home, as a first run."""
    tmp = tmp_path_factory.mktemp("docs-run")
    home, clone = tmp / "home", tmp / "clone"
    home.mkdir()
    clone.mkdir()
    (clone / ".venv").symlink_to(ROOT / ".venv")
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("MAKE", "MFLAGS", "AEP_BRIDGE_", "AEP_AGENTD_", "XDG_"))
    }
    env.update(HOME=str(home), PYTHONUNBUFFERED="1")
    port = free_port()
    log = tmp / "bridge.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(ROOT / ".venv" / "bin" / "aep-bridge"), "run", "--port", str(port)],
            cwd=clone,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, log.read_text()
            try:
                if httpx.get(f"{url}/.well-known/aep", timeout=1).is_success:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        token = (home / ".local" / "state" / "aep-bridge" / "token").read_text().strip()
        env.update(
            PATH=f"{ROOT / '.venv' / 'bin'}{os.pathsep}{env['PATH']}",
            AEP_BRIDGE_URL=url,
            AEP_BRIDGE_TOKEN=token,
        )
        yield Bridge(url, port, home, clone, log, env)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize(("where", "block"), runnable_blocks(), ids=lambda v: v.split("\n")[0])
def test_the_runnable_block_runs(bridge: Bridge, where: str, block: str):
    script = block.replace("127.0.0.1:8787", f"127.0.0.1:{bridge.port}")
    ran = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", script],
        cwd=bridge.clone,
        env=bridge.env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert ran.returncode == 0, f"{where}: exit {ran.returncode}\n{ran.stdout}{ran.stderr}"


# -- what the docs say of this first run ---------------------------------------------------

NUMBERS = [
    *("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"),
    *("ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen"),
]


def _migrated(text: str) -> list[str]:
    return re.findall(r"schema migrated to version \d+", text)


def test_cli_md_shows_the_migrations_a_first_run_logs(bridge: Bridge):
    ran = _migrated(bridge.shown())
    assert ran, bridge.shown()
    cli = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    section = cli.split("### What it logs", 1)[1].split("\n### ", 1)[0]
    assert _migrated(section) == ran
    [count] = re.findall(r"\(all (\w+) on a first run\)", section)
    assert count == NUMBERS[len(ran)], f"cli.md says all {count}; a first run logs {len(ran)}"


def _default_channels(bridge: Bridge) -> set[str]:
    return set(re.findall(r"channel (\w+) started \(\w+\)", bridge.shown()))


def test_the_docs_name_every_channel_of_the_embedded_defaults(bridge: Bridge):
    channels = _default_channels(bridge)
    assert channels == {"console", "web"}, bridge.shown()
    words = {"console": "console", "web": "web page"}
    said = []
    for path in DOCS:
        text = " ".join(path.read_text(encoding="utf-8").split())
        for what in re.findall(
            r"embedded defaults:? ?\(?(the AEP endpoint on .*?)(?:\)|\.\s)", text
        ):
            said.append(what)
            missing = [name for name in channels if words[name] not in what]
            assert not missing, f"{path.name}: the embedded defaults are {what!r}: no {missing}"
    assert len(said) >= 2


def test_the_web_page_is_on_the_endpoints_port(bridge: Bridge):
    page = httpx.get(f"{bridge.url}/channels/web/signin", timeout=10)  # the sign-in form
    assert page.status_code == 200
    assert "text/html" in page.headers["content-type"]
    intro = (ROOT / "docs" / "channels" / "web.md").read_text(encoding="utf-8").split("\n\n")[1]
    assert "own port" not in intro, "web.md: the page is on the bridge's port, not its own"
    assert "endpoint" in intro, "web.md's opening should say where the page is: the endpoint's port"
