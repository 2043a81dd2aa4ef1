"""The message model: the agent's markdown parsed into blocks, split at a platform's limit
without losing its structure, redacted string by string, and carried by the outbox across a
restart.

What a person would notice: no `**` or `##` in a Telegram thread, a code block that stays a
code block (of the same language) when the message is split, a numbered list that goes on
counting in the next message, and no secret anywhere in the structure.
"""

from __future__ import annotations

import asyncio
import random
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aep_bridge.aep.envelope import Event
from aep_bridge.aep.redaction import RedactionPolicy, Redactor
from aep_bridge.aep.validation import validate_event
from aep_bridge.contract.types import ChannelConfig, OutgoingMessage, RateLimits
from aep_bridge.markup import (
    Block,
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
    map_text,
    parse_markdown,
    plain,
    spans_text,
    split,
)
from aep_bridge.outbox import Job, Outbox
from aep_bridge.render import Renderer
from aep_bridge.store import Store
from aep_bridge.testing import FakeCore, MemoryChannel
from tests.core.doubles import VirtualTime

#: the issue's own example of what agents write, shown raw on Telegram before
REPLY = """## Fixed: invoice rounding

**Root cause:** `round()` rounds half to even; see [decimal docs](https://docs.python.org/3/library/decimal.html).

| file | callers |
|---|---|
| billing/invoice.py | 3 |
| billing/tax.py | 1 |

- changed `total()`
  - kept the old name as an alias
- added a test

```python
total = quantize(amount, Decimal("0.01"))
```
"""

SECRET = "sk-live-9f8e7d6c5b4a3f2e1d0c"


def _plain_len(blocks: Blocks) -> int:
    return len(plain(blocks))


def _redactor() -> Redactor:
    return Redactor(RedactionPolicy(home="/nonexistent-home"))


# -- parsing --------------------------------------------------------------------------------


def test_the_issues_examples_are_parsed_into_structure() -> None:
    heading, cause, table, bullets, code = parse_markdown(REPLY)

    assert heading == Heading(level=2, spans=(Span(text="Fixed: invoice rounding"),))
    assert isinstance(cause, Paragraph)
    assert cause.spans[0] == Span(text="Root cause:", bold=True)
    assert Span(text="round()", code=True) in cause.spans
    assert (
        Span(text="decimal docs", url="https://docs.python.org/3/library/decimal.html")
        in cause.spans
    )

    assert isinstance(table, Table)
    assert [spans_text(cell) for cell in table.header] == ["file", "callers"]
    assert [[spans_text(cell) for cell in row] for row in table.rows] == [
        ["billing/invoice.py", "3"],
        ["billing/tax.py", "1"],
    ]

    assert isinstance(bullets, ListBlock)
    assert not bullets.ordered
    first, second = bullets.items
    assert first[0] == Paragraph(spans=(Span(text="changed "), Span(text="total()", code=True)))
    nested = first[1]
    assert isinstance(nested, ListBlock)
    assert nested.items == ((Paragraph(spans=(Span(text="kept the old name as an alias"),)),),)
    assert second == (Paragraph(spans=(Span(text="added a test"),)),)

    assert code == Code(code='total = quantize(amount, Decimal("0.01"))', language="python")


def test_plain_text_of_agent_markdown_has_no_raw_markers() -> None:
    text = plain(parse_markdown(REPLY))
    for marker in ("**", "## ", "](", "`", "|---", "```", "- changed"):
        assert marker not in text, marker
    for words in ("Fixed: invoice rounding", "Root cause: round() rounds", "decimal docs"):
        assert words in text
    assert "• changed total()\n  • kept the old name as an alias" in text


def test_styles_breaks_quotes_and_ordered_lists() -> None:
    blocks = parse_markdown(
        "*one* and ~~two~~ and ***three***\nsoft  \nhard\n\n"
        "> quoted\n>\n> > deeper\n\n"
        "3. third\n4. fourth\n\n---\n\n    indented code\n\n~~~ sh extra words\nls -la\n~~~\n"
    )
    para, quote, ordered, rule, indented, fenced = blocks
    assert isinstance(para, Paragraph)
    assert para.spans == (
        Span(text="one", italic=True),
        Span(text=" and "),
        Span(text="two", strike=True),
        Span(text=" and "),
        Span(text="three", bold=True, italic=True),
        Span(text=" soft\nhard"),  # a soft break is a space, a hard break a line break
    )
    assert quote == Quote(
        blocks=(
            Paragraph(spans=(Span(text="quoted"),)),
            Quote(blocks=(Paragraph(spans=(Span(text="deeper"),)),)),
        )
    )
    assert isinstance(ordered, ListBlock)
    assert (ordered.ordered, ordered.start, len(ordered.items)) == (True, 3, 2)
    assert isinstance(rule, Rule)
    assert indented == Code(code="indented code")
    assert fenced == Code(code="ls -la", language="sh")


def test_html_stays_literal_text_and_an_image_is_a_link() -> None:
    blocks = parse_markdown(
        '<div onclick="x()">block</div>\n\n'
        "see <b>this</b> ![the chart](https://x.test/c.png) &amp; \\*\n"
    )
    html, para = blocks
    assert html == Paragraph(spans=(Span(text='<div onclick="x()">block</div>'),))
    assert isinstance(para, Paragraph)
    assert spans_text(para.spans) == "see <b>this</b> the chart & *"
    assert Span(text="the chart", url="https://x.test/c.png") in para.spans
    assert all(not span.bold for span in para.spans), "inline HTML is never markup"


# -- splitting ------------------------------------------------------------------------------


def test_a_long_code_block_is_split_at_lines_each_part_code_of_its_language() -> None:
    lines = [f"line_{n} = compute({n})" for n in range(40)]
    blocks = (Paragraph(spans=(Span(text="Here:"),)), Code(code="\n".join(lines), language="py"))
    pieces = split(blocks, 200, _plain_len)
    assert len(pieces) > 2
    assert all(_plain_len(piece) <= 200 for piece in pieces)
    codes = [block for piece in pieces for block in piece if isinstance(block, Code)]
    assert all(code.language == "py" for code in codes)
    assert [line for code in codes for line in code.code.split("\n")] == lines  # whole lines


def test_a_numbered_list_split_goes_on_counting() -> None:
    items = tuple((Paragraph(spans=(Span(text=f"step number {n} of many"),)),) for n in range(30))
    pieces = split((ListBlock(ordered=True, start=5, items=items),), 120, _plain_len)
    assert len(pieces) > 2
    numbers: list[int] = []
    for piece in pieces:
        [block] = piece
        assert isinstance(block, ListBlock)
        numbers += range(block.start, block.start + len(block.items))
    assert numbers == list(range(5, 35))
    assert "5. step number 0" in plain(pieces[0])
    assert plain(pieces[1]).startswith(f"{pieces[1][0].start}. step number")  # type: ignore[union-attr]


def test_a_table_split_repeats_its_header() -> None:
    header = ((Span(text="file"),), (Span(text="callers"),))
    rows = tuple(((Span(text=f"src/module_{n}.py"),), (Span(text=str(n)),)) for n in range(30))
    pieces = split((Table(header=header, rows=rows),), 150, _plain_len)
    assert len(pieces) > 2
    kept = []
    for piece in pieces:
        [table] = piece
        assert isinstance(table, Table)
        assert table.header == header
        kept += table.rows
    assert tuple(kept) == rows


def test_a_paragraph_splits_at_spaces_keeping_each_runs_style() -> None:
    spans = tuple(
        Span(text=f"word{n} " * 5, bold=n % 2 == 0, url="https://x.test" if n % 3 == 0 else None)
        for n in range(20)
    )
    pieces = split((Paragraph(spans=spans),), 80, _plain_len)
    assert len(pieces) > 3
    styled = [
        (word, span.bold, span.url)
        for piece in pieces
        for block in piece
        for span in block.spans  # type: ignore[union-attr]
        for word in span.text.split()
    ]
    assert styled == [(word, span.bold, span.url) for span in spans for word in span.text.split()]
    for piece in pieces:  # cut at spaces: no word in two
        assert all(word.startswith("word") for word in plain(piece).split())


def test_quotes_and_details_split_between_their_blocks() -> None:
    inner = tuple(Paragraph(spans=(Span(text=f"paragraph {n} " + "x" * 30),)) for n in range(10))
    for container in (Quote(blocks=inner), Details(summary="Output", blocks=inner)):
        pieces = split((container,), 100, _plain_len)
        assert len(pieces) > 2
        kept: list[Block] = []
        for piece in pieces:
            [block] = piece
            assert type(block) is type(container)
            if isinstance(block, Details):
                assert block.summary == "Output"
            kept += block.blocks  # type: ignore[union-attr]
        assert tuple(kept) == inner


def test_a_word_longer_than_the_limit_is_cut_and_tiny_limits_terminate() -> None:
    word = "a" * 50
    pieces = split((Paragraph(spans=(Span(text=word, bold=True),)),), 8, _plain_len)
    assert all(_plain_len(piece) <= 8 for piece in pieces)
    assert "".join(plain(piece) for piece in pieces) == word
    everything = (
        *parse_markdown(REPLY),
        Diff(path="a.py", unified="-x\n+y", added=1, removed=1),
        Details(summary="more", blocks=(Rule(),)),
    )
    for limit in (1, 2, 3, 5):
        pieces = split(everything, limit, _plain_len)
        assert all(piece for piece in pieces)
        assert all(_fits_or_one_character(piece, limit) or _tabled(piece) for piece in pieces)


def _fits_or_one_character(piece: Blocks, limit: int) -> bool:
    """Over the limit only as one character that cannot be split (with its frame: a
    header's rule line, a list's marker)."""
    return _plain_len(piece) <= limit or len(re.sub(r"[\s\-•>.\d—]", "", plain(piece))) <= 1


def test_a_diff_is_split_between_lines() -> None:
    unified = "\n".join(f"+added line {n}" for n in range(30))
    pieces = split((Diff(path="app.py", unified=unified, added=30),), 120, _plain_len)
    assert len(pieces) > 2
    diffs = [block for piece in pieces for block in piece]
    assert all(isinstance(d, Diff) and d.path == "app.py" for d in diffs)
    assert "\n".join(d.unified for d in diffs) == unified  # type: ignore[union-attr]


def test_split_packs_whole_blocks_and_never_makes_an_empty_piece() -> None:
    blocks = parse_markdown(REPLY)
    assert split(blocks, 10_000, _plain_len) == [blocks]
    assert split((), 10, _plain_len) == []
    with pytest.raises(ValueError, match="limit"):
        split(blocks, 0, _plain_len)


# -- the property: random block trees, random limits --------------------------------------

_word = st.text(alphabet="abcdefghij", min_size=1, max_size=14)
_phrase = st.lists(_word, min_size=1, max_size=12).map(" ".join)
_span = st.builds(
    Span,
    text=_phrase,
    bold=st.booleans(),
    italic=st.booleans(),
    code=st.booleans(),
    url=st.none() | st.just("https://x.test/doc"),
)
_spans = st.lists(_span, min_size=1, max_size=4).map(tuple)
_short_cell = st.lists(_word.map(lambda w: w[:6]), min_size=1, max_size=1).map(
    lambda words: (Span(text=words[0]),)
)
_leaf = st.one_of(
    st.builds(Paragraph, spans=_spans),
    st.builds(Heading, level=st.integers(1, 6), spans=_spans),
    st.builds(
        Code,
        code=st.lists(_phrase, min_size=1, max_size=12).map("\n".join),
        language=st.sampled_from(["", "python", "sh"]),
    ),
    st.integers(1, 3).flatmap(
        lambda columns: st.builds(
            Table,
            header=st.lists(_short_cell, min_size=columns, max_size=columns).map(tuple),
            rows=st.lists(
                st.lists(_spans, min_size=columns, max_size=columns).map(tuple), max_size=8
            ).map(tuple),
        )
    ),
    st.builds(Rule),
)


def _containers(children: st.SearchStrategy[Block]) -> st.SearchStrategy[Block]:
    seq = st.lists(children, min_size=1, max_size=4).map(tuple)
    return st.one_of(
        st.builds(
            ListBlock,
            ordered=st.booleans(),
            start=st.integers(1, 20),
            items=st.lists(seq, min_size=1, max_size=6).map(tuple),
        ),
        st.builds(Quote, blocks=seq),
        st.builds(Details, summary=_word.map(lambda w: w[:8]), blocks=seq),
    )


_block = st.recursive(_leaf, _containers, max_leaves=12)
_blocks = st.lists(_block, min_size=1, max_size=6).map(tuple)


def _content(blocks: Blocks) -> list[tuple[str, tuple[Any, ...]]]:
    """What a split must keep, in order: every visible character with its style, but not
    the whitespace at the cuts nor what a split repeats (a table's header, a summary)."""
    out: list[tuple[str, tuple[Any, ...]]] = []
    for block in blocks:
        if isinstance(block, Paragraph | Heading):
            for span in block.spans:
                style = (span.bold, span.italic, span.code, span.strike, span.url)
                out += [(c, style) for c in span.text if not c.isspace()]
        elif isinstance(block, Code):
            out += [(c, ("code", block.language)) for c in block.code if not c.isspace()]
        elif isinstance(block, ListBlock):
            for item in block.items:
                out += _content(item)
        elif isinstance(block, Quote | Details):
            out += _content(block.blocks)
        elif isinstance(block, Table):
            for row in block.rows:
                for cell in row:
                    out += _content((Paragraph(spans=cell),))
    return out


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(blocks=_blocks, limit=st.integers(60, 400))
def test_any_block_tree_splits_within_the_limit_losing_and_reordering_nothing(
    blocks: Blocks, limit: int
) -> None:
    pieces = split(blocks, limit, _plain_len)
    assert all(piece for piece in pieces), "never an empty piece"
    assert all(_plain_len(piece) <= limit for piece in pieces)
    kept = [c for piece in pieces for c in _content(piece)]
    assert kept == _content(blocks)


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(blocks=_blocks, limit=st.integers(1, 60))
def test_any_block_tree_splits_at_any_limit_and_terminates(blocks: Blocks, limit: int) -> None:
    pieces = split(blocks, limit, _plain_len)
    assert all(piece for piece in pieces)
    for piece in pieces:
        assert _fits_or_one_character(piece, limit) or _tabled(piece), piece


def _tabled(piece: Blocks) -> bool:
    """A known gap, below any real platform's limit: a table whose header row alone is wider
    than the limit goes out whole, over it (the split terminates all the same)."""
    return any(isinstance(block, Table) for block in piece)


# -- redaction --------------------------------------------------------------------------------


def test_map_text_reaches_every_string_a_person_would_see() -> None:
    secretive = (
        Heading(spans=(Span(text=f"h {SECRET}"),)),
        Paragraph(spans=(Span(text="docs", url=f"https://x.test/?key={SECRET}"),)),
        Code(code=f"export KEY={SECRET}", language="sh"),
        ListBlock(items=((Quote(blocks=(Paragraph(spans=(Span(text=SECRET),)),)),),)),
        Table(header=((Span(text=SECRET),),), rows=(((Span(text=f"cell {SECRET}"),),),)),
        Details(summary=SECRET, blocks=(Paragraph(spans=(Span(text=SECRET),)),)),
        Diff(path=f"{SECRET}.txt", unified=f"+{SECRET}"),
    )
    cleaned = map_text(secretive, _redactor().text)
    dump = str([block.model_dump() for block in cleaned])
    assert SECRET not in dump
    assert dump.count("[REDACTED:secret]") == 10
    assert cleaned[2] == Code(code="export KEY=[REDACTED:secret]", language="sh")


_seq = iter(range(1, 10**9))


def _event(type_: str, data: dict[str, Any]) -> Event:
    return validate_event(
        {
            "aep": "0.1",
            "id": f"M{next(_seq)}",
            "type": type_,
            "time": "2026-07-03T10:00:00Z",
            "source": "aep://host/agent/claude-code/session/s1",
            "agent": "claude-code",
            "session": "s1",
            "seq": next(_seq),
            "capture": "full",
            "data": data,
        }
    )


def test_the_agents_reply_is_rendered_as_blocks_with_plain_text() -> None:
    rendered = Renderer(_redactor()).render(
        _event("message.agent.replied", {"message_id": "m1", "text": REPLY}),
        ceiling="full",
        verbosity="normal",
    )
    [message] = rendered.messages
    assert message.blocks == parse_markdown(REPLY)
    assert message.text == plain(message.blocks)
    assert "**" not in message.text
    assert "## " not in message.text


def test_the_users_message_and_a_run_summary_are_blocks_too() -> None:
    renderer = Renderer(_redactor())
    [user] = renderer.render(
        _event("message.user.submitted", {"message_id": "m0", "text": "Please fix **this**"}),
        ceiling="full",
        verbosity="normal",
    ).messages
    assert user.text == "User: Please fix this"
    assert user.blocks[0].spans[0] == Span(text="User:", bold=True)  # type: ignore[union-attr]
    assert Span(text="this", bold=True) in user.blocks[0].spans  # type: ignore[union-attr]

    finished = renderer.render(
        _event("run.finished", {"summary": "## Done\n\n- fixed `a`", "duration_ms": 1200}),
        ceiling="full",
        verbosity="normal",
    ).messages
    summary = next(m for m in finished if m.type == "text")
    assert summary.text == "Done\n\n• fixed a\n\nFinished in 1.2 s"
    assert isinstance(summary.blocks[0], Heading)


def test_secrets_in_code_links_and_cells_never_reach_the_blocks() -> None:
    reply = (
        f"Set it:\n\n```sh\nexport API_KEY={SECRET}\n```\n\n"
        f"[console](https://x.test/?token={SECRET})\n\n| key |\n|---|\n| {SECRET} |\n"
    )
    [message] = (
        Renderer(_redactor())
        .render(
            _event("message.agent.replied", {"message_id": "m1", "text": reply}),
            ceiling="full",
            verbosity="normal",
        )
        .messages
    )
    assert SECRET not in message.model_dump_json()
    code = next(b for b in message.blocks if isinstance(b, Code))
    assert code.code == "export API_KEY=[REDACTED:secret]"


def test_a_plugins_blocks_pass_the_last_redaction_pass() -> None:
    def hook(event: Event, verbosity: str) -> list[OutgoingMessage]:
        blocks = (
            Code(code=f"token {SECRET}"),
            Paragraph(spans=(Span(text="see", url=f"https://x.test/{SECRET}"),)),
            Table(rows=(((Span(text=SECRET),),),)),
        )
        return [OutgoingMessage(type="text", text="stale", blocks=blocks)]

    event = _event("x.acme.deploy.done", {"target": "prod"})
    [message] = (
        Renderer(_redactor(), vendor=hook)
        .render(event, ceiling="full", verbosity="verbose")
        .messages
    )
    assert SECRET not in message.model_dump_json()
    assert message.text == plain(message.blocks)


# -- the outbox ----------------------------------------------------------------------------


class Shown(MemoryChannel):
    """A channel whose markup costs: each block counts 20 more than its plain text (as
    Telegram's HTML tags do), and every message it was given is kept."""

    def __init__(self, vt: VirtualTime, max_length: int = 300) -> None:
        super().__init__(FakeCore(), ChannelConfig(name="shown"))
        self.capabilities = MemoryChannel.capabilities.model_copy(
            update={"rate_limits": RateLimits(), "max_message_length": max_length}
        )
        self.vt = vt
        self.given: list[OutgoingMessage] = []
        self.hold: asyncio.Event | None = None

    def measure(self, blocks: Blocks) -> int:
        return len(plain(blocks)) + 20 * len(blocks)

    async def send_message(self, session_id: str, content: OutgoingMessage) -> None:
        if self.hold is not None:
            await self.hold.wait()
        self.given.append(content)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store.open(tmp_path / "state")
    yield opened
    opened.close()


def _outbox(adapter: Shown, store: Store) -> Outbox:
    return Outbox(
        adapter, store, clock=adapter.vt.clock, sleep=adapter.vt.sleep, rng=random.Random(7)
    )


def _long_reply() -> Blocks:
    steps = "\n".join(f"{n}. step {n} of the fix, explained at some length" for n in range(1, 25))
    code = "\n".join(f"value_{n} = compute({n})" for n in range(30))
    return parse_markdown(f"## Fixed\n\n{steps}\n\n```python\n{code}\n```\n")


async def test_a_long_message_with_blocks_is_split_by_the_adapters_measure(
    store: Store,
) -> None:
    adapter = Shown(VirtualTime())
    outbox = _outbox(adapter, store)
    await outbox.start()
    blocks = _long_reply()
    reply = OutgoingMessage(type="text", text=plain(blocks), blocks=blocks, notify=True)
    outbox.submit(Job.message("s1", reply))
    await asyncio.wait_for(outbox.idle(), 30)
    await outbox.stop()
    pieces = adapter.given
    assert len(pieces) > 3
    for piece in pieces:
        assert adapter.measure(piece.blocks) <= 300  # the adapter's own measure
        assert piece.text == plain(piece.blocks)
    assert [p.notify for p in pieces] == [False] * (len(pieces) - 1) + [True]
    lists = [b for p in pieces for b in p.blocks if isinstance(b, ListBlock)]
    assert [lb.start for lb in lists] == sorted({lb.start for lb in lists})
    assert sum(len(lb.items) for lb in lists) == 24
    codes = [b for p in pieces for b in p.blocks if isinstance(b, Code)]
    assert len(codes) > 1
    assert all(c.language == "python" for c in codes)


async def test_an_edit_with_blocks_too_long_keeps_its_first_piece_and_ends_with_an_ellipsis(
    store: Store,
) -> None:
    adapter = Shown(VirtualTime())
    outbox = _outbox(adapter, store)
    await outbox.start()
    blocks = _long_reply()
    outbox.submit(
        Job.message("s1", OutgoingMessage(type="text", text="x", blocks=blocks, key="card"))
    )
    await asyncio.wait_for(outbox.idle(), 30)
    await outbox.stop()
    [shown] = adapter.given
    assert adapter.measure(shown.blocks) <= 300
    assert shown.blocks[0] == blocks[0]
    assert shown.blocks[-1] == Paragraph(spans=(Span(text="…"),))
    assert shown.text == plain(shown.blocks)
    assert shown.text.endswith("…")


async def test_blocks_survive_the_outbox_table_and_a_restart(store: Store) -> None:
    vt = VirtualTime()
    first = Shown(vt, max_length=4096)
    first.hold = asyncio.Event()  # the platform hangs until the process "dies"
    outbox = _outbox(first, store)
    blocks = parse_markdown(REPLY)
    outbox.submit(
        Job.message("s1", OutgoingMessage(type="text", text=plain(blocks), blocks=blocks))
    )
    await outbox.start()
    await asyncio.sleep(0.05)
    await outbox.stop(flush_timeout=0)
    assert not first.given

    second = Shown(vt, max_length=4096)
    restarted = _outbox(second, store)
    await restarted.start()
    await asyncio.wait_for(restarted.idle(), 30)
    await restarted.stop()
    [shown] = second.given
    assert shown.blocks == blocks
    assert shown.text == plain(blocks)


_SENTENCE = st.text(
    alphabet=st.sampled_from(list("aZq09 ,.:;?!'\"/()%*_`[]<>#-+|~\\&\n=")), min_size=1, max_size=30
)


@given(_SENTENCE)
@settings(max_examples=400, deadline=None)
def test_a_sentence_reads_the_same_whether_or_not_it_skips_the_parser(text: str) -> None:
    """Plain sentences skip the CommonMark parser: what a person sees must not change."""
    from aep_bridge import markup

    parsed, _ = markup._parse_blocks(markup._MD.parse(text), 0, "")
    assert parse_markdown(text) == parsed


#: lines of plain words and code spans whose content is anything but a line break
_WITH_CODE = st.lists(
    st.one_of(
        st.text(alphabet=st.sampled_from(list("aZ09 ,.:;?!'\"/()%")), min_size=1, max_size=8),
        st.text(
            alphabet=st.sampled_from(list("az *_[]<>#-\\&`~|!\t\u00a0\u00e9")),
            min_size=0,
            max_size=8,
        ).map(lambda code: f"`{code}`"),
    ),
    min_size=1,
    max_size=6,
).map("".join)


@given(_WITH_CODE)
@settings(max_examples=600, deadline=None)
def test_a_sentence_with_code_reads_the_same_whether_or_not_it_skips_the_parser(
    text: str,
) -> None:
    """A sentence naming a command (`make deploy`) skips the parser when it can: what a
    person sees must not change."""
    from aep_bridge import markup

    parsed, _ = markup._parse_blocks(markup._MD.parse(text), 0, "")
    assert parse_markdown(text) == parsed


def test_a_sentence_naming_a_command_skips_the_parser() -> None:
    from aep_bridge import markup

    text = "Run `make deploy` in `~/src/app` (ref 12)?"
    assert markup._CODE_LINE.fullmatch(text)
    assert parse_markdown(text) == (
        Paragraph(
            spans=(
                Span(text="Run "),
                Span(text="make deploy", code=True),
                Span(text=" in "),
                Span(text="~/src/app", code=True),
                Span(text=" (ref 12)?"),
            )
        ),
    )


@pytest.mark.parametrize(
    "text", ["Turn 0: the tests pass now.", "It's done (all 12 tests pass)!", "see http://x.y/z"]
)
def test_a_plain_sentence_is_one_plain_paragraph(text: str) -> None:
    from aep_bridge import markup

    assert markup._PLAIN_LINE.fullmatch(text)
    assert parse_markdown(text) == (Paragraph(spans=(Span(text=text),)),)
