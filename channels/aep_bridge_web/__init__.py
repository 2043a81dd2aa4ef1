"""The web channel: agent sessions on a local page, answered from the browser.

A built-in channel shaped like any third-party plugin: registered through the `aep_bridge`
entry point `web`, importing only the public `aep_bridge` API. Its page is served by the
bridge at `/channels/web/`; `GET /` redirects there while a web channel runs.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from aep_bridge import BaseRoute, BridgeView, hookimpl

from .channel import WebChannel
from .config import WebConfig


def _web_channels(bridge: BridgeView) -> list[WebChannel]:
    adapters = (bridge.adapter(name) for name in bridge.running)
    return [a for a in adapters if isinstance(a, WebChannel)]


@hookimpl
def register_channels() -> list[type[WebChannel]]:
    return [WebChannel]


@hookimpl
def startup(bridge: BridgeView) -> None:
    """Each web channel logs its sign-in URL, now that the bridge's address is known."""
    for channel in _web_channels(bridge):
        channel.announce(bridge)


@hookimpl
def register_routes(bridge: BridgeView) -> list[BaseRoute]:
    """`GET /` opens the (first) web channel's page."""
    channels = _web_channels(bridge)
    if not channels:
        return []
    target = f"/channels/{channels[0].instance_name}/"

    async def home(request: Request) -> Response:
        return RedirectResponse(target, 307)

    return [Route("/", home, methods=["GET"])]


__all__ = ["WebChannel", "WebConfig", "register_channels", "register_routes", "startup"]
