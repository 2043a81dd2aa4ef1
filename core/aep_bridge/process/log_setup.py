"""How `aep-bridge run` logs: one line per message on standard error, at a level you choose.

The bridge's own loggers (every name that starts with `aep_bridge`: the core, the built-in
channels, and plugins that name theirs so) log at the chosen level, INFO by default. The
libraries under it log only their warnings and errors, unless `-v` (INFO) or
`--log-level DEBUG` (everything). httpx and httpcore are the exception: their INFO lines are
request URLs, and Telegram's Bot API URLs carry the bot token
(`https://api.telegram.org/bot<TOKEN>/getUpdates`), so they stay at WARNING even with `-v`,
and only `--log-level DEBUG`, which asks for everything, lets them through.

A line is `aep-bridge: MESSAGE` at INFO, `aep-bridge: warning: MESSAGE` (`error:`,
`debug:`) at the other levels, and a library's line says which library:
`aep-bridge: error: uvicorn: ...`.

Every line goes through `scrub.ScrubFilter` first: the secrets the bridge knows, credentials
in URLs and bot tokens in URLs never reach the log, whoever logs them. Then through
`TerminalSafe`: a record is one line, whatever it quotes (an agent's text, a chat member's
name), with every control character, escape sequence and bidi override written as a visible
escape (`terminal.visible`); a traceback keeps its lines, each indented, so no line an agent
wrote can pass for a line of the log.
"""

from __future__ import annotations

import logging
import sys
from typing import Final, TextIO

from ..text.scrub import ScrubFilter, rewrite_trace
from ..text.terminal import visible

#: the prefix of the bridge's own logger names
OWN_PREFIX: Final = "aep_bridge"
#: the libraries' loggers, quiet unless verbose
LIBRARIES: Final = (
    "asyncio",
    "telegram",  # python-telegram-bot: telegram, telegram.ext and their children
    "telegram.ext",
    "uvicorn",  # uvicorn.error and uvicorn.access are its children
    "uvicorn.error",
    "uvicorn.access",
    "websockets",
)
#: libraries whose INFO lines print URLs, which can hold a token (Telegram's bot URLs do)
URL_LOGGERS: Final = ("httpx", "httpcore")
LEVELS: Final = ("DEBUG", "INFO", "WARNING", "ERROR")


class _Format(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        if not record.name.startswith(OWN_PREFIX):
            text = f"{record.name.partition('.')[0]}: {text}"
        if record.levelno != logging.INFO:
            text = f"{record.levelname.lower()}: {text}"
        return f"aep-bridge: {text}"


class TerminalSafe(logging.Filter):
    """Each record made safe for a terminal, after scrubbing: its message (the arguments in
    it too) on one line through `visible`, newlines included, so a logged agent string can
    neither act on the terminal nor forge a line of the log; its traceback and stack through
    `visible`, each line indented two spaces (a line that starts `aep-bridge:` is always a
    record's first)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "_terminal_safe", False):
            return True  # a second handler with this filter: done already
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: say what was logged, still one safe line
            message = f"{record.msg} (could not be formatted with {record.args!r})"
        record.msg, record.args = visible(message, one_line=True), None
        rewrite_trace(record, _indented)
        setattr(record, "_terminal_safe", True)  # noqa: B010
        return True


def _indented(text: str) -> str:
    return "\n".join(f"  {line}" for line in visible(text).split("\n"))


class _Libraries(logging.Filter):
    """Holds any other library (one not in `LIBRARIES`) to the libraries' level."""

    def __init__(self, level: int) -> None:
        super().__init__()
        self.level = level

    def filter(self, record: logging.LogRecord) -> bool:
        return record.name.startswith(OWN_PREFIX) or record.levelno >= self.level


class _Handler(logging.StreamHandler[TextIO]):
    """The handler `configure` installs (and replaces when called again)."""


def levels(
    level: str | None = None, *, verbose: bool = False, quiet: bool = False
) -> tuple[int, int, int]:
    """The bridge's level, the libraries' level, and httpx's and httpcore's level.

    Default INFO, WARNING, WARNING; `verbose` DEBUG, INFO, WARNING; `quiet` WARNING for all;
    `level` is the bridge's level, the libraries logging at it too but never below WARNING,
    except DEBUG, which is everything, httpx included.
    """
    if verbose:
        return logging.DEBUG, logging.INFO, logging.WARNING
    own = logging.WARNING if quiet else logging.getLevelNamesMapping()[(level or "INFO").upper()]
    if own <= logging.DEBUG:
        return own, own, own
    quiet_level = max(own, logging.WARNING)
    return own, quiet_level, quiet_level


def configure(
    level: str | None = None,
    *,
    verbose: bool = False,
    quiet: bool = False,
    stream: TextIO | None = None,
) -> None:
    """Log to `stream` (standard error) at the levels `levels` gives."""
    own, libraries, urls = levels(level, verbose=verbose, quiet=quiet)
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _Handler)]:
        root.removeHandler(old)
    handler = _Handler(stream or sys.stderr)
    handler.setFormatter(_Format("%(message)s"))
    handler.addFilter(_Libraries(libraries))
    # every line, a library's too, without the secrets the bridge knows (`scrub.register`),
    # credentials in URLs, and bot tokens
    handler.addFilter(ScrubFilter())
    # then one line each, an agent's escape sequences shown, never acted on (`TerminalSafe`)
    handler.addFilter(TerminalSafe())
    root.addHandler(handler)
    root.setLevel(own)
    logging.getLogger(OWN_PREFIX).setLevel(own)
    for name in LIBRARIES:
        library = logging.getLogger(name)
        library.setLevel(libraries)
        # a handler of the library's own (uvicorn's default logging config installs one
        # for uvicorn.error) would print past the scrubbing and the escaping: every line
        # goes through ours
        for own_handler in list(library.handlers):
            library.removeHandler(own_handler)
        library.propagate = True
    for name in URL_LOGGERS:
        logging.getLogger(name).setLevel(urls)
