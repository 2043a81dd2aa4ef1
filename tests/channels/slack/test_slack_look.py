"""What the Slack channel sends, as Block Kit: every message, card, parent and heads-up keeps
every limit Slack enforces (checked with the fake Slack's own Block Kit rules), however large
what the agent sent; tool output is cut keeping its end; cards have styled buttons, in
several actions blocks when there are many, and none once closed; a form is a modal whose
answers come back as the core's values, or as errors to show under the fields."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from aep_bridge import (
    FormChoice,
    FormField,
    NotificationMessage,
    OutgoingMessage,
    PermissionOption,
    PermissionOutcome,
    PermissionRequest,
)
from aep_bridge.contract.types import OutcomeStatus
from aep_bridge.markup import Code, Details, Diff, Paragraph, Span, parse_markdown
from aep_bridge_slack import look, modal
from tests.channels.slack.fake_slack import BlockChecker, Limits, _state_value

BIG = 100_000


def _check(shown: look.Look) -> None:
    """Everything Slack checks in a message it is sent, and the fallback text's 3,000."""
    checker = BlockChecker(Limits.real())
    checker.blocks(shown.blocks)
    assert checker.errors == []
    assert 0 < len(shown.text) <= look.MAX_FALLBACK
    assert len(shown.blocks) <= look.MAX_BLOCKS
    for block in shown.blocks:
        if block["type"] == "section":
            assert len(block["text"]["text"]) <= look.MAX_SECTION


def _check_view(view: dict[str, Any]) -> None:
    checker = BlockChecker(Limits.real())
    checker.blocks(view["blocks"], "/view/blocks", modal=True)
    for key in ("title", "submit", "close"):
        checker.text(view[key], 24, f"/view/{key}", plain=True)
    assert checker.errors == []
    assert view["callback_id"] == "aep_form"


def _texts(shown: look.Look) -> str:
    out = []
    for block in shown.blocks:
        if "text" in block:
            out.append(block["text"]["text"])
        out.extend(e.get("text", "") for e in block.get("elements", []) if "type" in e)
    return "\n".join(str(x) for x in out)


def _tool(output: str) -> OutgoingMessage:
    return OutgoingMessage(
        type="tool_update",
        metadata={"activity": True},
        blocks=(
            Paragraph(
                spans=(
                    Span(text="❌ "),
                    Span(text="Bash", bold=True),
                    Span(text=" "),
                    Span(text="pytest -q", code=True),
                )
            ),
            Details(summary="last 15 lines", blocks=(Code(code=output),)),
            Paragraph(spans=(Span(text="Finished in 3s · 1,200 tokens", italic=True),)),
        ),
    )


def _request(n: int = 2, **extra: Any) -> PermissionRequest:
    labels = ["Allow", "Deny", *(f"Option {i}" for i in range(2, n))][:n]
    ids = ["allow", "deny", *(f"o{i}" for i in range(2, n))][:n]
    return PermissionRequest.model_validate(
        {
            "id": "c1",
            "title": "claude-code asks permission: Bash",
            "description": "git push -u origin main",
            "options": [
                PermissionOption(id=i, label=t, is_allow=i == "allow")
                for i, t in zip(ids, labels, strict=True)
            ],
            **extra,
        }
    )


# -- messages --------------------------------------------------------------------------------


def test_text_is_sections_of_mrkdwn() -> None:
    shown = look.message_look(
        OutgoingMessage(type="text", blocks=parse_markdown("**Done**: see <!channel>"))
    )
    _check(shown)
    assert shown.blocks == [
        {"type": "section", "text": {"type": "mrkdwn", "text": "*Done*: see &lt;!channel&gt;"}}
    ]
    assert "<!channel>" not in shown.text


def test_oversized_text_and_blocks_keep_every_limit() -> None:
    word = "<!channel> & *x* "
    plain = OutgoingMessage(type="text", text=(word * BIG)[:BIG])
    _check(look.message_look(plain))
    markdown = OutgoingMessage(type="text", blocks=parse_markdown("lorem ipsum " * 8000))
    _check(look.message_look(markdown))
    code = OutgoingMessage(type="text", blocks=(Code(code="\n".join(["x" * 4000] * 30)),))
    _check(look.message_look(code))
    one_word = OutgoingMessage(type="text", blocks=parse_markdown("&" * 20_000))
    _check(look.message_look(one_word))


def test_the_outbox_s_pieces_each_fit_one_message() -> None:
    """What the outbox sends, cut at MAX_TEXT by `measure`: each piece within 50 blocks."""
    many_calls = []
    for i in range(300):  # a long activity: a call's line, then what it showed
        many_calls.append(Paragraph(spans=(Span(text=f"✅ Read file{i}.py"),)))
        many_calls.append(Details(summary="output", blocks=(Code(code=f"line {i}"),)))
    cases = [
        tuple(many_calls),
        parse_markdown("a paragraph of words. " * 6000),
        parse_markdown("\n\n".join(f"```\n{'y' * 1600}\n```" for _ in range(40))),
    ]
    for blocks in cases:
        pieces = look.blocks_pieces(blocks, look.MAX_TEXT)
        assert len(pieces) > 1
        for piece in pieces:
            assert look.measure(piece) <= look.MAX_TEXT
            _check(look.message_look(OutgoingMessage(type="tool_update", blocks=piece)))
    for piece in look.text_pieces("& < > " * 10_000, look.MAX_TEXT):
        _check(look.message_look(OutgoingMessage(type="text", text=piece)))


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.builds(lambda n: Paragraph(spans=(Span(text="w " * n),)), st.integers(1, 2000)),
            st.builds(
                lambda n: Details(summary="output", blocks=(Code(code="c\n" * n),)),
                st.integers(1, 3000),
            ),
            st.builds(lambda n: Code(code="z" * n), st.integers(1, 4000)),
        ),
        min_size=1,
        max_size=60,
    )
)
def test_any_piece_within_max_text_fits_one_message(blocks: list[Any]) -> None:
    for piece in look.blocks_pieces(tuple(blocks), look.MAX_TEXT):
        _check(look.message_look(OutgoingMessage(type="text", blocks=piece)))


def test_tool_output_keeps_its_end_in_a_code_block() -> None:
    output = "\n".join(f"collected line {i}" for i in range(3000)) + "\nE   assert 10.0 == 10.01"
    shown = look.message_look(_tool(output))
    _check(shown)
    kinds = [b["type"] for b in shown.blocks]
    assert kinds == ["section", "context", "section", "context"]
    assert shown.blocks[0]["text"]["text"] == "❌ *Bash* `pytest -q`"
    assert shown.blocks[1]["elements"][0]["text"] == "_last 15 lines_"
    code = shown.blocks[2]["text"]["text"]
    assert code.startswith("…\n```\n")
    assert code.endswith("E   assert 10.0 == 10.01\n```")
    assert "collected line 2999" in code
    assert "collected line 0\n" not in code
    # the line that closes the run: small and grey
    assert shown.blocks[3]["elements"] == [
        {"type": "mrkdwn", "text": "Finished in 3s · 1,200 tokens"}
    ]


def test_a_diff_under_its_call_is_its_lines() -> None:
    message = OutgoingMessage(
        type="tool_update",
        metadata={"activity": True},
        blocks=(
            Paragraph(spans=(Span(text="✅ Edit "), Span(text="a.py", code=True))),
            Diff(path="a.py", unified="@@ -1 +1 @@\n-old <x>\n+new", added=1, removed=1),
        ),
    )
    shown = look.message_look(message)
    _check(shown)
    assert [b["text"]["text"] for b in shown.blocks] == [
        "✅ Edit `a.py`",
        "```\n@@ -1 +1 @@\n-old &lt;x&gt;\n+new\n```",
    ]


def test_plan_usage_and_errors() -> None:
    plan = OutgoingMessage(
        type="plan",
        blocks=(
            Paragraph(
                spans=(Span(text="Plan", bold=True), Span(text="\n✅ Reproduce\n⬜ Fix <it>"))
            ),
        ),
    )
    shown = look.message_look(plan)
    _check(shown)
    assert shown.blocks[0]["text"]["text"] == "📋 *Plan*\n✅ Reproduce\n⬜ Fix &lt;it&gt;"
    usage = look.message_look(OutgoingMessage(type="usage", text="61,842 tokens\n$0.25"))
    _check(usage)
    assert usage.blocks[0]["type"] == "context"
    error = look.message_look(
        OutgoingMessage(type="error", text="Run failed: budget_exceeded\n" + "why " * 5000)
    )
    _check(error)
    assert error.blocks[0]["text"]["text"] == "⚠️ *Run failed: budget_exceeded*"
    huge_plan = "\n".join(f"⬜ task {i} " + "w" * 80 for i in range(400))
    big = look.message_look(
        OutgoingMessage(
            type="plan",
            blocks=(Paragraph(spans=(Span(text="Plan", bold=True), Span(text="\n" + huge_plan))),),
        )
    )
    _check(big)


# -- cards -----------------------------------------------------------------------------------


def _actions(shown: look.Look) -> list[dict[str, Any]]:
    return [b for b in shown.blocks if b["type"] == "actions"]


def test_a_card_s_buttons_allow_primary_deny_danger() -> None:
    shown = look.card_look(_request(3, accepts_text=True))
    _check(shown)
    assert shown.blocks[0] == {
        "type": "header",
        "text": {
            "type": "plain_text",
            "text": "❓ claude-code asks permission: Bash",
            "emoji": True,
        },
    }
    assert shown.blocks[1]["text"]["text"] == "git push -u origin main"
    assert shown.blocks[2]["type"] == "context"
    assert "Reply in this thread" in shown.blocks[2]["elements"][0]["text"]
    [actions] = _actions(shown)
    assert [
        (e["text"]["text"], e["action_id"], e["value"], e.get("style")) for e in actions["elements"]
    ] == [
        ("Allow", "aep_answer_0", "c1:0", "primary"),
        ("Deny", "aep_answer_1", "c1:1", "danger"),
        ("Option 2", "aep_answer_2", "c1:2", None),
    ]
    assert look.ANSWER_ACTION.match(actions["elements"][2]["action_id"])


def test_which_buttons_are_red() -> None:
    def style(option_id: str, label: str) -> str | None:
        return look.option_style(PermissionOption(id=option_id, label=label))

    assert style("reject_once", "Reject") == "danger"
    assert style("o2", "No, and tell Claude what to do differently") == "danger"
    assert style("o3", "Normal mode") is None
    assert style("o4", "Yes, and don't ask again") is None
    assert look.option_style(PermissionOption(id="x", label="Go", is_allow=True)) == "primary"


def test_sixty_options_go_in_actions_blocks_of_25() -> None:
    shown = look.card_look(_request(60))
    _check(shown)
    assert [len(b["elements"]) for b in _actions(shown)] == [25, 25, 10]
    ids = [e["action_id"] for b in _actions(shown) for e in b["elements"]]
    assert len(set(ids)) == 60
    # more than Slack shows (5 blocks of 25): the first 125, and a word about the rest
    crowded = look.card_look(_request(200))
    _check(crowded)
    assert sum(len(b["elements"]) for b in _actions(crowded)) == 125
    assert "first 125 of 200" in _texts(crowded)


def test_long_labels_titles_details_and_ids_fit() -> None:
    request = _request(
        2,
        id="x" * 300,
        title="T" * 5000,
        details=parse_markdown("```\n" + "\n".join(["d" * 3000] * 20) + "\n```"),
        expires_at=datetime(2026, 1, 2, 3, 4, tzinfo=UTC),
    )
    request = request.model_copy(
        update={"options": (PermissionOption(id="allow", label="L" * 500, is_allow=True),)}
    )
    shown = look.card_look(request)
    _check(shown)
    [button] = _actions(shown)[0]["elements"]
    assert len(button["text"]["text"]) == 75
    key = look.card_key("x" * 300)
    assert key.startswith("#")
    assert len(key) == 17
    assert button["value"] == f"{key}:0"
    assert "Expires at 03:04 UTC." in _texts(shown)


def test_a_closed_card_keeps_its_words_loses_its_buttons_and_says_what_happened() -> None:
    request = _request(2)
    answered = PermissionOutcome(status=OutcomeStatus.ANSWERED, option_label="Allow", by="Alice")
    shown = look.card_look(request, outcome=answered)
    _check(shown)
    assert _actions(shown) == []
    assert shown.blocks[-1] == {
        "type": "context",
        "elements": [{"type": "mrkdwn", "text": "✅ Answered by Alice: Allow"}],
    }
    assert shown.blocks[:2] == look.card_look(request).blocks[:2]
    # refused: open again, the buttons stay, with the line
    refused = PermissionOutcome(status=OutcomeStatus.REFUSED, option_label="Allow", by="Bob")
    again = look.card_look(request, outcome=refused)
    _check(again)
    assert _actions(again)
    assert again.blocks[-1]["elements"][0]["text"].startswith("↩️")


def test_card_keys() -> None:
    assert look.card_key("c_12-AB") == "c_12-AB"
    for odd in ("#abc", "a:b", "x" * 61, "é"):
        key = look.card_key(odd)
        assert key.startswith("#")
        assert len(key) == 17
        assert ":" not in key


def test_an_informational_card_and_a_form_card() -> None:
    info = look.card_look(_request(2, informational=True))
    _check(info)
    assert _actions(info) == []
    assert "agent's own terminal" in _texts(info)
    form = look.card_look(
        _request(0, kind="form", fields=[FormField(id="f1", type="string", label="Note")])
    )
    _check(form)
    [actions] = _actions(form)
    assert actions["elements"][0]["action_id"] == "aep_form"
    assert actions["elements"][0]["value"] == "c1"


# -- parent and heads-ups --------------------------------------------------------------------


def test_parent_and_heads_ups() -> None:
    parent = look.parent_look("Fix <!channel> *now*", "running")
    _check(parent)
    assert "<!channel>" not in _texts(parent)
    assert "Running" in _texts(parent)
    assert "Ended" in _texts(look.parent_look("x", "ended"))
    _check(look.parent_look("n" * 5000, "waiting"))
    note = NotificationMessage(
        session_id="s1",
        session_name="Fix <totals>",
        type="permission",
        summary="claude-code asks permission: Bash " + "x" * 5000,
        request_id="c1",
    )
    sent = look.heads_up_look(note, "https://team.slack.com/archives/C0/p1?thread_ts=1.2&cid=C0")
    _check(sent)
    assert sent.text.startswith(
        "❓ <https://team.slack.com/archives/C0/p1?thread_ts=1.2&amp;cid=C0|Fix &lt;totals&gt;>: "
    )
    closed = look.closed_heads_up_look(sent.text, "Allow, by <@U0MALLORY>", "answered")
    _check(closed)
    assert closed.text.startswith("✅ <https://team.slack.com/")
    assert closed.text.endswith(" — Allow, by &lt;@U0MALLORY&gt;")
    assert look.heads_up_look(note, "javascript:alert(1)").text.startswith("❓ *Fix")


# -- forms -----------------------------------------------------------------------------------


def _form(*fields: FormField) -> PermissionRequest:
    return PermissionRequest(
        id="c9", kind="form", title="Configure the deployment now", fields=fields
    )


def _submitted(view: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """What Slack's client sends back: `view.state` filled in (as the fake fills it)."""
    state = {}
    for block in view["blocks"]:
        if block["type"] == "input":
            element = block["element"]
            state[block["block_id"]] = {
                element["action_id"]: _state_value(
                    element, values.get(block["block_id"]), optional=block["optional"]
                )
            }
    return {"values": state}


FIELDS = (
    FormField(id="f1", type="string", label="Name", required=True),
    FormField(id="f2", type="number", label="Replicas", min=1, max=5),
    FormField(id="f3", type="boolean", label="Canary?"),
    FormField(
        id="f4",
        type="select",
        label="Regions",
        multi=True,
        other=True,
        choices=tuple(FormChoice(id=f"r{i}", label=f"Region {i}") for i in range(3)),
    ),
    FormField(
        id="f5",
        type="select",
        label="Size",
        required=True,
        choices=(FormChoice(id="s", label="Small"), FormChoice(id="l", label="Large")),
    ),
)


def test_a_form_is_a_modal_and_comes_back_as_values() -> None:
    request = _form(*FIELDS)
    view = modal.modal_view(request, "c9")
    _check_view(view)
    assert view["private_metadata"] == "c9"
    assert view["title"]["text"] == "Configure the deploymen…"
    inputs = {b["block_id"]: b for b in view["blocks"] if b["type"] == "input"}
    assert list(inputs) == ["f0", "f1", "f2", "f3", "o3", "f4"]
    assert {b["element"]["action_id"] for b in inputs.values()} == {"v"}
    assert inputs["f0"]["element"]["type"] == "plain_text_input"
    assert inputs["f1"]["element"]["type"] == "number_input"
    assert inputs["f2"]["element"]["type"] == "static_select"
    assert inputs["f3"]["element"]["type"] == "multi_static_select"
    assert inputs["f4"]["element"]["type"] == "static_select"
    state = _submitted(view, {"f0": "web", "f1": "3", "f2": "y", "f3": ["0", "2"], "f4": "1"})
    assert modal.form_values(request, state) == {
        "f1": "web",
        "f2": 3,
        "f3": True,
        "f4": ["r0", "r2"],
        "f5": "l",
    }
    # words in the "other" box: a choice's label names it, other words are kept
    state = _submitted(view, {"f0": "web", "f4": "0", "o3": "region 1"})
    assert modal.form_values(request, state)["f4"] == ["r1"]
    state = _submitted(view, {"f0": "web", "f4": "0", "o3": "Mars"})
    assert modal.form_values(request, state)["f4"] == ["Mars"]
    # the state's `values` alone reads the same
    assert modal.form_values(request, state["values"])["f4"] == ["Mars"]


def test_what_is_wrong_goes_back_under_its_field() -> None:
    request = _form(
        FormField(id="f1", type="number", label="N", min=1, max=5),
        FormField(id="f2", type="select", label="Pick", required=True, other=True,
                  choices=(FormChoice(id="a", label="A"),)),
        FormField(id="f3", type="string", label="Why", required=True),
    )  # fmt: skip
    view = modal.modal_view(request, "c9")
    _check_view(view)
    # Slack's client keeps a number input within its bounds; a value that slips through,
    # or a required field a client left empty, is an error under that field
    state = {
        "values": {
            "f0": {"v": {"type": "number_input", "value": "9"}},
            "f1": {"v": {"type": "static_select", "selected_option": None}},
            "o1": {"v": {"type": "plain_text_input", "value": None}},
            "f2": {"v": {"type": "plain_text_input", "value": "  "}},
        }
    }
    errors = modal.form_values(request, state)
    assert isinstance(errors, modal.FormErrors)
    assert errors == {
        "f0": "A number from 1 to 5, please",
        "f1": "Pick one or write your own",
        "f2": "Required",
    }
    assert not isinstance(modal.form_values(_form(FIELDS[2]), {"values": {}}), modal.FormErrors)


def test_big_forms_keep_slack_s_limits() -> None:
    many_choices = FormField(
        id="big",
        type="select",
        label="L" * 3000,
        choices=tuple(FormChoice(id=f"c{i}", label="C" * 200 + str(i)) for i in range(150)),
    )
    hundred = FormField(
        id="hundred",
        type="select",
        label="Hundred",
        choices=tuple(FormChoice(id=f"h{i}", label="H" * 100 + str(i)) for i in range(100)),
    )
    request = _form(many_choices, hundred, *FIELDS).model_copy(
        update={"title": "A" * 300, "description": "D" * 10_000}
    )
    view = modal.modal_view(request, "#" + "a" * 16)
    _check_view(view)
    inputs = {b["block_id"]: b for b in view["blocks"] if b["type"] == "input"}
    # more choices than a menu holds: words, with the choices as a hint
    assert inputs["f0"]["element"]["type"] == "plain_text_input"
    assert inputs["f1"]["element"]["type"] == "static_select"
    state = _submitted(view, {"f0": "c" * 200 + "7", "f1": "99", "f2": "web", "f6": "0"})
    values = modal.form_values(request, state)
    assert values["big"] == "c7"  # a choice's label, in any case, is that choice
    assert values["hundred"] == "h99"
    # a form longer than a modal holds: no Fill in, a word instead
    too_long = _form(*(FormField(id=f"f{i}", type="string", label="x") for i in range(120)))
    shown = look.card_look(too_long)
    _check(shown)
    assert _actions(shown) == []
    assert "too long for Slack" in _texts(shown)


_LABELS = st.text(st.sampled_from([*"ab <>&*_`@!", "é", "\n"]), min_size=0, max_size=120)


@st.composite
def _fields(draw: st.DrawFn) -> tuple[FormField, ...]:
    fields = []
    for index in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(["string", "number", "boolean", "select"]))
        count = draw(st.integers(0, 130)) if kind == "select" else 0
        low = draw(st.none() | st.integers(-5, 5)) if kind == "number" else None
        fields.append(
            FormField(
                id=f"f{index + 1}",
                type=kind,
                label=draw(_LABELS) * draw(st.sampled_from([1, 30])),
                required=draw(st.booleans()),
                multi=kind == "select" and draw(st.booleans()),
                other=kind == "select" and draw(st.booleans()),
                choices=tuple(FormChoice(id=f"c{i}", label=f"choice {i}") for i in range(count)),
                min=low,
                max=None if low is None else low + 10,
            )
        )
    return tuple(fields)


@settings(max_examples=60, deadline=None)
@given(_fields(), _LABELS, st.data())
def test_any_form_opens_within_limits_and_answers_as_the_core_accepts(
    fields: tuple[FormField, ...], title: str, data: st.DataObject
) -> None:
    from aep_bridge.aep.form_values import form_problem

    request = PermissionRequest(id="c1", kind="form", title=title or "?", fields=fields)
    _check(look.card_look(request))
    view = modal.modal_view(request, look.card_key(request.id))
    _check_view(view)
    # a person fills in every input as Slack's client lets them
    answers: dict[str, Any] = {}
    for block in view["blocks"]:
        if block["type"] != "input":
            continue
        element = block["element"]
        if element["type"] == "plain_text_input":
            answers[block["block_id"]] = data.draw(st.sampled_from(["", "words", "choice 1"]))
        elif element["type"] == "number_input":
            low = float(element.get("min_value", -3))
            answers[block["block_id"]] = str(low + data.draw(st.integers(0, 3)))
        else:
            values = [o["value"] for o in element["options"]]
            picks = data.draw(st.lists(st.sampled_from(values), min_size=1, unique=True))
            answers[block["block_id"]] = (
                picks if element["type"] == "multi_static_select" else picks[0]
            )
        if not answers[block["block_id"]] and not block["optional"]:
            answers[block["block_id"]] = "words"
    result = modal.form_values(request, _submitted(view, answers))
    if isinstance(result, modal.FormErrors):
        blocks = {b.get("block_id") for b in view["blocks"]}
        assert set(result) <= blocks  # each error under an input the view has
    else:
        specs = [f.model_dump() for f in fields]
        assert form_problem(specs, result) is None


def test_a_choice_typed_must_be_one_unless_words_are_taken() -> None:
    many = tuple(FormChoice(id=f"c{i}", label=f"Choice {i}") for i in range(150))
    strict = _form(FormField(id="f1", type="select", label="Pick", choices=many))
    view = modal.modal_view(strict, "c9")
    assert modal.form_values(strict, _submitted(view, {"f0": "c7"})) == {"f1": "c7"}
    assert modal.form_values(strict, _submitted(view, {"f0": "choice 8"})) == {"f1": "c8"}
    refused = modal.form_values(strict, _submitted(view, {"f0": "Mars"}))
    assert isinstance(refused, modal.FormErrors)
    assert list(refused) == ["f0"]
    loose = _form(FormField(id="f1", type="select", label="Pick", choices=many, other=True))
    view = modal.modal_view(loose, "c9")
    assert modal.form_values(loose, _submitted(view, {"f0": "Mars"})) == {"f1": "Mars"}
