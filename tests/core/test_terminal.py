"""Text made safe for a terminal (`aep_bridge.text.terminal`), and the bridge's log written with it
(`log_setup.TerminalSafe`): whatever an agent writes, nothing that reaches the terminal is a
control character, an escape sequence or a bidi override, and a person sees that something
was there.

The rule is `tests/terminal_text.py`'s `raw_controls`, written out apart from the code.
"""

from __future__ import annotations

import io
import json
import logging
import re
import sys
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aep_bridge.process import log_setup
from aep_bridge.text.terminal import safe_output, visible
from tests.terminal_text import BIDI, HOSTILE, SHOWN, raw_controls

#: every character a terminal acts on, and the characters an escape is made of
_DANGER = st.sampled_from(
    [chr(c) for c in range(0x20)]
    + [chr(c) for c in range(0x7F, 0xA0)]
    + list(BIDI)
    + ["\u2028", "\u2029", "\ud800", "\udfff", "\\", "u", "0", "[", "]"]
)
#: any text at all, lone surrogates included, leaning on the dangerous characters
ANY_TEXT = st.text(st.one_of(st.characters(), _DANGER))

_UNESCAPE = re.compile(r"\\(u[0-9a-f]{4}|r|n)")


def _unescape(text: str) -> str:
    def one(match: re.Match[str]) -> str:
        code = match.group(1)
        return {"r": "\r", "n": "\n"}.get(code) or chr(int(code[1:], 16))

    return _UNESCAPE.sub(one, text)


@settings(max_examples=500)
@given(ANY_TEXT)
def test_nothing_a_terminal_acts_on_gets_through_and_a_person_sees_it_was_there(text: str):
    shown = visible(text)
    assert raw_controls(shown) == []
    shown.encode("utf-8")  # strict: a lone surrogate could not even be written
    assert shown.count("\n") == text.count("\n")  # lines stay lines
    assert shown.count("\t") == text.count("\t")
    # each character acted on became a visible escape, one for one
    escapes = len(_UNESCAPE.findall(shown)) - len(_UNESCAPE.findall(text))
    assert escapes == len(raw_controls(text))
    if "\\" not in text:  # and the escapes say exactly what was there
        assert _unescape(shown) == text
    assert visible(shown) == shown  # once is enough: nothing is escaped twice


@given(ANY_TEXT)
def test_one_line_is_one_line(text: str):
    shown = visible(text, one_line=True)
    assert "\n" not in shown
    assert raw_controls(shown) == []
    assert shown == visible(text).replace("\n", "\\n")


@given(st.text(st.characters(codec="utf-8", exclude_categories=["Cc", "Cf", "Cs", "Zl", "Zp"])))
def test_ordinary_text_reads_as_written(text: str):
    """Paths, regexes, other scripts, emoji: only controls are escaped."""
    assert visible(text) == text
    assert visible("C:\\Users\\me\\x1b " + text) == "C:\\Users\\me\\x1b " + text


@given(st.recursive(ANY_TEXT | st.integers(), lambda kids: st.lists(kids, max_size=4)))
def test_json_printed_through_it_stays_json_and_means_the_same(value: object):
    """`aep-bridge status --json` and `validate --json` print through `visible`: the escapes
    are JSON's, so the report is still JSON, and reads back as it was."""
    document = json.dumps(value, ensure_ascii=False, indent=2)
    assert json.loads(visible(document)) == value


def test_the_attack_is_shown_not_run():
    shown = visible(HOSTILE)
    assert raw_controls(shown) == []
    for escape in SHOWN:
        assert escape in shown, (escape, shown)


def test_a_command_prints_through_it(capsys: pytest.CaptureFixture[str]):
    with safe_output():
        print(HOSTILE)
        print("\x9b2J", file=sys.stderr)
    out, err = capsys.readouterr()
    assert raw_controls(out + err) == []
    assert "\\u001b[2J" in out
    assert err == "\\u009b2J\n"


def test_a_command_that_fails_prints_its_traceback_as_text(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    """A failure nobody foresaw ends a command as Python would (a traceback, status 1), its
    words, which can quote an agent's, shown as text."""
    import aep_bridge.cli as cli
    from aep_bridge.process.exit_status import EXIT_FAILED

    def fails(*args: object, **kwargs: object) -> int:
        raise RuntimeError(HOSTILE)

    monkeypatch.setattr(cli, "validate", fails)
    assert cli.main(["validate", "session.jsonl"]) == EXIT_FAILED
    err = capsys.readouterr().err
    assert "Traceback (most recent call last):" in err
    assert raw_controls(err) == []
    assert "RuntimeError: ok\\u001b[2J" in err


# -- the bridge's log --------------------------------------------------------------------


@pytest.fixture
def log_text() -> Iterator[io.StringIO]:
    """The bridge's handler as `aep-bridge run` installs it, writing here."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    stream = io.StringIO()
    log_setup.configure(stream=stream)
    yield stream
    for handler in list(root.handlers):
        if handler not in handlers:
            root.removeHandler(handler)
    root.setLevel(level)


def _records(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("aep-bridge: ")]


def test_a_logged_agent_string_is_one_line_and_shown(log_text: io.StringIO):
    log = logging.getLogger("aep_bridge.test")
    log.warning("answer to %s was not taken: %s", "c1", HOSTILE)
    log.info(f"a message built with an f-string: {HOSTILE}")
    log.error("%(who)s said %(what)r", {"who": HOSTILE, "what": HOSTILE})
    logging.getLogger("uvicorn.error").error(HOSTILE)  # a library's line too
    written = log_text.getvalue()
    assert raw_controls(written) == []
    lines = written.splitlines()
    assert lines == _records(written)  # four records, four lines: none forged
    assert len(lines) == 4
    assert not any(line.startswith("aep-bridge: error: forged") for line in lines)
    for escape in (*SHOWN, "\\naep-bridge: error: forged"):
        assert escape in lines[0], (escape, lines[0])
    assert lines[3].startswith("aep-bridge: error: uvicorn: ok\\u001b[2J")


def test_a_traceback_keeps_its_lines_indented_and_shown(log_text: io.StringIO):
    log = logging.getLogger("aep_bridge.test")
    try:
        raise ValueError(HOSTILE)
    except ValueError:
        log.exception("rendering the tool %s: the hook failed", "Bash\x1b[2J")
    log.warning("stack", stack_info=True)
    written = log_text.getvalue()
    assert raw_controls(written) == []
    lines = written.splitlines()
    assert _records(written) == [
        "aep-bridge: error: rendering the tool Bash\\u001b[2J: the hook failed",
        "aep-bridge: warning: stack",
    ]
    others = [line for line in lines if not line.startswith("aep-bridge: ")]
    assert others
    assert all(line.startswith("  ") for line in others)
    assert "  Traceback (most recent call last):" in lines
    assert "  aep-bridge: error: forged" in lines  # the exception's own line, indented


def test_a_second_handler_with_the_filter_does_not_escape_twice(log_text: io.StringIO):
    other = io.StringIO()
    handler = logging.StreamHandler(other)
    handler.addFilter(log_setup.TerminalSafe())
    logging.getLogger().addHandler(handler)
    try:
        try:
            raise ValueError("x\x1by")
        except ValueError:
            logging.getLogger("aep_bridge.test").exception("a\x1bb")
    finally:
        logging.getLogger().removeHandler(handler)
    assert "a\\u001bb" in log_text.getvalue()
    assert "a\\u001bb" in other.getvalue()
    assert "\n  ValueError: x\\u001by" in other.getvalue()  # indented once, not twice


@settings(max_examples=200)
@given(ANY_TEXT, st.sampled_from(["arg", "message", "exception", "library"]))
def test_whatever_an_agent_writes_the_log_stays_one_safe_line_per_record(text: str, how: str):
    stream = io.StringIO()
    handler = log_setup._Handler(stream)
    handler.setFormatter(log_setup._Format("%(message)s"))
    handler.addFilter(log_setup.TerminalSafe())
    log = logging.getLogger("uvicorn.error" if how == "library" else "aep_bridge.test")
    log.addHandler(handler)
    log.propagate = False
    previous = log.level
    log.setLevel(logging.INFO)
    try:
        if how == "arg":
            log.info("session %s: %r", text, text)
        elif how in ("message", "library"):
            log.warning(text)
        else:
            try:
                raise RuntimeError(text)
            except RuntimeError:
                log.exception("failed")
    finally:
        log.removeHandler(handler)
        log.propagate = True
        log.setLevel(previous)
    written = stream.getvalue()
    assert raw_controls(written) == []
    written.encode("utf-8")
    lines = written.splitlines()
    assert len(_records(written)) == 1
    assert lines[0].startswith("aep-bridge: ")
    assert all(line.startswith("  ") for line in lines[1:])
