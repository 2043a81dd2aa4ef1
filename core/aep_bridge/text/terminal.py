"""Text made safe to show in a terminal: what an agent wrote can carry escape sequences.

An agent's text (a message, a session name, a prompt, a refusal's detail) reaches the
approver's terminal through the console channel, the bridge's log and the commands that print
what the bridge holds (`status`, `demo`, `ask`, `preview --out -`). Printed raw, an escape
sequence in it can clear the screen (`ESC [2J`), rewrite the window title (OSC 0), write the
clipboard (OSC 52), move the cursor back over a line (`\\r`, CSI), or reorder what a line
shows (Unicode bidi overrides), so that a harmless-looking line hides a command.

`visible` turns every such character into a visible escape, as JSON and Python write it:
`ESC` becomes `\\u001b`, `CSI` (U+009B) `\\u009b`, DEL `\\u007f`, `\\r` `\\r`. What it escapes:

- every C0 control (U+0000..U+001F) but newline and tab; with `one_line`, newline too;
- DEL (U+007F) and every C1 control (U+0080..U+009F: the 8-bit CSI, OSC, NEL, ...);
- the bidi embeddings, overrides and isolates (U+202A..U+202E, U+2066..U+2069) and the bidi
  marks (U+200E, U+200F, U+061C), which reorder what a line shows ("Trojan Source");
- the line and paragraph separators (U+2028, U+2029), which some viewers break lines on;
- lone surrogates (U+D800..U+DFFF), which a UTF-8 terminal cannot be sent at all.

Everything else passes unchanged, backslashes included, so ordinary text (paths, regexes,
other scripts, emoji) reads as written; a literal `\\u001b` the agent typed reads the same as
an escaped ESC, and either way nothing hides. The escapes are valid JSON string escapes, so
JSON printed through `visible` (`status --json`) stays JSON and means the same.

This module imports nothing of the bridge's: the console channel, the log and the command line
all use it at the point where text leaves the process.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final, TextIO, cast

#: what `visible` escapes, newline and tab aside (module docstring)
_UNSAFE: Final = (
    "\x00-\x08\x0b-\x1f\x7f-\x9f"
    "\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
    "\ud800-\udfff"
)
_ESCAPED: Final = re.compile(f"[{_UNSAFE}]")
_ESCAPED_LINE: Final = re.compile(f"[\n{_UNSAFE}]")
_SHORT: Final = {"\n": "\\n", "\r": "\\r"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    return _SHORT.get(char) or f"\\u{ord(char):04x}"


def visible(text: str, *, one_line: bool = False) -> str:
    """`text` with every character a terminal would act on written as a visible escape;
    with `one_line`, newlines too (a log record is one line, whatever it quotes)."""
    pattern = _ESCAPED_LINE if one_line else _ESCAPED
    if pattern.search(text) is None:
        return text
    return pattern.sub(_escape, text)


class SafeStream:
    """A text stream that writes everything through `visible` to the stream it wraps (not an
    `io` class: one of those would close the wrapped stream when it is collected)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        self.stream.write(visible(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)  # flush, isatty, fileno, encoding, buffer, ...


def _wrapped(stream: TextIO | None) -> TextIO | None:
    if stream is None or isinstance(stream, SafeStream):
        return stream
    return cast(TextIO, SafeStream(stream))


@contextmanager
def safe_output() -> Iterator[None]:
    """Standard output and standard error through `visible` for the block: whatever a command
    prints, an agent's text in it included, reaches the terminal as text."""
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _wrapped(out), _wrapped(err)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = out, err


__all__ = ["SafeStream", "safe_output", "visible"]
