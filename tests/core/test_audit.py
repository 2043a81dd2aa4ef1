"""The audit trail (issue 34, item 5): every question, its outcome, every refused press and
every instruction, append-only in the store, exported by `aep-bridge audit` as JSON lines,
CSV or OCSF (AEP-0005 §4). The real bridge in process, its memory channels, SQLite on disk.
"""

from __future__ import annotations

import csv
import io
import json
import sqlite3
import time
from typing import Any

import pytest

from aep_bridge.cli import main
from aep_bridge.commands.audit_export import AuditUsageError, export, parse_since
from aep_bridge.config.config import ConfigError, read_config
from aep_bridge.contract.types import ChannelUser, ResolutionStatus
from aep_bridge.loop.audit import AuditLog
from aep_bridge.store import MIGRATIONS, Store

from .rig import ALICE, MALLORY, Rig


def _records(store: Store, fmt: str = "jsonl", **where: Any) -> list[dict[str, Any]]:
    out = io.StringIO()
    export(store, out, fmt=fmt, **where)  # type: ignore[arg-type]
    return [json.loads(line) for line in out.getvalue().splitlines()]


async def _answered(rig: Rig) -> tuple[Any, Any]:
    agent = rig.agent()
    agent.start()
    question = agent.ask()
    await rig.settle()
    refused = await rig.channel("alpha").press(rig.buttons("alpha")[0][1], MALLORY)
    assert refused.status is ResolutionStatus.NOT_ALLOWED
    accepted = await rig.channel("beta").press(rig.buttons("beta")[0][1], ALICE)
    assert accepted.status is ResolutionStatus.ACCEPTED
    await rig.settle()
    return agent, question


async def test_a_question_its_answer_and_a_refused_press_are_on_the_trail(tmp_path):
    async with Rig(tmp_path) as rig:
        agent, question = await _answered(rig)
        [command] = agent.commands
        records = _records(rig.store)
    kinds = [r["kind"] for r in records]
    assert kinds[0] == "question.asked"
    asked = records[0]
    assert asked["envelope"]["id"] == question.id  # the agent's own event, verbatim
    assert asked["session"] == "sess-1"
    card_id = asked["request_id"]
    posted = sorted(r["channel"] for r in records if r["kind"] == "question.posted")
    assert posted == ["alpha", "beta"]
    [refusal] = [r for r in records if r["kind"] == "press.refused"]
    assert refusal["actor"] == {"id": "mallory", "name": "Mallory"}
    assert (refusal["channel"], refusal["data"]["reason"]) == (
        "alpha",
        "you are not an approver for this channel",
    )
    [answer] = [r for r in records if r["kind"] == "question.answered"]
    assert answer["actor"] == {"id": "alice", "name": "Alice"}
    assert (answer["channel"], answer["request_id"]) == ("beta", card_id)
    assert answer["command_id"] == command.id  # the very command the agent got
    assert answer["answer"]["option_index"] == 0
    [ack] = [r for r in records if r["kind"] == "question.acknowledged"]
    assert (ack["ack"], ack["command_id"]) == ("accepted", command.id)
    outcomes = [r for r in records if r["kind"] == "question.outcome"]
    assert outcomes
    assert outcomes[-1]["envelope"]["type"] == "attention.resolved"
    assert kinds.index("press.refused") < kinds.index("question.answered")


async def test_the_trail_is_append_only_and_only_retention_deletes(tmp_path):
    async with Rig(tmp_path) as rig:
        await _answered(rig)
        store = rig.store
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            store.execute("UPDATE audit SET actor_name = 'Bob'")
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            store.execute("DELETE FROM audit")
        count = len(_records(store))
        # a year and a day later, the retention takes them; nothing younger goes
        later = AuditLog(store, clock=lambda: 9e9)
        later.record("token.created", data={"name": "ada"})
        assert later.prune(365) == count
        assert [r["kind"] for r in _records(store)] == ["token.created"]


async def test_the_export_filters_by_session_and_time(tmp_path):
    async with Rig(tmp_path) as rig:
        await _answered(rig)
        other = rig.agent("sess-2")
        other.start()
        other.ask()
        await rig.settle()
        by_aep_id = _records(rig.store, session="sess-2")
        assert by_aep_id
        assert {r["session_id"] for r in by_aep_id} == {by_aep_id[0]["session_id"]}
        assert _records(rig.store, session=by_aep_id[0]["session_id"]) == by_aep_id
        assert _records(rig.store, since=9e9) == []
    assert parse_since("7d", 1_000_000.0) == 1_000_000.0 - 7 * 86_400
    assert parse_since("2026-12-01T14:02:00Z", 0) == 1_796_133_720.0
    with pytest.raises(AuditUsageError, match="ISO 8601"):
        parse_since("last tuesday", 0)


async def test_ocsf_projects_the_attention_lifecycle_with_its_envelopes(tmp_path):
    async with Rig(tmp_path) as rig:
        _, question = await _answered(rig)
        findings = _records(rig.store, fmt="ocsf")
    assert findings, "no OCSF record"
    created = findings[0]
    assert (created["class_uid"], created["activity_id"], created["type_uid"]) == (
        2004,
        1,
        200401,
    )
    assert created["status_id"] == 1
    assert created["finding_info"] == {"uid": question.id, "title": "attention.requested"}
    envelope = question.to_dict()
    envelope.pop("data")
    assert created["unmapped"]["aep"] == envelope  # the source envelope, as AEP-0005 §4.3
    assert "data" not in created["unmapped"]  # redacted payload: not past the metadata ceiling
    assert created["metadata"]["uid"] == question.id
    for finding in findings:
        assert finding["finding_info"]["uid"] == question.id  # one finding per question
        assert finding["unmapped"]["aep"]["type"].startswith("attention.")
    closed = [f for f in findings if f["activity_id"] == 3]
    assert closed
    assert "disposition_id" not in closed[-1]  # answered: no disposition (§4.5)
    assert closed[-1]["unmapped"]["aep_bridge"]["actor_name"] == "Alice"


async def test_aep_bridge_audit_prints_csv_safe_for_spreadsheets(tmp_path, capsys):
    state = tmp_path / "state"
    async with Rig(state) as rig:
        agent = rig.agent()
        agent.start()
        agent.ask()
        await rig.settle()
        formula = ChannelUser(id='=HYPERLINK("http://x")', name="=1+1")
        await rig.channel("alpha").press(rig.buttons("alpha")[0][1], formula)
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"state_dir": str(state)}))
    assert main(["audit", "--config", str(config), "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    [refusal] = [r for r in rows if r["kind"] == "press.refused"]
    assert refusal["actor_name"] == "'=1+1"  # never a formula in a spreadsheet
    assert refusal["actor_id"].startswith("'=")
    assert main(["audit", "--config", str(config), "--since", "soon"]) == 2
    assert "--since 'soon'" in capsys.readouterr().err


def test_the_audit_migration_is_the_last_one():
    # the merge renumbers the migrations: the audit table is found by its script, not a number
    assert any("CREATE TABLE audit (" in script for script in MIGRATIONS)
    store = Store.memory()
    assert store.schema_version == len(MIGRATIONS)


async def test_an_instruction_is_on_the_trail_redacted_and_a_refused_one_too(tmp_path):
    channels = {
        "alpha": {"type": "memory", "approvers": ["alice"], "allow_instructions": True},
        "beta": {"type": "memory", "approvers": ["alice"]},
    }
    async with Rig(tmp_path, channels=channels) as rig:
        agent = rig.agent()
        agent.start()
        agent.emit(
            "attention.requested",
            {
                "kind": "input",
                "prompt": "test-agent finished: what next?",
                "options": [{"id": "done", "label": "Done"}],
                "respond_via": ["control"],
            },
            capture="full",
            extensions={"aepbridgesteer": "stop"},
        )
        await rig.settle()
        card_id = rig.card("beta")[1].id
        words = "mail the report to ada@example.com"
        refused = await rig.channel("beta").core.answer_text(card_id, words, ALICE)
        assert refused.status is ResolutionStatus.REJECTED
        taken = await rig.channel("alpha").core.answer_text(card_id, words, ALICE)
        assert taken.status is ResolutionStatus.ACCEPTED
        await rig.settle()
        records = _records(rig.store)
    [refusal] = [r for r in records if r["kind"] == "press.refused"]
    assert (refusal["channel"], refusal["data"]["reason"]) == ("beta", "allow_instructions is off")
    [sent] = [r for r in records if r["kind"] == "instruction.sent"]
    assert sent["actor"]["id"] == "alice"
    assert "mail the report to" in sent["answer"]["text"]
    leaked = [r["kind"] for r in records if "ada@example.com" in json.dumps(r)]
    assert leaked == [], leaked  # kept redacted, as the thread shows it
    assert not [r for r in records if r["kind"] == "question.answered"]


def test_a_bad_retention_names_the_key(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text(json.dumps({"audit": {"retention_days": 0}}))
    with pytest.raises(ConfigError, match=r"audit\.retention_days"):
        read_config(bad)
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"audit": {"retention_days": 7}}))
    assert read_config(good).audit.retention_days == 7
    assert read_config(None).audit.retention_days == 365


async def test_the_running_bridge_deletes_only_records_past_audit_retention(tmp_path):
    now = [time.time()]
    async with Rig(tmp_path, clock=lambda: now[0], audit={"retention_days": 2}) as rig:
        await _answered(rig)
        written = len(_records(rig.store))
        now[0] += 86_400  # a day on: all kept
        await rig.bridge.retention.forget()
        assert len(_records(rig.store)) == written
        now[0] += 2 * 86_400  # past the retention: gone, in the once-a-minute round
        await rig.bridge.retention.forget()
        assert _records(rig.store) == []


async def test_each_approval_of_a_two_person_question_is_on_the_trail(tmp_path):
    """Under the two-person rule, the first approval is on the trail when it is counted, not
    only the second one that sent the command: "who approved" names both."""
    from .rig import BOB

    routes = [{"match": {}, "channels": ["alpha", "beta"], "approvals": 2}]
    async with Rig(tmp_path, routes=routes) as rig:
        agent = rig.agent()
        agent.start()
        agent.ask()
        await rig.settle()
        first = await rig.channel("alpha").press(rig.buttons("alpha")[0][1], ALICE)
        assert first.status is ResolutionStatus.COUNTED
        assert not agent.commands
        second = await rig.channel("beta").press(rig.buttons("beta")[0][1], BOB)
        assert second.status is ResolutionStatus.ACCEPTED
        await rig.settle()
        [command] = agent.commands
        records = _records(rig.store)
    [approval] = [r for r in records if r["kind"] == "question.approved"]
    assert approval["actor"] == {"id": "alice", "name": "Alice"}
    assert (approval["channel"], approval["answer"]["progress"]) == ("alpha", "1 of 2 approvals")
    [answer] = [r for r in records if r["kind"] == "question.answered"]
    assert answer["actor"]["id"] == "bob"
    assert answer["command_id"] == command.id
    kinds = [r["kind"] for r in records]
    assert kinds.index("question.approved") < kinds.index("question.answered")


async def test_a_channel_that_says_nothing_of_its_card_still_has_it_on_the_trail(tmp_path):
    """Issue 34, item 5: `send_permission_request` may return where the card is; the memory
    channels return None, as a channel written for the older contract does. Their cards are
    on the trail all the same, naming only the channel, in every format."""
    async with Rig(tmp_path) as rig:
        agent = rig.agent()
        agent.start()
        agent.ask()
        await rig.settle()
        records = _records(rig.store)
        out = io.StringIO()
        export(rig.store, out, fmt="csv")
        findings = _records(rig.store, fmt="ocsf")
    posted = [r for r in records if r["kind"] == "question.posted"]
    assert sorted(r["channel"] for r in posted) == ["alpha", "beta"]
    for record in posted:
        assert (record["message_id"], record["chat"], record["link"]) == (None, None, None)
        assert not {"chat", "message", "link"} & set(record["data"])
    rows = [
        r for r in csv.DictReader(io.StringIO(out.getvalue())) if r["kind"] == "question.posted"
    ]
    assert [(r["message_id"], r["chat"], r["link"]) for r in rows] == [("", "", "")] * 2
    [created] = [f for f in findings if f["activity_id"] == 1]
    cards = created["unmapped"]["aep_bridge"]["posted"]
    assert sorted(c["channel"] for c in cards) == ["alpha", "beta"]
    assert all(set(c) == {"channel"} for c in cards)
