"""Where a client of the bridge finds it: the flags, else the running bridge's own address (its
`listen.json`), else the config's `listen` address; and the bridge's token.

`aep-bridge emit`, `ask` and `status` use it, and so does the agent daemon (`agentd`), which
runs beside the bridge on the same machine and so reads the same state directory.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ..config.config import config_path, read_config


def answers(base: str) -> bool:
    """Whether an AEP endpoint answers discovery at `base` within 2 s."""
    import httpx

    try:
        return httpx.get(f"{base}/.well-known/aep", timeout=2.0).status_code == 200
    except httpx.HTTPError:
        return False


def running_bridge(state_dir: Path, command: str) -> str | None:
    """The URL a running bridge with this state directory wrote to its `listen.json`, if one
    answers there. A file left by a bridge that was killed is said so, and not used."""
    from .listening import listen_path, read_listening

    found = read_listening(state_dir)
    if found is None:
        return None
    if answers(found.url):
        return found.url
    print(
        f"aep-bridge {command}: {listen_path(state_dir)} says a bridge"
        f"{f' (pid {found.pid})' if found.pid else ''} listens at {found.url}, but nothing "
        "answers there (it was killed?); ignoring it",
        file=sys.stderr,
    )
    return None


def endpoint(
    config_file: str | None, url: str | None, token: str | None, command: str = "client"
) -> tuple[str, str]:
    """The base URL and token a client command uses: the flags, else the running bridge's
    own (where its `listen.json` says it listens), else the config's `listen` address."""
    from ..intake.auth import load_or_create_token
    from .listening import base_url
    from .server import state_dir_of

    config = read_config(config_path(config_file))
    state_dir = state_dir_of(config)
    base = (
        url
        or running_bridge(state_dir, command)
        or base_url(config.listen.host, config.listen.port)
    )
    return base.rstrip("/"), token or load_or_create_token(state_dir)


__all__ = ["answers", "endpoint", "running_bridge"]
