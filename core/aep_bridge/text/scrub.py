"""Secrets out of every error text the bridge prints or logs.

`scrub(text)` removes, wherever they appear in `text`:

- every secret value registered with `register` (the bridge registers each `SecretStr` of the
  config and of every channel's config, and the endpoint's token, once it has read the
  config), and any `extra` values given; values shorter than 4 characters are ignored;
- credentials in URLs: `scheme://user:pass@host` becomes `scheme://***@host`;
- Telegram-style bot tokens in URL paths: `/bot123456:ABC-def/getMe` becomes `/bot***/getMe`.

`ScrubFilter` is the `logging.Filter` `log_setup` installs on the bridge's handler, so a line
from any library is scrubbed too; `aep-bridge doctor`, `check` and `setup` pass what they
print through `scrub`.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Final

from pydantic import BaseModel, SecretBytes, SecretStr

#: what a removed secret becomes
MASK: Final = "***"
#: shorter values are not secrets worth matching (and would mangle ordinary text)
MIN_SECRET: Final = 4

_URL_CREDENTIALS: Final = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^\s/?#@'\"<>]+@")
_BOT_TOKEN: Final = re.compile(r"(?i)\b(bot)\d+:[A-Za-z0-9_-]+")

_lock = threading.Lock()
_secrets: frozenset[str] = frozenset()


def register(values: Iterable[str]) -> None:
    """Add secret values to scrub from now on (in this process)."""
    global _secrets
    fresh = {v for v in values if isinstance(v, str) and len(v) >= MIN_SECRET}
    if fresh - _secrets:
        with _lock:
            _secrets = _secrets | fresh


def registered() -> frozenset[str]:
    """The secret values registered so far."""
    return _secrets


def forget() -> None:
    """Drop every registered secret (for tests)."""
    global _secrets
    with _lock:
        _secrets = frozenset()


def scrub(text: str, extra: Iterable[str] = ()) -> str:
    """`text` without registered secrets, `extra` ones, URL credentials and bot tokens."""
    values = _secrets | {v for v in extra if isinstance(v, str) and len(v) >= MIN_SECRET}
    for value in sorted(values, key=len, reverse=True):  # a secret inside another goes last
        if value in text:
            text = text.replace(value, MASK)
    text = _URL_CREDENTIALS.sub(rf"\1{MASK}@", text)
    return _BOT_TOKEN.sub(rf"\1{MASK}", text)


def secrets_in(*values: object) -> list[str]:
    """Every `SecretStr` (and `SecretBytes`) value in `values`, however deep: in models and
    their sub-models, lists, tuples, sets and mappings."""
    found: list[str] = []
    seen: set[int] = set()
    todo: list[object] = list(values)
    while todo:
        value = todo.pop()
        if isinstance(value, SecretStr):
            found.append(value.get_secret_value())
        elif isinstance(value, SecretBytes):
            found.append(value.get_secret_value().decode("utf-8", "replace"))
        elif isinstance(value, BaseModel | Mapping | list | tuple | set | frozenset):
            if id(value) in seen:
                continue
            seen.add(id(value))
            if isinstance(value, BaseModel):
                todo += vars(value).values()
                todo += (value.model_extra or {}).values()
            elif isinstance(value, Mapping):
                todo += value.values()
            else:
                todo += value
    return found


class ScrubFilter(logging.Filter):
    """Scrubs each record's message, and its traceback, before any handler formats it."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: logging reports it, with what it has
            return True
        cleaned = scrub(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        rewrite_trace(record, scrub)
        return True


def rewrite_trace(record: logging.LogRecord, change: Callable[[str], str]) -> None:
    """Pass what a handler prints of `record` after its message through `change`: its
    traceback (formatted here if no handler did yet, so that each sees the changed one) and
    its stack."""
    if record.exc_info and not record.exc_text:
        record.exc_text = logging.Formatter().formatException(record.exc_info)
    if record.exc_text:
        record.exc_text = change(record.exc_text)
    if record.stack_info:
        record.stack_info = change(record.stack_info)


__all__ = [
    "MASK",
    "ScrubFilter",
    "forget",
    "register",
    "registered",
    "rewrite_trace",
    "scrub",
    "secrets_in",
]
