"""The setup toolkit as a third-party channel's wizard uses it: the pairing code refuses a
wrong code, an expired one, a replay and a guesser; a token is never in an error text or on
the screen; a typed token is asked for again and offered to the env file."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from aep_bridge import (
    DoctorRun,
    PairingCode,
    PairingVerdict,
    SetupContext,
    SetupError,
    SetupToken,
    SetupWizard,
    approver_option,
    ask_choice,
    ask_number,
    ask_token,
    check_token,
    check_with_doctor,
    clean_error,
    doctor_fail,
    doctor_ok,
    given_approvers,
    hookimpl,
    human_duration,
    keep_tokens,
    number_problem,
    pair_from,
    scrub_token,
    tilde,
    token_env_option,
    url_problem,
    wait_setup_option,
    wait_until,
    write_channel_block,
)
from aep_bridge.contract.plugins import PluginHost
from aep_bridge.testing import ScriptedIO, run_setup

ROOT = Path(__file__).resolve().parents[2]

TOKEN = "123456789:AAHsecret-half-of-the-token_0123456789"
SECRET_HALF = TOKEN.partition(":")[2]


class Context(SetupContext):
    """A setup context that keeps what the wizard wrote, saved and checked."""

    def __init__(self, io: ScriptedIO, tmp: Path, **options: Any) -> None:
        super().__init__(
            channel="gotify",
            config_path=tmp / "config.json",
            env_file=tmp / "env",
            io=io,
            options={"token_env": None, **options},
            assume_yes=False,
        )
        self.blocks: list[Mapping[str, Any]] = []
        self.saved: dict[str, str] = {}
        self.environ: Mapping[str, str] | None = None
        self.doctor_says = True

    def write_channel(self, block: Mapping[str, Any]) -> Path:
        self.blocks.append(block)
        return self.config_path

    def save_secret(self, variable: str, value: str) -> Path:
        self.saved[variable] = value
        return self.env_file

    async def doctor(self, *, environ: Mapping[str, str] | None = None) -> bool:
        self.environ = environ
        return self.doctor_says


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def wrong(code: str) -> str:
    return f"{(int(code) + 1) % 10 ** len(code):0{len(code)}d}"


# -- the pairing code ---------------------------------------------------------------------


def test_the_code_is_taken_once_and_a_replay_is_refused() -> None:
    pairing = PairingCode(digits=6, lifetime=60)
    assert len(pairing.code) == 6
    assert pairing.code.isdigit()
    assert pairing.check(f"  {pairing.code}\n") is PairingVerdict.TAKEN
    assert pairing.check(pairing.code) is PairingVerdict.SPENT
    assert pairing.spent


def test_a_wrong_code_is_refused_and_the_right_one_still_taken() -> None:
    pairing = PairingCode(digits=8, lifetime=60)
    assert pairing.check(wrong(pairing.code)) is PairingVerdict.WRONG
    assert pairing.wrong == 1
    assert not pairing.spent
    assert pairing.check(pairing.code) is PairingVerdict.TAKEN


def test_chatter_is_not_a_code_and_not_counted() -> None:
    pairing = PairingCode(digits=6, lifetime=60, attempts=1)
    for text in ("hello", f"the code is {pairing.code}", pairing.code[:5], "١٢٣٤٥٦", ""):
        assert pairing.check(text) is PairingVerdict.OTHER
    assert pairing.wrong == 0
    assert pairing.check(pairing.code) is PairingVerdict.TAKEN


def test_an_expired_code_is_refused_however_right() -> None:
    clock = Clock()
    pairing = PairingCode(digits=6, lifetime=600, clock=clock)
    clock.now += 599
    assert pairing.check(wrong(pairing.code)) is PairingVerdict.WRONG
    clock.now += 1
    assert pairing.expired
    assert pairing.check(pairing.code) is PairingVerdict.EXPIRED


def test_a_guesser_spends_the_code_and_the_person_is_told() -> None:
    io = ScriptedIO()
    setup = Context(io, Path("/nonexistent"))
    pairing = PairingCode(digits=6, lifetime=60, attempts=3)
    for _ in range(2):
        assert pairing.check(wrong(pairing.code)) is PairingVerdict.WRONG
        pairing.say_wrong(setup, "Mallory")
    assert pairing.check(wrong(pairing.code)) is PairingVerdict.WRONG
    with pytest.raises(SetupError, match="3 wrong codes were typed, so this one is spent"):
        pairing.say_wrong(setup, "Mallory")
    assert pairing.check(pairing.code) is PairingVerdict.SPENT
    assert "Mallory typed another code: not taken. Still waiting..." in io.transcript


def test_the_code_is_shown_once_and_never_in_its_repr() -> None:
    io = ScriptedIO()
    pairing = PairingCode(digits=6, lifetime=300)
    pairing.show(Context(io, Path("/x")), "#agents", 300)
    assert io.transcript.count(f"    {pairing.code}") == 1
    assert "whoever types this code in #agents:" in io.text
    assert "up to 5 minutes" in io.text
    assert pairing.code not in repr(pairing)
    error = pairing.timed_out("#agents", 300, "Copy User ID")
    assert pairing.code not in str(error)
    assert "nobody typed the code in #agents within 5 minutes" in str(error)


def test_a_short_or_endless_code_is_refused() -> None:
    with pytest.raises(ValueError, match="4\\+ digits"):
        PairingCode(digits=3, lifetime=60)
    with pytest.raises(ValueError, match="a lifetime"):
        PairingCode(digits=6, lifetime=0)


# -- the token never shown ----------------------------------------------------------------


def test_scrub_token_cuts_the_token_and_its_secret_half() -> None:
    text = f"GET https://api.example/bot{TOKEN}/getMe; retry with {SECRET_HALF}"
    scrubbed = scrub_token(text, TOKEN)
    assert TOKEN not in scrubbed
    assert SECRET_HALF not in scrubbed
    assert scrubbed.count("[token]") == 2
    assert scrub_token("nothing here", "") == "nothing here"


def test_clean_error_never_quotes_the_token() -> None:
    exc = ConnectionError(f"cannot connect to https://api.example/bot{TOKEN}/getMe")
    assert TOKEN not in clean_error(exc, TOKEN)
    assert SECRET_HALF not in clean_error(exc, TOKEN)
    assert clean_error(exc, TOKEN, with_type=True).startswith("ConnectionError: ")
    assert "xoxb-1-2" not in clean_error(OSError("xoxb-1-2 refused"), "xapp-9", "xoxb-1-2")


def test_a_token_is_never_in_its_repr() -> None:
    token = SetupToken("GOTIFY_TOKEN", TOKEN, False)
    assert TOKEN not in repr(token)
    assert SECRET_HALF not in repr(token)
    assert token.reference == "${GOTIFY_TOKEN}"


# -- asking for and checking the token ----------------------------------------------------


def ask(setup: Context) -> SetupToken:
    return ask_token(
        setup,
        flag="--token-env",
        variable="GOTIFY_TOKEN",
        prompt="Application token",
        example="the application token",
    )


def test_a_typed_token_is_asked_without_echo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GOTIFY_TOKEN", raising=False)
    io = ScriptedIO(TOKEN)
    token = ask(Context(io, tmp_path))
    assert token == SetupToken("GOTIFY_TOKEN", TOKEN, False)
    assert io.secret_prompts == ["Application token (it is not shown as you type): "]


def test_the_token_in_the_default_variable_is_offered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOTIFY_TOKEN", f" {TOKEN} ")
    io = ScriptedIO("y")
    assert ask(Context(io, tmp_path)) == SetupToken("GOTIFY_TOKEN", TOKEN, True)
    assert io.prompts == ["Use the bot token in $GOTIFY_TOKEN? [Y/n] "]


def test_a_named_variable_that_is_empty_says_to_export_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MY_TOKEN", raising=False)
    with pytest.raises(SetupError, match="export MY_TOKEN='the application token' first"):
        ask(Context(ScriptedIO(), tmp_path, token_env="MY_TOKEN"))


async def refuse_all_but(good: str, value: str) -> str:
    if value != good:
        raise SetupError("the server refused the token")
    return "me"


async def test_a_refused_typed_token_is_asked_again_and_never_shown(tmp_path: Path) -> None:
    io = ScriptedIO(TOKEN)
    setup = Context(io, tmp_path)
    first = SetupToken("GOTIFY_TOKEN", "wrong-token-value", False)
    who, token = await check_token(
        setup, first, lambda v: refuse_all_but(TOKEN, v), again="Application token, again"
    )
    assert (who, token.value) == ("me", TOKEN)
    assert io.secret_prompts == ["Application token, again: "]
    assert "the server refused the token." in io.transcript
    assert TOKEN not in io.text
    assert "wrong-token-value" not in io.text


async def test_a_refused_token_from_a_variable_names_the_variable(tmp_path: Path) -> None:
    setup = Context(ScriptedIO(), tmp_path)
    token = SetupToken("GOTIFY_TOKEN", TOKEN, True)
    with pytest.raises(SetupError) as caught:
        await check_token(setup, token, lambda v: refuse_all_but("other", v), again="again")
    assert str(caught.value) == "$GOTIFY_TOKEN: the server refused the token"
    assert TOKEN not in str(caught.value)


async def test_three_refused_tokens_stop(tmp_path: Path) -> None:
    io = ScriptedIO("two", "three")
    setup = Context(io, tmp_path)
    token = SetupToken("GOTIFY_TOKEN", "one", False)
    with pytest.raises(SetupError, match=r"^that token: the server refused the token$"):
        await check_token(setup, token, lambda v: refuse_all_but(TOKEN, v), again="again")
    assert len(io.secret_prompts) == 2


# -- keeping the token, writing and checking ----------------------------------------------


async def test_the_typed_token_is_saved_and_the_block_names_the_variable(tmp_path: Path) -> None:
    io = ScriptedIO("y")
    setup = Context(io, tmp_path)
    token = SetupToken("GOTIFY_TOKEN", TOKEN, False)
    assert write_channel_block(setup, {"token": token.reference}) == tmp_path / "config.json"
    keep_tokens(setup, [token])
    assert await check_with_doctor(setup, [token], becomes="a message")
    assert setup.blocks == [{"token": "${GOTIFY_TOKEN}"}]
    assert setup.saved == {"GOTIFY_TOKEN": TOKEN}
    assert setup.environ == {"GOTIFY_TOKEN": TOKEN}  # the doctor sees it before it is exported
    assert "The file says ${GOTIFY_TOKEN}, not the token" in io.text
    assert "Done. Start the bridge with `aep-bridge run`: a session becomes a message." in io.text
    assert TOKEN not in io.text


async def test_a_token_not_saved_is_never_printed_in_the_how_to(tmp_path: Path) -> None:
    io = ScriptedIO("n")
    setup = Context(io, tmp_path)
    tokens = [SetupToken("BOT", TOKEN, False), SetupToken("APP", "xapp-1", True)]
    keep_tokens(setup, tokens)
    setup.doctor_says = False
    assert not await check_with_doctor(setup, tokens, becomes="x")
    assert setup.saved == {}
    assert TOKEN not in io.text
    assert "printf 'BOT=%s\\n' 'the token'" in io.text
    assert "printf 'APP=%s\\n' \"$APP\"" in io.text
    assert "The block is written, but a check failed" in io.text


# -- words and doctor checks --------------------------------------------------------------


def test_words() -> None:
    assert human_duration(300) == "5 minutes"
    assert human_duration(60) == "1 minute"
    assert human_duration(90) == "90 s"
    assert tilde(Path.home() / ".config" / "x") == "~/.config/x"
    assert tilde(Path("/etc/x")) == "/etc/x"
    assert number_problem("2", 3) is None
    assert number_problem("4", 3) == "Give a number from 1 to 3."
    assert number_problem("x", 3) == "Give a number from 1 to 3."


def test_ask_number_asks_again_until_a_choice_fits(tmp_path: Path) -> None:
    io = ScriptedIO("9", "x", "2")
    assert ask_number(Context(io, tmp_path), "Which (a number)?", 3, flag="--which ID") == 1
    assert io.transcript.count("Give a number from 1 to 3.") == 2
    io = ScriptedIO("1", "", "3")
    forum = ask_number(
        Context(io, tmp_path),
        "Heads-ups to which (a number, or none)?",
        3,
        flag="--notes ID",
        default="none",
        or_none=True,
        also=lambda i: "not a forum" if i == 0 else None,
    )
    assert forum is None  # the empty answer took the default, none
    assert "not a forum" in io.transcript


def test_token_env_option_names_the_default_variable() -> None:
    option = token_env_option("CHATLY_TOKEN")
    assert option.flag == "--token-env"
    assert option.dest == "token_env"
    assert option.help.endswith("default: ask, or use $CHATLY_TOKEN")


def test_the_approver_and_wait_options_say_what_they_take() -> None:
    approver = approver_option("a Chatly user id (u-...)")
    assert (approver.flag, approver.dest, approver.repeat) == ("--approver", "approver", True)
    assert (
        approver.help == "a Chatly user id (u-...) allowed to answer, instead of the pairing code"
    )
    wait = wait_setup_option("for the code", default=600.0, longest=True)
    assert (wait.flag, wait.kind, wait.default) == ("--wait", float, 600.0)
    assert wait.help == (
        "seconds to wait for the code (default and most 600: the code is taken for 10 minutes)"
    )
    assert (
        wait_setup_option("for the bot", default=300.0).help
        == "seconds to wait for the bot (default 300)"
    )


def test_given_approvers_are_checked_before_anything_is_asked(tmp_path: Path) -> None:
    def valid(user: str) -> bool:
        return user.startswith("u-")

    setup = Context(ScriptedIO(), tmp_path, approver=[" u-ada ", "u-bob"])
    assert given_approvers(setup, valid, "a user id such as u-ada") == ["u-ada", "u-bob"]
    assert given_approvers(Context(ScriptedIO(), tmp_path, approver=[]), valid, "an id") == []
    wrong = Context(ScriptedIO(), tmp_path, approver=["u-ada", "Ada", "bob"])
    with pytest.raises(SetupError) as refused:
        given_approvers(wrong, valid, "a user id such as u-ada")
    assert str(refused.value) == "--approver takes a user id such as u-ada, not Ada, bob"


def test_doctor_checks() -> None:
    ok = doctor_ok("token", "the bot is @x")
    assert (ok.name, ok.ok, ok.detail, ok.fix) == ("token", True, "the bot is @x", None)
    bad = doctor_fail("chat", "no such chat", "add the bot")
    assert (bad.name, bad.ok, bad.detail, bad.fix) == ("chat", False, "no such chat", "add the bot")


def test_ask_choice_lists_the_choices_and_takes_the_only_one_by_default(tmp_path: Path) -> None:
    io = ScriptedIO("3", "2")
    index = ask_choice(
        Context(io, tmp_path),
        "The rooms:",
        ["lobby", "agents (encrypted)", "ops"],
        "Which room (a number)?",
        flag="--room ID",
        also=lambda i: "that one is encrypted" if i == 1 else None,
    )
    assert index == 2
    assert io.transcript[:4] == ["", "The rooms:", "  1. lobby", "  2. agents (encrypted)"]
    io = ScriptedIO("", "2")
    only = ask_choice(Context(io, tmp_path), "The rooms:", ["lobby"], "Which?", flag="--room ID")
    assert only == 0  # the empty answer took the only choice


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("https://matrix.example.org", None),
        ("http://127.0.0.1:8008/", None),
        (
            "matrix.example.org",
            "must be an http:// or https:// URL with a host, such as https://x.org",
        ),
        ("ftp://matrix.example.org", "must be an http:// or https:// URL with a host"),
        ("https://", "must be an http:// or https:// URL with a host"),
        ("https://host:port", "must be an http:// or https:// URL with a host"),
        ("https://host/?a=1", "must not have a query (?...) or a fragment (#...)"),
        ("https://host/#top", "must not have a query"),
    ],
)
def test_url_problem_names_what_is_wrong(text: str, says: str | None) -> None:
    found = url_problem(text, example="https://x.org")
    assert found == says if says is None else (found or "").startswith(says)


async def _chat(*messages: tuple[str, str]) -> AsyncIterator[tuple[str, str]]:
    for message in messages:
        yield message


async def _named(user: str) -> str:
    return f"{user.title()} (@{user})"


async def test_pair_from_returns_who_typed_the_code_and_never_shows_chatter(
    tmp_path: Path,
) -> None:
    io = ScriptedIO()
    pairing = PairingCode(digits=6, lifetime=60)
    messages = _chat(
        ("mallory", wrong(pairing.code)), ("bob", "secret plans"), ("alice", pairing.code)
    )
    who = await pair_from(
        Context(io, tmp_path), pairing, messages, where="#ops", wait=60, how="@id", who=_named
    )
    assert who == "alice"
    assert "Mallory (@mallory) typed another code: not taken. Still waiting..." in io.transcript
    assert "Got it: Alice (@alice) typed the code, and is the first approver." in io.transcript
    assert f"    {pairing.code}" in io.transcript
    assert "secret plans" not in io.text


async def test_pair_from_stops_when_the_stream_ends_or_the_code_is_spent(tmp_path: Path) -> None:
    pairing = PairingCode(digits=6, lifetime=60)
    with pytest.raises(SetupError, match="nobody typed the code in #ops within 1 minute"):
        await pair_from(
            Context(ScriptedIO(), tmp_path),
            pairing,
            _chat(("bob", "hello")),
            where="#ops",
            wait=60,
            how="@id",
            who=_named,
        )
    pairing = PairingCode(digits=6, lifetime=60, attempts=2)
    guesses = _chat(("eve", wrong(pairing.code)), ("eve", wrong(pairing.code)), ("a", pairing.code))
    with pytest.raises(SetupError, match="2 wrong codes were typed, so this one is spent"):
        await pair_from(
            Context(ScriptedIO(), tmp_path),
            pairing,
            guesses,
            where="#ops",
            wait=60,
            how="@id",
            who=_named,
        )


async def test_wait_until_says_how_once_and_returns_the_first_answer(tmp_path: Path) -> None:
    answers = [[], [], ["#ops"]]

    async def look() -> list[str]:
        return answers.pop(0)

    io = ScriptedIO()
    how = ("Invite the bot to a channel.",)
    found = await wait_until(
        Context(io, tmp_path), look, wait=60, how=how, gave_up="no", first=0.001, most=0.001
    )
    assert found == ["#ops"]
    assert io.transcript == ["", how[0], "Waiting for it (up to 1 minute; Ctrl-C stops)..."]
    io = ScriptedIO()
    assert await wait_until(
        Context(io, tmp_path), lambda: _now(["#a"]), wait=1, how=how, gave_up="x"
    ) == ["#a"]
    assert io.transcript == []  # found at once: nothing to say


async def _now(value: list[str]) -> list[str]:
    return value


async def test_wait_until_gives_up_when_the_wait_is_over(tmp_path: Path) -> None:
    async def never() -> list[str]:
        return []

    with pytest.raises(SetupError, match="the bot joined nothing"):
        await wait_until(
            Context(ScriptedIO(), tmp_path),
            never,
            wait=0.01,
            how=(),
            gave_up="the bot joined nothing",
            first=0.001,
            most=0.001,
        )


def test_doctor_run_ends_at_the_first_failed_check_the_rest_need() -> None:
    run = DoctorRun()
    with run:
        run.add(doctor_fail("warning", "a failure the rest do not need"))
        run.need(doctor_ok("token", "the bot is @x"))
        run.need(doctor_fail("chat", "no such chat", "add the bot"))
        run.add(doctor_ok("members", "never reached"))
    assert [(c.name, c.ok) for c in run.checks] == [
        ("warning", False),
        ("token", True),
        ("chat", False),
    ]
    run = DoctorRun()
    with run:
        run.stop(doctor_fail("server", "no answer"))
    assert [c.name for c in run.checks] == ["server"]
    with pytest.raises(ValueError, match="a bug"), DoctorRun():  # a real error goes on
        raise ValueError("a bug")


# -- the documented example ---------------------------------------------------------------


def _documented_wizard() -> Any:
    """The wizard of docs/writing-a-channel.md's "The toolkit: setup", as a module."""
    page = (ROOT / "docs" / "writing-a-channel.md").read_text()
    section = page.split("## The toolkit: setup", 1)[1]
    source = re.search(r"```python\n(.*?)```", section, flags=re.S)
    assert source is not None
    module = ModuleType("chatly_setup")
    exec(compile(source[1], "writing-a-channel.md", "exec"), module.__dict__)
    return module


async def test_the_documented_wizard_pairs_the_person_who_types_the_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The example as written, its two platform calls played here: a wrong token typed
    first, then a guess and chatter in the room before the person types the code."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "home" / ".config"))
    monkeypatch.delenv("CHATLY_TOKEN", raising=False)
    module = _documented_wizard()
    io = ScriptedIO("wrong-token", TOKEN, "y")

    async def whoami(server: str, token: str) -> str:
        if token != TOKEN:
            raise module.SetupError("Chatly refused the token: make a new one on the Bots page")
        return "chatbot"

    said: list[str] = []

    async def new_messages(server: str, token: str, room: str) -> list[dict[str, Any]]:
        code = next(line.strip() for line in io.transcript if re.fullmatch(r" {4}\d{6}", line))
        if said:
            return []
        said.append(code)
        guess = f"{(int(code) + 1) % 1_000_000:06d}"
        return [
            {"user": "mallory", "text": guess},
            {"user": "bob", "text": "what is this?"},
            {"user": "alice", "text": code},
        ]

    module.whoami = whoami
    module.new_messages = new_messages

    class Plugin:
        @hookimpl
        def register_setup_wizards(self) -> list[SetupWizard]:
            return [module.ChatlySetup()]

    plugins = PluginHost()
    plugins.register(Plugin(), name="chatly_setup")
    config = tmp_path / "c.json"
    args = ["--config", str(config), "--server", "https://chat.example", "--room", "r1"]
    # the chatly channel itself is not installed here: the doctor says so, and exits 1
    assert await run_setup("chatly", args, io=io, host=plugins) == 1
    block = json.loads(config.read_text())["channels"]["chatly"]
    assert block == {
        "server": "https://chat.example",
        "token": "${CHATLY_TOKEN}",
        "room": "r1",
        "approvers": ["alice"],
    }
    assert "mallory typed another code: not taken. Still waiting..." in io.transcript
    assert "Got it: alice typed the code, and is the first approver." in io.transcript
    assert "Chatly refused the token: make a new one on the Bots page." in io.transcript
    assert TOKEN not in io.text
    assert TOKEN not in config.read_text()
    saved = (tmp_path / "home" / ".config" / "aep-bridge" / "env").read_text()
    assert f"CHATLY_TOKEN={TOKEN}" in saved
