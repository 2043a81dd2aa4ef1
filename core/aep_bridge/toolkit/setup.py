"""The setup flow's pieces a channel's `SetupWizard` composes: the token, the pairing code,
the last steps.

Every platform wizard asks for a token the same way (`--token-env VAR`, else the default
variable if the person says so, else typed without echo), checks it against the platform
(asking again for a typed one that is refused), never shows it in an error (`clean_error`),
writes `${VAR}` into the block rather than the value (`SetupToken.reference`), offers to keep the
typed value in the env file (`keep_tokens`) and ends with the doctor (`check_with_doctor`).
A wizard that needs a person's platform id pairs them with a one-time code typed in the chat
(`PairingCode`: random, shown once, taken once, for a while, for a few wrong tries,
compared in constant time). These are functions and small classes, not a framework: a
wizard calls the ones it needs, in its own order, with its own texts.
"""

from __future__ import annotations

import asyncio
import hmac
import os
import secrets
import time
from collections.abc import (
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Mapping,
    Sequence,
)
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, Final, Literal, NoReturn, Required, TypedDict, TypeVar, Unpack, overload
from urllib.parse import urlsplit

from ..contract.types import DoctorCheck
from ..contract.wizard import SetupContext, SetupError, SetupOption

_T = TypeVar("_T")

#: tries at a typed token before `check_token` gives up
TOKEN_TRIES: Final = 3
#: wrong codes a `PairingCode` takes before it is spent: a person mistypes once or twice; a
#: stranger guessing gets this many tries at a million codes, not unlimited ones
PAIRING_ATTEMPTS: Final = 10


# -- words ------------------------------------------------------------------------------------


def human_duration(seconds: float) -> str:
    """A wait as a person reads it: `45 s`, `5 minutes` (whole minutes only)."""
    whole = round(seconds)
    if whole >= 60 and whole % 60 == 0:
        minutes = whole // 60
        return f"{minutes} minute{'s' if minutes != 1 else ''}"
    return f"{whole} s"


def tilde(path: Path) -> str:
    """`path` with the home folder as `~`, as a person would type it."""
    try:
        return "~/" + str(path.relative_to(Path.home()))
    except ValueError:
        return str(path)


def scrub_token(text: str, *tokens: str, mark: str = "[token]") -> str:
    """`text` with every token cut out, and the secret half of an `id:secret` token too (a
    URL or an SDK's message may quote either)."""
    for token in tokens:
        for secret in (token, token.partition(":")[2]):
            if secret:
                text = text.replace(secret, mark)
    return text


def clean_error(exc: BaseException, *tokens: str, with_type: bool = False) -> str:
    """An error as one line for the person, the tokens cut out (`scrub_token`); with
    `with_type` its class name first (`ClientConnectorError: ...`), for errors whose text
    alone says little."""
    text = f"{type(exc).__name__}: {exc}" if with_type else str(exc)
    return scrub_token(text, *tokens)


def number_problem(answer: str, count: int) -> str | None:
    """Why `answer` is not a choice from a numbered list of `count`, or None: a `check`
    for `SetupContext.ask`."""
    if answer.isdigit() and 1 <= int(answer) <= count:
        return None
    return f"Give a number from 1 to {count}."


class _NumberOptions(TypedDict, total=False):
    """What `ask_number` takes besides `or_none`, declared once for its overloads and itself."""

    flag: Required[str]
    default: str | None
    also: Callable[[int], str | None] | None


@overload
def ask_number(
    setup: SetupContext,
    prompt: str,
    count: int,
    *,
    or_none: Literal[False] = False,
    **options: Unpack[_NumberOptions],
) -> int: ...


@overload
def ask_number(
    setup: SetupContext,
    prompt: str,
    count: int,
    *,
    or_none: Literal[True],
    **options: Unpack[_NumberOptions],
) -> int | None: ...


def ask_number(
    setup: SetupContext,
    prompt: str,
    count: int,
    *,
    or_none: bool = False,
    **options: Unpack[_NumberOptions],
) -> int | None:
    """The index (from 0) of a choice from a numbered list of `count` the person was shown,
    asked with `prompt` (`flag` and `default` as `SetupContext.ask` takes them); with
    `or_none`, `none` is an answer too (then None). `also(index)` says why a choice in range
    is still not acceptable, or None."""
    also = options.get("also")

    def problem(answer: str) -> str | None:
        if or_none and answer.lower() == "none":
            return None
        wrong = number_problem(answer, count)
        if wrong is not None:
            return wrong + " Or none." if or_none else wrong
        return also(int(answer) - 1) if also is not None else None

    answer = setup.ask(prompt, default=options.get("default"), flag=options["flag"], check=problem)
    return None if or_none and answer.lower() == "none" else int(answer) - 1


def ask_choice(
    setup: SetupContext,
    intro: str,
    labels: Sequence[str],
    prompt: str,
    *,
    flag: str,
    also: Callable[[int], str | None] | None = None,
) -> int:
    """Print `labels` as a numbered list under `intro` and ask for one (`ask_number`): its
    index. A list of one is the default answer."""
    setup.say("")
    setup.say(intro)
    for number, label in enumerate(labels, 1):
        setup.say(f"  {number}. {label}")
    default = "1" if len(labels) == 1 else None
    return ask_number(setup, prompt, len(labels), default=default, flag=flag, also=also)


def url_problem(text: str, *, example: str) -> str | None:
    """What `text` lacks to be a server's base URL (http or https, a host, a numeric port if
    any, no query or fragment), said after its name (`f"homeserver {problem}"`), or None."""
    try:
        parts = urlsplit(text.strip())
        parts.port  # noqa: B018 - a port that is not a number raises here
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        return f"must be an http:// or https:// URL with a host, such as {example}"
    if parts.query or parts.fragment:
        return "must not have a query (?...) or a fragment (#...)"
    return None


def wait_setup_option(what: str, *, default: float, longest: bool = False) -> SetupOption:
    """The `--wait SECONDS` option `wait_option` reads: `what` the wizard waits for (`for the
    bot to join, and for the code`); with `longest`, the default is the most, the pairing
    code's lifetime."""
    limit = f"default {default:.0f}"
    if longest:
        limit = f"default and most {default:.0f}: the code is taken for {human_duration(default)}"
    return SetupOption(
        "--wait",
        f"seconds to wait {what} ({limit})",
        metavar="SECONDS",
        kind=float,
        default=default,
    )


def wait_option(setup: SetupContext, *, most: float | None = None) -> float:
    """The `--wait` option in seconds: at least one, and at most `most` when given."""
    wait = max(1.0, float(setup.options["wait"]))
    return wait if most is None else min(most, wait)


async def poll_times(wait: float, *, first: float = 0.25, most: float = 3.0) -> AsyncIterator[None]:
    """Each time to look again, until `wait` seconds have passed: at once, then after
    `first` seconds, doubling up to every `most` (quick for someone quick, gentle on the
    platform's rate limits)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    pause = first
    yield
    while (remaining := deadline - loop.time()) > 0:
        await asyncio.sleep(min(pause, remaining))
        pause = min(pause * 2, most)
        yield


async def wait_until(
    setup: SetupContext,
    look: Callable[[], Awaitable[_T]],
    *,
    wait: float,
    how: Sequence[str],
    gave_up: str,
    first: float = 0.25,
    most: float = 3.0,
) -> _T:
    """`look()`'s first answer that is not empty: at once; else print `how` (what the person
    is to do, such as invite the bot) and look again (`poll_times`) until `wait` is over,
    then a `SetupError` saying `gave_up`."""
    if found := await look():
        return found
    setup.say("")
    for line in how:
        setup.say(line)
    setup.say(f"Waiting for it (up to {human_duration(wait)}; Ctrl-C stops)...")
    async for _ in poll_times(wait, first=first, most=most):
        if found := await look():
            return found
    raise SetupError(gave_up)


# -- the token --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SetupToken:
    """A secret the wizard got, the variable the config names for it, and whether it came
    from that variable (then it is there already; a typed one is offered to the env file)."""

    variable: str
    value: str
    from_env: bool

    @property
    def reference(self) -> str:
        """What the block holds instead of the value: `${VAR}`."""
        return "${" + self.variable + "}"

    def __repr__(self) -> str:  # never the value, in a traceback or a log
        return f"Token(variable={self.variable!r}, from_env={self.from_env})"


def token_env_option(variable: str, *, what: str = "bot token") -> SetupOption:
    """The `--token-env VAR` option `ask_token` reads, its help naming the default
    `variable`."""
    return SetupOption(
        "--token-env",
        f"read the {what} from this environment variable (the config then reads it from "
        f"there too) instead of asking; default: ask, or use ${variable}",
        metavar="VAR",
    )


def ask_token(
    setup: SetupContext,
    *,
    flag: str,
    variable: str,
    prompt: str,
    example: str,
    what: str = "bot token",
    hint: str = "",
) -> SetupToken:
    """A token: from the variable `flag` (such as `--token-env`) names, else from
    `variable` when it is set and the person says to use it, else typed without echo
    (`prompt`, a `SetupError` naming `flag` under `--yes`). A named variable that is empty is a
    `SetupError` saying to export it (`example` is the value shown, `hint` where to get it)."""
    named = setup.options[flag.lstrip("-").replace("-", "_")]
    if named:
        value = os.environ.get(named, "").strip()
        if not value:
            more = f" ({hint})" if hint else ""
            raise SetupError(f"${named} is not set: export {named}='{example}' first{more}")
        return SetupToken(named, value, True)
    if os.environ.get(variable, "").strip() and setup.confirm(
        f"Use the {what} in ${variable}?", default=True
    ):
        return SetupToken(variable, os.environ[variable].strip(), True)
    typed = setup.secret(f"{prompt} (it is not shown as you type)", flag=f"{flag} VAR")
    return SetupToken(variable, typed, False)


async def check_token(
    setup: SetupContext,
    token: SetupToken,
    check: Callable[[str], Awaitable[_T]],
    *,
    again: str,
    tries: int = TOKEN_TRIES,
) -> tuple[_T, SetupToken]:
    """`check(value)`'s result and the token it took. `check` raises `SetupError` with a
    reason that never quotes the token; a typed token is then asked for again (`again`, the
    prompt), up to `tries` times; one from a variable is not (the error names the variable)."""
    for attempt in range(1, tries + 1):
        try:
            return await check(token.value), token
        except SetupError as exc:
            where = f"${token.variable}" if token.from_env else "that token"
            if token.from_env or attempt == tries:
                raise SetupError(f"{where}: {exc}") from None
            setup.say(f"{exc}.")
            token = SetupToken(token.variable, setup.secret(again), False)
    raise AssertionError("unreachable")  # pragma: no cover


def keep_tokens(
    setup: SetupContext, tokens: Sequence[SetupToken], *, example: str = "the token"
) -> None:
    """Say that the file names the variables, not the values; offer to save the typed
    tokens in the env file (readable only by the person), else say how to keep them there
    (`example` stands in for a typed value)."""
    env_file = tilde(setup.env_file)
    one = len(tokens) == 1
    names = " and ".join(t.reference for t in tokens)
    setup.say(
        f"The file says {names}, not the token{'' if one else 's'}: aep-bridge reads "
        f"{'the token' if one else 'them'} from its environment when it starts."
    )
    typed = [t for t in tokens if not t.from_env]
    what = "the token" if one else f"the typed token{'s' if len(typed) > 1 else ''}"
    if typed and setup.confirm(f"Save {what} in {env_file}, readable only by you?", default=True):
        for token in typed:
            setup.save_secret(token.variable, token.value)
        setup.say(f"Saved. `aep-bridge run` (and `check`, `doctor`) reads it from {env_file}.")
        return
    them = "it" if one else "them"
    setup.say(f"To keep {them} in {env_file}, readable only by you, and load {them} from there:")
    setup.say(f"  mkdir -p {tilde(setup.env_file.parent)}")
    for token in tokens:
        value = f'"${token.variable}"' if token.from_env else f"'{example}'"
        setup.say(f"  (umask 077; printf '{token.variable}=%s\\n' {value} >> {env_file})")
    setup.say(f"  set -a; . {env_file}; set +a    # in the shell that runs aep-bridge")


# -- the approvers ----------------------------------------------------------------------------


def approver_option(
    what: str, *, kind: type = str, instead: str = "the pairing code"
) -> SetupOption:
    """The repeatable `--approver ID` option `given_approvers` reads: `what` an id is (`a
    Slack member id (U...)`), given instead of `instead`."""
    return SetupOption(
        "--approver",
        f"{what} allowed to answer, instead of {instead}",
        metavar="ID",
        kind=kind,
        repeat=True,
    )


def given_approvers(setup: SetupContext, valid: Callable[[str], object], takes: str) -> list[str]:
    """The `--approver` ids, stripped (none: an empty list): a `SetupError` naming each one
    that is not `valid`, saying what the flag `takes`, before anything is asked or written."""
    given = [str(approver).strip() for approver in setup.options["approver"]]
    if wrong := [approver for approver in given if not valid(approver)]:
        raise SetupError(f"--approver takes {takes}, not {', '.join(wrong)}")
    return given


# -- the last steps ---------------------------------------------------------------------------


def write_channel_block(setup: SetupContext, block: Mapping[str, Any]) -> Path:
    """Write the channel's block into the config, beside the channels already there, and
    say where."""
    path = setup.write_channel(block)
    setup.say(f"Wrote channels.{setup.channel} to {path}.")
    return path


async def check_with_doctor(
    setup: SetupContext, tokens: Iterable[SetupToken], *, becomes: str
) -> bool:
    """Run the channel's doctor on the block as written (the tokens passed in, exported or
    not), and end with what to do next: `becomes` says what a session becomes."""
    setup.say("")
    setup.say("Checking it as `aep-bridge doctor` does:")
    ok = await setup.doctor(environ={t.variable: t.value for t in tokens})
    setup.say("")
    if ok:
        setup.say(f"Done. Start the bridge with `aep-bridge run`: a session becomes {becomes}.")
    else:
        setup.say(
            "The block is written, but a check failed: fix what it says, then run "
            "`aep-bridge doctor`."
        )
    return ok


# -- the pairing code -------------------------------------------------------------------------


class PairingVerdict(Enum):
    """What a message in the chat was to a `PairingCode`."""

    #: the code: its sender is paired, and the code is spent
    TAKEN = "taken"
    #: a code, but not this one: counted against the attempts
    WRONG = "wrong"
    #: not a code at all (chat goes on around the pairing): not counted
    OTHER = "other"
    #: the code is past its lifetime: refused, however right
    EXPIRED = "expired"
    #: the code was taken already, or too many wrong codes came: refused, however right
    SPENT = "spent"


class PairingCode:
    """A one-time code the wizard shows once on the person's terminal; whoever types it in
    the chat proves they are that person, and becomes (say) the first approver.

    Random (`secrets`), `digits` long; taken once (a replay is `SPENT`), only within
    `lifetime` seconds of being made (then `EXPIRED`), and spent after `attempts` wrong
    codes. `check` compares in constant time, so how long it takes tells nothing about the
    code. `clock` (seconds, monotonic) is for tests.
    """

    def __init__(
        self,
        *,
        digits: int = 6,
        lifetime: float,
        attempts: int = PAIRING_ATTEMPTS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if digits < 4 or attempts < 1 or lifetime <= 0:
            raise ValueError("a pairing code needs 4+ digits, 1+ attempts and a lifetime")
        self.digits = digits
        self.code = f"{secrets.randbelow(10**digits):0{digits}d}"
        self.attempts = attempts
        self.wrong = 0
        self._clock = clock
        self._expires = clock() + lifetime
        self._spent = False

    def __repr__(self) -> str:  # never the code
        return f"PairingCode(digits={self.digits}, wrong={self.wrong}, spent={self.spent})"

    @property
    def spent(self) -> bool:
        """Taken, or out of attempts: no message takes it any more."""
        return self._spent

    @property
    def expired(self) -> bool:
        return self._clock() >= self._expires

    def looks_like_code(self, text: str) -> bool:
        """Whether `text` is shaped like a code (ASCII digits, as many as the code's)."""
        text = text.strip()
        return text.isascii() and text.isdigit() and len(text) == self.digits

    def check(self, text: str) -> PairingVerdict:
        """What the message `text` is: the code (`TAKEN`, once), a wrong code, or other."""
        if self._spent:
            return PairingVerdict.SPENT
        if self.expired:
            return PairingVerdict.EXPIRED
        text = text.strip()
        if not self.looks_like_code(text):
            return PairingVerdict.OTHER
        if hmac.compare_digest(text.encode(), self.code.encode()):
            self._spent = True
            return PairingVerdict.TAKEN
        self.wrong += 1
        if self.wrong >= self.attempts:
            self._spent = True
        return PairingVerdict.WRONG

    # the texts every pairing says, the same on every platform

    def show(self, setup: SetupContext, where: str, wait: float) -> None:
        """Tell the person where to type the code, and the code (on their terminal only)."""
        setup.say("")
        setup.say(
            "Who answers the agents' questions? The first approver is whoever types this code "
            f"in {where}:"
        )
        setup.say(f"    {self.code}")
        setup.say(f"Waiting for it (up to {human_duration(wait)}; Ctrl-C stops)...")

    def say_taken(self, setup: SetupContext, who: str) -> None:
        setup.say(f"Got it: {who} typed the code, and is the first approver.")

    def say_wrong(self, setup: SetupContext, who: str) -> None:
        """A wrong code was typed: say who; a `SetupError` when that spent the code."""
        setup.say(f"{who} typed another code: not taken. Still waiting...")
        if self._spent:
            raise SetupError(
                f"{self.wrong} wrong codes were typed, so this one is spent: run this again "
                "for a new code, or pass --approver ID"
            )

    def timed_out(self, where: str, wait: float, how: str) -> SetupError:
        """The error when nobody typed the code in time (`how`: how to find an id)."""
        return SetupError(
            f"nobody typed the code in {where} within {human_duration(wait)}: run this again for "
            f"a new code, or pass --approver ID ({how})"
        )


async def pair_from(
    setup: SetupContext,
    pairing: PairingCode,
    messages: AsyncIterable[tuple[str, str]],
    *,
    where: str,
    wait: float,
    how: str,
    who: Callable[[str], Awaitable[str]],
) -> str:
    """Show the code, then read `messages` ((sender id, text) of each new message in
    `where`, the stream ending when `wait` is over) until one takes it: that sender's id.
    A wrong code is said with `who(sender)` (a person's name); chatter is passed over and never
    shown; too many wrong codes, or the stream's end, is a `SetupError` (`how` says how to
    find an id for `--approver`)."""
    pairing.show(setup, where, wait)
    async for sender, text in messages:
        verdict = pairing.check(text)
        if verdict is PairingVerdict.TAKEN:
            pairing.say_taken(setup, await who(sender))
            return sender
        if verdict is PairingVerdict.WRONG:
            pairing.say_wrong(setup, await who(sender))
    raise pairing.timed_out(where, wait, how)


# -- the doctor -------------------------------------------------------------------------------


def doctor_ok(name: str, detail: str) -> DoctorCheck:
    """A doctor check that passed."""
    return DoctorCheck(name=name, ok=True, detail=detail)


def doctor_fail(name: str, detail: str, fix: str | None = None) -> DoctorCheck:
    """A doctor check that failed, with what to do (`detail` never quotes a token: see
    `clean_error`)."""
    return DoctorCheck(name=name, ok=False, detail=detail, fix=fix)


class _DoctorStop(Exception):
    """A check the rest need failed: the run ends there."""


class DoctorRun:
    """The checks of one doctor run, in order, each needing the ones before: `add` records a
    check; `need` records one the rest depend on and, when it failed, ends the run (the
    `with run:` block); `stop` records a failure and ends it. Nothing is then checked against
    what is known to be broken."""

    def __init__(self) -> None:
        self.checks: list[DoctorCheck] = []

    def __enter__(self) -> DoctorRun:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> bool:
        return kind is _DoctorStop

    def add(self, check: DoctorCheck) -> None:
        self.checks.append(check)

    def need(self, check: DoctorCheck) -> None:
        self.checks.append(check)
        if not check.ok:
            raise _DoctorStop

    def stop(self, check: DoctorCheck) -> NoReturn:
        self.checks.append(check)
        raise _DoctorStop
