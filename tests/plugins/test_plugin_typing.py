"""A plugin type-checks under plain `mypy --strict` against aep-bridge as installed.

Plugin authors run mypy without the pydantic mypy plugin and without `MYPYPATH`, so the
public API must type-check as written: mypy sees each pydantic model through
`dataclass_transform` alone (a field's `alias` becomes its `__init__` keyword there). The
plugin below subclasses the adapter with every contract 1.2 method, declares its own config
model and capabilities, builds every model the API exports, and implements the hooks; mypy
checks it from a scratch folder with a config that names no plugin and no `mypy_path`, and
the module is then loaded as a plugin for real.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from aep_bridge.commands.setup_command import find_wizards
from aep_bridge.contract.plugins import PluginHost

PLUGIN = '''
"""A plugin written the way the docs say, checked by plain mypy --strict."""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field, SecretStr
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from aep_bridge import (
    CONTRACT_VERSION,
    DEFAULT_SIGNATURE_TTL,
    OUTGOING_KINDS,
    AdapterFactory,
    AgentCommand,
    Attachment,
    BaseRoute,
    BridgeCore,
    BridgeView,
    ChannelAdapter,
    ChannelCapabilities,
    ChannelConfig,
    ChannelError,
    ChannelRegistration,
    ChannelState,
    ChannelUser,
    DoctorCheck,
    Event,
    FormChoice,
    FormField,
    IncomingMessage,
    NotificationMessage,
    OutcomeStatus,
    OutgoingKind,
    OutgoingMessage,
    PermissionOption,
    PermissionOutcome,
    PermissionRequest,
    RateLimit,
    RateLimited,
    RateLimits,
    Resolution,
    ResolutionStatus,
    SetupContext,
    SetupError,
    SetupOption,
    SetupWizard,
    SignedPress,
    ToolCall,
    ToolOutcome,
    ToolView,
    hookimpl,
    markup,
    measure,
    split_text,
)


class PagerConfig(ChannelConfig):
    """The pager's own keys, beside the ones every channel has."""

    token: SecretStr = Field(description="the pager API token")
    room: str = "ops"
    rooms: list[str] = Field(default_factory=list)
    per_minute: int | None = None


LIMITS = RateLimits(
    per_chat=RateLimit(count=1, per_seconds=1.0),
    per_group=RateLimit(count=20, per_seconds=60, burst=5),
    global_=RateLimit(count=30, per_seconds=1),
)
CAPABILITIES = ChannelCapabilities(
    threads=True,
    buttons=True,
    edits=True,
    text_answers=True,
    forms=True,
    max_message_length=4096,
    length_unit="utf16",
    max_button_data=64,
    max_buttons=8,
    identifies_users=True,
    rate_limits=LIMITS,
)


class PagerChannel(ChannelAdapter[PagerConfig]):
    """Pages a phone."""

    name = "pager"
    capabilities = CAPABILITIES
    config_model: ClassVar[type[ChannelConfig]] = PagerConfig
    contract_version = CONTRACT_VERSION

    def __init__(self, core: BridgeCore, config: PagerConfig) -> None:
        super().__init__(core, config)
        self.sent: list[OutgoingMessage] = []
        self.state: ChannelState = core.state(self.instance_name)
        if config.per_minute is not None:
            limits = RateLimits(global_=RateLimit(count=config.per_minute, per_seconds=60))
            self.capabilities = self.capabilities.model_copy(update={"rate_limits": limits})
        token: str = self.config.token.get_secret_value()
        self.room: str = self.config.room + token[:0]

    async def start(self) -> None:
        if not self.config.rooms:
            raise ChannelError("no rooms configured", permanent=True)

    async def stop(self) -> None:
        return None

    async def send_message(self, session_id: str, content: OutgoingMessage) -> None:
        kind: OutgoingKind = content.type
        assert kind in OUTGOING_KINDS
        for part in split_text(content.text, 4096, unit="utf16"):
            assert measure(part, "utf16") <= 4096
        self.sent.append(content)
        if len(self.sent) > 1000:
            raise RateLimited(2.5, "slow down")

    async def send_permission_request(self, session_id: str, request: PermissionRequest) -> None:
        for index, option in enumerate(request.options):
            token = self.core.sign(request.id, str(index), ttl=DEFAULT_SIGNATURE_TTL)
            press: SignedPress | None = self.core.verify(token)
            assert press is None or press.option == str(index), option.label

    async def send_notification(self, notification: NotificationMessage) -> None:
        await self.state.set(notification.session_id, notification.summary)

    async def create_session_thread(self, session_id: str, name: str) -> str:
        return f"thread-{session_id}"

    async def rename_session_thread(self, session_id: str, new_name: str) -> None:
        await self.state.set(f"name:{session_id}", new_name)

    async def update_permission_request(
        self, session_id: str, request: PermissionRequest, outcome: PermissionOutcome
    ) -> None:
        line: str = outcome.summary()
        closed: bool = outcome.closed
        assert line or closed

    async def delete_session_thread(self, session_id: str) -> None:
        await self.state.delete(f"name:{session_id}")

    async def archive_session_thread(self, session_id: str) -> None:
        name: str | None = await self.state.get(f"name:{session_id}")
        assert name is None or name

    async def doctor(self) -> Sequence[DoctorCheck]:
        return [
            DoctorCheck(name="token", ok=True),
            DoctorCheck(name="room", ok=False, detail="no such room", fix="create it"),
        ]

    async def send_skill_commands(self, session_id: str, commands: list[AgentCommand]) -> None:
        for command in commands:
            assert command.name

    async def cleanup_skill_commands(self, session_id: str) -> None:
        return None

    def limit_keys(self, session_id: str | None) -> tuple[str, str]:
        return (session_id or "", self.instance_name)

    def routes(self) -> Sequence[BaseRoute]:
        return [Route("/press", self.press, methods=["POST"])]

    async def press(self, request: Request) -> Response:
        user = ChannelUser(id="u1", name="Ada", roles=("ops",))
        shown: str = user.display
        resolution: Resolution = await self.core.resolve_permission("c1", 0, user)
        resolution = await self.core.resolve_permission("c1", "allow", user)
        resolution = await self.core.answer_text("c1", "yes" + shown[:0], user)
        resolution = await self.core.answer_form("c1", {"f1": "a"}, user)
        await self.core.handle_incoming_message(
            IncomingMessage(
                channel=self.instance_name,
                session_id="s1",
                thread_id=self.core.thread_id(self.instance_name, "s1"),
                user=user,
                text="/status",
            )
        )
        result: Any = await self.core.call(self.instance_name, "stop", session_id="s1")
        assert result is None
        accepted: bool = resolution.accepted
        return JSONResponse({"accepted": accepted, "message": resolution.message})


def build_everything() -> list[object]:
    """Every model a plugin builds, with its optional fields given."""
    user = ChannelUser(id="u1")
    attachment = Attachment(type="image", file_name="a.png", mime_type="image/png", size=3)
    form = FormField(
        id="f1",
        type="select",
        label="Pick",
        required=True,
        multi=False,
        other=True,
        choices=(FormChoice(id="a", label="A"),),
        min=0.0,
        max=1.0,
    )
    request = PermissionRequest(
        id="c1",
        kind="form",
        title="Deploy?",
        description="to staging",
        options=(PermissionOption(id="allow", label="Allow", is_allow=True),),
        fields=(form,),
        accepts_text=True,
        informational=False,
        expires_at=datetime.now(UTC),
    )
    return [
        user,
        attachment,
        IncomingMessage(
            channel="pager",
            session_id=None,
            thread_id=None,
            user=user,
            text="hi",
            attachments=(attachment,),
            reply_to="c1",
        ),
        OutgoingMessage(
            type="tool_call",
            text="ls",
            key="k1",
            metadata={"tool": "bash"},
            attachment=attachment,
            notify=True,
        ),
        OutgoingMessage(type="text"),
        request,
        PermissionRequest(id="c2", title="Plain"),
        PermissionOutcome(
            status=OutcomeStatus.ANSWERED,
            option_id="allow",
            option_label="Allow",
            text=None,
            by="Ada",
            detail="via pager",
        ),
        NotificationMessage(
            session_id="s1",
            session_name="build",
            type="permission",
            summary="waiting for you",
            deep_link="https://example.com/t/1",
        ),
        AgentCommand(name="compact", description="shrink", input_hint="[focus]"),
        Resolution(status=ResolutionStatus.ALREADY_ANSWERED, reason=None, answered_by="Bo"),
        SignedPress(card_id="c1", option="0"),
        DoctorCheck(name="token", ok=True, detail="", fix=None),
        RateLimits(),
        RateLimits(global_=RateLimit(count=1, per_seconds=5, burst=60)),
        ChannelCapabilities(
            threads=False,
            buttons=False,
            edits=False,
            text_answers=False,
            forms=False,
            max_message_length=100,
        ),
        ChannelConfig(),
        ChannelConfig(name="pager", type="pager", approvers=["u1"], capture="metadata"),
        PagerConfig(token=SecretStr("t"), rooms=["a"], verbosity="quiet"),
        ChannelError("gone", permanent=True),
        RateLimited(1.0),
        ToolCall(name="pager_send", args={"room": "ops"}, cwd="/srv/pager"),
        ToolOutcome(status="failed", output="no route", error_type="exit 1", duration_ms=3),
        ToolView(title=(markup.Span(text="Paged"),), summary="", details=(), plan=(("a", "b"),)),
    ]


class QuietPager(PagerChannel):
    """A subclass that sets the class attributes without annotations."""

    name = "quietpager"
    config_model = PagerConfig
    capabilities = CAPABILITIES.model_copy(update={"buttons": False})


def make_pager(core: BridgeCore, config: Any) -> ChannelAdapter[Any]:
    return PagerChannel(core, PagerConfig.model_validate(config))


FACTORY: AdapterFactory = make_pager
REGISTRATION = ChannelRegistration(
    name="pager2",
    factory=FACTORY,
    capabilities=CAPABILITIES,
    config_model=PagerConfig,
    description="Pages a phone, built by a factory.",
)


@hookimpl
def register_channels() -> list[type[ChannelAdapter[Any]] | ChannelRegistration]:
    return [PagerChannel, REGISTRATION]


@hookimpl
def startup(bridge: BridgeView) -> Awaitable[None] | None:
    for name in bridge.running:
        adapter: ChannelAdapter[Any] | None = bridge.adapter(name)
        assert adapter is None or adapter.name
    return None


@hookimpl
def register_routes(bridge: BridgeView) -> Sequence[BaseRoute] | None:
    return None


@hookimpl
def render_vendor_event(event: Event, verbosity: str) -> Sequence[OutgoingMessage] | None:
    return [OutgoingMessage(type="system_message", text=event.type)]


@hookimpl
def approver_decision(
    channel: str, user: ChannelUser, request: PermissionRequest, config: ChannelConfig
) -> bool | None:
    return user.id in config.approvers or None


@hookimpl
def render_tool(call: ToolCall, outcome: ToolOutcome | None, verbosity: str) -> ToolView | None:
    if call.name != "pager_send":
        return None
    room = call.args.get("room")
    done = outcome is not None and outcome.status == "success"
    return ToolView(
        title=(markup.Span(text="Paged", bold=True), markup.Span(text=f" {room}", code=True)),
        summary="delivered" if done else "",
        details=(markup.Details(summary="log", blocks=(markup.Code(code="ok"),)),),
        plan=None,
    )


class PagerSetup(SetupWizard):
    """`aep-bridge setup pager`."""

    name = "pager"
    description = "a pager token and a room"
    options = (
        SetupOption("--room", "the room", metavar="ROOM"),
        SetupOption("--retries", "how often", kind=int, default=2),
        SetupOption("--member", "a member", repeat=True),
    )

    async def run(self, setup: SetupContext) -> bool:
        room: str = setup.options["room"] or setup.ask("Room", default="ops")
        token = setup.secret("Pager token", flag="--token-env")
        if not token:
            raise SetupError("a token is needed")
        if setup.confirm("Keep the token in the env file?", default=True):
            setup.save_secret("PAGER_TOKEN", token)
        path: Path = setup.write_channel({"token": "${PAGER_TOKEN}", "room": room})
        setup.say(f"wrote {path}")
        return await setup.doctor(environ={"PAGER_TOKEN": token})


@hookimpl
def register_setup_wizards() -> Sequence[SetupWizard]:
    return [PagerSetup()]


if TYPE_CHECKING:
    reveal_type(LIMITS.global_)
'''

MYPY_INI = """\
[mypy]
strict = True
"""


def run_mypy(folder: Path, source: str) -> tuple[int, str]:
    """Plain `mypy --strict` on `source`, from `folder`, with aep-bridge found as installed."""
    (folder / "pagerplugin.py").write_text(textwrap.dedent(source).lstrip())
    (folder / "mypy.ini").write_text(MYPY_INI)
    env = {k: v for k, v in os.environ.items() if k not in ("MYPYPATH", "PYTHONPATH")}
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--config-file", "mypy.ini", "pagerplugin.py"],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return result.returncode, result.stdout + result.stderr


def test_a_plugin_type_checks_under_plain_mypy_strict(tmp_path: Path):
    status, output = run_mypy(tmp_path, PLUGIN)
    assert status == 0, f"mypy --strict failed on the example plugin:\n{output}"
    # aep_bridge was really found and read: the field has its declared type, not Any
    assert 'Revealed type is "aep_bridge.contract.types.RateLimit | None"' in output, output


def test_mypy_reports_a_misuse_of_the_api(tmp_path: Path):
    """The check has teeth: a wrong argument to an aep_bridge model is an error."""
    status, output = run_mypy(tmp_path, PLUGIN + "\nRateLimits(global_=RateLimit(count='1'))\n")
    assert status == 1, output
    assert 'Argument "count" to "RateLimit" has incompatible type "str"' in output, output
    assert 'Missing named argument "per_seconds" for "RateLimit"' in output, output


def test_registration_of_accepts_an_adapter_with_its_own_config(tmp_path: Path):
    status, output = run_mypy(tmp_path, PLUGIN + "\nQUIET = ChannelRegistration.of(QuietPager)\n")
    assert status == 0, output


def test_the_type_checked_plugin_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """What mypy passed also runs: the models build and the plugin loads with both channels."""
    path = tmp_path / "pagerplugin.py"
    path.write_text(textwrap.dedent(PLUGIN).lstrip())
    spec = importlib.util.spec_from_file_location("pagerplugin", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "pagerplugin", module)  # pydantic resolves names there
    spec.loader.exec_module(module)
    assert len(module.build_everything()) > 20
    host = PluginHost()
    record = host.register(module, "pagerplugin")
    assert record.status == "loaded", record.error
    assert record.channels == ["pager", "pager2"]
    assert list(find_wizards(host)[0]) == ["pager"]
    limits = host.channels["pager"].capabilities.rate_limits
    assert limits.global_ is not None
    assert limits.global_.count == 30
