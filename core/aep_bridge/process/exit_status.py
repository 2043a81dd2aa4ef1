"""The exit statuses of the `aep-bridge` commands, all in one place.

docs/cli.md ("Exit statuses") is the table of them, and the systemd unit
(docs/systemd/aep-bridge.service) does not restart `aep-bridge run` after `NEEDS_A_PERSON`;
tests/test_deploy.py holds the three to each other. Imports nothing (`_startup` uses it while
the package is still importing).
"""

from typing import Final

#: done; `run`: stopped by SIGINT or SIGTERM
EXIT_OK: Final = 0
#: something is wrong and was said: problems in a config (`check`, `doctor`), a log
#: (`validate`), a running bridge (`status`), a refused event (`emit`), a cancelled question
#: (`ask`, `demo`), a stopped wizard (`setup`), a wrong hook command line (`hook`); also
#: Python's own status for a failure nobody caught (with a traceback)
EXIT_FAILED: Final = 1
#: the command cannot do what was asked: a wrong command line (argparse), a config that
#: cannot be read or has a problem at its top level, a file that cannot be read or written,
#: no bridge answers (`status`, `ask`, `demo`), a refused change (`install`, `agentd`)
EXIT_USAGE: Final = 2
#: `run`: the endpoint cannot listen (the port is taken); uvicorn's `STARTUP_FAILURE`
EXIT_CANNOT_LISTEN: Final = 3
#: `ask`, `demo`: no answer in time
EXIT_NO_ANSWER: Final = 3
#: `run`: another bridge holds the state directory
EXIT_BUSY: Final = 4
#: `run`: the state directory cannot be created or written
EXIT_STATE_DIR: Final = 5
#: `run`: the store is damaged, or was written by a newer aep-bridge
EXIT_STORE: Final = 6
#: Ctrl-C before the command could stop in its own order (`run` while it loads, `demo`,
#: `setup`)
EXIT_INTERRUPTED: Final = 130

#: the statuses after which `aep-bridge run` would only fail again the same way until a
#: person acts (fixes the config, stops the other bridge, makes the directory writable, moves
#: the damaged store aside or installs the newer version): a service manager must not
#: restart it (the unit's `RestartPreventExitStatus`). A taken port (3) may free itself, and
#: 1 is a failure nobody foresaw: those are restarted.
NEEDS_A_PERSON: Final = frozenset({EXIT_USAGE, EXIT_BUSY, EXIT_STATE_DIR, EXIT_STORE})

__all__ = [
    "EXIT_BUSY",
    "EXIT_CANNOT_LISTEN",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_NO_ANSWER",
    "EXIT_OK",
    "EXIT_STATE_DIR",
    "EXIT_STORE",
    "EXIT_USAGE",
    "NEEDS_A_PERSON",
]
