"""Channel contract 1.2 through the real bridge: presses by card id alone, the default
behaviour as a plugin a plugin can override, signed press tokens, and the 1.1 forms that
still work for one minor version."""

from __future__ import annotations

import time
from typing import Any

import pytest

from aep_bridge import BridgeView, hookimpl
from aep_bridge.contract.adapter import ChannelAdapter
from aep_bridge.contract.plugins import DEFAULTS_PLUGIN, PluginHost
from aep_bridge.contract.types import ChannelConfig, OutgoingMessage, ResolutionStatus
from aep_bridge.loop.bridge import Bridge
from aep_bridge.testing import MemoryChannel
from tests.core.doubles import LocalAgent

from .rig import ALICE, MALLORY, Rig, memory_host


async def _asking(rig: Rig, **ask: Any) -> LocalAgent:
    """An agent that started a session and asked a question, the bridge settled after it."""
    agent = rig.agent()
    agent.start()
    agent.ask(**ask)
    await rig.settle()
    return agent


def _ask_form(agent: LocalAgent, prompt: str, *fields: dict[str, Any]) -> None:
    agent.emit(
        "attention.requested",
        {"kind": "form", "prompt": prompt, "fields": list(fields)},
        capture="full",
    )


def _core(rig: Rig, channel: str = "alpha"):
    """The `BridgeCore` the bridge gave a channel: what a plugin calls."""
    return rig.channel(channel).core


# -- presses by card id ----------------------------------------------------------------


async def test_a_press_by_card_id_and_index_answers_the_agent(tmp_path):
    async with Rig(tmp_path) as rig:
        agent = await _asking(rig, options=("allow", "deny", "always"))
        card_id = rig.card("alpha")[1].id
        resolution = await _core(rig).resolve_permission(card_id, 2, ALICE)
        assert resolution.status is ResolutionStatus.ACCEPTED
        await rig.settle()
        assert agent.answers == [{"option": "always"}]


async def test_a_press_by_card_id_and_option_id_answers_the_agent(tmp_path):
    async with Rig(tmp_path) as rig:
        agent = await _asking(rig)
        card = rig.card("beta")[1]
        await _core(rig, "beta").resolve_permission(card.id, card.options[1].id, ALICE)
        await rig.settle()
        assert agent.answers == [{"option": "deny"}]


@pytest.mark.parametrize("option", [5, -1, "o9", "zz", "", True])
async def test_an_option_that_is_not_on_the_card_is_refused_and_nothing_is_sent(tmp_path, option):
    async with Rig(tmp_path) as rig:
        agent = await _asking(rig)
        card_id = rig.card("alpha")[1].id
        resolution = await _core(rig).resolve_permission(card_id, option, ALICE)
        assert resolution.status is ResolutionStatus.REJECTED
        await rig.settle()
        assert agent.answers == []


async def test_a_card_of_another_channel_is_unknown_here(tmp_path):
    """Card ids are global, but a channel answers only its own cards."""
    async with Rig(tmp_path, channels={"alpha": {"type": "memory", "approvers": ["alice"]}}) as rig:
        await _asking(rig)
        card_id = rig.card("alpha")[1].id
        resolution = await rig.bridge.attention.answer("gamma", card_id, ALICE, option="o1")
        assert resolution.status is ResolutionStatus.NOT_ALLOWED  # no such channel: nobody
        resolution = await _core(rig).resolve_permission("c0000000000000000", 0, ALICE)
        assert resolution.status is ResolutionStatus.UNKNOWN


async def test_text_and_form_answers_by_card_id(tmp_path):
    async with Rig(tmp_path) as rig:
        agent = await _asking(rig, options=())
        card_id = rig.card("alpha")[1].id
        resolution = await _core(rig).answer_text(card_id, "use port 8080", ALICE)
        assert resolution.accepted
        await rig.settle()
        choices = [{"id": "prod", "label": "Prod"}, {"id": "dev", "label": "Dev"}]
        _ask_form(
            agent,
            "Deploy where?",
            {"id": "env", "type": "select", "label": "Env", "required": True, "choices": choices},
        )
        await rig.settle()
        form = rig.card("alpha")[1]
        assert form.fields[0].id == "f1"
        resolution = await _core(rig).answer_form(form.id, {"f1": "c2"}, ALICE)
        assert resolution.accepted, resolution
        await rig.settle()
        assert agent.answers == [{"text": "use port 8080"}, {"values": {"env": "dev"}}]


async def test_a_stranger_pressing_by_card_id_is_refused(tmp_path):
    async with Rig(tmp_path) as rig:
        agent = await _asking(rig)
        card_id = rig.card("alpha")[1].id
        resolution = await _core(rig).resolve_permission(card_id, 0, MALLORY)
        assert resolution.status is ResolutionStatus.NOT_ALLOWED
        await rig.settle()
        assert agent.answers == []


# -- the 1.1 forms, deprecated ---------------------------------------------------------


async def test_the_contract_1_1_forms_still_work_with_a_deprecation_warning(tmp_path):
    async with Rig(tmp_path) as rig:
        agent = await _asking(rig)
        session_id, card, _ = rig.card("alpha")
        with pytest.warns(DeprecationWarning, match="contract 1.1"):
            resolution = await _core(rig).resolve_permission(session_id, card.id, "o2", ALICE)  # type: ignore[call-arg]
        assert resolution.accepted
        await rig.settle()
        assert agent.answers == [{"option": "deny"}]
        agent.ask(options=())
        await rig.settle()
        session_id, card, _ = rig.card("alpha")
        with pytest.warns(DeprecationWarning, match="answer_text"):
            wrong = await _core(rig).answer_text("another-session", card.id, "x", ALICE)  # type: ignore[call-arg]
        assert wrong.status is ResolutionStatus.UNKNOWN, "1.1's session id must still match"


class _Minimal(ChannelAdapter):
    """The least a channel implements."""

    name = "minimal"
    capabilities = MemoryChannel.capabilities

    async def start(self) -> None: ...
    async def stop(self) -> None: ...
    async def send_message(self, session_id, content) -> None: ...
    async def send_permission_request(self, session_id, request) -> None: ...
    async def send_notification(self, notification) -> None: ...
    async def create_session_thread(self, session_id, name) -> str:
        return "t1"

    async def rename_session_thread(self, session_id, new_name) -> None: ...


class _TopicChannel(_Minimal):
    """A contract 1.1 channel: it implements `archive_session_topic`."""

    archived: tuple[str, ...] = ()

    async def archive_session_topic(self, session_id: str) -> None:
        self.archived = (*self.archived, session_id)


async def test_an_adapter_keeps_its_own_state_and_finds_its_sessions_threads(tmp_path):
    async with Rig(tmp_path) as rig:
        await _asking(rig)
        session_id, _, _ = rig.card("alpha")
        alpha, beta = rig.channel("alpha"), rig.channel("beta")
        assert alpha.thread_of(session_id) in alpha.threads, "the thread the channel made"
        assert alpha.thread_of("no-such-session") is None
        await alpha.channel_state().set("topic", "t9")
        assert await _core(rig).state("alpha").get("topic") == "t9", "the core's, durable"
        assert await beta.channel_state().get("topic") is None, "each instance its own"


async def test_an_adapter_with_the_old_archive_name_is_still_archived():
    config = ChannelConfig(name="old")
    channel = _TopicChannel(object(), config)
    await channel.archive_session_thread("s1")
    assert channel.archived == ("s1",)
    plain = _Minimal(object(), config)
    assert await plain.archive_session_thread("s1") is None
    assert await plain.archive_session_topic("s1") is None  # the alias, no recursion


# -- defaults are a plugin -------------------------------------------------------------


def test_the_defaults_are_registered_like_any_plugin():
    host = PluginHost()
    plugin = host.manager.get_plugin(DEFAULTS_PLUGIN)
    assert plugin is not None
    names = {impl.plugin_name for impl in host.hook.approver_decision.get_hookimpls()}
    assert names == {DEFAULTS_PLUGIN}
    assert all(
        impl.trylast
        for hook in (host.hook.approver_decision, host.hook.render_vendor_event)
        for impl in hook.get_hookimpls()
    )


async def test_a_plugin_overrides_the_default_approver_policy(tmp_path):
    class EveryoneOnAlpha:
        @hookimpl
        def approver_decision(self, channel, user, request, config):
            return True if channel == "alpha" else None

    async with Rig(tmp_path, host=memory_host(EveryoneOnAlpha())) as rig:
        agent = await _asking(rig)
        # beta: the plugin has no opinion, the default (the approvers list) refuses Mallory
        refused = await _core(rig, "beta").resolve_permission(rig.card("beta")[1].id, 0, MALLORY)
        assert refused.status is ResolutionStatus.NOT_ALLOWED
        allowed = await _core(rig).resolve_permission(rig.card("alpha")[1].id, 0, MALLORY)
        assert allowed.accepted
        await rig.settle()
        assert agent.answers == [{"option": "allow"}]


async def test_a_failing_approver_plugin_refuses(tmp_path):
    class Broken:
        @hookimpl
        def approver_decision(self, channel, user, request, config):
            raise RuntimeError("directory unreachable")

    async with Rig(tmp_path, host=memory_host(Broken())) as rig:
        await _asking(rig)
        resolution = await _core(rig).resolve_permission(rig.card("alpha")[1].id, 0, ALICE)
        assert resolution.status is ResolutionStatus.NOT_ALLOWED


async def test_vendor_events_by_default_are_one_line_at_verbose_and_hidden_otherwise(tmp_path):
    channels = {
        "alpha": {"type": "memory", "verbosity": "normal"},
        "beta": {"type": "memory", "verbosity": "verbose"},
    }
    async with Rig(tmp_path, channels=channels) as rig:
        agent = rig.agent()
        agent.start()
        agent.emit("x.acme.deploy.started", {"target": "prod"})
        await rig.settle()
        assert not any("x.acme" in t for t in rig.thread_texts("alpha"))
        assert "x.acme.deploy.started (test-agent)" in rig.thread_texts("beta")


async def test_a_plugin_overrides_the_default_vendor_rendering(tmp_path):
    class Acme:
        @hookimpl
        def render_vendor_event(self, event, verbosity):
            if event.type != "x.acme.deploy.started":
                return None
            target = (event.data or {}).get("target")
            return [OutgoingMessage(type="system_message", text=f"🚀 deploying to {target}")]

    async with Rig(tmp_path, host=memory_host(Acme())) as rig:
        agent = rig.agent()
        agent.start()
        agent.emit("x.acme.deploy.started", {"target": "prod"})
        agent.emit("x.other.build.done", {})
        await rig.settle()
        texts = rig.thread_texts("alpha")
        assert "🚀 deploying to prod" in texts
        assert not any("x.other.build.done" in t for t in texts), "the rest keep the default"


# -- signed press tokens -----------------------------------------------------------------


async def test_press_tokens_verify_for_their_channel_only_and_until_they_expire(tmp_path):
    async with Rig(tmp_path) as rig:
        alpha, beta = _core(rig, "alpha"), _core(rig, "beta")
        token = alpha.sign("c0123456789abcdef", "1")
        press = alpha.verify(token)
        assert press is not None
        assert (press.card_id, press.option) == ("c0123456789abcdef", "1")
        assert beta.verify(token) is None, "a token is good on its own channel only"
        body, _, mac = token.partition(".")
        for altered in (
            body + "." + mac[:-1] + ("A" if mac[-1] != "A" else "B"),
            alpha.sign("c0123456789abcdef", "2").partition(".")[0] + "." + mac,
            token[:-4],
            "",
            "not a token",
            "....",
        ):
            assert alpha.verify(altered) is None, altered
        expired = alpha.sign("c0123456789abcdef", "1", ttl=-1)
        assert alpha.verify(expired) is None
        assert time.time() > 0


async def test_the_signing_secret_survives_a_restart(tmp_path):
    async with Rig(tmp_path) as rig:
        token = _core(rig).sign("c0123456789abcdef", "0")
    async with Rig(tmp_path) as rig:
        assert _core(rig).verify(token) is not None
    async with Rig(tmp_path / "elsewhere") as rig:
        assert _core(rig).verify(token) is None, "another bridge's secret"


# -- what the lifecycle hooks hand a plugin ----------------------------------------------


async def test_the_lifecycle_hooks_get_a_bridge_view_and_not_the_bridge(tmp_path):
    seen: dict[str, object] = {}

    class Watcher:
        @hookimpl
        def startup(self, bridge):
            seen["startup"] = bridge
            seen["running"] = list(bridge.running)
            seen["adapter"] = bridge.adapter("alpha")

        @hookimpl
        def shutdown(self, bridge):
            seen["shutdown"] = bridge

    async with Rig(tmp_path, host=memory_host(Watcher())) as rig:
        view = seen["startup"]
        assert isinstance(view, BridgeView)
        assert not isinstance(view, Bridge)
        assert not hasattr(view, "attention"), "the core's parts are not a plugin's to touch"
        assert seen["running"] == ["alpha", "beta"]
        assert seen["adapter"] is rig.channel("alpha")
        agent = rig.agent()
        agent.start()
        await rig.settle()
        session = rig.bridge.sessions.find_by_session("sess-1")
        assert view.thread_id("alpha", session.id) == rig.thread_of("alpha")
        await view.state("alpha").set("k", "v")
        assert await rig.channel("alpha").core.state("alpha").get("k") == "v"
    assert seen["shutdown"] is view


@pytest.mark.parametrize(
    ("values", "reason"), [({}, "this is not a form"), ({"f1": "x"}, "this is not a form")]
)
async def test_form_values_on_a_card_that_is_no_form_are_refused(tmp_path, values, reason):
    async with Rig(tmp_path) as rig:
        agent = await _asking(rig)
        resolution = await _core(rig).answer_form(rig.card("alpha")[1].id, values, ALICE)
        assert (resolution.status, resolution.reason) == (ResolutionStatus.REJECTED, reason)
        await rig.settle()
        assert agent.answers == []


async def test_a_value_for_a_field_the_form_does_not_have_is_refused(tmp_path):
    async with Rig(tmp_path) as rig:
        agent = rig.agent()
        agent.start()
        _ask_form(agent, "Name?", {"id": "name", "type": "string", "label": "Name"})
        await rig.settle()
        card_id = rig.card("alpha")[1].id
        resolution = await _core(rig).answer_form(card_id, {"f1": "ok", "f2": "x"}, ALICE)
        assert (resolution.status, resolution.reason) == (
            ResolutionStatus.REJECTED,
            "no such field",
        )
        assert (await _core(rig).answer_form(card_id, {"f1": "ok"}, ALICE)).accepted
        await rig.settle()
        assert agent.answers == [{"values": {"name": "ok"}}]


async def test_the_1_1_keyword_names_still_work_and_the_1_2_ones_too(tmp_path):
    async with Rig(tmp_path) as rig:
        agent = await _asking(rig, options=("allow", "deny", "always"))
        session_id, card, _ = rig.card("alpha")
        core = _core(rig)
        with pytest.raises(TypeError, match="unexpected or repeated argument 'option_id'"):
            await core.resolve_permission(card_id=card.id, option_id="o1", user=ALICE)
        with pytest.raises(TypeError, match="missing user"):
            await core.resolve_permission(card.id, 1)
        with pytest.warns(DeprecationWarning, match="request_id"):
            old = await core.resolve_permission(
                session_id=session_id, request_id=card.id, option_id="o3", user=ALICE
            )
        assert old.accepted
        await rig.settle()
        agent.ask()
        await rig.settle()
        new = await core.resolve_permission(card_id=rig.card("alpha")[1].id, option=1, user=ALICE)
        assert new.accepted
        await rig.settle()
        assert agent.answers == [{"option": "always"}, {"option": "deny"}]
