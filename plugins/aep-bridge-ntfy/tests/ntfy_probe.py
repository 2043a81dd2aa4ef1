"""The conformance probe for ntfy: what a subscribed phone shows, and its taps.

It reads the topic the way a subscriber does (`GET /{topic}/json?poll=1`), so it sees exactly
what ntfy accepted and would deliver. ntfy has no threads, so every message is outside one.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
from fake_ntfy import FakeNtfy, Phone, button_data

from aep_bridge import ChannelUser
from aep_bridge.testing import ButtonView, MessageView, PlatformProbe, ThreadView


class NtfyProbe(PlatformProbe):
    """`PlatformProbe` over the fake ntfy server and the fake phone; ntfy notifications
    cannot be replied to (the inherited `reply`)."""

    def __init__(self, ntfy: FakeNtfy, topic: str, phone: Phone) -> None:
        self.ntfy = ntfy
        self.topic = topic
        self.phone = phone

    async def notifications(self) -> list[dict[str, Any]]:
        """Every notification on the topic, oldest first, as the phone receives them."""
        headers = {"Authorization": f"Bearer {self.ntfy.token}"} if self.ntfy.token else {}
        async with httpx.AsyncClient(timeout=10) as client:
            response = await client.get(
                f"{self.ntfy.url}/{self.topic}/json", params={"poll": "1"}, headers=headers
            )
        response.raise_for_status()
        return [json.loads(line) for line in response.text.splitlines() if line.strip()]

    async def threads(self) -> list[ThreadView]:
        return []

    async def messages(self, thread_id: str | None = None) -> list[MessageView]:
        if thread_id is not None:
            return []
        return [
            MessageView(
                id=n["id"],
                thread_id=None,
                text=n["message"],
                title=n.get("title") or "",
                buttons=tuple(ButtonView(a["label"], button_data(a)) for a in n.get("actions", ())),
            )
            for n in await self.notifications()
        ]

    async def press(self, message: MessageView, button: ButtonView, user: ChannelUser) -> None:
        """Tap the button on the phone. ntfy does not say who tapped, so `user` goes nowhere.

        A button whose data was altered (`button.data` is not what the notification carries)
        is sent as altered: its request's URL and body, with the change where it falls.
        """
        for notification in await self.notifications():
            if notification["id"] != message.id:
                continue
            for action in notification.get("actions", ()):
                if action["label"] != button.label:
                    continue
                genuine = button_data(action)
                if button.data != genuine and len(button.data) == len(genuine):
                    cut = len(str(action["url"]).encode())
                    url, body = button.data[:cut].decode(), button.data[cut:].decode()
                    action = {**action, "url": url, "body": body}
                elif button.data != genuine:
                    continue
                response = await self.phone.tap(action)
                assert response.status_code == 200, response.text
                return
        raise AssertionError(f"no button {button.label!r} on notification {message.id}")
