"""`GET /away` and `POST /away` (issue 33, interface 2): what the agent daemon asks when its
agent stops, and what `aep-bridge away` and `status` use. The route in-process over a whole
bridge (`Rig`: who is refused, and how; what is switched), then the commands against a real
`aep-bridge run`."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from aep_bridge.intake.auth import AuthPolicy
from aep_bridge.intake.endpoint import Endpoint
from tests.core.rig import Rig
from tests.shared_data import AEP_FIXTURES

from .conftest import TOKEN
from .test_status import bridge, client  # noqa: F401 - the real bridge's fixture

BEARER = {"Authorization": f"Bearer {TOKEN}"}


def away_app(rig: Rig, *, open_on_loopback: bool = False) -> Any:
    policy = AuthPolicy(TOKEN, open_without_token=open_on_loopback)
    return Endpoint(rig.hub, policy, away=rig.bridge.away).app


async def call(
    app: Any, method: str, path: str, headers: dict[str, str] | None = None, **kwargs: Any
) -> httpx.Response:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8787") as c:
        return await c.request(method, path, headers=headers or {}, **kwargs)


async def test_the_daemons_question_needs_the_token_even_where_events_do_not(tmp_path):
    async with Rig(tmp_path) as rig:
        app = away_app(rig, open_on_loopback=True)
        refused = await call(app, "GET", "/away?session=sess-1")
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"] == "Bearer"
        wrong = await call(app, "GET", "/away?session=sess-1", {"Authorization": "Bearer no"})
        assert wrong.status_code == 403
        switch = await call(app, "POST", "/away", json={"on": True, "session": None})
        assert switch.status_code == 401
        assert rig.bridge.away.describe()["everywhere"] is False  # nothing changed
        ok = await call(app, "GET", "/away?session=sess-1", BEARER)
        assert ok.status_code == 200
        assert ok.json() == {"away": False, "hold_seconds": 1800}


@pytest.mark.parametrize(
    ("headers", "error"),
    [
        ({"Host": "evil.example"}, "forbidden-host"),
        ({"Origin": "http://127.0.0.1:8787"}, "forbidden-origin"),  # even the bridge's own page
        ({"Origin": "https://evil.example"}, "forbidden-origin"),
    ],
)
async def test_a_browser_or_a_foreign_host_cannot_switch_even_with_the_token(
    tmp_path, headers, error
):
    async with Rig(tmp_path) as rig:
        app = away_app(rig)
        for method, path, body in (
            ("POST", "/away", {"on": True, "session": None}),
            ("GET", "/away?session=sess-1", None),
        ):
            refused = await call(app, method, path, {**BEARER, **headers}, json=body)
            assert refused.status_code == 403
            assert refused.json()["error"] == error
        assert rig.bridge.away.describe()["everywhere"] is False


async def test_post_switches_a_session_or_everywhere_and_get_says_so(tmp_path):
    async with Rig(tmp_path, away={"hold_minutes": 45}) as rig:
        rig.agent().start()
        rig.agent("sess-2").start()
        await rig.settle()
        app = away_app(rig)
        on = await call(app, "POST", "/away", BEARER, json={"on": True, "session": "sess-1"})
        assert on.status_code == 200
        record = rig.bridge.sessions.find_by_session("sess-1")
        assert record is not None
        assert on.json()["switched"] == [record.id]
        asked = await call(app, "GET", "/away?session=sess-1", BEARER)
        assert asked.json() == {"away": True, "hold_seconds": 2700}
        other = await call(app, "GET", "/away?session=sess-2", BEARER)
        assert other.json()["away"] is False
        by_id = await call(app, "POST", "/away", BEARER, json={"on": False, "session": record.id})
        assert by_id.json()["switched"] == [record.id]
        assert (await call(app, "GET", "/away?session=sess-1", BEARER)).json()["away"] is False

        everywhere = await call(app, "POST", "/away", BEARER, json={"on": True, "session": None})
        assert everywhere.json()["everywhere"] is True
        whole = await call(app, "GET", "/away", BEARER)
        assert whole.status_code == 200
        assert whole.json()["everywhere"] is True
        assert {s["session"] for s in whole.json()["sessions"] if s["away"]} == {
            "sess-1",
            "sess-2",
        }


@pytest.mark.parametrize(
    ("body", "status"),
    [
        (b"not json", 400),
        (b'{"on": "yes"}', 400),
        (b'{"session": "sess-1"}', 400),
        (b'{"on": true, "session": 7}', 400),
        (b'{"on": true, "session": ""}', 400),
        (b'{"on": true, "session": "never-seen"}', 404),
        (b'{"on": true, "session": "' + b"x" * 5000 + b'"}', 413),
    ],
)
async def test_a_bad_switch_is_refused_with_a_reason_and_changes_nothing(tmp_path, body, status):
    async with Rig(tmp_path) as rig:
        rig.agent().start()
        await rig.settle()
        before = rig.bridge.away.describe()
        refused = await call(
            away_app(rig),
            "POST",
            "/away",
            {**BEARER, "Content-Type": "application/json"},
            content=body,
        )
        assert refused.status_code == status
        assert refused.json()["detail"]
        assert rig.bridge.away.describe() == before


async def test_an_endpoint_without_a_bridge_answers_404_so_the_daemon_lets_the_agent_stop():
    from aep_bridge.intake.hub import Hub

    app = Endpoint(Hub(), AuthPolicy(TOKEN)).app
    assert (await call(app, "GET", "/away?session=s", BEARER)).status_code == 404


# -- the commands, against a real bridge -------------------------------------------------------


async def test_away_on_then_status_then_the_daemons_question(bridge):  # noqa: F811
    golden = AEP_FIXTURES / "golden" / "golden.jsonl"  # session s_8f2c
    status, _, err = await client(bridge, "emit", str(golden))
    assert status == 0, err
    base = f"http://127.0.0.1:{bridge.port}"
    headers = {"Authorization": f"Bearer {bridge.token()}"}

    status, out, err = await client(bridge, "away", "on", "--session", "s_8f2c")
    assert status == 0, err
    assert "session s_8f2c is away" in out
    async with httpx.AsyncClient() as http:
        asked = await http.get(f"{base}/away", params={"session": "s_8f2c"}, headers=headers)
        assert asked.json() == {"away": True, "hold_seconds": 1800}
        unseen = await http.get(f"{base}/away", params={"session": "other"}, headers=headers)
        assert unseen.json()["away"] is False

    status, out, err = await client(bridge, "status")
    assert "away: off; a held stop waits up to 30 min" in out
    assert "s_8f2c" in out
    assert ": away (its own switch)" in out

    status, out, err = await client(bridge, "away", "on", "--session", "nobody")
    assert status == 1
    assert "the bridge knows no such session" in err

    status, out, err = await client(bridge, "away", "on")
    assert status == 0, err
    assert "every session is away" in out
    status, out, _ = await client(bridge, "status")
    assert "away: everywhere" in out
    async with httpx.AsyncClient() as http:
        unseen = await http.get(f"{base}/away", params={"session": "other"}, headers=headers)
        assert unseen.json()["away"] is True

    status, out, err = await client(bridge, "away", "off")
    assert status == 0, err
    assert "every session is back: no stop is held" in out
    async with httpx.AsyncClient() as http:
        asked = await http.get(f"{base}/away", params={"session": "s_8f2c"}, headers=headers)
        assert asked.json()["away"] is False  # its own switch was cleared


# -- a person's named token switches its own away (issue 33, issue 34) ------------------------

ADA_TOKEN, BOB_TOKEN, CI_TOKEN = "a" * 43, "b" * 43, "c" * 43


def _as(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_a_persons_token_switches_its_own_away_and_nothing_else(tmp_path):
    from aep_bridge.intake.principals import Principal, digest

    people = {"ada": {"alpha": "u-ada"}, "bob": {"alpha": "u-bob"}}
    async with Rig(tmp_path, people=people) as rig:
        for name, token, role in (
            ("ada", ADA_TOKEN, "agent"),
            ("bob", BOB_TOKEN, "agent"),
            ("ci", CI_TOKEN, "agent"),
        ):
            rig.store.create_token(name, role, digest(token), None)
        rig.agent("ada-1", principal=Principal("ada", "agent")).start()
        rig.agent("bob-1", principal=Principal("bob", "agent")).start()
        rig.agent("ci-1", principal=Principal("ci", "agent")).start()
        await rig.settle()
        app = Endpoint(rig.hub, AuthPolicy(TOKEN, tokens=rig.store), away=rig.bridge.away).app
        away = rig.bridge.away

        def states() -> list[bool]:
            return [away.query(s)["away"] for s in ("ada-1", "bob-1", "ci-1")]

        # {"on": true} from Ada's token is Ada's switch: her sessions, nobody else's
        mine = await call(app, "POST", "/away", _as(ADA_TOKEN), json={"on": True})
        assert mine.status_code == 200, mine.text
        assert (mine.json()["person"], mine.json()["everywhere"]) == ("ada", False)
        assert states() == [True, False, False]
        assert away.describe()["people"]["ada"] == {"away": True, "by": "aep-bridge away (ada)"}

        # another person, another's session, an unknown one, a token that is nobody: refused
        before = away.describe()
        for token, body, words in (
            (ADA_TOKEN, {"on": False, "person": "bob"}, "not bob's"),
            (ADA_TOKEN, {"on": True, "session": "bob-1"}, "session bob-1 is not ada's"),
            (ADA_TOKEN, {"on": True, "session": "never-seen"}, "is not ada's"),
            (CI_TOKEN, {"on": True}, "ci is not under people (add people.ci)"),
            (CI_TOKEN, {"on": True, "session": "ci-1"}, "needs an admin token"),
        ):
            refused = await call(app, "POST", "/away", _as(token), json=body)
            assert refused.status_code == 403, (body, refused.text)
            assert refused.json()["error"] == "unauthorized"
            assert words in refused.json()["detail"]
            assert away.describe() == before
        assert states() == [True, False, False]

        # a session she owns, by its AEP id: its own switch
        back = await call(
            app, "POST", "/away", _as(ADA_TOKEN), json={"on": False, "session": "ada-1"}
        )
        assert back.status_code == 200
        assert states() == [False, False, False]
        # her own name, said
        assert (
            await call(app, "POST", "/away", _as(BOB_TOKEN), json={"on": True, "person": "bob"})
        ).status_code == 200
        assert states() == [False, True, False]

        # the admin keeps every power: another person, everywhere
        admin = await call(app, "POST", "/away", BEARER, json={"on": False, "person": "bob"})
        assert admin.status_code == 200
        everywhere = await call(app, "POST", "/away", BEARER, json={"on": True})
        assert everywhere.json()["everywhere"] is True
        assert states() == [True, True, True]


@pytest.fixture
async def team_bridge(tmp_path):
    """A real bridge whose config maps the person `ada` (the console's `local`)."""
    from tests.bridge_process import free_port, write_config

    from .test_status import CONSOLE, PortBridge

    port = free_port()
    config = write_config(tmp_path, free_port(), CONSOLE)
    block = json.loads(config.read_text())
    config.write_text(json.dumps({**block, "people": {"ada": {"console": "local"}}}))
    process = PortBridge(config, tmp_path / "bridge.log", port)
    await process.start(f"http://127.0.0.1:{port}")
    yield process
    await process.aclose()


async def test_away_with_a_persons_token_switches_that_person(team_bridge):
    status, out, err = await client(team_bridge, "token", "create", "ada")
    assert status == 0, err
    ada = out.splitlines()[0].strip()
    # session s_8f2c, sent with Ada's token (an agent's: the commands left out)
    golden = AEP_FIXTURES / "golden" / "golden.jsonl"
    events = team_bridge.config.parent / "ada.jsonl"
    lines = golden.read_text().splitlines()
    events.write_text("\n".join(x for x in lines if '"type":"control.' not in x) + "\n")
    status, _, err = await client(team_bridge, "emit", str(events), "--token", ada)
    assert status == 0, err

    status, out, err = await client(team_bridge, "away", "on", "--token", ada)
    assert status == 0, err
    assert "ada's sessions are away" in out
    assert "  ada: away (their switch)" in out
    status, out, _ = await client(team_bridge, "status")
    assert "away: off" in out  # not everywhere
    assert "away (ada's switch)" in out

    status, out, err = await client(team_bridge, "away", "off", "--token", ada, "--person", "bob")
    assert status == 2
    assert "a token switches its own person's away (ada), not bob's" in err
    status, out, err = await client(team_bridge, "away", "off", "--token", ada)
    assert status == 0, err
    assert "ada's sessions are back" in out
