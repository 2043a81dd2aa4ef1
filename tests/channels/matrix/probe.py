"""The conformance kit's eyes and hands on the fake homeserver, and a Matrix adapter factory."""

from __future__ import annotations

import asyncio
import html as htmllib
import re
from typing import Any

from aep_bridge import ChannelUser
from aep_bridge.testing import ButtonView, FakeCore, MessageView, ThreadView
from aep_bridge_matrix import MatrixChannel, MatrixConfig
from aep_bridge_matrix.html import CARD_FIELD

from .fake_homeserver import ADA, BOB, BOT, SERVER_NAME, STRANGER, FakeHomeserver, FakeMessage

_TAG = re.compile(r"<[^>]*>")
_BREAK = re.compile(r"<br>|</p>|</h\d>|</li>|</pre>|</tr>|</summary>|<hr>")


def make_room(fake: FakeHomeserver, **kwargs: Any) -> str:
    return fake.create_room("agents", [BOT, ADA, BOB, STRANGER], **kwargs)


def make_config(fake: FakeHomeserver, room: str, **config: Any) -> dict[str, Any]:
    return {
        "homeserver": fake.url,
        "user_id": BOT,
        "access_token": fake.token(BOT),
        "room_id": room,
        "approvers": [ADA],
        **config,
    }


def make_adapter(fake: FakeHomeserver, core: Any, room: str, **config: Any) -> MatrixChannel:
    block = MatrixConfig.model_validate({"name": "matrix", **make_config(fake, room, **config)})
    return MatrixChannel(core, block)


def visible(message: FakeMessage) -> str:
    """What a person reads of a message as it is now (`drawn`)."""
    return drawn(message.content)


def drawn(content: dict[str, Any]) -> str:
    """What a person reads of a content: the HTML as a client draws it (tags gone, entities
    read, a word joiner unseen), else the body."""
    markup = content.get("formatted_body")
    if not isinstance(markup, str):
        return str(content.get("body", "")).replace("\u2060", "")
    text = _TAG.sub("", _BREAK.sub(lambda m: m.group() + "\n", markup))
    return htmllib.unescape(text).replace("\u2060", "")


def buttons(message: FakeMessage) -> tuple[ButtonView, ...]:
    """A card's reactions to tap, as its latest version lists them ("React 1️⃣ Allow · ...")."""
    if CARD_FIELD not in message.versions[0]:
        return ()
    for line in message.body.splitlines():
        if line.startswith("React "):
            pairs = [part.split(" ", 1) for part in line[len("React ") :].split(" · ")]
            return tuple(ButtonView(label, key.encode()) for key, label in pairs)
    return ()


def matrix_user(fake: FakeHomeserver, room: str, user: ChannelUser) -> str:
    """A kit user as a member of the room: a Matrix id as it is, else a new member."""
    if user.id.startswith("@"):
        return user.id
    user_id = f"@{user.id}:{SERVER_NAME}"
    if user_id not in fake.users:
        fake.add_user(user.id, user.name)
        fake.rooms[room].members.add(user_id)
    return user_id


class MatrixProbe:
    """`PlatformProbe` over the fake homeserver: what the room shows; reactions and replies."""

    def __init__(self, fake: FakeHomeserver, core: FakeCore, room: str) -> None:
        self.fake, self.core, self.room = fake, core, room

    async def threads(self) -> list[ThreadView]:
        roots = self.fake.messages(self.room, from_bot=True, include_threads=False)
        return [ThreadView(m.event_id, visible(m), "(ended)" in m.body) for m in roots]

    async def messages(self, thread_id: str | None = None) -> list[MessageView]:
        if thread_id is not None:
            found = self.fake.thread(self.room, thread_id)
        else:
            found = self.fake.messages(self.room, from_bot=True)
        return [
            MessageView(m.event_id, m.thread_root, visible(m), buttons(m))
            for m in found
            if m.sender == BOT
        ]

    def _answers(self) -> int:
        return len(self.core.presses) + len(self.core.incoming) + len(self.core.refused)

    async def _delivered(self, before: int) -> None:
        async with asyncio.timeout(10):
            while self._answers() == before:
                await asyncio.sleep(0.01)

    async def press(self, message: MessageView, button: ButtonView, user: ChannelUser) -> None:
        before = self._answers()
        who = matrix_user(self.fake, self.room, user)
        self.fake.react_as(who, self.room, message.id, button.data.decode())
        await self._delivered(before)

    async def reply(
        self,
        thread_id: str | None,
        text: str,
        user: ChannelUser,
        reply_to: MessageView | None = None,
    ) -> None:
        before = self._answers()
        who = matrix_user(self.fake, self.room, user)
        root = thread_id or (reply_to.thread_id if reply_to else None)
        self.fake.send_as(
            who, self.room, text, thread_root=root, reply_to=reply_to.id if reply_to else None
        )
        await self._delivered(before)
