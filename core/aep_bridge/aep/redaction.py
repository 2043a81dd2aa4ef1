"""The capture redaction pipeline (AEP-0003 §9.4) and content digests (§9.3).

Chat platforms are third parties, so free text the bridge shows at capture `redacted` passes
through `Redactor` first. The rules run in the specification's order: (a) secrets and
credentials, (b) values the operator names as secret, (c) home directories, (d) emails and
phone numbers. Running (a) before (d) makes `password=jo@example.com` a secret, not PII.

The pipeline is a floor, not a ceiling, and this one redacts more than the floor where leaks
are common: quoted credential assignments, well-known bare token shapes, any user's home
directory, and whole values under credential-named object keys.

It runs on every message the bridge sends, so every pattern is compiled once, here, and is
tried only when a cheap substring test on the casefolded text says it could match.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Final

SECRET: Final = "[REDACTED:secret]"
PII: Final = "[REDACTED:pii]"

#: Configured secret values shorter than this are ignored: redacting `abc` shreds prose.
MIN_SECRET_LENGTH: Final = 4
#: `Redactor.text` remembers its answers for texts up to this many characters, this many.
MEMO_TEXT: Final = 2048
MEMO_SIZE: Final = 4096

_Replacement = str | Callable[[re.Match[str]], str]


@dataclass(frozen=True, slots=True)
class _Rule:
    """One pattern, what replaces a match, and substrings every match contains (casefolded).

    The rule is skipped when none of `hints` occurs in the casefolded text; an empty `hints`
    means "always try".
    """

    pattern: re.Pattern[str]
    replacement: _Replacement
    hints: tuple[str, ...] = ()

    def apply(self, text: str, folded: str) -> str:
        if self.hints and not any(hint in folded for hint in self.hints):
            return text
        return self.pattern.sub(self.replacement, text)


# -- rule (a): secrets and credentials ------------------------------------------------------

#: PEM armour of any label (RFC 7468). An unterminated block is redacted to the end of the
#: text: a truncated private key is still a private key.
_PEM: Final = re.compile(
    r"-----BEGIN [^\r\n-]{1,80}-----(?:.*?-----END [^\r\n-]{1,80}-----|.*)", re.DOTALL
)

#: Credentials embedded in URLs: `scheme://user:password@host`. The user name stays.
_URL_USERINFO: Final = re.compile(r"(?<=://)([^/\s:@\"'<>]+):[^/\s@\"'<>]+@")

#: `Bearer <token>` (RFC 6750; the scheme is case-insensitive). Whether the word after it is
#: a token or prose ("the bearer of good news") is decided by `_bearer`.
_BEARER: Final = re.compile(r"\b(bearer\s+)([A-Za-z0-9\-._~+/]+=*)", re.IGNORECASE)

_KEY_WORDS: Final = (
    r"password|passwd|passphrase|secret|api[_-]?key|token|authorization|credentials?"
    r"|private[_-]?key|access[_-]?key"
)

#: `key = value` and `key: value` where the key ends in a credential word (so `GITHUB_TOKEN=`
#: and `client_secret:` count, `max_tokens: 5` does not). Handles a closing quote between key
#: and separator (JSON, also JSON escaped inside a string), `:=`/`=>`/`==`, a value on the
#: next line, a kept auth scheme (`Authorization: Basic <value>`) and quoted values with
#: spaces. Unquoted values run to the next whitespace.
_ASSIGNMENT: Final = re.compile(
    r"(?P<key>" + _KEY_WORDS + r")"
    r"(?P<sep>\\?[\"']?\s*(?::=|=>|==?|:)\s*)"
    r"(?P<scheme>(?:bearer|basic|digest|token)[ \t]+)?"
    r"(?P<value>\\\"(?:(?!\\\")[^\r\n])*\\\""
    r"|\"(?:[^\"\\\r\n]|\\.)*\""
    r"|'[^'\r\n]*'"
    r"|\S+)",
    re.IGNORECASE,
)

#: JWT/JWS (three base64url parts, the last possibly empty for `alg: none`) or JWE (five).
_JWT: Final = re.compile(
    r"eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*"
    r"(?:\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+)?"
)

#: AWS access key ids: long-lived (`AKIA`, the floor) and temporary (`ASIA`).
_AWS_KEY_ID: Final = re.compile(r"(?:AKIA|ASIA)[0-9A-Z]{16}")

#: Well-known token shapes that need no `key=` before them to be recognisable.
_BARE_TOKENS: Final = re.compile(
    r"(?<![A-Za-z0-9])(?:"
    r"gh[pousr]_[A-Za-z0-9]{20,}"  # GitHub classic and app tokens
    r"|github_pat_[A-Za-z0-9_]{20,}"  # GitHub fine-grained tokens
    r"|glpat-[A-Za-z0-9_-]{20,}"  # GitLab personal access tokens
    r"|xox[abeoprs]-[A-Za-z0-9-]{10,}"  # Slack tokens
    r"|xapp-[0-9]-[A-Za-z0-9-]{10,}"  # Slack app-level tokens
    r"|sk-(?=[A-Za-z0-9_-]*[0-9])[A-Za-z0-9_-]{20,}"  # OpenAI / Anthropic style (not sk-learn)
    r"|[sr]k_(?:live|test)_[A-Za-z0-9]{10,}"  # Stripe secret and restricted keys
    r"|AIza[A-Za-z0-9_-]{30,}"  # Google API keys
    r"|npm_[A-Za-z0-9]{36}"  # npm tokens
    r"|hf_[A-Za-z0-9]{30,}"  # Hugging Face tokens
    r")"
)
_BARE_TOKEN_HINTS: Final = (
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "glpat-",
    "xox",
    "xapp-",
    "sk-",
    "sk_",
    "rk_",
    "aiza",
    "npm_",
    "hf_",
)

_TOKEN_SYMBOLS: Final = frozenset("0123456789._~+/=")


def _looks_like_token(word: str) -> bool:
    """A credential rather than an English word: long, or with digits or token punctuation."""
    if len(word) >= 20:
        return True
    return len(word) >= 8 and (
        not _TOKEN_SYMBOLS.isdisjoint(word) or any(c.isupper() for c in word[1:])
    )


def _bearer(match: re.Match[str]) -> str:
    if _looks_like_token(match[2]):
        return match[1] + SECRET
    return match[0]


def _assignment(match: re.Match[str]) -> str:
    value = match["value"]
    if value.startswith(SECRET):  # already hidden, e.g. by the `Bearer` rule
        return match[0]
    if value.startswith('\\"') and len(value) >= 4:
        hidden = '\\"' + SECRET + '\\"'
    elif value[0] in "\"'" and len(value) >= 2 and value[-1] == value[0]:
        hidden = value[0] + SECRET + value[0]
    else:
        hidden = SECRET
    return match["key"] + match["sep"] + (match["scheme"] or "") + hidden


def _userinfo(match: re.Match[str]) -> str:
    return match[1] + ":" + SECRET + "@"


_SECRET_RULES: Final = (
    _Rule(_PEM, SECRET, ("-----begin",)),
    _Rule(_URL_USERINFO, _userinfo, ("://",)),
    _Rule(_BEARER, _bearer, ("bearer",)),
    _Rule(
        _ASSIGNMENT,
        _assignment,
        (
            "password",
            "passwd",
            "passphrase",
            "secret",
            "key",
            "token",
            "authorization",
            "credential",
        ),
    ),
    _Rule(_JWT, SECRET, ("eyj",)),
    _Rule(_AWS_KEY_ID, SECRET, ("akia", "asia")),
    _Rule(_BARE_TOKENS, SECRET, _BARE_TOKEN_HINTS),
)

# -- rule (c): home directories -------------------------------------------------------------

#: Characters that end a user name inside a path.
_NAME_END: Final = r"/\\\s\"'`<>|:;,()\[\]{}"
#: `/home/<user>`, `/Users/<user>` (not `/Users/Shared`) and `C:\Users\<user>` (also with
#: doubled backslashes, as in JSON text, or forward slashes). A trailing dot is punctuation.
_ANY_HOME: Final = re.compile(
    r"(?<![\w.-])(?:"
    r"/(?:home|Users)/(?!Shared(?:[/\\\s]|$))"
    r"|[A-Za-z]:(?:\\{1,2}|/)(?i:users)(?:\\{1,2}|/)"
    r")"
    rf"[^{_NAME_END}]*[^{_NAME_END}.]"
)
_HOME_RULE: Final = _Rule(_ANY_HOME, "~", ("/home/", "users"))

# -- rule (d): personal data ----------------------------------------------------------------

#: Email addresses. `git@host` (an SSH remote, not a person) is left alone.
_EMAIL: Final = re.compile(
    r"(?<![A-Za-z0-9._%+-])(?!git@)[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*"
    r"\.[A-Za-z]{2,}\b"
)

#: International numbers: `+`, then 8 to 15 digits (E.164) with the usual separators.
_PHONE_INTERNATIONAL: Final = re.compile(r"(?<![\w+])\+\d[\d \t().-]{6,24}\d(?!\d)")

#: North American numbers written the usual ways: `(555) 123-4567`, `555-123-4567`,
#: `555.123.4567`. Versions (`22.11.0`), dates and addresses have other group lengths.
#: Each branch opens with its first character and only then looks behind it, which lets the
#: regex engine skip ahead to candidate characters (twice as fast on clean text).
_PHONE_NANP: Final = re.compile(
    r"(?:\((?<![\w.+-]\()\d{3}\)[ .-]?|\d(?<![\w.+-]\d)\d{2}[ .-])\d{3}[ .-]\d{4}(?![\w-]|\.\d)"
)


def _international(match: re.Match[str]) -> str:
    digits = sum(c.isdigit() for c in match[0])
    return PII if 8 <= digits <= 15 else match[0]


_PII_RULES: Final = (
    _Rule(_EMAIL, PII, ("@",)),
    _Rule(_PHONE_INTERNATIONAL, _international, ("+",)),
    _Rule(_PHONE_NANP, PII),
)

#: Any hint of any rule (casefolded, as the hints are): `Redactor._redact`'s one search.
_ANY_HINT: Final = re.compile(
    "|".join(
        re.escape(hint) for rule in (*_SECRET_RULES, _HOME_RULE, *_PII_RULES) for hint in rule.hints
    )
)
#: the rules that run even when no hint occurs (a rule without hints always tries): a rule
#: added without hints is never skipped by that search
_UNHINTED_SECRET_RULES: Final = tuple(rule for rule in _SECRET_RULES if not rule.hints)
_UNHINTED_HOME_RULES: Final = () if _HOME_RULE.hints else (_HOME_RULE,)
_UNHINTED_PII_RULES: Final = tuple(rule for rule in _PII_RULES if not rule.hints)

# -- object keys ----------------------------------------------------------------------------

_CAMEL_BOUNDARY: Final = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_CREDENTIAL_KEY: Final = re.compile(r"(?:.*[_.\-\s])?(?:" + _KEY_WORDS + r")")


@lru_cache(maxsize=4096)
def is_credential_key(key: str) -> bool:
    """True for object keys that name a credential: `token`, `API_KEY`, `clientSecret`.

    The key is split at camelCase boundaries and matched case-insensitively on its last
    word(s), so `access_token` and `x-api-key` count and `max_tokens` or `token_count` do not.
    """
    words = _CAMEL_BOUNDARY.sub("_", key).lower()
    return _CREDENTIAL_KEY.fullmatch(words) is not None


# -- the pipeline ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RedactionPolicy:
    """What the operator configured: secret values (rule b), the home (c), PII on/off (d)."""

    secret_values: tuple[str, ...] = ()
    home: str | None = None
    pii: bool = True

    @classmethod
    def from_environment(
        cls,
        names: Iterable[str] = (),
        *,
        environ: Mapping[str, str] | None = None,
        extra_values: Iterable[str] = (),
        home: str | None = None,
        pii: bool = True,
    ) -> RedactionPolicy:
        """A policy whose secret values are those of the variables (or config keys) `names`.

        The operator names secrets rather than pasting them into configuration; names that are
        unset or empty are skipped. `environ` defaults to the process environment.
        """
        source: Mapping[str, str] = os.environ if environ is None else environ
        found: dict[str, None] = {}
        for name in names:
            value = source.get(name)
            if value:
                found[value] = None
        for value in extra_values:
            if value:
                found[value] = None
        return cls(secret_values=tuple(found), home=home, pii=pii)


def _operator_home(policy: RedactionPolicy) -> str | None:
    home = policy.home
    if home is None:
        try:
            home = str(Path.home())
        except (RuntimeError, KeyError):
            return None
    home = home.rstrip("/\\")
    # A home at `/` or a drive root would turn every absolute path into `~`.
    return None if len(home) <= 1 or re.fullmatch(r"[A-Za-z]:", home) else home


class Redactor:
    """The §9.4 pipeline under one policy; build once, call for every message."""

    __slots__ = ("_home", "_memo", "_pii", "_values")

    def __init__(self, policy: RedactionPolicy | None = None) -> None:
        policy = policy if policy is not None else RedactionPolicy()
        values = {
            v
            for v in policy.secret_values
            if len(v) >= MIN_SECRET_LENGTH and v not in SECRET and v not in PII
        }
        # Longest first, so a value containing another is replaced whole.
        self._values = tuple(sorted(values, key=len, reverse=True))
        home = _operator_home(policy)
        self._home = None if home is None else (home, re.compile(re.escape(home) + r"(?![\w.-])"))
        self._pii = policy.pii
        #: recent answers: a rendering redacts its parts and then the whole again, and the
        #: same lines recur (labels, statuses, every channel of a session)
        self._memo: dict[str, str] = {}

    def text(self, text: str) -> str:
        """`text` with secrets, configured values, home paths and (unless off) PII replaced."""
        if not text:
            return text
        memo = self._memo
        done = memo.get(text)
        if done is not None:
            return done
        done = self._redact(text)
        if len(text) <= MEMO_TEXT:
            if len(memo) >= MEMO_SIZE:
                memo.clear()
            memo[text] = done
        return done

    def _redact(self, text: str) -> str:
        folded = text.casefold()
        # One search tells whether any rule's hint occurs; when none does, every rule with
        # hints would skip itself, so only those without hints run.
        hinted = _ANY_HINT.search(folded) is not None
        for rule in _SECRET_RULES if hinted else _UNHINTED_SECRET_RULES:
            text = rule.apply(text, folded)
        for value in self._values:
            if value in text:
                text = text.replace(value, SECRET)
        if self._home is not None and self._home[0] in text:
            text = self._home[1].sub("~", text)
        for rule in (_HOME_RULE,) if hinted else _UNHINTED_HOME_RULES:
            text = rule.apply(text, folded)
        if self._pii:
            for rule in _PII_RULES if hinted else _UNHINTED_PII_RULES:
                text = rule.apply(text, folded)
        return text

    def value(self, value: Any) -> Any:
        """A JSON value with every string redacted and credential-named keys' values hidden.

        Keys are structure and stay as they are; numbers, booleans and null pass untouched.
        A non-null value under a key like `token` or `Password` becomes `[REDACTED:secret]`
        whatever it is, since its key already says it is a secret.
        """
        if isinstance(value, str):
            return self.text(value)
        if value is None or type(value) in _SCALARS:  # most values: skip the ABC checks
            return value
        if type(value) is dict or isinstance(value, Mapping):
            return {
                key: (
                    SECRET
                    if item is not None and isinstance(key, str) and is_credential_key(key)
                    else self.value(item)
                )
                for key, item in value.items()
            }
        if isinstance(value, list | tuple):
            return [self.value(item) for item in value]
        return value


#: JSON's numbers and booleans: what `Redactor.value` passes untouched
_SCALARS: Final = frozenset({int, float, bool})


def digest(value: Any) -> str:
    """SHA-256 of the canonical JSON of `value`, hex of the first 16 bytes (AEP-0003 §9.3).

    Take it over the original content, before redaction: it lets parties correlate equal
    content without seeing it. Canonical means sorted keys, no spaces, UTF-8 unescaped.
    """
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:32]


__all__ = ["PII", "SECRET", "RedactionPolicy", "Redactor", "digest", "is_credential_key"]
