"""Ctrl-C while `aep-bridge` is still importing itself (its first second or so).

Imported first of all by the package, for its effect: `guard()` runs at import, before
anything slow is imported (so this module imports only built-in modules, and `exit_status`,
which imports nothing).

Python turns Ctrl-C into a KeyboardInterrupt, which, raised among the imports `cli.main`
runs after, would end the command with a traceback. `guard` installs a SIGINT handler that
ends the command in one line instead, only when the process is the command (`aep-bridge ...`
or `python -m aep_bridge ...`), never in a program that imports the package; `cli.main` puts
the usual KeyboardInterrupt back (`release`) once it runs, and each command handles it from
there. (Ctrl-C in the few milliseconds Python takes to start, before this runs, is Python's.)
"""

import contextlib
import os
import signal
import sys
from types import FrameType

#: the exit status of a command interrupted by Ctrl-C before it could stop in its own order
from .process.exit_status import EXIT_INTERRUPTED  # imports nothing: as quick as a built-in module

#: the line it prints (as `aep-bridge run` logs it: docs/cli.md lists it)
LINE = "aep-bridge: interrupted while starting (Ctrl-C)\n"


def _interrupted(signum: int, frame: FrameType | None) -> None:
    try:
        sys.stderr.write(LINE)
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    os._exit(EXIT_INTERRUPTED)  # nothing is open yet: there is nothing to clean up


def _is_the_command() -> bool:
    first = sys.argv[0] if sys.argv else ""
    if os.path.basename(first) == "aep-bridge":
        return True
    # `python -m aep_bridge`: argv[0] is "-m" while any `-m` package is being found, so the
    # interpreter's own command line says which module it runs (another one may import us)
    original = list(getattr(sys, "orig_argv", ()))
    return (
        first == "-m"
        and "-m" in original
        and original[original.index("-m") + 1 :][:1] == ["aep_bridge"]
    )


#: whether this process is the command (known at import: `-m` shows only then)
_command = False


def guard() -> None:
    """In the command, until `release`: Ctrl-C prints `LINE` and exits 130."""
    global _command
    _command = _is_the_command()
    if _command and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        try:  # noqa: SIM105
            signal.signal(signal.SIGINT, _interrupted)
        except ValueError:  # not the main thread
            pass


def end_interrupted() -> None:
    """In the command, after a Ctrl-C it handled while starting: end now, with 130.

    CPython marks a KeyboardInterrupt raised inside `exec()` (dataclasses and namedtuples
    make their methods so, at import) as unhandled even once it is caught, and then ends
    the process by SIGINT instead of with the status the command returns."""
    if not _command:
        return
    import logging

    logging.shutdown()  # the line saying so is written
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(EXIT_INTERRUPTED)


def release() -> None:
    """Ctrl-C raises KeyboardInterrupt again (if `guard` had changed it)."""
    if signal.getsignal(signal.SIGINT) is _interrupted:
        signal.signal(signal.SIGINT, signal.default_int_handler)


guard()
