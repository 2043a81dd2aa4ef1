"""`aep-bridge audit`: the audit trail (`audit.py`) as JSON lines, CSV or OCSF.

The OCSF form is AEP-0005 §4's projection of the attention lifecycle: a record whose source
envelope is an `attention.*` event becomes a Detection Finding (2004), built from the envelope
and, within the metadata capture ceiling (§4.6), its payload; the bridge's own facts (who
answered in chat, with what command, the agent's acknowledgement) ride `unmapped.aep_bridge`;
a question's finding (`attention.requested`) lists there the cards its question was shown as
(`posted`: channel, chat, message, link), from the `question.posted` records.
Records with no such envelope (a refused press, the answer's command: the control plane,
which §4.1 does not project, a token) are in the JSON lines and CSV forms only.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import IO, Any, Final, Literal

from ..store import AuditRow, Store
from ..store.audit import AUDIT_COLUMNS

Format = Literal["jsonl", "csv", "ocsf"]
FORMATS: Final = ("jsonl", "csv", "ocsf")
#: the OCSF version AEP-0005 pins
OCSF_VERSION: Final = "1.8.0"
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")
_SECONDS: Final = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86_400.0}
#: a spreadsheet runs a cell that starts with one of these as a formula (CSV injection)
_FORMULA: Final = ("=", "+", "-", "@", "\t", "\r")
#: AEP-0005 §4.2: an attention event's `(activity_id, status_id)`
_ACTIVITY: Final = {
    "attention.requested": (1, 1),
    "attention.answered": (2, 2),
    "attention.resolved": (3, 4),
    "attention.timeout": (3, None),
}
#: AEP-0005 §4.4
_SEVERITY: Final = {"debug": 1, "info": 1, "notice": 2, "warning": 3, "error": 4, "critical": 5}
_CAPTURE_RANK: Final = {"none": 0, "metadata": 1, "redacted": 2, "full": 3}
#: where a posted card is (`question.posted`'s data): `message` is the `message_id` column
_WHERE: Final = ("chat", "link")
#: the CSV header: the record's id, the columns as the store keeps them, then where a card is
CSV_COLUMNS: Final = ("id", *AUDIT_COLUMNS, *_WHERE)


class AuditUsageError(ValueError):
    """A bad `--since` or `--format`: the message says what is accepted."""


def parse_since(text: str, now: float) -> float:
    """`--since`: an ISO 8601 date or time (UTC unless it says), or an age: `30m`, `24h`,
    `7d`."""
    found = _DURATION.match(text.strip())
    if found:
        return now - float(found.group(1)) * _SECONDS[found.group(2)]
    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise AuditUsageError(
            f"--since {text!r}: give an ISO 8601 date or time (2026-12-01, "
            "2026-12-01T14:02:00Z) or an age (30m, 24h, 7d)"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds")


def as_json(row: AuditRow) -> dict[str, Any]:
    """One record as the JSON lines form shows it."""
    (rid, when, kind, session_id, session, principal, channel, message_id, actor_id) = row[:9]
    actor_name, request_id, answer, command_id, ack, data, envelope = row[9:]
    facts = _maybe_json(data)
    where = facts if isinstance(facts, dict) else {}
    return {
        "id": rid,
        "time": _iso(when),
        "kind": kind,
        "session_id": session_id,
        "session": session,
        "principal": principal,
        "channel": channel,
        "message_id": message_id,
        "chat": where.get("chat"),
        "link": where.get("link"),
        "actor": {"id": actor_id, "name": actor_name} if actor_id or actor_name else None,
        "request_id": request_id,
        "answer": _maybe_json(answer),
        "command_id": command_id,
        "ack": ack,
        "data": facts,
        "envelope": None if envelope is None else json.loads(envelope),
    }


def _maybe_json(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def _cell(value: object) -> str:
    text = "" if value is None else value if isinstance(value, str) else str(value)
    return "'" + text if text.startswith(_FORMULA) else text


def as_ocsf(
    row: AuditRow, posted: Mapping[str, list[dict[str, Any]]] | None = None
) -> dict[str, Any] | None:
    """One record as an OCSF Detection Finding (AEP-0005 §4), or None when its source
    envelope is not an attention event (§4.1 projects nothing else of it). `posted`: where
    each question's cards are, by request id (`_posted`), for its `attention.requested`."""
    envelope_raw = row[15]
    if envelope_raw is None:
        return None
    envelope = json.loads(envelope_raw)
    kind = envelope.get("type") if isinstance(envelope, dict) else None
    if kind not in _ACTIVITY or not isinstance(envelope.get("time"), str):
        return None
    activity, status = _ACTIVITY[kind]
    data = envelope.get("data")
    record: dict[str, Any] = {
        "class_uid": 2004,
        "category_uid": 2,
        "activity_id": activity,
        "type_uid": 2004 * 100 + activity,
        "time": round(_seconds(envelope["time"]) * 1000),
        "severity_id": _SEVERITY.get(str(envelope.get("severity", "info")), 1),
        "message": kind,
        "metadata": {
            "version": OCSF_VERSION,
            "uid": envelope.get("id"),
            "original_time": envelope.get("time"),
            "product": {"name": envelope.get("agent")},
        },
    }
    if "cause" in envelope:
        record["metadata"]["correlation_uid"] = envelope["cause"]
    if status is not None:
        record["status_id"] = status
    disposition = _disposition(kind, data)
    if disposition is not None:
        record["disposition_id"] = disposition
        record["metadata"]["profiles"] = ["security_control"]
    finding = envelope.get("id") if kind == "attention.requested" else envelope.get("subject")
    record["finding_info"] = {"uid": finding, "title": kind}
    unmapped: dict[str, Any] = {"aep": {k: v for k, v in envelope.items() if k != "data"}}
    capture = str(envelope.get("capture", "metadata"))
    if data and _CAPTURE_RANK.get(capture, 3) <= _CAPTURE_RANK["metadata"]:  # §4.6
        unmapped["data"] = data
    facts = as_json(row)
    unmapped["aep_bridge"] = {
        key: facts[key]
        for key in ("id", "kind", "time", "principal", "request_id", "command_id", "ack")
        if facts[key] is not None
    }
    if facts["data"] and isinstance(facts["data"], dict):
        for key in ("status", "actor_name"):
            if facts["data"].get(key) is not None:
                unmapped["aep_bridge"][key] = facts["data"][key]
    cards = (posted or {}).get(facts["request_id"] or "")
    if kind == "attention.requested" and cards:
        unmapped["aep_bridge"]["posted"] = cards
    record["unmapped"] = unmapped
    return record


def _posted(rows: Iterator[AuditRow]) -> dict[str, list[dict[str, Any]]]:
    """Where each question's cards went, by request id, from its `question.posted` records:
    the channel and, when the channel said, the chat, message and link."""
    found: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        if row[2] != "question.posted" or row[10] is None:
            continue
        facts = as_json(row)
        card = {"channel": facts["channel"], "message": facts["message_id"]}
        card.update((key, facts[key]) for key in _WHERE)
        found.setdefault(row[10], []).append({k: v for k, v in card.items() if v is not None})
    return found


def _seconds(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def _disposition(kind: str, data: object) -> int | None:
    """AEP-0005 §4.5: a disposition only where the event itself asserts the outcome."""
    if kind == "attention.timeout":
        return 16
    dismissed = isinstance(data, dict) and data.get("resolution") == "dismissed"
    return 16 if kind == "attention.resolved" and dismissed else None


def export(
    store: Store,
    out: IO[str],
    *,
    fmt: Format = "jsonl",
    since: float | None = None,
    session: str | None = None,
) -> int:
    """Write the records (from `since`, of `session`) to `out`; returns how many."""
    rows = store.audit_rows(since=since, session=session)
    count = 0
    if fmt == "csv":
        # "\n" ends a row: the command's output shows a "\r" as the two characters `\r`
        # (`terminal.safe_output`), which would end every row's last cell
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(CSV_COLUMNS)
        for row in rows:
            cells = list(row)
            cells[1] = _iso(row[1])
            cells[15] = None if row[15] is None else row[15].decode()
            facts = as_json(row)
            cells += [facts[key] for key in _WHERE]
            writer.writerow([_cell(cell) for cell in cells])
            count += 1
        return count
    posted = _posted(store.audit_rows(since=since, session=session)) if fmt == "ocsf" else {}
    for record in _records(rows, fmt, posted):
        out.write(json.dumps(record, sort_keys=True) + "\n")
        count += 1
    return count


def _records(
    rows: Iterator[AuditRow], fmt: Format, posted: Mapping[str, list[dict[str, Any]]]
) -> Iterator[dict[str, Any]]:
    for row in rows:
        record = as_ocsf(row, posted) if fmt == "ocsf" else as_json(row)
        if record is not None:
            yield record


__all__ = ["FORMATS", "AuditUsageError", "Format", "as_json", "as_ocsf", "export", "parse_since"]
