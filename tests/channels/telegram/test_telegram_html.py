"""`blocks_html`: each block kind as Telegram HTML that Telegram's parser (the fake's, which
refuses what Telegram would drop) accepts, showing the words without markdown markers."""

from __future__ import annotations

import pytest

from aep_bridge.markup import (
    Blocks,
    Code,
    Details,
    Diff,
    Heading,
    ListBlock,
    Paragraph,
    Quote,
    Rule,
    Span,
    Table,
)
from aep_bridge_telegram.html import blocks_html, visible_length, visible_text

from .fake_bot_api import finish_text, parse_html, utf16_len


def para(*spans: Span | str) -> Paragraph:
    return Paragraph(spans=tuple(Span(text=s) if isinstance(s, str) else s for s in spans))


def shown(blocks: Blocks) -> tuple[str, list[tuple[str, str]]]:
    """What Telegram shows: the text, and each entity as (type, the text it covers)."""
    text, entities = finish_text(*parse_html(blocks_html(blocks)))
    utf16 = text.encode("utf-16-le")

    def cover(entity: dict[str, int]) -> str:
        start, length = entity["offset"] * 2, entity["length"] * 2
        return utf16[start : start + length].decode("utf-16-le")

    return text, [(str(e["type"]), cover(e)) for e in entities]


def test_spans_bold_italic_code_strike_and_links() -> None:
    blocks = (
        para(
            Span(text="Root cause:", bold=True),
            " the ",
            Span(text="a<b> & c", code=True),
            " and ",
            Span(text="cache", code=True, bold=True),
            ", ",
            Span(text="gone", strike=True),
            " ",
            Span(text="really", italic=True),
            " (",
            Span(text="docs", url='https://example.com/?a=1&b="2"'),
            ")",
        ),
    )
    assert blocks_html(blocks) == (
        "<b>Root cause:</b> the <code>a&lt;b&gt; &amp; c</code> and <b><code>cache</code></b>,"
        ' <s>gone</s> <i>really</i> (<a href="https://example.com/?a=1&amp;b=&quot;2&quot;">'
        "docs</a>)"
    )
    text, entities = shown(blocks)
    assert text == "Root cause: the a<b> & c and cache, gone really (docs)"
    assert ("bold", "Root cause:") in entities
    assert ("code", "a<b> & c") in entities
    assert ("bold", "cache") in entities
    assert ("code", "cache") in entities
    assert ("strikethrough", "gone") in entities
    assert ("italic", "really") in entities
    assert ("text_link", "docs") in entities
    assert parse_html(blocks_html(blocks))[1][-1]["url"] == 'https://example.com/?a=1&b="2"'


def test_a_heading_is_bold_and_keeps_its_code() -> None:
    blocks = (Heading(level=2, spans=(Span(text="Fixed: "), Span(text="x<y", code=True))),)
    assert blocks_html(blocks) == "<b>Fixed: <code>x&lt;y</code></b>"
    assert shown(blocks) == ("Fixed: x<y", [("bold", "Fixed: x<y"), ("code", "x<y")])


def test_code_blocks_with_and_without_a_language() -> None:
    assert blocks_html((Code(code="print(1 < 2)\n", language="python"),)) == (
        '<pre><code class="language-python">print(1 &lt; 2)</code></pre>'
    )
    assert blocks_html((Code(code="$ make"),)) == "<pre>$ make</pre>"
    assert shown((Code(code="a\n  b", language="sh"),)) == ("a\n  b", [("pre", "a\n  b")])


def test_lists_bullets_numbers_nesting_and_code_left_as_written() -> None:
    blocks = (
        ListBlock(
            items=(
                (
                    para("one"),
                    ListBlock(
                        ordered=True,
                        start=3,
                        items=(
                            (para("three"),),
                            (para("four"), Code(code="x = 1\n  y = 2", language="python")),
                        ),
                    ),
                ),
                (para(Span(text="two", bold=True)),),
            )
        ),
    )
    text, entities = shown(blocks)
    assert text.split("\n") == [
        "• one",
        "   3. three",
        "   4. four",
        "x = 1",  # the code block is not indented: its lines are the code's own
        "  y = 2",
        "• two",
    ]
    assert ("pre", "x = 1\n  y = 2") in entities
    assert ("bold", "two") in entities


def test_a_quote_and_a_quote_in_it_shown_flat() -> None:
    blocks = (Quote(blocks=(para("outer"), Quote(blocks=(para("inner"),)))),)
    assert blocks_html(blocks) == "<blockquote>outer\n\ninner</blockquote>"
    assert shown(blocks)[1] == [("blockquote", "outer\n\ninner")]


def test_a_table_is_monospace_aligned_columns() -> None:
    table = Table(
        header=((Span(text="file"),), (Span(text="callers"),)),
        rows=(
            ((Span(text="render.py", code=True),), (Span(text="3"),)),
            ((Span(text="a&b.py"),), (Span(text="12"),)),
        ),
    )
    text, entities = shown((table,))
    assert text.split("\n") == [
        "file      │ callers",
        "──────────┼────────",
        "render.py │ 3",
        "a&b.py    │ 12",
    ]
    assert entities == [("pre", text)]
    assert "|" not in text


def test_details_is_its_summary_and_an_expandable_quote() -> None:
    blocks = (Details(summary="Output (120 lines)", blocks=(Code(code="line 1\nline 2"),)),)
    assert blocks_html(blocks) == (
        "Output (120 lines)\n<blockquote expandable><pre>line 1\nline 2</pre></blockquote>"
    )
    _text, entities = shown(blocks)
    assert ("expandable_blockquote", "line 1\nline 2") in entities
    # a collapsible block inside a quote: no quote in a quote, its lines shown flat
    nested = (Quote(blocks=(Details(summary="more", blocks=(para("folded"),)),)),)
    assert shown(nested) == ("more\nfolded", [("blockquote", "more\nfolded")])


def test_a_diff_is_its_path_counts_and_lines() -> None:
    blocks = (Diff(path="src/a.py", unified="-old\n+new\n", added=1, removed=1),)
    assert blocks_html(blocks) == (
        '<b>src/a.py</b> +1 \u22121\n<pre><code class="language-diff">-old\n+new</code></pre>'
    )
    text, entities = shown(blocks)
    assert text == "src/a.py +1 \u22121\n-old\n+new"
    assert ("bold", "src/a.py") in entities
    assert ("pre", "-old\n+new") in entities


def test_blocks_are_separated_by_a_blank_line_and_a_rule_is_a_line() -> None:
    blocks = (para("above"), Rule(), para("below"))
    assert shown(blocks)[0] == "above\n\n——————\n\nbelow"


@pytest.mark.parametrize(
    "blocks",
    [
        (para(Span(text="😀 <&>", bold=True)),),
        (Code(code="é" * 10 + "😀", language="c++"),),
        (Details(summary="s", blocks=(para("x"),)), Rule()),
        (Code(code="    indented()\n", language="python"), para("  after ")),
    ],
)
def test_visible_length_is_what_telegram_counts(blocks: Blocks) -> None:
    text, _ = finish_text(*parse_html(blocks_html(blocks)))
    assert visible_text(blocks_html(blocks)) == text
    assert visible_length(blocks_html(blocks)) == utf16_len(text)


def test_only_links_a_chat_can_open_are_links() -> None:
    blocks = (
        para(
            Span(text="readme", url="./README.md"),
            " ",
            Span(text="x", url="javascript:alert(1)"),
            " ",
            Span(text="mail", url="mailto:a@b.org"),
        ),
    )
    assert blocks_html(blocks) == 'readme x <a href="mailto:a@b.org">mail</a>'
