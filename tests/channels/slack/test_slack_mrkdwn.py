"""Slack's dialect: the agent's markdown as mrkdwn Slack draws (bold, italic, strike, code,
links, headings as bold lines, lists as bullets), and nothing the agent writes pings anyone,
links anywhere, formats or breaks out of a code block."""

from __future__ import annotations

import html
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from aep_bridge.markup import (
    Code,
    Details,
    Diff,
    Rule,
    Span,
    parse_markdown,
)
from aep_bridge_slack import mrkdwn
from aep_bridge_slack.preview import inline, mrkdwn_html

#: what Slack turns into a ping, a mention or a link when it reaches it unescaped
PINGS = ("<!channel>", "<!here>", "<!everyone>", "<@U0ALICE>", "<!subteam^S0OPS>", "<#C0OTHER>")


def _md(text: str) -> str:
    return mrkdwn.blocks_mrkdwn(parse_markdown(text))


def test_markdown_becomes_mrkdwn() -> None:
    source = (
        "# Fixed it\n\nSome **bold**, *italic*, ~~struck~~, `code` and a "
        "[link](https://example.com/a?b=1&c=2).\n\n- one\n- two\n  1. nested\n\n"
        "> quoted\n\n```python\nprint(1)\n```\n\n---\n"
    )
    assert _md(source) == (
        "*Fixed it*\n\n"
        "Some *bold*, _italic_, ~struck~, `code` and a "
        "<https://example.com/a?b=1&amp;c=2|link>.\n\n"
        "• one\n• two\n   1. nested\n\n"
        "> quoted\n\n"
        "```\nprint(1)\n```\n\n"
        "——————"
    )


def test_a_diff_a_table_and_a_collapsible_block() -> None:
    blocks = (
        Diff(path="src/a.py", unified="@@ -1 +1 @@\n-a\n+b", added=1, removed=1),
        parse_markdown("| a | b |\n|---|---|\n| 1 | <2> |")[0],
        Details(summary="last 2 lines", blocks=(Code(code="x\ny"),)),
        Rule(),
    )
    assert mrkdwn.blocks_mrkdwn(blocks) == (
        "*src/a.py +1 \u22121*\n```\n@@ -1 +1 @@\n-a\n+b\n```\n\n"
        "```\na │ b\n──┼────\n1 │ &lt;2&gt;\n```\n\n"
        "_last 2 lines_\n```\nx\ny\n```\n\n"
        "——————"
    )


def test_agent_text_never_pings_links_or_formats() -> None:
    text = "hi <!channel> and <@U0ALICE> <!here> <http://evil.example|your bank> @channel *x* & _y_"
    shown = mrkdwn.escape(text)
    assert "<" not in shown
    assert ">" not in shown
    assert "&amp;" in shown
    assert "&lt;!channel&gt;" in shown
    assert "@channel" not in shown  # a zero-width space after the @
    # the preview, which parses mrkdwn as Slack does, shows the text as written, unformatted
    drawn = inline(shown)
    assert not re.search(r"<(?!/?a\b)", drawn.replace("&lt;", "").replace("&gt;", "")), drawn
    assert "<strong>" not in drawn
    assert "<em>" not in drawn
    # (a bare web address is linked, as Slack links it: to itself)
    assert html.unescape(re.sub(r"</?a[^>]*>", "", drawn)) == text


def test_pings_stay_text_everywhere_the_agent_writes() -> None:
    for ping in PINGS:
        source = (
            f"# {ping}\n\n{ping} **{ping}** `{ping}` [{ping}](https://x.example)\n\n"
            f"- {ping}\n\n> {ping}\n\n```\n{ping}\n```\n\n| {ping} |\n|---|\n| {ping} |\n"
        )
        shown = _md(source)
        # our only angle brackets are our own link's
        assert re.sub(r"<https://x\.example\|[^<>]*>", "", shown).count("<") == 0, shown
        assert ping not in shown


def test_a_link_is_ours_alone_and_its_target_cannot_be_forged() -> None:
    spans = (Span(text="click", url="https://a.example/x|<!channel>>y z"),)
    shown = mrkdwn.spans_mrkdwn(spans)
    assert shown == "<https://a.example/x%7C%3C!channel%3E%3Ey%20z|click>"
    # only http(s) and mailto are links
    assert mrkdwn.spans_mrkdwn((Span(text="run", url="javascript:alert(1)"),)) == "run"
    assert mrkdwn.spans_mrkdwn((Span(text="<me>", url="mailto:a@b.c"),)) == (
        "<mailto:a@b.c|&lt;me&gt;>"
    )


def test_code_cannot_leave_its_block() -> None:
    code = "a ``` b\n```\n<!channel> & done"
    shown = mrkdwn.blocks_mrkdwn((Code(code=code),))
    assert shown.startswith("```\n")
    assert shown.endswith("\n```")
    assert shown.count("```") == 2
    assert "&lt;!channel&gt; &amp; done" in shown
    # drawn back, it is the same code, in one block
    drawn = mrkdwn_html(shown)
    assert drawn.count("<pre>") == 1
    assert html.unescape(drawn.removeprefix("<pre><code>").removesuffix("</code></pre>")) == code


def test_inline_code_with_a_backtick_is_text() -> None:
    shown = mrkdwn.spans_mrkdwn((Span(text="a`b", code=True),))
    assert html.unescape(inline(shown)) == "a`b"
    assert mrkdwn.spans_mrkdwn((Span(text="a_b*c", code=True),)) == "`a_b*c`"


def test_styles_break_at_lines_and_never_reach_across() -> None:
    shown = mrkdwn.spans_mrkdwn((Span(text="one\ntwo", bold=True), Span(text=" and *three*")))
    assert shown.split("\n")[0] == "*one*"
    assert shown.split("\n")[1].startswith("*two*")
    assert "<strong>three</strong>" not in inline(shown.split("\n")[1])


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from([*list("ab *_~`<>&@!|#:/\nhttps"), "\u200b", "é"])))
def test_any_text_escaped_reads_back_as_written(text: str) -> None:
    shown = mrkdwn.escape(text)
    assert "<" not in shown
    assert ">" not in shown
    assert not re.search(r"&(?!amp;|lt;|gt;)", shown)
    for line, drawn in zip(text.split("\n"), shown.split("\n"), strict=True):
        html_line = inline(drawn)
        assert not re.search(r"<(strong|em|s|code)>", html_line)
        visible = re.sub(r"</?a[^>]*>", "", html_line)
        assert html.unescape(visible) == line.replace("\u200b", "")


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from([*"ab *_~`<>&#-[]()\n", "<!channel>", "<@U1>", "```", "](https://x)"])
    ).map("".join)
)
def test_any_markdown_reaches_slack_without_a_ping(text: str) -> None:
    shown = _md(text)
    assert "<!" not in shown
    assert "<@" not in shown
    assert shown.count("```") % 2 == 0  # every code block closed
    # every angle bracket left is one of our links: `<https://...|...>`
    assert re.sub(r"<https://x\|[^<>]*>", "", shown).count("<") == 0
