"""The web dialect (`markup_html`): every block kind as a browser's HTML, nothing the agent
wrote ever markup, and no link a browser should not follow."""

from __future__ import annotations

import pytest

from aep_bridge import HtmlRenderer
from aep_bridge.contract.markup_html import blocks_html
from aep_bridge.markup import (
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
    parse_markdown,
)

SCRIPT = "<script>alert(1)</script>"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"


def _p(*spans: Span) -> Paragraph:
    return Paragraph(spans=spans)


@pytest.mark.parametrize(
    "block",
    [
        _p(Span(text=SCRIPT)),
        _p(Span(text=SCRIPT, bold=True, italic=True, strike=True)),
        _p(Span(text=SCRIPT, code=True)),
        _p(Span(text=SCRIPT, url="https://example.com/")),
        Heading(level=2, spans=(Span(text=SCRIPT),)),
        Code(code=SCRIPT, language="html"),
        Details(summary=SCRIPT, blocks=(_p(Span(text=SCRIPT)),)),
        Quote(blocks=(_p(Span(text=SCRIPT)),)),
        ListBlock(items=((_p(Span(text=SCRIPT)),),)),
        Table(header=((Span(text=SCRIPT),),), rows=(((Span(text=SCRIPT),),),)),
        Diff(path=SCRIPT, unified=f"+{SCRIPT}\n-{SCRIPT}", added=1, removed=1),
    ],
)
def test_what_the_agent_wrote_stays_text_in_every_block(block: object) -> None:
    out = blocks_html((block,))  # type: ignore[arg-type]
    assert "<script" not in out
    assert ESCAPED in out


def test_an_attribute_cannot_be_broken_out_of() -> None:
    out = blocks_html(
        (
            _p(Span(text="x", url='https://example.com/"onmouseover="alert(1)')),
            Code(code="x", language='py" onclick="alert(1)'),
        )
    )
    assert '"onmouseover=' not in out
    assert '" onclick' not in out
    assert '<code class="language-pyonclickalert1">' in out  # a language is a name, no more
    assert 'href="https://example.com/&quot;onmouseover=&quot;alert(1)"' in out


@pytest.mark.parametrize(
    "url", ["javascript:alert(1)", " JavaScript:alert(1)", "data:text/html,x", "./README.md", ""]
)
def test_only_web_and_mail_links_are_links(url: str) -> None:
    out = blocks_html((_p(Span(text="the docs", url=url)),))
    assert "<a" not in out
    assert "href" not in out
    assert out == "<p>the docs</p>"


def test_a_link_opens_apart_without_a_referrer() -> None:
    out = blocks_html(parse_markdown("[docs](https://docs.python.org/3/) and <mailto:a@b.c>"))
    assert (
        '<a href="https://docs.python.org/3/" target="_blank" rel="noopener noreferrer">docs</a>'
        in out
    )
    assert 'href="mailto:a@b.c"' in out


def test_each_block_kind() -> None:
    blocks = parse_markdown(
        "## Fixed\n\n**bold** *it* ~~gone~~ `code`\n\n```python\nx = 1\n```\n\n"
        "- one\n- two\n\n3. three\n4. four\n\n> quoted\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n---\n"
    )
    out = blocks_html(blocks)
    assert "<h4>Fixed</h4>" in out
    assert "<strong>bold</strong> <em>it</em> <s>gone</s> <code>code</code>" in out
    assert '<pre><code class="language-python">x = 1</code></pre>' in out
    assert "<ul><li><p>one</p></li><li><p>two</p></li></ul>" in out
    assert '<ol start="3"><li><p>three</p></li>' in out
    assert "<blockquote><p>quoted</p></blockquote>" in out
    assert "<table><thead><tr><th>a</th><th>b</th></tr></thead>" in out
    assert "<tbody><tr><td>1</td><td>2</td></tr></tbody></table>" in out
    assert out.endswith("<hr>")
    assert blocks_html((Rule(),)) == "<hr>"
    assert blocks_html((Heading(level=6, spans=(Span(text="h"),)),)) == "<h6>h</h6>"


def test_a_collapsible_block_folds_without_a_script() -> None:
    out = blocks_html((Details(summary="output", blocks=(Code(code="1 failed"),)),))
    assert out == "<details><summary>output</summary><pre><code>1 failed</code></pre></details>"


def test_a_diff_marks_its_added_and_removed_lines_under_its_counts() -> None:
    out = blocks_html(
        (
            Diff(
                path="src/totals.py",
                unified="@@ -1,2 +1,2 @@\n context\n-old\n+new",
                added=1,
                removed=1,
            ),
        )
    )
    assert '<span class="path">src/totals.py</span>' in out
    assert '<span class="added">+1</span> <span class="removed">\u22121</span>' in out
    assert '<pre class="diff"><code><span class="hunk">@@ -1,2 +1,2 @@</span>\n context\n' in out
    assert '<span class="del">-old</span>\n<span class="add">+new</span></code></pre>' in out


def test_a_hard_line_break_is_a_line_break() -> None:
    assert blocks_html((_p(Span(text="a\nb")),)) == "<p>a<br>b</p>"


class _Quiet(HtmlRenderer):
    """A platform's dialect on the web's: no separator, `<del>`, links to one site only, its
    own escape (every `@` shown as `(at)`) and diff."""

    joint = ""
    strike = "del"

    def text(self, text: str) -> str:
        return super().text(text.replace("@", "(at)"))

    def link(self, text_html: str, url: str | None) -> str:
        return super().link(text_html, url) if url and "example.com" in url else text_html

    def diff(self, diff: Diff) -> str:
        return self.pre(diff.unified, "diff")


def test_a_platform_dialect_changes_only_what_it_overrides_and_escapes_everywhere() -> None:
    blocks = (
        _p(Span(text="a@b", strike=True), Span(text=" x", url="https://example.com/")),
        _p(Span(text="y", url="https://elsewhere.org/")),
        Code(code=f"@{SCRIPT}", language="sh"),
        Details(summary="@s", blocks=(_p(Span(text="t")),)),
        Diff(path="p", unified="+@x", added=1),
    )
    out = _Quiet().blocks(blocks)
    assert out == (
        '<p><del>a(at)b</del><a href="https://example.com/" target="_blank" '
        'rel="noopener noreferrer"> x</a></p><p>y</p>'
        f'<pre><code class="language-sh">(at){ESCAPED}</code></pre>'
        "<details><summary>(at)s</summary><p>t</p></details>"
        '<pre><code class="language-diff">+(at)x</code></pre>'
    )
    assert blocks_html(blocks[:1]).startswith("<p><s>a@b</s>"), "the web dialect is as it was"
