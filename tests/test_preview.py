"""`aep-bridge preview`: the reference session as each built channel's thread, reviewed by eye.

The snapshots (tests/snapshots/reference.CHANNEL.html) are the demo session at the default
verbosity, as `aep-bridge preview --demo --channel CHANNEL` writes it. A change to how a
session renders changes them: this test then writes the new page beside the old one
(`reference.CHANNEL.new.html`) and fails; open both in a browser, and if the new one reads
right, `make snapshots` (which runs this module) makes it the snapshot. The other tests check
what every page must be whatever the rendering: standalone (no script, nothing loaded from
elsewhere), the agent's words never markup, and a bad recording or channel said plainly.
"""

from __future__ import annotations

import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from aep_bridge.aep.build import make_event
from aep_bridge.commands.preview_command import render
from aep_bridge.demo import recorded
from tests.bridge_process import ROOT
from tests.terminal_text import HOSTILE, raw_controls

SNAPSHOTS = ROOT / "tests" / "snapshots"
#: each built channel with a preview dialect of its own, and the core's web dialect
CHANNELS = ("telegram", "web")
DEMO = "the demo session"
REVIEW = (
    "the reference session renders differently: open both in a browser, review by eye, "
    "then run `make snapshots`"
)


def reference(channel: str) -> str:
    """The demo session's page in `channel` at the default verbosity."""
    return render(recorded().encode(), DEMO, channel)


def snapshot(channel: str) -> Path:
    return SNAPSHOTS / f"reference.{channel}.html"


@pytest.mark.parametrize("channel", CHANNELS)
def test_the_reference_session_renders_as_its_snapshot(channel: str) -> None:
    page = reference(channel)
    kept = snapshot(channel)
    fresh = kept.with_name(f"reference.{channel}.new.html")
    if kept.exists() and kept.read_text(encoding="utf-8") == page:
        fresh.unlink(missing_ok=True)
        return
    fresh.write_text(page, encoding="utf-8")
    pytest.fail(f"{REVIEW} ({kept.relative_to(ROOT)} and {fresh.relative_to(ROOT)})")


class _Page(HTMLParser):
    """Every tag of a page with its attributes, and the text of its `<style>`."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.style = ""
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_style = tag == "style"

    def handle_endtag(self, tag: str) -> None:
        self._in_style = False

    def handle_data(self, data: str) -> None:
        if self._in_style:
            self.style += data


def _parsed(page: str) -> _Page:
    parser = _Page()
    parser.feed(page)
    parser.close()
    return parser


@pytest.mark.parametrize("channel", CHANNELS)
def test_the_page_stands_alone_and_runs_nothing(channel: str) -> None:
    page = _parsed(reference(channel))
    names = {tag for tag, _ in page.tags}
    assert not names & {"script", "iframe", "img", "link", "object", "embed", "form", "base"}
    for tag, attributes in page.tags:
        assert not {"src", "srcset"} & set(attributes), tag
        assert not any(name.startswith("on") for name in attributes), (tag, attributes)
        assert "style" not in attributes, tag
        if "href" in attributes:  # only the content's own links, opened without a referrer
            assert tag == "a"
            assert str(attributes["href"]).startswith(("https://", "http://", "mailto:"))
            assert attributes.get("rel") == "noopener noreferrer"
    assert "url(" not in page.style
    assert "@import" not in page.style
    policy = next(
        a["content"] for t, a in page.tags if a.get("http-equiv") == "Content-Security-Policy"
    )
    assert policy is not None
    assert policy.startswith("default-src 'none'; style-src 'sha256-")
    # what a person looks for: the thread, the card with its outcome, the heads-ups
    text = reference(channel)
    assert "Fix the CSV export totals that are off by a cent" in text
    assert "Notifications" in text
    assert "🔔" in text
    assert "FAILED tests/test_totals.py::test_rounding - assert 10.0 == 10.01" in text


def _recording(tmp_path: Path, reply: str) -> Path:
    """A session whose agent replies `reply`, as a JSONL file."""
    source = "aep://localhost/agent/claude-code/session/s_x"
    common = {"source": source, "agent": "claude-code", "session": "s_x", "capture": "redacted"}
    events = [
        make_event(
            "session.started",
            seq=0,
            data={"label": "a <b>bold</b> label", "cwd": "/tmp/x"},
            time="2026-11-30T10:00:00.000Z",
            **common,
        ),
        make_event(
            "message.agent.replied",
            seq=1,
            data={"message_id": "m1", "role": "assistant", "text": reply},
            time="2026-11-30T10:00:02.000Z",
            **common,
        ),
        make_event(
            "session.ended", seq=2, data={"reason": "normal"}, time="2026-11-30T10:00:03.000Z",
            **common,
        ),
    ]  # fmt: skip
    path = tmp_path / "hostile.jsonl"
    path.write_bytes(b"\n".join(event.raw for event in events) + b"\n")
    return path


@pytest.mark.parametrize("channel", CHANNELS)
def test_what_the_agent_wrote_is_shown_as_text_never_run(tmp_path: Path, channel: str) -> None:
    reply = (
        "<script>alert(1)</script> see [the docs](javascript:alert(2)) and "
        "`<img src=x onerror=alert(3)>`"
    )
    path = _recording(tmp_path, reply)
    page = render(path.read_bytes(), path.name, channel)
    assert "<script" not in page
    assert "<img" not in page
    assert 'href="javascript' not in page.replace(" ", "").lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;img src=x onerror=alert(3)&gt;" in page
    assert "the docs" in page
    assert "a &lt;b&gt;bold&lt;/b&gt; label" in page  # the thread's name too


def _cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "aep_bridge", "preview", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_transcript_shows_an_agents_escape_sequences_as_text(tmp_path: Path) -> None:
    """`--text` is read in a terminal (`--out -`, or `cat`, a pager): the agent's escape
    sequences are shown, not run, on standard output and in the file alike."""
    path = _recording(tmp_path, HOSTILE)
    preview = [sys.executable, "-m", "aep_bridge", "preview", str(path), "--channel", "telegram"]
    printed = subprocess.run(
        [*preview, "--text", "--out", "-"],
        cwd=ROOT,
        capture_output=True,
        timeout=60,
    )
    assert printed.returncode == 0, printed.stderr
    written = _cli(str(path), "--channel", "telegram", "--text", "--out", str(tmp_path / "t.txt"))
    assert written.returncode == 0, written.stderr
    for text in (printed.stdout.decode("utf-8"), (tmp_path / "t.txt").read_text("utf-8")):
        assert raw_controls(text) == [], text
        assert "ok\\u001b[2J" in text, text


def test_an_unknown_channel_is_refused_naming_the_ones_there_are(tmp_path: Path) -> None:
    done = _cli("--demo", "--channel", "nosuch", "--out", str(tmp_path / "x.html"))
    assert done.returncode == 2
    assert "unknown channel 'nosuch'" in done.stderr
    assert "telegram" in done.stderr
    assert "web" in done.stderr
    assert not (tmp_path / "x.html").exists()


def test_a_broken_line_is_named_with_its_number_and_the_fix(tmp_path: Path) -> None:
    lines = recorded().splitlines()
    path = tmp_path / "broken.jsonl"
    path.write_text("\n".join([lines[0], lines[1], '{"aep": "0.1", "id": ', *lines[2:]]) + "\n")
    done = _cli(str(path), "--channel", "web")
    assert done.returncode == 2
    assert "broken.jsonl:3: not a valid AEP event: " in done.stderr
    assert "aep-bridge validate broken.jsonl" in done.stderr
    assert not (tmp_path / "broken.web.html").exists()


def test_the_page_is_written_beside_the_recording(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    path.write_text(recorded())
    done = _cli(str(path), "--channel", "web", "--verbosity", "quiet", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    written = tmp_path / "session.web.html"
    assert f"aep-bridge preview: wrote {written}" in done.stderr
    page = written.read_text()
    assert "verbosity quiet" in page
    assert page.startswith("<!DOCTYPE html>")


# -- docs/rendering.md shows the reference session at each verbosity -------------------------

RENDERING_DOC = ROOT / "docs" / "rendering.md"
LEVELS = ("quiet", "normal", "verbose")


def transcript(verbosity: str) -> str:
    """The demo session in Telegram at `verbosity`, as plain text (`preview --text`)."""
    return render(recorded().encode(), DEMO, "telegram", verbosity=verbosity, text=True)


def _doc_block(doc: str, verbosity: str) -> tuple[int, int]:
    """Where the transcript at `verbosity` sits in the doc (between its two markers)."""
    start = doc.index(f"<!-- reference {verbosity} -->\n```text\n") + len(
        f"<!-- reference {verbosity} -->\n```text\n"
    )
    return start, doc.index(f"```\n<!-- /reference {verbosity} -->", start)


@pytest.mark.parametrize("verbosity", LEVELS)
def test_the_rendering_doc_shows_the_reference_session_as_it_renders(verbosity: str) -> None:
    """What docs/rendering.md shows at each level is what the bridge shows today."""
    doc = RENDERING_DOC.read_text(encoding="utf-8")
    start, end = _doc_block(doc, verbosity)
    assert doc[start:end] == transcript(verbosity), (
        f"docs/rendering.md's {verbosity} transcript is not what the bridge shows: "
        "review the change, then run `make snapshots`"
    )


def write_snapshots() -> None:
    """`make snapshots`: make the current rendering the snapshots, and the transcripts in
    docs/rendering.md."""
    SNAPSHOTS.mkdir(exist_ok=True)
    for channel in CHANNELS:
        snapshot(channel).write_text(reference(channel), encoding="utf-8")
        snapshot(channel).with_name(f"reference.{channel}.new.html").unlink(missing_ok=True)
        print(f"wrote {snapshot(channel).relative_to(ROOT)}")
    doc = RENDERING_DOC.read_text(encoding="utf-8")
    for verbosity in LEVELS:
        start, end = _doc_block(doc, verbosity)
        doc = doc[:start] + transcript(verbosity) + doc[end:]
    RENDERING_DOC.write_text(doc, encoding="utf-8")
    print(f"wrote the transcripts in {RENDERING_DOC.relative_to(ROOT)}")


if __name__ == "__main__":
    write_snapshots()


def test_an_old_recordings_question_shows_what_became_of_it_not_expired() -> None:
    """The realistic session was recorded days ago: its question's `expires_at` is in the
    past on today's wall clock. The preview replays it with the time it had left, so the card
    shows the answer the recording holds instead of "Expired without an answer"."""
    recording = ROOT / "tests" / "sessions" / "realistic.jsonl"
    shown = render(recording.read_bytes(), recording.name, "telegram", text=True)
    assert "Expired without an answer" not in shown
    assert "Answered in the terminal: Allow" in shown


@pytest.mark.parametrize("channel", ["telegram", "discord", "slack", "web", "console"])
@pytest.mark.parametrize("text", [True, False], ids=["transcript", "page"])
def test_every_reply_of_a_realistic_session_is_in_its_preview(channel: str, text: bool) -> None:
    """A burst right before a question goes in the card's own message on a channel that shows
    a card's context (issue 32): the preview, as a page and as a transcript, shows it there,
    never drops it. Every reply of the recorded session is read somewhere."""
    import html
    import json

    data = (ROOT / "tests" / "sessions" / "realistic.jsonl").read_bytes()
    shown = render(data, "realistic", channel, text=text)
    if not text:
        shown = html.unescape(shown)
    for line in data.decode().splitlines():
        event = json.loads(line)
        if event["type"] == "message.agent.replied":
            first = event["data"]["text"].split("\n")[0].lstrip("# ")
            words = first.replace("`", "").replace("**", "")
            assert words[:40] in shown, f"{channel}: not shown: {words[:40]!r}"
