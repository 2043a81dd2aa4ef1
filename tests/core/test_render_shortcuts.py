"""The renderer's shortcuts each give what the slow path gives: work skipped only where it
provably changes nothing (issue 21's faster render). Each test holds a shortcut to the path it
skips, so a rendering never reads differently (or less redacted) for having taken it."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from aep_bridge.aep import capture, redaction
from aep_bridge.aep.capture import _above, _fits, _prune, field_levels
from aep_bridge.aep.redaction import RedactionPolicy, Redactor
from aep_bridge.aep.registry import CAPTURE_RANK
from aep_bridge.markup import Code, Paragraph, Span, _plain_block, plain

# -- capture: an event that keeps to its level is not copied to be checked -------------------

_TYPES = ["attention.requested", "tool.completed", "message.agent.replied", "run.finished"]


def _data_for(type_: str, draw: Any) -> dict[str, Any]:
    """A payload with a random subset of the type's fields (and one unknown), nested as the
    field table says, lists included."""
    table = field_levels(type_) or {}
    data: dict[str, Any] = {}
    for path in table:
        if not draw(st.booleans()):
            continue
        node: Any = data
        parts = path.split(".")
        for part in parts[:-1]:
            name, in_list = part.removesuffix("[]"), part.endswith("[]")
            child = node.setdefault(name, [{}] if in_list else {})
            if isinstance(child, list):
                child = child[0] if child and isinstance(child[0], dict) else {}
            if not isinstance(child, dict):
                break
            node = child
        else:
            last = parts[-1]
            node.setdefault(last.removesuffix("[]"), ["x"] if last.endswith("[]") else "x")
    data["not_a_field"] = 1
    return data


@given(st.sampled_from(_TYPES), st.sampled_from(["metadata", "redacted", "full"]), st.data())
@settings(max_examples=300, deadline=None)
def test_an_event_fits_its_level_exactly_when_pruning_would_keep_it_whole(
    type_: str, level: str, data: st.DataObject
) -> None:
    payload = _data_for(type_, data.draw)
    table = field_levels(type_)
    assert table is not None
    rank = CAPTURE_RANK[level]
    above, leads = _above(type_, rank)
    assert _fits(payload, "", above, leads) == (_prune(payload, "", table, rank) == payload)


def test_keys_that_look_like_paths_are_pruned_as_pruning_would() -> None:
    """A producer's key may hold "." or "[]": the check follows the same path strings."""
    from aep_bridge.aep.payloads import payload_model
    from aep_bridge.aep.registry import CAPTURE_ORDER

    checked = 0
    for type_ in ("attention.requested", "tool.completed", "resource.citation.recorded"):
        table = field_levels(type_)
        assert table is not None
        assert payload_model(type_) is not None
        for level in CAPTURE_ORDER[1:]:
            rank = CAPTURE_RANK[level]
            above, leads = _above(type_, rank)
            for path in above:
                cuts = [i for i in range(1, len(path)) if path[i] == "." or path[i : i + 2] == "[]"]
                for cut in cuts:
                    rest = path[cut:].removeprefix(".").removeprefix("[]").removeprefix(".")
                    inner = path[cut:].removeprefix("[]").removeprefix(".")
                    keyed = (
                        (path, "x"),
                        (path[:cut], {rest: "x"}),
                        (path[:cut] + "[]", {inner: 1}),
                    )
                    for key, value in keyed:
                        for data in ({key: value}, {key: [value]}):
                            pruned = _prune(data, "", table, rank)
                            assert _fits(data, "", above, leads) == (pruned == data)
                            checked += 1
    assert checked


def test_an_event_with_a_field_above_its_level_is_still_held_to_it() -> None:
    from aep_bridge.aep.envelope import Event

    event = Event.model_validate(
        {
            "aep": "0.1",
            "id": "01J0000000000000000000000A",
            "type": "message.agent.replied",
            "time": "2026-01-01T00:00:00Z",
            "source": "urn:aep:test",
            "agent": "a",
            "session": "x",
            "seq": 1,
            "capture": "metadata",
            "data": {"text": "the agent's words", "final": True},
        }
    )
    held = capture.held_to_declared(event)
    assert held is not event
    assert "text" not in (held.data or {})


# -- redaction: one search for any rule's hint ------------------------------------------------


def _every_rule(redactor: Redactor, text: str) -> str:
    """`Redactor._redact` as it was before the shortcut: every rule checks its own hints."""
    folded = text.casefold()
    for rule in redaction._SECRET_RULES:
        text = rule.apply(text, folded)
    for value in redactor._values:
        if value in text:
            text = text.replace(value, redaction.SECRET)
    if redactor._home is not None and redactor._home[0] in text:
        text = redactor._home[1].sub("~", text)
    text = redaction._HOME_RULE.apply(text, folded)
    if redactor._pii:
        for rule in redaction._PII_RULES:
            text = rule.apply(text, folded)
    return text


_PIECES = st.sampled_from(
    [
        "hello ",
        "token=abc123def456 ",
        "Bearer abcdefghijklmnop ",
        "https://u:p@host/x ",
        "/home/jo/x ",
        "C:\\Users\\jo ",
        "jo@example.com ",
        "+44 20 7946 0958 ",
        "555-123-4567 ",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abc ",
        "AKIAABCDEFGHIJKLMNOP ",
        "ghp_" + "a" * 36 + " ",
        "sk-" + "b" * 40 + " ",
        "-----BEGIN KEY-----x ",
        "PASSWORD: hunter22 ",
        "sekrit-value ",
        "plain words 12.3 ",
    ]
)


@given(st.lists(_PIECES, max_size=6).map("".join), st.booleans())
@settings(max_examples=400, deadline=None)
def test_redaction_reads_the_same_whether_or_not_it_skips_the_hinted_rules(
    text: str, pii: bool
) -> None:
    redactor = Redactor(RedactionPolicy(secret_values=["sekrit-value"], pii=pii))
    assert redactor._redact(text) == _every_rule(redactor, text)


# -- plain text: remembered by the identity of the (frozen) blocks ----------------------------


def test_plain_text_is_remembered_only_for_the_same_blocks() -> None:
    blocks = (Paragraph(spans=(Span(text="one"),)), Code(code="two\n"))
    slow = "\n\n".join(_plain_block(b) for b in blocks).strip("\n")
    assert plain(blocks) == slow == plain(blocks)
    other = (Paragraph(spans=(Span(text="three"),)),)
    assert plain(other) == "three"
    copy = tuple(blocks)  # the same tuple object again (tuples are not copied)...
    rebuilt = (*blocks[:1], Code(code="four"))  # ...but this one holds another block
    assert plain(rebuilt) == "one\n\nfour"
    assert plain(copy) == slow
    assert plain(list(blocks)) == slow  # a list is never remembered


def _every_value(redactor: Redactor, value: Any) -> Any:
    """`Redactor.value` as it was before numbers and dicts skipped the ABC checks."""
    from collections.abc import Mapping

    if isinstance(value, str):
        return redactor.text(value)
    if isinstance(value, Mapping):
        return {
            key: (
                redaction.SECRET
                if item is not None and isinstance(key, str) and redaction.is_credential_key(key)
                else _every_value(redactor, item)
            )
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [_every_value(redactor, item) for item in value]
    return value


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | _PIECES,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["token", "status", "api_key", "n"]), inner, max_size=3)
    ),
    max_leaves=8,
)


@given(_JSON)
@settings(max_examples=300, deadline=None)
def test_a_json_value_is_redacted_the_same_whether_or_not_it_skips_the_type_checks(
    value: Any,
) -> None:
    redactor = Redactor()
    assert redactor.value(value) == _every_value(redactor, value)
