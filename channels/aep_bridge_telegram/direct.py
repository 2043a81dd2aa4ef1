"""Heads-ups by direct message: a session's owner hears about their own agent privately.

A bot may write to a person only after that person opened a private chat with it (sent it
/start); until then, and after they block it, Telegram refuses with 403 ("bot can't initiate
conversation with a user", "bot was blocked by the user"), or 400 "chat not found" for an id
it has never seen. Such a refusal is not worth retrying: the heads-up goes to the
Notifications topic instead, and the warning that says how to fix it is logged once per
person (again only after a direct message to them has worked in between).
"""

from __future__ import annotations

import logging

from telegram.error import BadRequest, Forbidden, TelegramError

log = logging.getLogger(__name__)


def user_chat(recipient: str) -> int | None:
    """The private chat of a recipient (a Telegram user id is a positive number), or None
    when `recipient` cannot be one."""
    text = recipient.strip()
    if not text.isascii() or not text.isdigit():
        return None
    chat = int(text)
    return chat if chat > 0 else None


def refused(exc: TelegramError) -> bool:
    """Whether Telegram will not take a direct message to this person until they act."""
    if isinstance(exc, Forbidden):
        return True
    return isinstance(exc, BadRequest) and "chat not found" in exc.message.lower()


class Refusals:
    """Which people's direct messages were refused, so that each is warned about once."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._warned: set[str] = set()

    def refused(self, recipient: str, why: str) -> None:
        """Say once that `recipient` gets heads-ups in the Notifications topic, and why."""
        if recipient in self._warned:
            log.debug("telegram %s: direct message to %s refused again", self._name, recipient)
            return
        self._warned.add(recipient)
        log.warning(
            "telegram %s: cannot send user %s their heads-ups by direct message (%s): they "
            "must open a private chat with the bot and press Start (or unblock it), and their "
            "id in people.<name>.telegram must be their numeric user id; until then their "
            "heads-ups go to the Notifications topic",
            self._name,
            recipient,
            why,
        )

    def delivered(self, recipient: str) -> None:
        """A direct message to `recipient` worked: a later refusal is news again."""
        self._warned.discard(recipient)
