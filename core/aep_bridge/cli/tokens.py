"""`aep-bridge token create|list|revoke`: a token per person (`intake.principals`).

The tokens live in the bridge's store, as their sha256 only: these commands open the store
themselves, so they work with the bridge stopped or running (it reads the store at every
check). A token is printed once, by `create`. `revoke` also asks a running bridge to close
that token's open connections at once (`POST /tokens/revoked`, with the bridge's own token).
"""

from __future__ import annotations

import argparse
import datetime
import getpass
import sys
from pathlib import Path
from typing import TextIO

from ..config.config import ConfigError, config_path, read_config
from ..intake.principals import LOCAL, ROLES, BadName, check_name, check_role, digest, new_token
from .common import CONFIG_HELP, EXIT_OK, EXIT_USAGE, EXIT_VIOLATIONS


def add_parser(token: argparse.ArgumentParser) -> None:
    """The subcommands of `aep-bridge token` (alone, it prints the bridge's own token)."""
    commands = token.add_subparsers(dest="token_command", metavar="ACTION")
    create = commands.add_parser(
        "create",
        help="make a token for one person or machine, shown once",
        description="Make a named token and print it once (the store keeps its sha256 only). "
        "Roles: agent (send events on its own sessions, take their commands), reader "
        "(subscribe only), admin (everything, as the bridge's own token).",
    )
    create.add_argument("name", help="the token's name: lower-case letters, digits, . _ -")
    create.add_argument("--role", choices=ROLES, default="agent", help="default: agent")
    commands.add_parser("list", help="the named tokens: name, role, created, revoked")
    revoke = commands.add_parser(
        "revoke", help="revoke a named token; a running bridge closes its connections at once"
    )
    revoke.add_argument("name")
    for sub in (create, revoke, *[commands.choices["list"]]):
        sub.add_argument(
            "--config", help=CONFIG_HELP + "; for its state_dir", default=argparse.SUPPRESS
        )


def _state_dir(config_file: str | None) -> Path:
    from ..process.server import state_dir_of

    return state_dir_of(read_config(config_path(config_file)))


def _when(stamp: float | None) -> str:
    if stamp is None:
        return "-"
    return datetime.datetime.fromtimestamp(stamp, datetime.UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def main(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Run `token create|list|revoke`; 0 done, 1 refused (a name taken or unknown), 2 usage."""
    from ..loop.audit import TOKEN_CREATED, TOKEN_REVOKED, AuditLog
    from ..store import Store, StoreError, TokenExists

    out = out or sys.stdout
    action = args.token_command
    try:
        state_dir = _state_dir(getattr(args, "config", None))
        name = check_name(args.name) if action in ("create", "revoke") else ""
        role = check_role(args.role) if action == "create" else "agent"
    except (ConfigError, BadName) as exc:
        print(f"aep-bridge token {action}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        store = Store.open(state_dir)
    except StoreError as exc:
        print(f"aep-bridge token {action}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    with store:
        audit = AuditLog(store)
        if action == "create":
            secret = new_token()
            try:
                with store.transaction():  # the token and its record, or neither
                    store.create_token(name, role, digest(secret), None)
                    audit.record(TOKEN_CREATED, principal=LOCAL.name, data=_operator(name, role))
            except TokenExists:
                print(
                    f"aep-bridge token create: a token named {name!r} exists; revoke it first "
                    f"(`aep-bridge token revoke {name}`) or choose another name",
                    file=sys.stderr,
                )
                return EXIT_VIOLATIONS
            print(secret, file=out)
            print(
                f"aep-bridge token: {name} ({role}) created; it is shown this once "
                "(the bridge keeps only its hash)",
                file=sys.stderr,
            )
            return EXIT_OK
        if action == "list":
            rows = store.tokens()
            if not rows:
                print("no named tokens (`aep-bridge token create NAME`)", file=out)
            for row in rows:
                revoked = f"revoked {_when(row.revoked)}" if row.revoked is not None else "live"
                print(f"{row.name}\t{row.role}\tcreated {_when(row.created)}\t{revoked}", file=out)
            return EXIT_OK
        with store.transaction():
            was_live = store.revoke_token(name)
            if was_live:
                audit.record(TOKEN_REVOKED, principal=LOCAL.name, data=_operator(name, None))
        if not was_live:
            print(
                f"aep-bridge token revoke: no live token named {name!r} (`aep-bridge token list`)",
                file=sys.stderr,
            )
            return EXIT_VIOLATIONS
    print(f"token {name} revoked: it is refused from now on", file=out)
    _close_connections(state_dir, name, out)
    return EXIT_OK


def _operator(name: str, role: str | None) -> dict[str, str | None]:
    """What the audit trail keeps of a token's creation or revocation: the token's name and
    role, and who ran the command on this machine (the OS user; the command acts with the
    state directory, as the bridge's own token does)."""
    return {"token": name, "role": role, "actor_id": getpass.getuser(), "actor_name": None}


def _close_connections(state_dir: Path, name: str, out: TextIO) -> None:
    """Ask a running bridge to close the revoked token's connections now."""
    import httpx

    from ..intake.auth import load_or_create_token
    from ..process.client_endpoint import running_bridge

    base = running_bridge(state_dir, "token revoke")
    if base is None:
        print("no bridge is running: it will refuse the token when it starts", file=out)
        return
    try:
        reply = httpx.post(
            f"{base}/tokens/revoked",
            json={"name": name},
            headers={"Authorization": f"Bearer {load_or_create_token(state_dir)}"},
            timeout=10.0,
        )
        closed = int(reply.json()["closed"]) if reply.status_code == 200 else None
    except (httpx.HTTPError, ValueError, KeyError, TypeError):
        closed = None
    if closed is None:
        print(
            f"aep-bridge token revoke: the bridge at {base} did not close the token's open "
            "connections (an older aep-bridge?): restart it to be sure they are gone",
            file=sys.stderr,
        )
    else:
        print(f"the bridge at {base} closed {closed} open connection(s) of it", file=out)
