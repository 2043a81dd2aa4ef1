"""The conformance kit's eyes and hands on the fake Slack, and a Slack adapter factory."""

from __future__ import annotations

import re
from typing import Any

from aep_bridge import ChannelUser
from aep_bridge.testing import ButtonView, FakeCore, MessageView, ThreadView
from aep_bridge_slack import SlackChannel, SlackConfig

from .fake_slack import C0AGENTS, C0NOTIFY, FakeMessage, FakeSlack, make_config

ZWSP = "\u200b"
#: a link as Slack draws it: its text (or its target when it has none)
_LINK = re.compile(r"<([^<>|]*)\|([^<>]*)>|<([^<>|]*)>")
#: inline code (not a backtick made literal with zero-width spaces): shown as it is
_INLINE_CODE = re.compile(r"(?<!\u200b)`([^`\n]+?)`(?!\u200b)")
_MARKERS = "*_~`"


def make_adapter(fake: FakeSlack, core: Any, **config: Any) -> SlackChannel:
    block = SlackConfig.model_validate({"name": "slack", **make_config(fake, **config)})
    return SlackChannel(core, block)


def visible(text: str) -> str:
    """What a person reads in a mrkdwn text, as Slack draws it: code as written, links as
    their text, formatting markers gone, a marker between zero-width spaces (`escape`'s
    inert one) shown as the character, entities as their characters."""
    parts = text.split("```")
    shown = "".join(part if index % 2 else _inline(part) for index, part in enumerate(parts))
    return shown.replace(ZWSP, "").replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def _inline(text: str) -> str:
    text = _LINK.sub(lambda m: m.group(2) if m.group(1) is not None else m.group(3), text)
    pieces = _INLINE_CODE.split(text)
    out = []
    for index, piece in enumerate(pieces):
        if index % 2:
            out.append(piece)
            continue
        kept = []
        for at, char in enumerate(piece):
            if char in _MARKERS:
                inert = at > 0 and piece[at - 1] == ZWSP and piece[at + 1 : at + 2] == ZWSP
                # an `_` inside a word (`line_total`) is a letter to Slack: no style
                inert = inert or (
                    char == "_"
                    and 0 < at < len(piece) - 1
                    and piece[at - 1].isalnum()
                    and piece[at + 1].isalnum()
                )
                if not inert:
                    continue
            kept.append(char)
        out.append("".join(kept))
    return "".join(out)


def shown(message: FakeMessage) -> str:
    """What a person reads in a message: its sections' and contexts' texts (or its text,
    without blocks), as Slack draws them."""
    parts: list[str] = []
    for block in message.blocks or []:
        if block.get("type") in ("section", "header"):
            parts.append(str((block.get("text") or {}).get("text", "")))
        elif block.get("type") == "context":
            parts += [str(e.get("text", "")) for e in block.get("elements", [])]
    text = "\n".join(parts) if message.blocks else message.text
    return visible(text)


def slack_user(fake: FakeSlack, user: ChannelUser) -> dict[str, Any]:
    """A Slack member for a kit user: one of the fake's people, else added to the
    workspace (in the sessions' channel) under the kit's id."""
    if user.id not in fake.users:
        fake.add_user(user.id, user.name or user.id)
    return fake.users[user.id]


class SlackProbe:
    """`PlatformProbe` over the fake: what the workspace shows, and presses and replies."""

    def __init__(self, fake: FakeSlack, core: FakeCore) -> None:
        self.fake = fake
        self.core = core

    async def threads(self) -> list[ThreadView]:
        return [
            ThreadView(m.ts, shown(m), "Ended" in shown(m))
            for m in self.fake.parents(C0AGENTS)
            if m.from_bot
        ]

    async def messages(self, thread_id: str | None = None) -> list[MessageView]:
        if thread_id is not None:
            found = self.fake.thread(C0AGENTS, thread_id)
        else:
            found = [*self.fake.messages(C0AGENTS), *self.fake.messages(C0NOTIFY)]
        return [self._view(m) for m in sorted(found, key=lambda m: float(m.ts)) if m.from_bot]

    @staticmethod
    def _view(message: FakeMessage) -> MessageView:
        buttons = tuple(
            ButtonView(str((b.get("text") or {}).get("text", "")), str(b.get("value", "")).encode())
            for b in message.buttons
        )
        return MessageView(
            f"{message.channel}/{message.ts}", message.thread_ts, shown(message), buttons
        )

    async def direct_messages(self, user_id: str) -> list[MessageView]:
        """The bot's messages in its DM with `user_id`: as shown, then the raw text (its
        link to the card)."""
        return [
            MessageView(f"{m.channel}/{m.ts}", None, f"{shown(m)}\n{m.text}")
            for m in self.fake.dms(user_id)
            if m.from_bot
        ]

    async def press(self, message: MessageView, button: ButtonView, user: ChannelUser) -> None:
        channel, ts = message.id.split("/")
        found = self.fake.message(channel, ts)
        action = next(
            b["action_id"] for b in found.buttons if b.get("value") == button.data.decode()
        )
        envelope = await self.fake.press(slack_user(self.fake, user), found, action)
        assert envelope.acked, "the press was not acked"

    async def reply(
        self,
        thread_id: str | None,
        text: str,
        user: ChannelUser,
        reply_to: MessageView | None = None,
    ) -> None:
        """Words in a thread (Slack has no reply to one message inside a thread: `reply_to`
        is the thread's open question, which the words answer)."""
        before = self.core.heard
        thread = thread_id or (reply_to.thread_id if reply_to else None)
        await self.fake.say(slack_user(self.fake, user), C0AGENTS, text, thread_ts=thread)
        await self.core.hears_more_than(before)
