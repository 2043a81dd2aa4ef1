"""The `aep-bridge` command's entry point.

`aep-bridge hook` is run by a coding agent on every hook, and the agent waits on it, so it
goes straight to the hook shim without the command-line parser (which loads every plugin);
everything else is `cli.main`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["hook"]:
        from . import _startup
        from .agents.shim import main as hook

        _startup.release()
        code = hook(args[1:])
        # the agent waits for the hook to exit: skip the interpreter's teardown (~10 ms)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    from .cli import main as cli_main

    return cli_main(args)


__all__ = ["main"]
