"""Routing: which channels a session is mirrored into, decided once, on its first event."""

from __future__ import annotations

from collections.abc import Sequence

from ..aep.envelope import Event
from ..aep.filters import Filter
from ..config.config import RouteConfig


class Routes:
    """The config's `routes`: each an attr-match filter and the channels it sends to.

    A session goes to the channels of every route its first event matches. Without routes,
    every session goes to every running channel.
    """

    def __init__(self, routes: Sequence[RouteConfig] | None) -> None:
        self._routes: list[tuple[Filter, tuple[str, ...], dict[str, str]]] | None = (
            None
            if routes is None
            else [(Filter.parse(r.match), tuple(r.channels), dict(r.places)) for r in routes]
        )

    def channels_for(self, event: Event, running: Sequence[str]) -> list[str]:
        """The running channels `event`'s session goes to, in config order."""
        if self._routes is None:
            return list(running)
        wanted: set[str] = set()
        for match, channels, _places in self._routes:
            if match.matches_event(event):
                wanted.update(channels)
        return [name for name in running if name in wanted]

    def place_for(self, event: Event, channel: str) -> str | None:
        """Where on `channel` the session of `event` goes: the place of the first route (in
        config order) that matches it and places it there; None is the channel's own."""
        for match, _channels, places in self._routes or ():
            place = places.get(channel)
            if place is not None and match.matches_event(event):
                return place
        return None
