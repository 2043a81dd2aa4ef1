"""The AEP-0003 §9.4 redaction pipeline and the §9.3 digest.

The official corpus first, one test per case; then what a reader of the chat would notice and
the corpus does not pin: surrounding text survives, keys stay readable, configured secrets
come from variable names, and ordinary technical prose is left alone.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import pytest

from aep_bridge.aep.redaction import (
    PII,
    SECRET,
    RedactionPolicy,
    Redactor,
    digest,
    is_credential_key,
)
from tests.shared_data import load_json

CORPUS: dict[str, Any] = load_json("redaction/cases.json")  # type: ignore[assignment]
TEXT_CASES: list[dict[str, Any]] = CORPUS["text_cases"]
VALUE_CASES: list[dict[str, Any]] = CORPUS["value_cases"]

AKIA = "AKIAIOSFODNN7EXAMPLE"


def _redactor(opts: dict[str, Any] | None) -> Redactor:
    """The pipeline under a case's `opts`; `home` is pinned so no case depends on the machine."""
    opts = opts or {}
    return Redactor(
        RedactionPolicy(
            home=opts.get("home", "/nonexistent-home"),
            pii=opts.get("pii", True),
            secret_values=tuple(opts.get("secretValues", ())),
        )
    )


def _check(out: str, case: dict[str, Any]) -> None:
    leaked = [s for s in case.get("must_not_contain", []) if s in out]
    lost = [s for s in case.get("must_contain", []) if s not in out]
    assert not leaked, f"leaked {leaked}: {out!r}"
    assert not lost, f"lost {lost}: {out!r}"


def test_corpus_counts_are_the_published_ones():
    """A corpus that shrank would silently weaken every case test below."""
    assert (len(TEXT_CASES), len(VALUE_CASES)) == (28, 5)


@pytest.mark.conformance("redaction")
@pytest.mark.parametrize("case", TEXT_CASES, ids=[c["name"] for c in TEXT_CASES])
def test_text_case(case: dict[str, Any]):
    _check(_redactor(case.get("opts")).text(case["input"]), case)


@pytest.mark.conformance("redaction")
@pytest.mark.parametrize("case", VALUE_CASES, ids=[c["name"] for c in VALUE_CASES])
def test_value_case(case: dict[str, Any]):
    _check(json.dumps(_redactor(case.get("opts")).value(case["input"])), case)


@pytest.mark.parametrize("case", TEXT_CASES, ids=[c["name"] for c in TEXT_CASES])
def test_redacting_twice_changes_nothing_more(case: dict[str, Any]):
    """A relay may redact what an adapter already redacted; the placeholders must survive."""
    redactor = _redactor(case.get("opts"))
    once = redactor.text(case["input"])
    assert redactor.text(once) == once


# -- what stays ------------------------------------------------------------------------------

PLAIN = Redactor(RedactionPolicy(home="/nonexistent-home"))


def test_a_secret_in_the_middle_of_a_long_text_keeps_the_text_around_it():
    head = "The deploy step printed its configuration. " * 200
    tail = " Then it uploaded the artifact and exited 0." * 200
    assert PLAIN.text(head + AKIA + tail) == head + SECRET + tail


def test_the_key_of_an_assignment_stays_readable():
    assert PLAIN.text("password=hunter2sequel") == f"password={SECRET}"
    assert (
        PLAIN.text("export GITHUB_TOKEN=abc123 && make") == f"export GITHUB_TOKEN={SECRET} && make"
    )
    assert PLAIN.text('{"api_key": "two words"}') == f'{{"api_key": "{SECRET}"}}'
    assert PLAIN.text("Authorization: Basic dXNlcjpwYXNz") == f"Authorization: Basic {SECRET}"
    header = "curl -H 'Authorization: Bearer abc123DEF456' https://x.test"
    assert PLAIN.text(header) == f"curl -H 'Authorization: Bearer {SECRET}' https://x.test"


def test_quoted_values_with_spaces_are_hidden_whole():
    out = PLAIN.text('login {"password": "correct horse battery staple", "user": "kim"}')
    assert "horse" not in out
    assert "staple" not in out
    assert '"user": "kim"' in out


def test_credential_json_escaped_inside_a_string_is_hidden():
    out = PLAIN.text(r"{\"token\": \"tok 9f8e\", \"n\": 1}")
    assert "9f8e" not in out
    assert r"\"n\": 1" in out


def test_words_that_only_contain_a_credential_word_are_not_assignments():
    text = "usage: max_tokens: 4096, input_tokens=142, token_count=7, tokenizer=cl100k"
    assert PLAIN.text(text) == text


def test_bearer_tokens_are_hidden_and_bearer_prose_is_not():
    assert PLAIN.text("Bearer abc123DEF456") == f"Bearer {SECRET}"
    assert PLAIN.text("BEARER eyJhbGciOiJIUzI1NiJ9.e30.x") == f"BEARER {SECRET}"
    prose = "Bearer bonds pay the bearer; the bearer instrument is old."
    assert PLAIN.text(prose) == prose


def test_url_credentials_keep_the_user_and_host():
    out = PLAIN.text("cloning https://deploy:hunter2sequel@git.example.com/org/repo")
    assert out == f"cloning https://deploy:{SECRET}@git.example.com/org/repo"


def test_sk_learn_and_task_ids_are_not_openai_keys():
    text = "pip install sk-learn-compatible-estimators; see task-abcdefghijklmnopqrstuvwxyz"
    assert PLAIN.text(text) == text


def test_technical_prose_has_no_pii():
    text = (
        "2026-07-03T10:15:04.221Z tool.completed in 1240 ms, seq 187, ip 192.168.1.100, "
        "uuid 550e8400-e29b-41d4-a716-446655440000, react@18.2.0, @types/node, diff +120 -45, "
        "date 01-02-2024, offset +02:00, timestamp 1720000000123, v1.2.3, port 8080, "
        "lines +12 -34 -5"
    )
    assert PLAIN.text(text) == text


def test_ssh_remotes_are_not_email_addresses():
    text = "git@github.com:org/repo.git"
    assert PLAIN.text(text) == text
    assert PLAIN.text("mail kim@example.org") == f"mail {PII}"


@pytest.mark.parametrize(
    "number", ["+44 20 7946 0958", "+1-555-123-4567", "(555) 123-4567", "555.123.4567"]
)
def test_phone_numbers_in_common_formats_are_pii(number: str):
    assert PLAIN.text(f"call {number} now") == f"call {PII} now"


def test_pii_off_leaves_phone_numbers_and_emails_but_not_secrets():
    redactor = Redactor(RedactionPolicy(home="/nonexistent-home", pii=False))
    text = "call +1 (555) 123-4567 or kim@example.org"
    assert redactor.text(text) == text
    assert redactor.text(f"key {AKIA}") == f"key {SECRET}"


# -- PEM -------------------------------------------------------------------------------------


def test_a_multiline_pem_block_becomes_one_placeholder():
    text = (
        "before\n"
        "-----BEGIN EC PRIVATE KEY-----\n"
        "MHcCAQEEIBkg4LVWM9nuwNSk3yByxZpYRTBnVJk5oWFd4nVdP2quoAoGCCqGSM49\n"
        "AwEHoUQDQgAE7bqZzz999\n"
        "-----END EC PRIVATE KEY-----\n"
        "after"
    )
    assert PLAIN.text(text) == f"before\n{SECRET}\nafter"


def test_two_pem_blocks_keep_the_text_between_them():
    block = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----"
    assert PLAIN.text(f"{block}\nmiddle\n{block}") == f"{SECRET}\nmiddle\n{SECRET}"


def test_a_truncated_pem_block_is_hidden_to_the_end():
    text = "key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7bq\n...(output truncated)"
    out = PLAIN.text(text)
    assert "MIIEowIBAAKCAQEA7bq" not in out
    assert out.startswith("key:")


# -- configured secrets (rule b) -------------------------------------------------------------


def test_from_environment_resolves_names_to_values():
    policy = RedactionPolicy.from_environment(
        ["MY_TOKEN", "UNSET", "EMPTY"], environ={"MY_TOKEN": "s3cr3tvalue", "EMPTY": ""}
    )
    assert policy.secret_values == ("s3cr3tvalue",)
    out = Redactor(policy).text("using s3cr3tvalue for MY_TOKEN")
    assert out == f"using {SECRET} for MY_TOKEN"


def test_from_environment_reads_the_process_environment_by_default(
    monkeypatch: pytest.MonkeyPatch,
):
    monkeypatch.setenv("AEP_TEST_DEPLOY_KEY", "d3pl0y-v4lue")
    policy = RedactionPolicy.from_environment(
        ["AEP_TEST_DEPLOY_KEY"], extra_values=["lit3ral-v4lue"], home="/h", pii=False
    )
    assert policy == RedactionPolicy(
        secret_values=("d3pl0y-v4lue", "lit3ral-v4lue"), home="/h", pii=False
    )


def test_values_shorter_than_four_characters_are_ignored():
    redactor = Redactor(RedactionPolicy(secret_values=("abc", "abcd"), home="/nonexistent-home"))
    assert redactor.text("abc and abcd") == f"abc and {SECRET}"


def test_a_configured_value_containing_another_is_hidden_whole():
    redactor = Redactor(
        RedactionPolicy(secret_values=("part", "partandmore"), home="/nonexistent-home")
    )
    assert redactor.text("x partandmore y") == f"x {SECRET} y"


# -- home directories (rule c) ---------------------------------------------------------------


def test_the_operator_home_is_replaced_only_as_a_whole_path_component():
    redactor = Redactor(RedactionPolicy(home="/srv/kim/"))
    assert redactor.text("open /srv/kim/notes.md") == "open ~/notes.md"
    assert redactor.text("open /srv/kimberly/notes.md") == "open /srv/kimberly/notes.md"


def test_no_home_means_the_current_users_home(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("HOME", "/srv/someone")
    monkeypatch.setenv("USERPROFILE", "/srv/someone")
    assert Redactor().text("at /srv/someone/project") == "at ~/project"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("C:\\Users\\bob\\repo\\a.py", "~\\repo\\a.py"),
        ("C:\\\\Users\\\\bob\\\\repo", "~\\\\repo"),
        ("c:/users/Bob/repo", "~/repo"),
        ("saved in /home/alice.", "saved in ~."),
        ("/Users/Shared/cache", "/Users/Shared/cache"),
    ],
)
def test_any_users_home_is_replaced(text: str, expected: str):
    assert PLAIN.text(text) == expected


# -- JSON values -----------------------------------------------------------------------------


def test_value_keeps_keys_and_structure_and_only_touches_strings():
    given = {
        "Token": {"nested": "x"},
        "clientSecret": 12345,
        "password": None,
        "max_tokens": 4096,
        "argv": ["--key", AKIA],
        "ok": True,
        "ratio": 0.5,
    }
    assert PLAIN.value(given) == {
        "Token": SECRET,
        "clientSecret": SECRET,
        "password": None,
        "max_tokens": 4096,
        "argv": ["--key", SECRET],
        "ok": True,
        "ratio": 0.5,
    }
    assert given["argv"] == ["--key", AKIA], "the input must not be changed in place"


@pytest.mark.parametrize(
    ("key", "credential"),
    [
        ("token", True),
        ("API_KEY", True),
        ("api-key", True),
        ("apiKey", True),
        ("x-api-key", True),
        ("accessToken", True),
        ("client_secret", True),
        ("Authorization", True),
        ("credentials", True),
        ("private_key", True),
        ("AWS_SECRET_ACCESS_KEY", True),
        ("max_tokens", False),
        ("gen_ai.usage.input_tokens", False),
        ("token_count", False),
        ("tokenizer", False),
        ("secrets", False),
        ("keyboard", False),
        ("region", False),
    ],
)
def test_credential_key_names(key: str, credential: bool):
    assert is_credential_key(key) is credential


# -- digest (§9.3) ---------------------------------------------------------------------------


def test_digest_is_the_first_16_bytes_of_sha256_over_canonical_json():
    value = {"b": [1, 2], "a": "é"}
    expected = hashlib.sha256('{"a":"é","b":[1,2]}'.encode()).hexdigest()[:32]
    assert digest(value) == expected
    assert re.fullmatch(r"[0-9a-f]{32}", digest(value))


def test_digest_ignores_key_order_and_sees_content():
    assert digest({"a": 1, "b": {"c": 2, "d": 3}}) == digest({"b": {"d": 3, "c": 2}, "a": 1})
    assert digest({"a": 1}) != digest({"a": 2})
    assert digest("1") != digest(1)
    assert digest(True) != digest(1)


def test_digest_is_taken_over_the_original_not_the_redacted_text():
    original = f"deploy with {AKIA}"
    other = "deploy with AKIAJJJJJJJJJJJJJJJJ"
    assert PLAIN.text(original) == PLAIN.text(other)
    assert digest(original) != digest(other)


# -- cost ------------------------------------------------------------------------------------


def test_no_regex_is_compiled_per_call(monkeypatch: pytest.MonkeyPatch):
    """`re.compile`, `re.sub` and friends all go through `re._compile`; count its calls."""
    redactor = Redactor(RedactionPolicy(home="/srv/kim", secret_values=("s3cr3tvalue",)))
    real = re._compile  # type: ignore[attr-defined]
    compiled: list[object] = []

    def counting(pattern: object, flags: int) -> object:
        compiled.append(pattern)
        return real(pattern, flags)

    monkeypatch.setattr(re, "_compile", counting)
    text = (
        f"token=abc {AKIA} s3cr3tvalue /srv/kim/x /home/bob/y kim@example.org "
        "+1 (555) 123-4567 Bearer abc123DEF456 https://u:p4ss@h.io"
    )
    out = redactor.text(text)
    monkeypatch.undo()
    assert compiled == []
    assert "abc123DEF456" not in out
    assert "kim@example.org" not in out
