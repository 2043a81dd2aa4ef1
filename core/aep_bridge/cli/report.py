"""`aep-bridge status`: the running bridge's report, printed for a person (or as JSON).

Every line is printed through `visible(..., one_line=True)`: a session's id and name are the
agent's words, a source's or channel's reason may quote another program's, and a newline in
any of them would print a line of its own (a fake pending session, a fake `store: fine`).
"""

from __future__ import annotations

import json
import sys
from typing import TextIO

from ..text.terminal import visible
from .away import away_lines
from .common import EXIT_OK, EXIT_USAGE, EXIT_VIOLATIONS, ask_bridge

NO_CHANNEL = (
    "no channel is running: nothing shows your agents' sessions; fix the channels listed "
    "(`aep-bridge check`, `aep-bridge doctor`, the bridge's log) and restart the bridge"
)


def _age(seconds: float | None) -> str:
    """45s, 3m 05s, 2h 10m, 3d 4h."""
    if seconds is None:
        return "-"
    whole = int(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m {whole % 60:02d}s"
    if whole < 86400:
        return f"{whole // 3600}h {whole % 3600 // 60:02d}m"
    return f"{whole // 86400}d {whole % 86400 // 3600}h"


def _size(count: object) -> str:
    """1.5 MB, 320 KB, 12 bytes (binary units, as the config's defaults are)."""
    if not isinstance(count, (int, float)):
        return "-"
    if count >= 1 << 20:
        return f"{count / (1 << 20):.1f} MB"
    if count >= 1 << 10:
        return f"{count / (1 << 10):.0f} KB"
    return f"{count:.0f} bytes"


def _store_line(store: dict[str, object]) -> str:
    """The store's size on disk, and the replay buffers against their budget."""
    line = f"store: {_size(store.get('bytes'))} on disk"
    extra = []
    if store.get("wal_bytes"):
        extra.append(f"WAL {_size(store['wal_bytes'])}")
    if store.get("free_bytes"):
        extra.append(f"{_size(store['free_bytes'])} free inside")
    if extra:
        line += f" ({'; '.join(extra)})"
    replay = store.get("replay")
    if isinstance(replay, dict):
        line += (
            f", replay buffers {_size(replay.get('bytes'))} of {_size(replay.get('budget'))}"
            f" in {replay.get('sessions', 0)} session(s)"
        )
    return line


def _line(text: str, out: TextIO) -> None:
    """Print `text` as one line, whatever the values in it hold."""
    print(visible(text, one_line=True), file=out)


def status(
    *,
    config_file: str | None,
    url: str | None,
    token: str | None,
    as_json: bool = False,
    out: TextIO | None = None,
) -> int:
    """Ask the running bridge for its sources, channels, pending questions, outboxes and store.

    Exit 0 when it runs with at least one channel and nothing failed, 1 when no channel is
    running or a channel or source failed, 2 when no bridge answers (or it refuses the token).
    """
    out = out or sys.stdout
    reply = ask_bridge("status", "/status", config_file=config_file, url=url, token=token)
    if reply is None:
        return EXIT_USAGE
    base, report = reply.base, reply.body
    if reply.status != 200 or report is None:
        detail = report.get("detail", "") if report is not None else reply.text[:200]
        print(
            f"aep-bridge status: {base}/status answered {reply.status}: {detail}",
            file=sys.stderr,
        )
        return EXIT_USAGE
    channels = report.get("channels", [])
    sources = report.get("sources", [])
    failed = [c for c in channels if c.get("state") in ("failed", "starting")] + [
        s for s in sources if s.get("state") == "failed"
    ]
    idle = not report.get("running_channels")
    if as_json:
        json.dump(report, out, indent=2, ensure_ascii=False)
        out.write("\n")
        if idle:
            print(f"aep-bridge status: {NO_CHANNEL}", file=sys.stderr)
        return EXIT_VIOLATIONS if idle or failed else EXIT_OK
    head = f"bridge at {base}"
    if report.get("version"):
        head += f": aep-bridge {report['version']}"
    if report.get("pid"):
        head += f", pid {report['pid']}"
    if report.get("uptime") is not None:
        head += f", up {_age(report['uptime'])}"
    _line(head, out)
    if idle:
        print(f"\n  !!! {NO_CHANNEL}\n", file=out)
    print("sources:", file=out)
    for source in sources:
        line = f"  {source.get('name')}: {source.get('state')}"
        if source.get("reason"):
            line += f": {source['reason']}"
        if "files" in source:
            line += f" ({source['files']} log(s) open, {source.get('bad_lines', 0)} bad line(s))"
        _line(line, out)
    print("channels:", file=out)
    if not channels:
        print("  none configured", file=out)
    for channel in channels:
        line = f"  {channel.get('name')} ({channel.get('type')}): {channel.get('state')}"
        if channel.get("state") == "failed":
            line = line.replace(": failed", ": FAILED")
        elif channel.get("state") == "starting":
            line = line.replace(": starting", ": NOT STARTED YET (trying again)")
        if channel.get("reason"):
            line += f": {channel['reason']}"
        if "outbox" in channel:
            line += f", outbox {channel['outbox'].get('queued', 0)} queued"
        _line(line, out)
    pending = report.get("pending", {})
    sessions = pending.get("sessions", [])
    _line(
        f"pending questions: {pending.get('count', 0)}"
        + (
            f" in {len(sessions)} session(s), oldest waiting {_age(pending.get('oldest_age'))}"
            if sessions
            else ""
        ),
        out,
    )
    for session in sessions:
        who = " ".join(str(part) for part in (session.get("agent"), session.get("session")) if part)
        name = session.get("name")
        named = f" {name!r}" if name and name != session.get("session") else ""
        owner = session.get("owner")
        _line(
            f"  {who}{named}: {session.get('count')} waiting, the oldest for "
            f"{_age(session.get('oldest_age'))}" + (f"; owner {owner}" if owner else ""),
            out,
        )
    if isinstance(report.get("away"), dict):
        for line in away_lines(report["away"]):
            _line(line, out)
    store = report.get("store")
    if isinstance(store, dict):
        _line(_store_line(store), out)
    return EXIT_VIOLATIONS if idle or failed else EXIT_OK
