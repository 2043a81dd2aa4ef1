"""The toolkit's text helpers (`aep_bridge.keep_end`, `table_text`, `one_line`,
`break_ticks`, `marked`, `indent_rest`), through a dialect that renders blocks as plain
text."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from aep_bridge import (
    OutgoingMessage,
    break_ticks,
    indent_rest,
    keep_end,
    link_target,
    marked,
    markup,
    one_line,
    plan_body,
    split_closing,
    split_to_fit,
    table_text,
)
from aep_bridge.markup import Blocks, Code, Diff, Paragraph, Span, Table


def render(blocks: Blocks) -> str:
    """A dialect of the simplest kind: a paragraph's text, code fenced."""
    out = []
    for block in blocks:
        if isinstance(block, Paragraph):
            out.append("".join(span.text for span in block.spans))
        elif isinstance(block, Code):
            out.append(f"```{block.language}\n{block.code}\n```")
        elif isinstance(block, Diff):
            out.append(f"{block.path}\n```diff\n{block.unified}\n```")
    return "\n\n".join(out)


def para(text: str) -> Paragraph:
    return Paragraph(spans=(Span(text=text),))


def utf16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


FAILURE = Code(code="\n".join(f"line {i}" for i in range(100)) + "\nError: it failed")


def test_keep_end_keeps_the_failure_at_the_end_and_says_it_cut():
    blocks = (para("Running the tests"), FAILURE)
    kept = keep_end(blocks, 120, render=render)
    assert len(kept) <= 120
    assert kept.startswith("…\n```\n"), "the cut is said, and the code keeps its fence"
    assert kept.endswith("Error: it failed\n```")
    assert "Running the tests" not in kept
    assert "line 0\n" not in kept


def test_keep_end_returns_whole_blocks_that_fit_after_dropping_earlier_ones():
    blocks = (para("a" * 50), para("the end"))
    assert keep_end(blocks, 20, render=render) == "…\nthe end"


def test_a_diff_cut_to_its_end_is_shown_as_its_lines_as_code():
    diff = Diff(path="a.py", unified="\n".join(f"+added {i}" for i in range(50)), added=50)
    kept = keep_end((diff,), 60, render=render)
    assert kept.startswith("…\n```diff\n")
    assert kept.endswith("+added 49\n```")
    assert "a.py" not in kept, "its counts and path head would no longer be true"


def test_one_line_longer_than_the_room_keeps_its_last_characters_in_a_whole_fence():
    code = Code(code="x" * 500 + "THE END")
    kept = keep_end((code,), 40, render=render)
    assert len(kept) <= 40
    assert kept.startswith("…\n```\n")
    assert kept.endswith("THE END\n```")


def test_a_long_paragraph_keeps_its_end_or_what_the_dialect_does_last():
    long = para("word " * 100 + "last")
    assert keep_end((long,), 30, render=render).endswith("last")
    assert keep_end((long,), 30, render=render, last_resort=lambda text, room: "mine") == "mine"


def test_keep_end_measures_the_platforms_way():
    blocks = (para("😀" * 30),)  # 60 UTF-16 units, 30 characters
    kept = keep_end(blocks, 40, render=render, count=utf16)
    assert utf16(kept) <= 40
    assert len(kept) > 2
    assert keep_end(blocks, 40, render=render) == "…\n" + "😀" * 30


def test_no_room_for_the_cut_mark_is_nothing():
    assert keep_end((FAILURE,), 2, render=render) == ""


@given(
    st.lists(st.text(min_size=1, max_size=40), min_size=1, max_size=6),
    st.integers(min_value=0, max_value=120),
)
def test_keep_end_never_exceeds_its_room(texts, room):
    blocks = tuple(Code(code=t) if i % 2 else para(t) for i, t in enumerate(texts))
    whole = render(blocks)
    kept = keep_end(blocks, room, render=render)
    assert len(kept) <= room
    assert kept == "" or kept.startswith("…")
    if room > 2 and kept.startswith("…\n"):
        # a code block cut from a line on drops its trailing blank lines (`_tail` keeps lines)
        end = re.sub(r"\n+```", "\n```", kept[2:])
        assert re.sub(r"\n+```", "\n```", whole).endswith(end) or kept.endswith("```"), (
            "it is the end that stays"
        )


def test_table_text_aligns_columns_on_one_line_each():
    table = Table(
        header=((Span(text="name"),), (Span(text="value"),)),
        rows=(((Span(text="a\nb"),), (Span(text="1"),)), ((Span(text="long name"),), ())),
    )
    assert table_text(table) == "\n".join(
        [
            "name      │ value",
            "──────────┼──────",
            "a b       │ 1",
            "long name",
        ]
    )


def test_one_line_and_break_ticks():
    assert one_line("  a\r\nb\u2028 c  ") == "a b c"
    broken = break_ticks("x ``` y ```` z")
    assert "```" not in broken
    assert broken.replace("\u200b", "") == "x ``` y ```` z"


def test_a_link_target_is_only_a_web_or_mail_address_without_control_characters():
    unsafe = re.compile(r"[\s|>]")
    assert link_target(" https://example.com/a b|c ", unsafe) == "https://example.com/a%20b%7Cc"
    assert link_target("mailto:someone@example.com", unsafe) == "mailto:someone@example.com"
    for refused in ("javascript:alert(1)", "./README.md", "https://a.example/\x00", None, ""):
        assert link_target(refused, unsafe) is None, refused


def test_split_closing_takes_the_closing_lines_off_the_end_only() -> None:
    """The core's italic "Finished ..." / "Session ended" lines, at the end, come apart (on
    one line each); the same words elsewhere, or not alone in italics, stay in the body."""
    body = (
        Paragraph(spans=(Span(text="Finished the tests", italic=True),)),  # not at the end: stays
        Paragraph(spans=(Span(text="the agent's words"),)),
        Paragraph(spans=(Span(text="Finished reading", bold=True, italic=True),)),  # bold: stays
    )
    closing = (
        Paragraph(spans=(Span(text="Finished in 2m\n· 3k tokens", italic=True),)),
        Paragraph(spans=(Span(text="Session ended (exit)", italic=True),)),
    )
    assert split_closing(body + closing) == (
        body,
        ["Finished in 2m · 3k tokens", "Session ended (exit)"],
    )
    assert split_closing(body) == (body, [])
    assert split_closing(()) == ((), [])


def test_plan_body_drops_the_bold_title_and_the_line_break_after_it() -> None:
    tasks = Paragraph(spans=(Span(text="\n✅ write the test"), Span(text="\n🔄 fix it")))
    titled = Paragraph(spans=(Span(text="Plan", bold=True), *tasks.spans))
    later = Paragraph(spans=(Span(text="more"),))
    assert plan_body((titled, later)) == (
        Paragraph(spans=(Span(text="✅ write the test"), Span(text="\n🔄 fix it"))),
        later,
    )
    assert plan_body((tasks, later)) == (tasks, later)  # no bold title: as it is
    assert plan_body(()) == ()


def test_split_to_fit_keeps_a_message_that_fits_and_cuts_a_long_one_in_order() -> None:
    def measure(blocks: Blocks) -> int:
        return len(render(blocks))

    short = OutgoingMessage(type="text", text="hello", key="k", notify=True)
    assert split_to_fit(short, 100, measure) == []
    long = OutgoingMessage(
        type="text", text=" ".join(f"w{i}" for i in range(300)), key="k", notify=True
    )
    pieces = split_to_fit(long, 100, measure)
    assert len(pieces) > 3
    assert all(measure(p.blocks) <= 100 for p in pieces)
    assert " ".join(p.text for p in pieces).split() == long.text.split(), "every word, in order"
    assert [(p.key, p.notify) for p in pieces[-2:]] == [(None, False), ("k", True)], (
        "only the last piece stands for the keyed message and rings"
    )


def test_marked_wraps_a_span_in_the_markers_of_its_marks_first_innermost() -> None:
    tags = {"code": ("<code>", "</code>"), "italic": ("<i>", "</i>"), "bold": ("<b>", "</b>")}
    assert marked("x", Span(text="x", bold=True, italic=True), tags) == "<b><i>x</i></b>"
    assert marked("x", Span(text="x", code=True, bold=True), tags) == "<b><code>x</code></b>"
    assert marked("x", Span(text="x", strike=True), tags) == "x", "a mark it has no markers for"
    assert marked("x", Span(text="x"), tags) == "x"


def test_indent_rest_indents_the_later_lines_but_never_a_code_blocks() -> None:
    text = "item\nmore words\n```py\n  code\n```\n\nafter"
    assert indent_rest(text, "  ") == "item\n  more words\n```py\n  code\n```\n\n  after"
    fenced = "```\ncode\n```\nafter"
    assert indent_rest(fenced, "  ") == "```\ncode\n```\n  after", "a block opening in a fence"
    one_line_code = "```x```\nafter"
    assert indent_rest(one_line_code, "  ") == "```x```\n  after", "it opens no fence"


def test_remembered_draws_the_same_spans_once_and_equal_spans_made_again_anew() -> None:
    """A message measured when its slot comes and drawn again to be sent is drawn once; a
    message rendered again from the agent's text (new spans, equal ones) is drawn again,
    since only identity is trusted, never a hash of what could be large."""
    drawn: list[str] = []

    @markup.remembered
    def stars(spans: markup.Spans) -> str:
        drawn.append(markup.spans_text(spans))
        return "".join(f"*{span.text}*" if span.bold else span.text for span in spans)

    spans = (markup.Span(text="Tests "), markup.Span(text="pass", bold=True))
    assert stars(spans) == stars(spans) == "Tests *pass*"
    assert drawn == ["Tests pass"]
    again = tuple(span.model_copy() for span in spans)
    assert stars(again) == "Tests *pass*"
    assert drawn == ["Tests pass", "Tests pass"]
    assert stars.__name__ == "stars"
