"""A third-party plugin installed with pip into a fresh environment is found and configured.

This is the promise to plugin authors: `pip install` the package, name its channel in the
config, and the bridge runs it, with no change to aep-bridge. And its tests run the real core
with it (the `bridge` fixture that comes with aep-bridge), as an outside author's would.
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NTFY = ROOT / "plugins" / "aep-bridge-ntfy"


@pytest.fixture(scope="module")
def fresh_env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("fresh") / "venv"
    venv.EnvBuilder(with_pip=True).create(target)
    python = target / "bin" / "python"
    subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            str(ROOT),
            str(NTFY),
        ],
        check=True,
        timeout=600,
        capture_output=True,
    )
    return target


def run(
    env: Path, *args: str, program: str = "aep-bridge", cwd: Path | None = None, **extra: str
) -> subprocess.CompletedProcess[str]:
    """`program` (a script of the environment) with `args`, outside this test run's settings."""
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AEP_BRIDGE", "PYTHON", "VIRTUAL_ENV", "PYTEST"))
    }
    return subprocess.run(
        [str(env / "bin" / program), *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env={**clean, **extra},
    )


def test_the_installed_plugin_is_listed_as_loaded(fresh_env: Path):
    records = {r["name"]: r for r in json.loads(run(fresh_env, "plugins", "--json").stdout)}
    assert records["ntfy"]["status"] == "loaded"
    assert records["ntfy"]["distribution"] == "aep-bridge-ntfy"
    assert records["ntfy"]["channels"] == ["ntfy"]
    assert records["console"]["builtin"] is True


def test_check_accepts_a_config_that_enables_it_and_never_prints_the_token(
    fresh_env: Path, tmp_path: Path
):
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {
                "channels": {
                    "phone": {
                        "type": "ntfy",
                        "topic": "aep-bridge-test-7f3k",
                        "token": "${NTFY_TOKEN}",
                        "public_url": "https://bridge.example.com",
                        "approvers": ["ntfy"],
                    }
                }
            }
        )
    )
    result = run(fresh_env, "check", str(config), NTFY_TOKEN="tk_secret_value_123")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "channels: phone (ntfy)" in result.stdout
    assert "tk_secret_value_123" not in result.stdout + result.stderr
    missing = run(fresh_env, "check", str(config))
    assert missing.returncode == 1
    assert "channels.phone.token: environment variable NTFY_TOKEN is not set" in missing.stdout


# -- an outside author's plugin, tested through the real core ----------------------------------

PAGER = {
    "pyproject.toml": """
        [build-system]
        requires = ["setuptools>=68"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "aep-bridge-pager"
        version = "0.3.0"
        requires-python = ">=3.11"
        dependencies = ["aep-bridge", "httpx"]

        [project.entry-points.aep_bridge]
        pager = "aep_bridge_pager"

        [tool.setuptools.packages.find]
        where = ["src"]
    """,
    "src/aep_bridge_pager/__init__.py": '''
        """Agent sessions on a pager; its buttons are signed links back to the bridge.

        The channel keeps nothing: no state, no cards. A press is the card id and the option's
        index, signed by the bridge, and the bridge knows the rest.
        """

        from __future__ import annotations

        import httpx
        from pydantic import Field
        from starlette.requests import Request
        from starlette.responses import JSONResponse
        from starlette.routing import Route

        from aep_bridge import (
            BaseRoute,
            ChannelAdapter,
            ChannelCapabilities,
            ChannelConfig,
            ChannelUser,
            NotificationMessage,
            OutgoingMessage,
            PermissionRequest,
            hookimpl,
        )


        class PagerConfig(ChannelConfig):
            server: str = Field(description="the pager service's URL")
            public_url: str = Field(description="the bridge's address as the pager reaches it")


        class PagerChannel(ChannelAdapter[PagerConfig]):
            """Pages, with a button per option."""

            name = "pager"
            config_model = PagerConfig
            contract_version = "1.2"
            capabilities = ChannelCapabilities(
                threads=False,
                buttons=True,
                edits=False,
                text_answers=False,
                forms=False,
                max_message_length=2000,
                max_button_data=400,
            )

            async def _page(self, text: str, buttons: list[dict[str, str]] | None = None) -> None:
                async with httpx.AsyncClient(base_url=self.config.server) as client:
                    page = {"text": text, "buttons": buttons or []}
                    (await client.post("/pages", json=page)).raise_for_status()

            async def start(self) -> None:
                pass

            async def stop(self) -> None:
                pass

            async def create_session_thread(self, session_id: str, name: str) -> str:
                return session_id

            async def rename_session_thread(self, session_id: str, new_name: str) -> None:
                pass

            async def send_message(self, session_id: str, content: OutgoingMessage) -> None:
                await self._page(content.text or content.type)

            async def send_notification(self, notification: NotificationMessage) -> None:
                await self._page(notification.summary)

            async def send_permission_request(
                self, session_id: str, request: PermissionRequest
            ) -> None:
                press = f"{self.config.public_url}/channels/{self.instance_name}/press"
                buttons = [
                    {"label": o.label, "url": f"{press}?t={self.core.sign(request.id, str(i))}"}
                    for i, o in enumerate(request.options)
                ]
                await self._page(request.title, [] if request.informational else buttons)

            def routes(self) -> list[BaseRoute]:
                return [Route("/press", self._pressed, methods=["POST"])]

            async def _pressed(self, http: Request) -> JSONResponse:
                press = self.core.verify(http.query_params.get("t", ""))
                if press is None:
                    return JSONResponse({"error": "not a press this bridge signed"}, 403)
                user = ChannelUser(id=http.headers.get("x-pager-user", ""))
                answer = await self.core.resolve_permission(press.card_id, int(press.option), user)
                return JSONResponse({"status": answer.status.value})


        @hookimpl
        def register_channels() -> list[type[PagerChannel]]:
            return [PagerChannel]
    ''',
    "tests/test_pager.py": '''
        """Through the real core: a page, a press, the agent's answer."""

        from __future__ import annotations

        import asyncio
        import socket
        from typing import Any

        import httpx
        import pytest
        import pytest_asyncio
        import uvicorn
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import JSONResponse
        from starlette.routing import Route

        from aep_bridge.testing.fixture import BridgeFixture

        pytestmark = pytest.mark.asyncio  # pytest-asyncio's strict mode: nothing configured


        class FakePager:
            def __init__(self) -> None:
                self.pages: list[dict[str, Any]] = []
                self.url = ""

            async def receive(self, request: Request) -> JSONResponse:
                self.pages.append(await request.json())
                return JSONResponse({"ok": True})

            async def press(self, page: dict[str, Any], label: str, user: str) -> str:
                """A person presses a button on their pager: it calls the button's link."""
                [url] = [b["url"] for b in page["buttons"] if b["label"] == label]
                async with httpx.AsyncClient() as client:
                    answer = await client.post(url, headers={"X-Pager-User": user})
                return str(answer.json().get("status", answer.status_code))


        @pytest_asyncio.fixture
        async def pager():
            fake = FakePager()
            app = Starlette(routes=[Route("/pages", fake.receive, methods=["POST"])])
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            fake.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
            server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
            serving = asyncio.create_task(server.serve(sockets=[sock]))
            while not server.started:
                await asyncio.sleep(0.01)
            yield fake
            server.should_exit = True
            await serving


        async def test_a_press_on_a_page_answers_the_agent(bridge: BridgeFixture, pager) -> None:
            config = {"server": pager.url, "public_url": bridge.url, "approvers": ["alice"]}
            running = await bridge.start("pager", config)  # found by its entry point
            assert type(running.adapter).__module__ == "aep_bridge_pager"
            agent = running.agent()
            agent.start("Deploy the site")
            options = [("allow", "Allow"), ("deny", "Deny")]
            request = agent.ask("Run `make deploy`?", options=options)
            await running.settle()
            [page] = [p for p in pager.pages if p["buttons"]]
            assert [b["label"] for b in page["buttons"]] == ["Allow", "Deny"]
            assert set(vars(running.adapter)) == {"core", "config"}, "the channel keeps nothing"

            assert await pager.press(page, "Allow", user="mallory") == "not_allowed"
            await running.settle()
            assert agent.commands == [], "a stranger's press sends nothing"

            await running.restart()  # a new adapter: there was nothing to keep
            assert await pager.press(page, "Deny", user="alice") == "accepted"
            await running.settle()
            [command] = agent.commands
            assert command.type == "control.attention.respond"
            assert command.subject == request.id
            assert command.data["answer"] == {"option": "deny"}
    ''',
}


def test_an_outside_plugin_answers_a_press_with_nothing_stored(fresh_env: Path, tmp_path: Path):
    """A plugin in its own package, pip-installed beside aep-bridge with pytest: its test
    runs the real core through the `bridge` fixture, finds the channel by its entry point, and
    a press on its card reaches the agent as `control.attention.respond` with the option."""
    plugin = tmp_path / "aep-bridge-pager"
    for path, text in PAGER.items():
        (plugin / path).parent.mkdir(parents=True, exist_ok=True)
        (plugin / path).write_text(textwrap.dedent(text).lstrip())
    install = ("-m", "pip", "install", "--quiet", "pytest", "pytest-asyncio", str(plugin))
    installed = run(fresh_env, *install, program="python")
    assert installed.returncode == 0, installed.stderr[-2000:]
    records = {r["name"]: r for r in json.loads(run(fresh_env, "plugins", "--json").stdout)}
    assert records["pager"]["status"] == "loaded"

    pytest_args = ("-m", "pytest", "-q", "-p", "no:cacheprovider", "tests")
    tested = run(fresh_env, *pytest_args, program="python", cwd=plugin)
    assert tested.returncode == 0, tested.stdout[-3000:] + tested.stderr[-2000:]
    assert "1 passed" in tested.stdout
