"""The Bot API's failures as the bridge understands them.

A call the core's outbox runs fails as `RateLimited` (Telegram said when to try again) or
`ChannelError` (permanent when trying again cannot help, else the outbox retries); a start
that cannot reach the chat fails so that the core tries again, unless the token is refused;
a getUpdates refused with 409 Conflict (another program polls the bot) is said in one line.
A token never reaches a message: python-telegram-bot's `InvalidToken` quotes it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable
from typing import Any, Final, NoReturn, TypeVar

from telegram.error import BadRequest, Conflict, Forbidden, InvalidToken, RetryAfter, TelegramError

from aep_bridge import ChannelError, RateLimited

log = logging.getLogger(__name__)
#: python-telegram-bot's polling logger: getUpdates errors other than 409 are logged as it does
_POLLING_LOG = logging.getLogger("telegram.ext.Updater")
#: seconds before a 409 Conflict that persists is logged again (PTB retries every few seconds)
CONFLICT_REPEAT: Final = 600.0
#: what `bot_call(..., missing_ok=True)` returns when the message to edit or delete is gone
MISSING: Final = object()

T = TypeVar("T")


async def bot_call(
    call: Awaitable[T], *, unchanged_ok: bool = False, missing_ok: bool = False
) -> T | Any:
    """One Bot API call, its failures as the core's outbox understands them."""
    try:
        return await call
    except RetryAfter as exc:
        raise RateLimited(_seconds(exc.retry_after), str(exc)) from exc
    except BadRequest as exc:
        text = exc.message.lower()
        if unchanged_ok and "not modified" in text:
            return None
        if missing_ok and ("not found" in text or "message can't be" in text):
            return MISSING
        raise ChannelError(
            f"Telegram refused the call: {exc.message}",
            permanent=True,
        ) from exc
    except InvalidToken:  # its message quotes the token
        raise ChannelError("Telegram refused the bot's token", permanent=True) from None
    except Forbidden as exc:
        raise ChannelError(f"Telegram refused the bot: {exc}", permanent=True) from exc
    except TelegramError as exc:  # network errors, timeouts, 5xx: the outbox retries
        raise ChannelError(f"Telegram call failed: {exc}") from exc


def start_failed(exc: TelegramError, name: str, chat_id: int) -> NoReturn:
    """Why channel `name` could not start: a refused token for good, anything else (a network
    that comes up late) for now, so that the core tries `start` again."""
    if isinstance(exc, InvalidToken):
        raise ChannelError(
            f"Telegram refused the token of channel {name}: check "
            "`token` (from @BotFather) or run `aep-bridge doctor`",
            permanent=True,
        ) from None  # its message quotes the token
    raise ChannelError(
        f"Telegram channel {name}: cannot reach chat "
        f"{chat_id}: {exc}; is the bot a member? run `aep-bridge doctor`"
    ) from exc


class PollingErrors:
    """getUpdates failed (PTB tries again, backing off up to 30 s). A 409 Conflict means
    another program polls this bot: said in one line, again only if it lasts
    `CONFLICT_REPEAT` seconds, not as a traceback at every retry."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._conflict_said: float | None = None  # when a 409 Conflict was last logged

    def __call__(self, exc: TelegramError) -> None:
        if not isinstance(exc, Conflict):
            _POLLING_LOG.exception("Exception happened while polling for updates.", exc_info=exc)
            return
        now = time.monotonic()
        if self._conflict_said is not None and now - self._conflict_said < CONFLICT_REPEAT:
            log.debug("telegram %s: getUpdates: 409 Conflict again", self._name)
            return
        self._conflict_said = now
        log.error(
            "telegram %s: another program is polling this bot (Telegram said 409 Conflict): "
            "stop it, or give this bridge its own bot",
            self._name,
        )


def _seconds(value: Any) -> float:
    return float(value.total_seconds()) if hasattr(value, "total_seconds") else float(value)
