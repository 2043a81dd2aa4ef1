"""Behind a reverse proxy: `listen.public_url` and `listen.trusted_proxies` (docs/deploy.md,
docs/security.md). Forwarded headers are believed only from a trusted peer; the Host and
Origin rules then apply to what the browser really used.

In-process requests through `httpx.ASGITransport`, whose `client` is the peer's address.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route

from aep_bridge.config.config import ListenConfig
from aep_bridge.intake.auth import AuthPolicy
from aep_bridge.intake.endpoint import Endpoint
from aep_bridge.intake.hub import Hub
from aep_bridge.intake.proxy import client_of

from .conftest import TOKEN

PUBLIC = "https://bridge.example.com"
#: what nginx sends as docs/deploy.md configures it: the Host it was asked for, forwarded
NGINX = {
    "Host": "bridge.example.com",
    "X-Forwarded-For": "203.0.113.9",
    "X-Forwarded-Proto": "https",
    "X-Forwarded-Host": "bridge.example.com",
}


async def seen(request: Request) -> JSONResponse:
    """What the bridge believes about the request (a channel's route, behind the guard)."""
    return JSONResponse(
        {
            "scheme": request.url.scheme,
            "host": request.headers.get("host"),
            "client": client_of(request.scope),
        }
    )


def app(**options: Any) -> Any:
    channel = Mount("/channels/pager", routes=[Route("/seen", seen, methods=["GET", "POST"])])
    return Endpoint(
        Hub(),
        AuthPolicy(TOKEN, open_without_token=True),
        extra_routes=[channel],
        listen_host="127.0.0.1",
        **options,
    ).app


BEHIND = {"public_url": PUBLIC, "trusted_proxies": ["127.0.0.1"]}


async def call(
    application: Any, headers: dict[str, str], *, peer: str = "127.0.0.1", method: str = "POST"
) -> httpx.Response:
    transport = httpx.ASGITransport(app=application, client=(peer, 50123))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8787") as client:
        return await client.request(method, "/channels/pager/seen", headers=headers)


async def test_the_public_origin_through_a_trusted_proxy_is_the_bridges_own():
    """A page at https://bridge.example.com pressing a button through nginx: admitted
    without the token, and the request is seen as https from the real client."""
    answered = await call(app(**BEHIND), {**NGINX, "Origin": PUBLIC})
    assert answered.status_code == 200, answered.text
    assert answered.json() == {
        "scheme": "https",
        "host": "bridge.example.com",
        "client": "203.0.113.9",
    }


async def test_without_public_url_the_proxied_name_is_refused_as_today():
    refused = await call(app(trusted_proxies=["127.0.0.1"]), {**NGINX, "Origin": PUBLIC})
    assert refused.status_code == 403
    assert refused.json()["error"] == "forbidden-host"


@pytest.mark.parametrize("name", ["rebound.example", "bridge.example.com.evil.example"])
async def test_a_rebound_name_through_the_proxy_is_refused(name):
    """DNS rebinding through the proxy: nginx forwards the name the browser asked for."""
    headers = {**NGINX, "Host": name, "X-Forwarded-Host": name}
    refused = await call(app(**BEHIND), headers)
    assert refused.status_code == 403
    assert refused.json()["error"] == "forbidden-host"
    token = await call(app(**BEHIND), {**headers, "Authorization": f"Bearer {TOKEN}"})
    assert token.status_code == 403  # the token does not make a rebound name ours


async def test_forwarded_headers_from_an_untrusted_peer_are_ignored():
    """A client on the network that writes X-Forwarded-* itself changes nothing: its
    rebound Host stays refused, and its scheme and address stay its own."""
    rebound = {**NGINX, "Host": "rebound.example"}
    refused = await call(app(**BEHIND), rebound, peer="198.51.100.4")
    assert refused.status_code == 403
    assert refused.json()["error"] == "forbidden-host"
    direct = await call(app(**BEHIND), {**NGINX, "Host": "127.0.0.1:8787"}, peer="198.51.100.4")
    assert direct.json() == {"scheme": "http", "host": "127.0.0.1:8787", "client": "198.51.100.4"}


async def test_no_proxy_is_trusted_by_default_not_even_loopback():
    answered = await call(app(public_url=PUBLIC), {**NGINX, "Host": "127.0.0.1:8787"})
    assert answered.json()["scheme"] == "http"
    assert answered.json()["client"] == "127.0.0.1"


@pytest.mark.parametrize(
    "origin",
    ["http://bridge.example.com", "https://bridge.example.com:8443", "https://evil.example"],
)
async def test_only_the_exact_public_origin_is_the_bridges_own(origin):
    refused = await call(app(**BEHIND), {**NGINX, "Origin": origin})
    assert refused.status_code == 403
    assert refused.json()["error"] == "forbidden-origin"
    with_token = await call(
        app(**BEHIND), {**NGINX, "Origin": origin, "Authorization": f"Bearer {TOKEN}"}
    )
    assert with_token.status_code == 200


async def test_rfc_7239_forwarded_and_a_chain_of_proxies():
    """`Forwarded` is read as well; in a chain the client is the nearest untrusted address
    (one a client wrote at the left is never taken)."""
    trusted = {"public_url": PUBLIC, "trusted_proxies": ["127.0.0.1", "10.0.0.0/8"]}
    forwarded = {
        "Host": "127.0.0.1:8787",
        "Forwarded": 'for=192.0.2.66, for="[2001:db8::1]:4711";proto=https;host=bridge.example.com',
        "Origin": PUBLIC,
    }
    answered = await call(app(**trusted), forwarded)
    assert answered.json() == {
        "scheme": "https",
        "host": "bridge.example.com",
        "client": "2001:db8::1",
    }
    chain = {**NGINX, "X-Forwarded-For": "6.6.6.6, 198.51.100.7, 10.1.2.3"}
    assert (await call(app(**trusted), chain)).json()["client"] == "198.51.100.7"


def test_the_config_names_the_key_and_the_fix():
    with pytest.raises(ValidationError, match=r"public_url[\s\S]*such as https://bridge"):
        ListenConfig(public_url="bridge.example.com")
    with pytest.raises(ValidationError, match=r"public_url[\s\S]*no user"):
        ListenConfig(public_url="https://ada:secret@bridge.example.com")
    with pytest.raises(ValidationError, match=r"public_url[\s\S]*at the root of a name"):
        ListenConfig(public_url="https://example.com/aep")
    with pytest.raises(ValidationError, match=r"trusted_proxies[\s\S]*'nginx' is not an address"):
        ListenConfig(trusted_proxies=["127.0.0.1", "nginx"])
    listen = ListenConfig(public_url="https://Bridge.example.com/", trusted_proxies=["::1"])
    assert listen.public_url == "https://Bridge.example.com"


def test_an_https_public_url_without_a_trusted_proxy_is_warned_of():
    """Without it the proxy's https is not believed, and the web page behind the proxy
    would refuse its own requests: `check` and the start say so, naming the fix."""
    from aep_bridge.config.config import BridgeConfig, resolve_channels
    from aep_bridge.contract.plugins import PluginHost

    lone = BridgeConfig.model_validate({"listen": {"public_url": PUBLIC}})
    [warning] = resolve_channels(lone, PluginHost(), {}).warnings
    assert warning.key == "listen.trusted_proxies"
    assert "list the proxy's address" in (warning.fix or "")
    trusted = BridgeConfig.model_validate({"listen": BEHIND})
    assert resolve_channels(trusted, PluginHost(), {}).warnings == []


def test_open_on_loopback_is_ignored_behind_a_proxy():
    """Behind nginx on the same machine, every connection comes from loopback: a bridge that
    kept `open_on_loopback` would let anyone who reaches the proxy send events without a
    token. `check` warns, naming the key and the fix, and `run` ignores it (see
    test_the_real_bridge_behind_a_proxy_wants_the_token_from_loopback)."""
    from aep_bridge.config.config import BridgeConfig, resolve_channels
    from aep_bridge.contract.plugins import PluginHost

    config = BridgeConfig.model_validate({"listen": BEHIND, "intake": {"open_on_loopback": True}})
    [warning] = resolve_channels(config, PluginHost(), {}).warnings
    assert warning.key == "intake.open_on_loopback"
    assert "aep-bridge token create" in (warning.fix or "")
    alone = BridgeConfig.model_validate({"intake": {"open_on_loopback": True}})
    assert resolve_channels(alone, PluginHost(), {}).warnings == []


async def test_the_real_bridge_behind_a_proxy_wants_the_token_from_loopback(tmp_path):
    """`aep-bridge run` with `open_on_loopback` and a trusted proxy: an event posted from
    loopback without the token (as anyone on the internet would, through nginx) is refused;
    with the token it is taken; the log says why the option is ignored."""
    import json as json_module

    import httpx as httpx_module

    from aep_bridge.aep.ids import new_id
    from tests.bridge_process import BridgeProcess, free_port, write_config

    port = free_port()
    config = write_config(tmp_path, port)
    block = json_module.loads(config.read_text())
    block["listen"].update(BEHIND)
    block["intake"] = {"open_on_loopback": True}
    config.write_text(json_module.dumps(block))
    bridge = BridgeProcess(config, tmp_path / "bridge.log")
    base = f"http://127.0.0.1:{port}"
    await bridge.start(base)
    try:
        event = {
            "aep": "0.1",
            "id": new_id(),
            "type": "session.started",
            "source": "test://proxy",
            "agent": "claude-code",
            "session": "s-proxy",
            "seq": 1,
            "time": "2026-12-06T18:00:00Z",
            "data": {},
        }
        async with httpx_module.AsyncClient(base_url=base) as client:
            version = {"AEP-Version": "0.1"}
            refused = await client.post("/events", json=event, headers=version)
            assert refused.status_code == 401
            taken = await client.post(
                "/events",
                json=event,
                headers={**version, "Authorization": f"Bearer {bridge.token()}"},
            )
            assert taken.status_code < 300, taken.text
    finally:
        bridge.stop()
    log = (tmp_path / "bridge.log").read_text()
    assert "intake.open_on_loopback is ignored: the bridge is behind a proxy" in log
