"""The reference session (the demo stream) on Telegram, through the real process.

What a person in the forum group must always see of it: every event the default verbosity
shows reaches the session's topic, and the `git push` permission card comes with its
buttons. How well it reads (bubbles, notifications, raw markdown, edits shown) is measured
against the issue's goals in bench/rendering.py, not asserted here.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.reference_session import FAILING_ASSERTION, Seen, demo_events, run_reference

#: the channel paces a forum group at one message every 3 s (Telegram's 20 a minute), so the
#: session's 25 calls or so take about 75 s to go out
TIMEOUT = 150.0


@pytest.fixture(scope="module")
def shown(tmp_path_factory: pytest.TempPathFactory) -> Seen:
    folder: Path = tmp_path_factory.mktemp("reference")
    seen, fake = asyncio.run(run_reference(folder, timeout=TIMEOUT))
    assert fake.violations == []  # Telegram's limits, kept
    return seen


def test_every_shown_event_of_the_reference_session_reaches_its_topic(shown: Seen):
    events = demo_events()
    assert shown.shows(f"Session started: {events[0]['data']['label']}")
    prompt = next(e for e in events if e["type"] == "message.user.submitted")["data"]["text"]
    assert shown.shows(f"User: {prompt}")
    for event in events:
        if event["type"] == "tool.requested" and event["data"]["tool"]["name"] != "TodoWrite":
            # an MCP tool reads `server › tool`, a MultiEdit `Edit path (2 edits)`
            name = event["data"]["tool"]["name"].split("__")[-1].replace("MultiEdit", "Edit")
            assert shown.shows(name), event["data"]["tool"]
        if event["type"] == "progress.task.planned":
            assert shown.shows(event["data"]["task"]["title"]), event["data"]["task"]
    # the replies, by words that no rendering of their markdown changes
    assert shown.shows("then make the export write the same value.")
    assert shown.shows("Fixed: CSV totals off by a cent")
    assert shown.shows("Finished in 1m 23s")
    assert shown.shows("Session ended (normal)")


def test_the_push_permission_card_is_answerable(shown: Seen):
    assert shown.shows("git push -u origin fix/rounding-half-up")
    assert shown.card_buttons == ["Allow", "Deny"]


def test_the_failing_assertion_is_visible(shown: Seen):
    assert shown.shows(FAILING_ASSERTION)
