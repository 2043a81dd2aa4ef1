"""`NtfyChannel`: aep-bridge sessions as ntfy push notifications, requests as action buttons.

ntfy has no threads and cannot edit a notification, so every message, card and outcome is a
new notification whose title names the session. A card's buttons are ntfy `http` actions:
the phone POSTs a press to this instance's `/press` route, carrying a token the core signed
for the card and the button's index (`core.sign`); the route checks it (`core.verify`) and
hands the card id and index to the core, which knows the rest. Nothing is stored to answer a
press: what the channel keeps (session names, for titles) is for display only.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import logging
from collections.abc import Sequence
from typing import Any, ClassVar, Final
from urllib.parse import urlsplit

from starlette.routing import BaseRoute

from aep_bridge import (
    BridgeCore,
    ChannelAdapter,
    ChannelCapabilities,
    ChannelConfig,
    ChannelError,
    ChannelState,
    ChannelUser,
    NotificationMessage,
    Once,
    OutgoingMessage,
    PermissionOutcome,
    PermissionRequest,
    RateLimit,
    RateLimits,
    split_text,
)

from . import render
from .client import MAX_ACTIONS, MAX_MESSAGE_BYTES, NtfyClient
from .config import NtfyConfig
from .press import parse_press, press_body, press_route

log = logging.getLogger(__name__)

#: how many half-sent long messages to remember, so a retry does not repeat their parts
_RESUME_SLOTS: Final = 32
#: how many (card, refusal) pairs to remember, so a replayed press is reported once
_TOLD_SLOTS: Final = 1024
_URGENT_NOTIFICATIONS: Final = frozenset({"permission", "input_required", "error"})
_FORBIDDEN: Final[dict[str, Any]] = {"error": "forbidden: not a press this bridge signed"}


class NtfyChannel(ChannelAdapter[NtfyConfig]):
    """ntfy push notifications, with permission prompts as up to three action buttons."""

    name = "ntfy"
    capabilities = ChannelCapabilities(
        threads=False,
        buttons=True,
        edits=False,
        text_answers=False,
        forms=False,
        max_message_length=MAX_MESSAGE_BYTES,
        length_unit="bytes",
        max_buttons=MAX_ACTIONS,
        # what a button carries: the press URL plus its signed JSON body (about 150 bytes)
        max_button_data=512,
        # ntfy does not say who tapped: every press is the topic's configured identity
        identifies_users=False,
        # ntfy.sh: a bucket of 60 requests per visitor, refilled one per 5 s
        rate_limits=RateLimits(global_=RateLimit(count=1, per_seconds=5, burst=60)),
    )
    config_model: ClassVar[type[ChannelConfig]] = NtfyConfig
    #: presses are answered by card id alone, with tokens from `core.sign`
    contract_version: ClassVar[str] = "1.2"

    def __init__(self, core: BridgeCore, config: NtfyConfig) -> None:
        super().__init__(core, config)
        self._client = NtfyClient(config.server, config.token)
        self._names: dict[str, str] = {}
        self._sent_parts: dict[str, int] = {}
        self._told = Once(_TOLD_SLOTS)

    # -- lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        await self._client.connect()
        try:
            await self._client.check_health()
        except BaseException:
            await self._client.close()
            raise
        if _is_loopback(self.config.public_url):
            log.warning(
                "ntfy channel %r: public_url is %s, which a phone cannot reach; its buttons "
                "will fail until public_url is the bridge's public address",
                self.instance_name,
                self.config.public_url,
            )

    async def stop(self) -> None:
        await self._client.close()

    def routes(self) -> Sequence[BaseRoute]:
        return (press_route(self.handle_press),)

    # -- sessions ------------------------------------------------------------------------

    async def create_session_thread(self, session_id: str, name: str) -> str:
        """No threads on ntfy: remember the name for titles and return a stable pseudo-id."""
        await self._set_name(session_id, name)
        return f"ntfy-session-{session_id}"

    async def rename_session_thread(self, session_id: str, new_name: str) -> None:
        await self._set_name(session_id, new_name)

    async def delete_session_thread(self, session_id: str) -> None:
        self._names.pop(session_id, None)
        await self._state.delete(_name_key(session_id))

    # -- messages ------------------------------------------------------------------------

    async def send_message(self, session_id: str, content: OutgoingMessage) -> None:
        if content.type == "error":
            priority = self.config.urgent_priority
        elif content.notify:
            priority = self.config.priority
        else:
            priority = self.config.quiet_priority
        extra: dict[str, Any] = {}
        attachment = content.attachment
        if attachment is not None and attachment.url and _is_web_url(attachment.url):
            extra = {"attach": attachment.url, "filename": attachment.file_name}
        await self._publish(
            await self._title(session_id),
            render.message_text(content),
            tags=render.message_tags(content),
            priority=priority,
            extra=extra,
        )

    async def send_notification(self, notification: NotificationMessage) -> None:
        urgent = notification.type in _URGENT_NOTIFICATIONS
        extra: dict[str, Any] = {}
        if notification.deep_link and _is_web_url(notification.deep_link):
            extra["click"] = notification.deep_link
        await self._publish(
            notification.session_name or await self._title(notification.session_id),
            notification.summary,
            tags=render.notification_tags(notification.type),
            priority=self.config.urgent_priority if urgent else self.config.priority,
            extra=extra,
        )

    # -- cards ---------------------------------------------------------------------------

    async def send_permission_request(self, session_id: str, request: PermissionRequest) -> None:
        await self._publish(
            await self._title(session_id),
            render.card_text(request),
            tags=render.request_tags(request),
            priority=self.config.urgent_priority,
            actions=await self._offer(session_id, request),
        )

    async def update_permission_request(
        self, session_id: str, request: PermissionRequest, outcome: PermissionOutcome
    ) -> None:
        """ntfy cannot edit: the outcome is a new notification, with the buttons again if open."""
        actions: list[dict[str, Any]] = []
        if not outcome.closed:
            actions = await self._offer(session_id, request)
        await self._publish(
            await self._title(session_id),
            render.outcome_text(request, outcome.summary()),
            tags=render.outcome_tags(outcome.status),
            priority=self.config.priority if outcome.closed else self.config.urgent_priority,
            actions=actions,
        )

    async def _offer(self, session_id: str, request: PermissionRequest) -> list[dict[str, Any]]:
        """One ntfy `http` action per buttoned option: a POST to this instance's route whose
        body carries the core's token for (card id, option index). Nothing is stored."""
        options = render.buttoned(request)
        if not options:
            return []
        url = f"{self.config.public_url}/channels/{self.instance_name}/press"
        return [
            {
                "action": "http",
                "label": option.label,
                "url": url,
                "method": "POST",
                "headers": {"Content-Type": "application/json"},
                "body": press_body(self.core.sign(request.id, str(index)), session_id),
                "clear": True,
            }
            for index, option in enumerate(options)
        ]

    # -- presses -------------------------------------------------------------------------

    async def handle_press(self, raw: bytes) -> tuple[int, dict[str, Any]]:
        """A tapped button: check the core signed it, then let the core decide by card id and
        option index. A press it did not sign (forged, altered, expired, another channel's)
        never reaches it."""
        body = parse_press(raw)
        press = self.core.verify(body.token) if body is not None else None
        if body is None or press is None or not _is_index(press.option):
            return 403, _FORBIDDEN
        resolution = await self.core.resolve_permission(
            press.card_id, int(press.option), ChannelUser(id=self.config.identity, name="ntfy")
        )
        if not resolution.accepted and self._first_time(press.card_id, resolution.status.value):
            await self._tell(body.session, resolution.message)
        return 200, {"status": resolution.status.value, "message": resolution.message}

    def _first_time(self, card: str, status: str) -> bool:
        """Whether this card has not yet been answered with this refusal.

        A replayed press (anyone who reads the topic can send one) must not cost a publish
        each time: the phone is told once per card and outcome, and the press itself still
        gets the answer in its HTTP response.
        """
        return self._told.first((card, status))

    async def _tell(self, session_id: str | None, text: str) -> None:
        """Tell the phone what became of a press; a failure here is logged, not raised.

        The note is titled with the session the button named, if it is one this channel
        titled (the name is unsigned: an unknown one gets the bridge's name, never its text).
        """
        name = await self._name(session_id) if session_id else None
        title = name or "aep-bridge"
        try:
            await self._publish(title, text, tags=["warning"], priority=self.config.priority)
        except ChannelError as exc:
            log.warning("ntfy channel %r: could not report a press: %s", self.instance_name, exc)

    # -- helpers -------------------------------------------------------------------------

    @property
    def _state(self) -> ChannelState:
        """Where session names are kept, so titles survive a restart (display only)."""
        return self.core.state(self.instance_name)

    async def _set_name(self, session_id: str, name: str) -> None:
        self._names[session_id] = name
        await self._state.set(_name_key(session_id), name)

    async def _name(self, session_id: str) -> str | None:
        name = self._names.get(session_id)
        if name is None:
            name = await self._state.get(_name_key(session_id))
            if name is not None:
                self._names[session_id] = name
        return name

    async def _title(self, session_id: str) -> str:
        return await self._name(session_id) or f"Session {session_id}"

    async def _publish(
        self,
        title: str,
        text: str,
        *,
        tags: list[str],
        priority: int,
        actions: list[dict[str, Any]] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        """Publish `text` in parts of at most 4096 bytes; buttons and `extra` go on the last.

        If a part fails (a 429 halfway), the parts already delivered are remembered, so the
        outbox's retry of the same message sends only the rest.
        """
        pieces = split_text(text, MAX_MESSAGE_BYTES, "bytes")
        resume = _fingerprint(title, text, tags, actions) if len(pieces) > 1 else ""
        first = self._sent_parts.get(resume, 0) if resume else 0
        for index in range(first, len(pieces)):
            last = index == len(pieces) - 1
            message: dict[str, Any] = {
                "topic": self.config.topic,
                "title": render.titled(title, index + 1, len(pieces)),
                "message": pieces[index],
                "priority": priority,
            }
            if tags:
                message["tags"] = tags
            if last:  # buttons, a link or an attachment once, under the end of the text
                message.update(extra or {})
                if actions:
                    message["actions"] = actions
            await self._client.publish(message)
            if resume and not last:
                self._remember_parts(resume, index + 1)
        if resume:
            self._sent_parts.pop(resume, None)

    def _remember_parts(self, fingerprint: str, sent: int) -> None:
        self._sent_parts.pop(fingerprint, None)
        self._sent_parts[fingerprint] = sent
        while len(self._sent_parts) > _RESUME_SLOTS:
            del self._sent_parts[next(iter(self._sent_parts))]


def _is_index(option: str) -> bool:
    """Whether a signed option is a button index, as this channel signs them ("0" to "2")."""
    return option.isascii() and option.isdigit() and len(option) <= 2


def _name_key(session_id: str) -> str:
    return f"session:{session_id}"


def _fingerprint(
    title: str, text: str, tags: list[str], actions: list[dict[str, Any]] | None
) -> str:
    data = json.dumps([title, text, tags, actions], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(data.encode()).hexdigest()


def _is_web_url(url: str) -> bool:
    return urlsplit(url).scheme in ("http", "https")


def _is_loopback(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
