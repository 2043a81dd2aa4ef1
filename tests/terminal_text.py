"""What an agent's text can carry to attack a terminal, and the rule a terminal-safe text
keeps (issue 30, item 6), written out apart from the code (`aep_bridge.text.terminal`): the tests
of the console channel, the bridge's log, `aep-bridge run` in a terminal and `status` hold
what they read to `raw_controls`."""

from __future__ import annotations

#: the bidi embeddings, overrides, isolates and marks: they reorder what a line shows
BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"

#: what an agent's text carries to attack the terminal: clear the screen, set the window
#: title (OSC 0), write the clipboard (OSC 52), an 8-bit CSI, a carriage return that hides
#: what came before it, DEL, a right-to-left override, and a line that looks like the log's
HOSTILE = (
    "ok\x1b[2J\x1b[H"
    "\x1b]0;owned\x07"
    "\x1b]52;c;cm0gLXJmIH4=\x07"
    "\x9b31mred"
    "rm -rf ~\r ls -la   "
    "back\x7f"
    "\u202eevil\u202c"
    "\naep-bridge: error: forged"
)
#: the same attack as the escapes a person sees instead
SHOWN = (
    "\\u001b[2J",
    "\\u001b]0;owned\\u0007",
    "\\u001b]52;c;cm0gLXJmIH4=\\u0007",
    "\\u009b31m",
    "\\r",
    "\\u007f",
    "\\u202e",
)


def raw_controls(text: str) -> list[str]:
    """The characters in `text` a terminal would act on: C0 controls but newline and tab,
    DEL, C1 controls, bidi controls, the line and paragraph separators, lone surrogates."""
    return [
        char
        for char in text
        if (ord(char) < 0x20 and char not in "\n\t")
        or 0x7F <= ord(char) <= 0x9F
        or char in BIDI
        or char in "\u2028\u2029"
        or 0xD800 <= ord(char) <= 0xDFFF
    ]
