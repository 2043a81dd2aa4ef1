"""Where a route places a session (`routes[].places`): the first route in config order that
matches the session's first event and places it on that channel decides."""

from __future__ import annotations

from aep_bridge.aep.build import make_event
from aep_bridge.aep.envelope import Event
from aep_bridge.config.config import RouteConfig
from aep_bridge.loop.routing import Routes


def first_event(agent: str) -> Event:
    return make_event(
        "session.started", source="aep://h/a", agent=agent, session="s1", seq=0, data={}
    )


ROUTES = Routes(
    [
        RouteConfig(match={"agent": "codex"}, channels=["slack"], places={"slack": "C0CODEX"}),
        RouteConfig(match={}, channels=["slack", "discord"], places={"slack": "C0ALL"}),
        RouteConfig(match={}, channels=["discord"], places={"discord": "42"}),
    ]
)


def test_the_first_matching_route_that_places_a_session_on_a_channel_decides() -> None:
    codex, claude = first_event("codex"), first_event("claude-code")
    assert ROUTES.place_for(codex, "slack") == "C0CODEX"
    assert ROUTES.place_for(claude, "slack") == "C0ALL"
    assert ROUTES.place_for(claude, "discord") == "42"
    assert ROUTES.place_for(claude, "web") is None
    assert Routes(None).place_for(claude, "slack") is None
