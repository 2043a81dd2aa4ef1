"""`aep-bridge audit`: export the audit trail (`audit_export.py`) to stdout.

It reads the store read-only, so it runs beside a running bridge (SQLite's WAL lets a reader
see every committed record) and never migrates or changes the file.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any, cast

from ..commands.audit_export import FORMATS, AuditUsageError, Format, export, parse_since
from ..config.config import ConfigError, config_path, read_config
from ..store import DB_NAME, MIGRATIONS, Store
from .common import CONFIG_HELP, EXIT_OK, EXIT_USAGE

#: the schema version that made the audit table (found, not written down: versions renumber)
AUDIT_VERSION = 1 + next(
    i for i, script in enumerate(MIGRATIONS) if "CREATE TABLE audit (" in script
)


def add_parser(commands: Any) -> None:
    """Register `aep-bridge audit` (`cli/parser.py`)."""
    trail = commands.add_parser(
        "audit",
        help="export the audit trail: questions, answers, refused presses, instructions, tokens",
        description="Print the audit trail's records, oldest first, to stdout: as JSON lines "
        "(default), CSV, or OCSF Detection Findings (AEP-0005 §4; attention records only, each "
        "with its source envelope). Reads the store read-only; the bridge may be running.",
    )
    trail.add_argument(
        "--since",
        metavar="T",
        help="records from T on: an ISO 8601 date or time (UTC unless it says) or an age "
        "(30m, 24h, 7d)",
    )
    trail.add_argument(
        "--session", metavar="S", help="one session: its AEP session id or the bridge's id"
    )
    trail.add_argument("--format", choices=FORMATS, default="jsonl", help="default jsonl")
    trail.add_argument("--config", help=CONFIG_HELP + "; for its state_dir")


def audit(args: argparse.Namespace) -> int:
    """Run `aep-bridge audit`."""
    from ..process.server import state_dir_of

    try:
        config = read_config(config_path(args.config))
        since = None if args.since is None else parse_since(args.since, time.time())
    except (ConfigError, AuditUsageError) as exc:
        print(f"aep-bridge audit: {exc}", file=sys.stderr)
        return EXIT_USAGE
    path = Path(state_dir_of(config)) / DB_NAME
    if not path.exists():
        print(f"aep-bridge audit: no store at {path}: nothing recorded yet", file=sys.stderr)
        return EXIT_OK
    conn = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, isolation_level=None)
    try:
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        if version > len(MIGRATIONS):
            print(
                f"aep-bridge audit: {path} was written by a newer aep-bridge (schema "
                f"{version}); use that version's `aep-bridge audit`",
                file=sys.stderr,
            )
            return EXIT_USAGE
        if version < AUDIT_VERSION:
            print(
                f"aep-bridge audit: {path} has no audit trail yet (this version of the bridge "
                "has not run on it)",
                file=sys.stderr,
            )
            return EXIT_OK
        count = export(
            Store(conn, path),
            sys.stdout,
            fmt=cast(Format, args.format),
            since=since,
            session=args.session,
        )
    finally:
        conn.close()
    sys.stdout.flush()
    print(f"aep-bridge audit: {count} record(s)", file=sys.stderr)
    return EXIT_OK


__all__ = ["add_parser", "audit"]
