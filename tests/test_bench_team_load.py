"""The team load benchmark (bench/team_load.py): the streams its 500 agent sessions send are
valid AEP, and its `--quick` run (the real bridge process, the Slack and Discord fakes)
answers every question it asks, through the platforms' buttons, exactly once, and finds
every reply it sent. Its instruments can fail: a copy or a missing reply is counted."""

from __future__ import annotations

import importlib
import io
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from aep_bridge.cli import validate

BENCH = Path(__file__).resolve().parent.parent / "bench"


def _bench(name: str) -> ModuleType:
    """A bench/ module, imported as the benchmarks import it (their folder on the path)."""
    sys.path.insert(0, str(BENCH))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(BENCH))


load = _bench("team_load")


def _stream(tmp_path: Path) -> tuple[Path, list[dict[str, Any]]]:
    """Two sessions of one connection as the benchmark drives them: started, three laps of
    the realistic loop, a question answered, more of the loop."""
    marks: dict[str, int] = {}
    events: list[dict[str, Any]] = []
    for index in (0, 1):
        session = load.Session(index, 0, "dev-00")
        events.append(session.started())
        events += [session.next(marks) for _ in range(3 * len(load.BODY))]
        events += session.ask(index + 1)
        events += session.answered({"id": "01M95NBXCCPS7GD5WQBYB8D3P7", "data": {"by": "ada"}})
        events += [session.next(marks) for _ in range(10)]
    path = tmp_path / "team.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return path, events


def test_the_sessions_streams_are_valid_aep(tmp_path: Path) -> None:
    path, events = _stream(tmp_path)
    out, err = io.StringIO(), io.StringIO()
    status = validate([str(path)], out=out, err=err)
    assert status == 0, (out.getvalue() + err.getvalue())[-2000:]
    assert f"{len(events)} valid event(s), 2 session(s)" in out.getvalue() + err.getvalue()
    assert len({e["id"] for e in events}) == len(events)  # fresh ids on every lap


def test_every_reply_carries_its_own_mark(tmp_path: Path) -> None:
    _, events = _stream(tmp_path)
    texts = [e["data"]["text"] for e in events if e["type"] == "message.agent.replied"]
    marks = [load.REPLY_MARK.match(t) for t in texts]
    assert all(marks)
    assert len({m[0] for m in marks if m}) == len(texts)
    asked = [e for e in events if e["type"] == "attention.requested"]
    assert [load.QUESTION_MARK.search(e["data"]["prompt"])[1] for e in asked] == ["0001", "0002"]


def test_the_goals_fail_on_a_lost_reply_a_copy_a_429_or_a_late_card() -> None:
    platform = {
        "cards": 2,
        "no_card": 0,
        "slots": [0, 0],
        "429": 0,
        "lost": 0,
        "duplicated": 0,
    }
    good = {
        "platforms": {"slack": platform, "discord": dict(platform)},
        "commands": 2,
        "questions": 2,
        "twice": 0,
        "dropped": [],
    }
    assert all(load.goals_met(good).values())
    for key, bad, goal in (
        ("lost", 1, "lost"),
        ("duplicated", 1, "duplicated"),
        ("429", 1, "429"),
        ("slots", [0, 1], "slot"),
        ("no_card", 1, "slot"),
    ):
        broken = json.loads(json.dumps(good))
        broken["platforms"]["discord"][key] = bad
        assert not load.goals_met(broken)[goal], key
    twice = {**good, "twice": 1}
    assert not load.goals_met(twice)["answers"]
    dropped = {**good, "dropped": ["dev-03: sent 1011 (internal error) keepalive ping timeout"]}
    assert not load.goals_met(dropped)["dropped"]


def test_the_quick_run_answers_every_question_once_and_finds_every_reply() -> None:
    found = load.main(quick=True)
    assert found["questions"] >= 2
    assert found["replies"] > 0
    assert found["pressed"] == found["questions"]
    assert found["commands"] == found["questions"]
    assert found["twice"] == 0
    for name, platform in found["platforms"].items():
        assert platform["no_card"] == 0, name  # every question's card on both platforms
        assert platform["lost"] == 0, (name, platform)
        assert platform["duplicated"] == 0, (name, platform["twice_in"])
        assert platform["429"] == 0, (name, platform["violations"])
    assert found["dropped"] == []
    assert found["hwm"] > 0
    assert found["load_cpu"] > 0
    lines = load.section(found)
    assert lines[0] == load.HEADING
    assert any("provisional" in line.lower() for line in lines)


def test_the_quick_run_with_a_channel_per_team_shows_every_reply_in_its_team_s_channels() -> None:
    """`--places`: each team's sessions in its own Slack and Discord channel; the replies
    are looked for there only, so one shown in the channels' own place counts as lost."""
    shape = load.replace(load.QUICK, places=3)
    found = load.main(shape=shape)
    assert found["commands"] == found["questions"] >= 2
    for name, platform in found["platforms"].items():
        assert platform["no_card"] == 0, name
        assert platform["lost"] == 0, (name, platform)
        assert platform["duplicated"] == 0, (name, platform["twice_in"])
        assert platform["429"] == 0, (name, platform["violations"])
    assert load.section(found)[0] == load.HEADING_PLACED
