"""`aep-bridge run` (the bridge in this process) and `aep-bridge token` (the token its state
directory holds)."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from pathlib import Path

from .. import _startup
from ..config import env_file
from ..config.config import BridgeConfig, ConfigError, config_path, read_config
from ..process.client_endpoint import running_bridge
from ..process.exit_status import EXIT_INTERRUPTED
from .common import EXIT_OK, EXIT_USAGE, load

log = logging.getLogger("aep_bridge.cli")


def run(
    config_file: str | None = None,
    host: str | None = None,
    port: int | None = None,
    *,
    log_level: str | None = None,
    verbose: bool = False,
    quiet: bool = False,
) -> int:
    """Serve the bridge: the embedded AEP endpoint and the configured channels."""
    from ..process import log_setup

    # the bridge at INFO (or as asked), the libraries at WARNING; httpx and httpcore at
    # WARNING unless DEBUG is asked for: their INFO lines are URLs, and URLs can hold tokens
    log_setup.configure(log_level, verbose=verbose, quiet=quiet)
    held: int | None = None
    try:  # until the bridge handles signals itself, Ctrl-C ends it here, in one line
        # the secrets the wizards saved, as the systemd unit loads them (the environment wins)
        env_file.load()
        try:
            config, plugins = load(config_file)
        except ConfigError as exc:
            print(exc, file=sys.stderr)
            return EXIT_USAGE
        listen = config.listen.model_copy(
            update={k: v for k, v in (("host", host), ("port", port)) if v is not None}
        )
        from ..process.server import StartFailed, hold_state_dir, listen_on, serve, state_dir_of

        try:
            # one bridge per state directory, for this process's life, before the store opens
            held = hold_state_dir(state_dir_of(config))
            # then its port: a taken one is said before anything starts
            sockets = listen_on(listen.host, listen.port)
            try:
                asyncio.run(serve(config, plugins, listen.host, listen.port, sockets=sockets))
            except KeyboardInterrupt:  # before the bridge took its signals: it ends there
                log.info("interrupted while starting (Ctrl-C)")
                return EXIT_INTERRUPTED
        except StartFailed as failed:
            return failed.status
        finally:
            # stopped (or failing): a Ctrl-C pressed once more on the way out changes nothing
            for signum in (signal.SIGINT, signal.SIGTERM):
                signal.signal(signum, signal.SIG_IGN)
    except KeyboardInterrupt:
        log.info("interrupted while starting (Ctrl-C)")
        _startup.end_interrupted()
        return EXIT_INTERRUPTED
    finally:
        if held is not None:
            os.close(held)
    return EXIT_OK


def _state_dir(config: BridgeConfig) -> Path:
    from ..process.server import state_dir_of

    return state_dir_of(config)


def token(config_file: str | None, *, rotate: bool = False) -> int:
    """Print the bridge's bearer token (made on first use); `rotate` replaces it."""
    from ..intake.auth import load_or_create_token, rotate_token

    try:
        config = read_config(config_path(config_file))
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return EXIT_USAGE
    state_dir = _state_dir(config)
    print(rotate_token(state_dir) if rotate else load_or_create_token(state_dir))
    running = running_bridge(state_dir, "token")
    if running is not None:
        print(
            f"aep-bridge token: the bridge listening at {running} "
            + ("keeps using the old token until it is restarted" if rotate else "uses it"),
            file=sys.stderr,
        )
    return EXIT_OK
