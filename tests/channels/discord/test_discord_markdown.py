"""The message model as Discord markdown: what a Discord client draws from it, read back by a
small model of Discord's parser (below), so the tests check what a person sees, not the
source's spelling."""

from __future__ import annotations

import re
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

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
    parse_markdown,
    split,
)
from aep_bridge_discord.markdown import (
    LIMIT,
    ZWSP,
    blocks_markdown,
    escape,
    measure,
    safe_url,
    spans_markdown,
)

# -- a small Discord renderer ---------------------------------------------------------------
# The rules of simple-markdown, which Discord's client parser is built on, with Discord's
# additions (strike, spoilers, mentions, headings, subtext, lists): each tried in order at
# each position, the first that matches wins.


@dataclass(frozen=True)
class Run:
    """Text as drawn, with its styles and the link it opens."""

    text: str
    styles: frozenset[str] = frozenset()
    link: str | None = None


@dataclass(frozen=True)
class Fence:
    language: str
    code: str


@dataclass(frozen=True)
class Mark:
    """Something drawn that is not text: a heading's size, subtext, a list bullet, a quote's
    bar, a mention's pill."""

    kind: str


Node = Run | Fence | Mark

_CODE_BLOCK = re.compile(r"```(?:([a-z0-9_+\-.#]+?)\n)?\n*([^\n][\s\S]*?)\n*```", re.I)
_ESCAPE = re.compile(r"\\([^0-9A-Za-z\s])")
_AUTOLINK = re.compile(r"<([^: >]+:/[^ >]+)>")
_URL = re.compile(r"(?:https?|steam)://[^\s<]+[^<.,:;\"')\]\s]")
_LINK = re.compile(
    r"\[((?:\[[^\]]*\]|[^\[\]]|\](?=[^\[]*\]))*)\]"
    r"\(\s*<?((?:\([^)]*\)|[^\s\\])*?)>?(?:\s+['\"]([\s\S]*?)['\"])?\s*\)"
)
_MENTION = re.compile(
    r"<@!?\d+>|<@&\d+>|<#\d+>|<a?:\w+:\d+>|<t:-?\d+(?::\w)?>|</[^:>]+:\d+>|@everyone|@here"
)
_STYLED = (
    (
        "italic",
        re.compile(
            r"\b_((?:__|\\[\s\S]|[^\\_])+?)_\b"
            r"|\*(?=\S)((?:\*\*|\\[\s\S]|\s+(?:\\[\s\S]|[^\s*\\]|\*\*)|[^\s*\\])+?)\*(?!\*)"
        ),
    ),
    ("bold", re.compile(r"\*\*((?:\\[\s\S]|[^\\])+?)\*\*(?!\*)")),
    ("underline", re.compile(r"__((?:\\[\s\S]|[^\\])+?)__(?!_)")),
    ("strike", re.compile(r"~~([\s\S]+?)~~(?!_)")),
    ("spoiler", re.compile(r"\|\|([\s\S]+?)\|\|")),
)
_INLINE_CODE = re.compile(r"(`+)([\s\S]*?[^`])\1(?!`)")
_TEXT = re.compile(r"[\s\S]+?(?=[^0-9A-Za-z\s\u00c0-\uffff]|\n|\w+:\S|$)")
_LINE_START = (
    ("h", re.compile(r"(#{1,3}) +(?=\S)")),
    ("subtext", re.compile(r"-# +(?=\S)")),
    ("item", re.compile(r" *(?:[*+-]|\d+\.) +(?=\S)")),
)
_QUOTE_LINE = re.compile(r" *>(?:>>)? ")
#: what Discord's server reads as a ping in a message's content, markdown or not
PINGS = re.compile(r"@everyone|@here|<@[!&]?\d+>")


def render(source: str) -> list[Node]:
    """What a Discord client draws for a message's content."""
    source = re.sub(r"\r\n?", "\n", source)
    nodes: list[Node] = []
    chunk: list[str] = []
    lines = source.split("\n")
    index = 0
    while index < len(lines):
        if _QUOTE_LINE.match(lines[index]):
            nodes.extend(_inline("\n".join(chunk) + "\n" if chunk else ""))
            chunk = []
            quoted = []
            while index < len(lines) and _QUOTE_LINE.match(lines[index]):
                quoted.append(_QUOTE_LINE.sub("", lines[index], count=1))
                index += 1
            nodes.append(Mark("quote"))
            nodes.extend(_inline("\n".join(quoted) + "\n"))
        else:
            chunk.append(lines[index])
            index += 1
    nodes.extend(_inline("\n".join(chunk)))
    return _merge(nodes)


def _inline(text: str, styles: frozenset[str] = frozenset(), link: str | None = None) -> list[Node]:
    nodes: list[Node] = []
    pos, line_start = 0, True
    while pos < len(text):
        rest = text[pos:]
        if line_start:
            line_start = False
            found = next(((k, m) for k, rule in _LINE_START if (m := rule.match(rest))), None)
            if found is not None:
                kind, start = found
                nodes.append(Mark(f"h{len(start.group(1))}" if kind == "h" else kind))
                pos += start.end()
                continue
        if rest[0] == "\n":
            nodes.append(Run("\n", styles, link))
            pos, line_start = pos + 1, True
            continue
        match = None
        if match := _CODE_BLOCK.match(rest):
            nodes.append(Fence((match.group(1) or "").lower(), match.group(2)))
        elif match := _ESCAPE.match(rest):
            nodes.append(Run(match.group(1), styles, link))
        elif match := _AUTOLINK.match(rest):
            nodes.append(Run(match.group(1), styles, match.group(1)))
        elif match := _URL.match(rest):
            nodes.append(Run(match.group(), styles, match.group()))
        elif match := _LINK.match(rest):
            nodes.extend(_inline(match.group(1), styles, match.group(2)))
        elif match := _MENTION.match(rest):
            nodes += [Mark("mention"), Run(match.group(), styles, link)]
        elif styled := next(((kind, m) for kind, rule in _STYLED if (m := rule.match(rest))), None):
            kind, match = styled
            inner = next(group for group in match.groups() if group is not None)
            nodes.extend(_inline(inner, styles | {kind}, link)[:])
        elif match := _INLINE_CODE.match(rest):
            content = re.sub(r"^ (?= *`)|(` *) $", r"\1", match.group(2))
            nodes.append(Run(content, styles | {"code"}, link))
        else:
            match = _TEXT.match(rest)
            assert match is not None
            nodes.append(Run(match.group(), styles, link))
        pos += match.end()
    return nodes


def _merge(nodes: list[Node]) -> list[Node]:
    out: list[Node] = []
    for node in nodes:
        last = out[-1] if out else None
        if (
            isinstance(node, Run)
            and isinstance(last, Run)
            and (last.styles, last.link) == (node.styles, node.link)
        ):
            out[-1] = Run(last.text + node.text, node.styles, node.link)
        else:
            out.append(node)
    return out


def visible(nodes: list[Node]) -> str:
    """The text a person reads (a zero-width space is invisible)."""
    return "".join(
        n.text if isinstance(n, Run) else n.code if isinstance(n, Fence) else "" for n in nodes
    ).replace(ZWSP, "")


def runs(nodes: list[Node]) -> list[Run]:
    """The runs with something to read."""
    return [n for n in nodes if isinstance(n, Run) and n.text.replace(ZWSP, "").strip()]


def marks(nodes: list[Node]) -> list[str]:
    return [n.kind for n in nodes if isinstance(n, Mark)]


def p(*spans: Span | str) -> Paragraph:
    return Paragraph(spans=tuple(Span(text=s) if isinstance(s, str) else s for s in spans))


def test_the_renderer_model_reads_discord_markdown_as_discord_does() -> None:
    """The model itself, on markdown a person would type in Discord."""
    nodes = render("# Big\n**b** *i* ~~s~~ `c` ||x|| [t](<https://a.example>) @everyone\n> q")
    assert marks(nodes) == ["h1", "mention", "quote"]
    assert Run("b", frozenset({"bold"})) in nodes
    assert Run("t", frozenset(), "https://a.example") in nodes
    assert Run("c", frozenset({"code"})) in nodes
    assert render("\\*a\\*") == [Run("*a*")]
    assert render("see https://x.example/a\\_b") == [
        Run("see "),
        Run("https://x.example/a\\_b", link="https://x.example/a\\_b"),  # the backslash shown
    ]


# -- each block kind ----------------------------------------------------------------------


def test_styled_spans_become_discord_markers() -> None:
    spans = (
        Span(text="bold", bold=True),
        Span(text=" "),
        Span(text="it", italic=True),
        Span(text=" "),
        Span(text="gone", strike=True),
        Span(text=" "),
        Span(text="x = 1", code=True),
        Span(text=" "),
        Span(text="both", bold=True, italic=True),
    )
    source = blocks_markdown((Paragraph(spans=spans),))
    assert source == "**bold** *it* ~~gone~~ `x = 1` ***both***"
    nodes = render(source)
    assert visible(nodes) == "bold it gone x = 1 both"
    assert [r.styles for r in runs(nodes)] == [
        {"bold"},
        {"italic"},
        {"strike"},
        {"code"},
        {"bold", "italic"},
    ]


def test_touching_markers_of_two_spans_stay_two_styles() -> None:
    source = spans_markdown((Span(text="a", bold=True), Span(text="b", italic=True)))
    nodes = render(source)
    assert [(r.text.strip(ZWSP), r.styles) for r in runs(nodes)] == [
        ("a", {"bold"}),
        ("b", {"italic"}),
    ]
    two_codes = spans_markdown((Span(text="a", code=True), Span(text="b", code=True, bold=True)))
    assert [r.styles for r in runs(render(two_codes))] == [{"code"}, {"code", "bold"}]


def test_styles_leave_a_span_s_edge_spaces_outside_their_markers() -> None:
    source = spans_markdown((Span(text="a"), Span(text=" it ", italic=True), Span(text="b")))
    assert source == "a *it* b"
    assert runs(render(source))[1] == Run("it", frozenset({"italic"}))


def test_links_are_masked_with_no_embed_and_only_for_web_and_mail_targets() -> None:
    url = "https://docs.python.org/3/library/functools.html?a=1&b=2"
    source = spans_markdown((Span(text="the docs", url=url, bold=True),))
    assert source == f"[**the docs**](<{url}>)"
    assert runs(render(source)) == [Run("the docs", frozenset({"bold"}), url)]
    assert spans_markdown((Span(text="mail", url="mailto:jo@example.com"),)) == (
        "[mail](<mailto:jo@example.com>)"
    )
    for target in ("javascript:alert(1)", "./README.md", "data:text/html,x", "ftp://h/f"):
        source = spans_markdown((Span(text="click", url=target),))
        assert source == "click"
    # a target that would end the link early is percent-encoded, not cut
    odd = spans_markdown((Span(text="wiki", url="https://en.example/Foo_(bar) x>y"),))
    assert runs(render(odd)) == [Run("wiki", link="https://en.example/Foo_%28bar%29%20x%3Ey")]


def test_a_link_whose_text_is_a_url_or_has_brackets_shows_its_target_beside_it() -> None:
    shown = spans_markdown((Span(text="https://bank.example", url="https://evil.example"),))
    assert "https://bank.example" in visible(render(shown))
    assert "(https://evil.example)" in visible(render(shown))
    assert all(r.link != "https://evil.example" or r.text == r.link for r in runs(render(shown)))
    bracket = spans_markdown((Span(text="a [b]", url="https://x.example"),))
    assert visible(render(bracket)) == "a [b] (https://x.example)"
    # a link shown as its own address is simply that address, linked
    same = spans_markdown((Span(text="https://x.example/a_b", url="https://x.example/a_b"),))
    assert runs(render(same)) == [Run("https://x.example/a_b", link="https://x.example/a_b")]


def test_headings_use_discord_s_three_sizes_and_bold_below() -> None:
    for level in (1, 2, 3):
        source = blocks_markdown((Heading(level=level, spans=(Span(text="Fixed *it*"),)),))
        assert source == f"{'#' * level} Fixed \\*it\\*"
        assert marks(render(source)) == [f"h{level}"]
        assert visible(render(source)) == "Fixed *it*"
    deep = blocks_markdown((Heading(level=4, spans=(Span(text="Notes"),)),))
    assert deep == "**Notes**"
    assert runs(render(deep)) == [Run("Notes", frozenset({"bold"}))]


def test_code_blocks_keep_their_language_and_their_text() -> None:
    code = "def f():\n    return '**not bold** @everyone <@123>'\n"
    source = blocks_markdown((Code(code=code, language="Python"),))
    assert source == f"```python\n{code.rstrip()}\n```"
    assert render(source) == [Fence("python", code.rstrip())]
    # a language Discord would not read as one is left out, not put in the code
    odd = blocks_markdown((Code(code="x", language="c++ (gnu)"),))
    assert render(odd) == [Fence("", "x")]
    assert blocks_markdown((Code(code="  \n"),)) == ""


def test_a_code_block_with_backtick_fences_inside_stays_one_block() -> None:
    code = "Use:\n```python\nprint('hi')\n```\nor ```` and `` and a trailing `"
    source = blocks_markdown((Code(code=code, language="md"), p("after")))
    nodes = render(source)
    [fence] = [n for n in nodes if isinstance(n, Fence)]
    assert fence.language == "md"
    assert fence.code.replace(ZWSP, "") == code
    assert visible(nodes).endswith("after")
    assert marks(nodes) == []


def test_inline_code_with_backticks_inside_is_one_code_span() -> None:
    for text in ("a`b", "`start", "end`", "`", "x ` y"):
        assert runs(render(spans_markdown((Span(text=text, code=True),)))) == [
            Run(text, frozenset({"code"}))
        ]
    # Discord has no inline fence for a run of two: the text is shown as written, escaped
    assert visible(render(spans_markdown((Span(text="a``b```c", code=True),)))) == "a``b```c"


def test_lists_nest_by_indentation_and_count_from_their_start() -> None:
    block = ListBlock(
        items=(
            (p("cleared the cache"), ListBlock(ordered=True, items=((p("a"),), (p("b"),)))),
            (p("- not a bullet"),),
        )
    )
    source = blocks_markdown((block,))
    assert source == "- cleared the cache\n  1. a\n  2. b\n- \\- not a bullet"
    assert marks(render(source)) == ["item", "item", "item", "item"]
    numbered = blocks_markdown((ListBlock(ordered=True, start=7, items=((p("x"),), (p("y"),))),))
    assert numbered == "7. x\n8. y"


def test_code_in_a_list_item_starts_at_the_line_s_start() -> None:
    block = ListBlock(
        ordered=True, items=((p("run"), Code(code="  make test", language="sh")), (p("done"),))
    )
    source = blocks_markdown((block,))
    assert source == "1. run\n```sh\n  make test\n```\n2. done"
    assert Fence("sh", "  make test") in render(source)
    # an item that opens with code: its bullet on a line of its own, the fence at the start
    empty_first = ListBlock(items=((Paragraph(spans=()), Code(code="x")),))
    assert blocks_markdown((empty_first,)) == "-\n```\nx\n```"


def test_quotes_are_lines_with_a_bar_and_an_inner_quote_is_flat() -> None:
    quote = Quote(blocks=(p("Ran 412 tests."), Quote(blocks=(p("> inner"),))))
    source = blocks_markdown((quote,))
    assert source == "> Ran 412 tests.\n> \n> \\> inner"
    nodes = render(source)
    assert marks(nodes) == ["quote"]
    assert visible(nodes).strip() == "Ran 412 tests.\n\n> inner"


def test_tables_are_an_aligned_monospace_block() -> None:
    table = Table(
        header=((Span(text="file"),), (Span(text="callers", bold=True),)),
        rows=(((Span(text="cache.py"),), (Span(text="3"),)), ((Span(text="a|b"),), ())),
    )
    [fence] = render(blocks_markdown((table,)))
    assert fence == Fence("", "file     │ callers\n─────────┼────────\ncache.py │ 3\na|b")


def test_details_are_a_subtext_summary_over_their_content() -> None:
    details = Details(summary="log *tail*", blocks=(Code(code="boom"),))
    source = blocks_markdown((details,))
    assert source == "-# log \\*tail\\*\n```\nboom\n```"
    nodes = render(source)
    assert marks(nodes) == ["subtext"]
    assert nodes[1:] == [Run("log *tail*\n"), Fence("", "boom")]
    # in a list there is no subtext: the summary is in italics
    listed = blocks_markdown((ListBlock(items=((p("x"), Details(summary="why")),)),))
    assert listed == "- x\n  *why*"


def test_a_diff_is_a_bold_header_over_a_diff_block() -> None:
    diff = Diff(path="src/a_b.py", unified="-old\n+new", added=1, removed=1)
    source = blocks_markdown((diff,))
    assert source == "**src/a\\_b.py +1 \u22121**\n```diff\n-old\n+new\n```"
    nodes = render(source)
    assert runs(nodes)[0] == Run("src/a_b.py +1 \u22121", frozenset({"bold"}))
    assert nodes[-1] == Fence("diff", "-old\n+new")


def test_a_rule_is_a_line() -> None:
    assert blocks_markdown((p("a"), Rule(), p("b"))) == "a\n\n——————\n\nb"


# -- the issue's example ------------------------------------------------------------------

#: the issue's example, as an agent writes it (tests/channels/telegram/test_telegram_rendering.py)
MARKDOWN = """## Fixed: flaky `test_cache`

**Root cause:** the `lru_cache` outlived the test (see [the docs](https://docs.python.org/3/library/functools.html)).

| file | callers |
|---|---|
| cache.py | 3 |
| render.py | 12 |

- cleared the cache
  1. in setUp
  2. in tearDown
- *added* a test

```python
def test_cache():
    assert cached(1) == 1
```
"""


def test_the_issue_s_example_reads_formatted_without_markdown_markers() -> None:
    source = blocks_markdown(parse_markdown(MARKDOWN))
    nodes = render(source)
    text = visible(nodes)
    for marker in ("##", "**", "`", "](", "| file |", "|---", "```"):
        assert marker not in text
    assert text.startswith("Fixed: flaky test_cache")
    assert "h2" in marks(nodes)
    assert Run("Root cause:", frozenset({"bold"})) in nodes
    assert Run("lru_cache", frozenset({"code"})) in nodes
    assert Run("the docs", link="https://docs.python.org/3/library/functools.html") in nodes
    assert Run("added", frozenset({"italic"})) in nodes
    assert Fence("python", "def test_cache():\n    assert cached(1) == 1") in nodes
    assert any(isinstance(n, Fence) and n.code.startswith("file      │ callers") for n in nodes)
    assert marks(nodes).count("item") == 4
    assert len(source) <= LIMIT


def test_an_agent_s_literal_markers_show_as_written() -> None:
    """What the agent wrote as text (escaped in its markdown) is text on Discord too."""
    written = r"Use \*\*kwargs, a \_private name, 2 \* 3, \`tick\` and \# not a heading"
    nodes = render(blocks_markdown(parse_markdown(written)))
    assert visible(nodes) == "Use **kwargs, a _private name, 2 * 3, `tick` and # not a heading"
    assert all(r.styles == frozenset() for r in runs(nodes))


# -- escaping -----------------------------------------------------------------------------

#: pieces of text that mean something to Discord, and some that do not
_PIECES = [
    *"*_~`|\\<>#[]():/@.-+! \n\tab1é😀",
    "**", "__", "~~", "``", "```", "||", ">>> ", "> ", "# ", "## ", "-# ", "- ", "* ", "+ ",
    "1. ", "2)", "](", "[x](https://e.example)", "<@123>", "<@!42>", "<@&7>", "<#9>",
    "<:e:12>", "<a:e:12>", "<t:1:R>", "</cmd:5>", "@everyone", "@here", "@Everyone",
    "https://ex.example/a_b*c", "http://x.example/(p).", "<https://y.example>",
    "steam://run/1", "ftp://h/f", "https://ex.example/@everyone", "\r\n", "\r",
]  # fmt: skip
_TEXT_ST = st.lists(st.one_of(st.sampled_from(_PIECES), st.text(max_size=3)), max_size=14).map(
    lambda parts: "".join(parts).replace(ZWSP, "")
)
_URLS = [None, "https://e.example/a_(b)?q=*", "mailto:jo@example.com", "javascript:x()"]


@settings(max_examples=400, deadline=None)
@given(
    text=_TEXT_ST,
    bold=st.booleans(),
    italic=st.booleans(),
    strike=st.booleans(),
    code=st.booleans(),
    url=st.sampled_from(_URLS),
)
def test_any_span_text_shows_verbatim_in_its_style_and_never_pings(
    text: str, bold: bool, italic: bool, strike: bool, code: bool, url: str | None
) -> None:
    span = Span(text=text, bold=bold, italic=italic, strike=strike, code=code, url=url)
    source = blocks_markdown((Paragraph(spans=(span,)),))
    nodes = render(source)
    expected = re.sub(r"\r\n?", "\n", text).strip()
    target = safe_url(url)
    shown_beside = target is not None and ("[" in text or "]" in text or "://" in text)
    if target is not None and text.strip() == url:
        target = None
    if shown_beside:
        # the text, then its target beside it (spaces between as code or prose leave them)
        assert " ".join(visible(nodes).split()) == " ".join(f"{expected} ({target})".split())
        assert all(r.link in (None, r.text) for r in runs(nodes))  # an address links itself
    else:
        assert visible(nodes).strip() == expected
    assert marks(nodes) == []  # no heading, list, quote, subtext or mention drawn
    if not code:
        assert not PINGS.search(source)
    styles = {name for name, on in (("bold", bold), ("italic", italic), ("strike", strike)) if on}
    for run in [] if shown_beside else runs(nodes):
        if "code" in run.styles:  # a style whose marker is in the code is left off
            assert run.styles - {"code"} <= styles, (source, run)
        else:
            assert run.styles == styles, (source, run)
        if code and "``" not in text:
            assert "code" in run.styles
        if target is not None:
            assert run.link == target
        else:  # only an address in the text links, to itself, shown whole
            assert run.link is None or run.link == run.text.replace(ZWSP, "")


_SPANS_ST = st.lists(
    st.builds(
        Span,
        text=_TEXT_ST,
        bold=st.booleans(),
        italic=st.booleans(),
        strike=st.booleans(),
        code=st.booleans(),
    ),
    min_size=2,
    max_size=4,
)


def _styles(span: Span) -> frozenset[str]:
    names = ("bold", "italic", "strike", "code")
    return frozenset(name for name in names if getattr(span, name))


@settings(max_examples=300, deadline=None)
@given(spans=_SPANS_ST)
def test_runs_of_any_styles_side_by_side_keep_each_its_own(spans: list[Span]) -> None:
    """Two spans' markers never merge into one, or eat into the other's text."""
    nodes = render(blocks_markdown((Paragraph(spans=tuple(spans)),)))
    shown = [(c, run.styles) for run in runs(nodes) for c in run.text if c.strip(ZWSP).strip()]
    wanted = [(c, _styles(span)) for span in spans for c in span.text if c.strip()]
    assert [c for c, _ in shown] == [c for c, _ in wanted]
    for (_, got), (_, want) in zip(shown, wanted, strict=True):
        if "code" in want:  # a style whose marker is in the code is left off
            assert got - {"code"} <= want - {"code"}
        else:
            assert got == want
    assert marks(nodes) == []


@settings(max_examples=300, deadline=None)
@given(text=_TEXT_ST)
def test_escape_shows_any_text_as_written(text: str) -> None:
    source = escape(text)
    nodes = render(source)
    assert visible(nodes) == re.sub(r"\r\n?", "\n", text)
    assert marks(nodes) == []
    assert not PINGS.search(source)
    assert all(r.styles == frozenset() for r in runs(nodes))


def test_mentions_in_text_are_broken_and_bare_links_unfurl_nothing() -> None:
    source = escape("ping @everyone and @here, <@123> <@&4> <#5> see https://x.example/a_b.")
    assert not PINGS.search(source)
    assert "<https://x.example/a_b>." in source  # linked, no embed; the period is prose
    assert visible(render(source)) == (
        "ping @everyone and @here, <@123> <@&4> <#5> see https://x.example/a_b."
    )
    # an address holding a mention is not kept as a link: it is text like the rest
    assert not PINGS.search(escape("https://x.example/@everyone"))


# -- measuring and splitting --------------------------------------------------------------


def test_measure_counts_the_source_as_discord_counts_its_limit() -> None:
    blocks: Blocks = (p(Span(text="a*b", bold=True)),)
    assert measure(blocks) == len("**a\\*b**")
    assert measure((p("😀"),)) == 2  # UTF-16: never fewer than Discord counts


def test_a_long_reply_splits_under_2000_with_each_code_piece_reopened() -> None:
    script = "\n".join(f"    step_{n:04}()  # {'x' * 30} ``` @here" for n in range(220))
    blocks: Blocks = (p("Here is the ", Span(text="whole", bold=True), " script:"),
                      Code(code=script, language="python"), p("Done."))  # fmt: skip
    assert measure(blocks) > 2 * LIMIT
    pieces = split(blocks, LIMIT, measure)
    assert len(pieces) >= 3
    sources = [blocks_markdown(piece) for piece in pieces]
    assert all(len(s.encode("utf-16-le")) // 2 <= LIMIT for s in sources)
    fences = []
    for source in sources:
        nodes = render(source)
        found = [n for n in nodes if isinstance(n, Fence)]
        assert len(found) <= 1
        fences += found
    assert len(fences) >= 2
    assert {f.language for f in fences} == {"python"}
    assert "\n".join(f.code.replace(ZWSP, "") for f in fences) == script
    assert visible(render(sources[0])).startswith("Here is the whole script:")
    assert visible(render(sources[-1])).endswith("Done.")


def test_a_paragraph_of_markup_characters_splits_under_2000_and_reads_whole() -> None:
    text = " ".join(["*_~|<@123>#"] * 400)  # the escapes more than double it
    pieces = split((p(text),), LIMIT, measure)
    assert len(pieces) >= 3
    assert all(measure(piece) <= LIMIT for piece in pieces)
    shown = [visible(render(blocks_markdown(piece))) for piece in pieces]
    assert " ".join(shown) == text
