"""Tool output, diffs, the plan and errors as Discord embeds, sent by the real channel to the
fake Discord (which refuses what Discord refuses): the reference session's activity reads as
its lines with an embed for each output or diff, within every limit; a huge output is cut to
the limits keeping its failing last lines; an activity edited in place edits its embeds; what
does not fit in embeds stays in the content, and the outbox splits by the content."""

from __future__ import annotations

import re
from typing import Any

import discord
import pytest

from aep_bridge import OutgoingMessage
from aep_bridge.aep.redaction import Redactor
from aep_bridge.commands.preview_command import read_events
from aep_bridge.demo import recorded
from aep_bridge.markup import Code, Details, Diff, Paragraph, Span
from aep_bridge.render import Renderer

from .fake_discord import TEXT_CHANNEL_ID, FakeDiscord, FakeMessage, Limits
from .probe import shown
from .test_discord_channel import started
from .test_discord_markdown import render, visible

SESSION = "s-embeds"
#: pytest's last line in the demo's failing run
FAILING_ASSERTION = "FAILED tests/test_totals.py::test_rounding - assert 10.0 == 10.01"
#: a raw markdown marker or JSON in what a person reads (the rendering issue's list)
RAW = re.compile(r"(?m)\*\*|^#{1,6} |\]\(http|\{\"|\[\{|```")


def _thread_messages(fake: FakeDiscord) -> list[FakeMessage]:
    (thread,) = fake.threads(TEXT_CHANNEL_ID)
    return fake.messages(thread.id, from_bot=True)


def _prose(message: FakeMessage) -> str:
    """What a person reads outside code blocks, in the content and every embed (whose
    fences must all close: code is literal, so what is inside them is not checked)."""
    embeds = message.embeds
    parts = [message.content]
    for embed in embeds:
        parts += [embed.get("title", ""), embed.get("description", "")]
        parts.append((embed.get("footer") or {}).get("text", ""))
    for part in parts:
        assert part.count("```") % 2 == 0, part
    return "\n".join(visible(render(re.sub(r"(?s)```.*?```", "", part))) for part in parts)


def _within_limits(message: FakeMessage) -> None:
    """Discord's limits, checked here too (the fake refuses them as well)."""
    assert len(message.content) <= 2000
    assert len(message.embeds) <= 10
    total = 0
    for embed in message.embeds:
        title = embed.get("title", "")
        description = embed.get("description", "")
        footer = (embed.get("footer") or {}).get("text", "")
        assert len(title) <= 256
        assert len(description) <= 4096
        assert len(footer) <= 2048
        assert 0 <= embed.get("color", 0) <= 0xFFFFFF
        total += len(title) + len(description) + len(footer)
    assert total <= 6000


def _demo_messages() -> list[OutgoingMessage]:
    """Every message the core renders for the demo at the default verbosity, each version
    of an edited one in turn, as a channel that edits in place gets them."""
    renderer = Renderer(Redactor())
    out: list[OutgoingMessage] = []
    for event in read_events(recorded().encode(), "demo"):
        rendered = renderer.render(
            event,
            ceiling="redacted",
            verbosity="normal",
            notify={"questions", "final_replies"},
            edits=True,
        )
        out.extend(rendered.messages)
    return out


def _line(icon: str, tool: str, what: str, summary: str = "") -> Paragraph:
    spans = [Span(text=f"{icon} "), Span(text=tool, bold=True), Span(text=" "), Span(text=what)]
    if summary:
        spans.append(Span(text=f" — {summary}", italic=True))
    return Paragraph(spans=tuple(spans))


def _activity(*blocks: Any) -> OutgoingMessage:
    return OutgoingMessage(
        type="tool_update", text="", blocks=blocks, key="activity:1", metadata={"activity": True}
    )


async def test_the_reference_session_shows_its_tool_activity_as_embeds_within_limits() -> None:
    async with FakeDiscord(limits=Limits.loose()) as fake:
        async with started(fake) as (adapter, core):
            await core.create_thread(adapter, SESSION, "Fix the CSV export totals")
            for message in _demo_messages():
                await adapter.send_message(SESSION, message)
        assert fake.violations == []
        messages = _thread_messages(fake)
    for message in messages:
        _within_limits(message)
    with_embeds = [m for m in messages if m.embeds]
    titles = [e.get("title", "") for m in with_embeds for e in m.embeds]
    # the failing test run: a red embed titled with its line, pytest's last line in it
    failing = next(
        e for m in with_embeds for e in m.embeds if FAILING_ASSERTION in e.get("description", "")
    )
    assert failing["color"] == 0xED4245
    assert failing["title"].startswith("❌")
    assert "pytest" in failing["title"]
    # each edit's diff is a green embed with a diff code block
    diffs = [e for m in with_embeds for e in m.embeds if "```diff" in e.get("description", "")]
    assert len(diffs) >= 3
    assert all(e["color"] == 0x57F287 for e in diffs)
    assert any("+    return amount.quantize(CENT" in e["description"] for e in diffs)
    # the plan is an embed of its own
    assert "📋 Plan" in titles
    # every call still has its line in the content, in order, outputs and diffs only below
    activity = next(m for m in messages if FAILING_ASSERTION in shown(m))
    lines = [x for x in activity.content.splitlines() if x.startswith(("✅", "❌"))]
    assert len(lines) == 5
    assert lines[-1].startswith("❌")
    assert FAILING_ASSERTION not in activity.content
    # the run's closing line is a small line under the last reply
    assert any(
        x.startswith("-# Finished in 1m 23s") for m in messages for x in m.content.splitlines()
    )
    # what a person reads shows no raw markup, in the content or in any embed
    for message in messages:
        assert not RAW.search(_prose(message)), _prose(message)


async def test_a_huge_output_is_cut_to_the_embed_limits_keeping_its_failing_last_lines() -> None:
    output = "\n".join(f"line {n}: " + "x" * 60 for n in range(3000)) + "\nFAILED boom: 1 != 2"
    message = _activity(
        _line("✅", "Read", "a.py"),
        _line("❌", "Bash", "make test", "exit 2"),
        Details(summary="last lines", blocks=(Code(code=output),)),
    )
    async with FakeDiscord(limits=Limits.loose()) as fake:
        async with started(fake) as (adapter, core):
            await core.create_thread(adapter, SESSION, "huge")
            await adapter.send_message(SESSION, message)
        assert fake.violations == []
        (sent,) = _thread_messages(fake)
    _within_limits(sent)
    (embed,) = sent.embeds
    description = embed["description"]
    assert len(description) <= 4096
    assert description.rstrip("`\n").endswith("FAILED boom: 1 != 2")
    assert "line 2999: " in description  # the lines just before it too
    assert description.startswith("…")  # and it says it was cut
    assert embed["color"] == 0xED4245
    assert embed["footer"]["text"] == "last lines"
    assert visible(render(description)).count("FAILED boom") == 1
    assert [x for x in sent.content.splitlines() if x] == [
        "✅ **Read** a.py",
        "❌ **Bash** make test *— exit 2*",
    ]


async def test_ten_outputs_share_the_six_thousand_and_each_keeps_its_end() -> None:
    blocks: list[Any] = []
    for n in range(12):
        blocks.append(_line("❌", "Bash", f"step {n}", "exit 1"))
        lines = "\n".join(f"{n}: output line {k} " + "y" * 40 for k in range(80))
        blocks.append(Details(summary="error", blocks=(Code(code=f"{lines}\nEND OF {n}"),)))
    message = OutgoingMessage(type="tool_update", text="", blocks=tuple(blocks))
    async with FakeDiscord(limits=Limits.loose()) as fake:
        async with started(fake) as (adapter, core):
            await core.create_thread(adapter, SESSION, "many")
            await adapter.send_message(SESSION, message)
        assert fake.violations == []
        sent = _thread_messages(fake)
    for each in sent:
        _within_limits(each)
    embeds = [e for m in sent for e in m.embeds]
    # the first ten are embeds, the two beyond are no loss: they are in the content
    assert len(sent[0].embeds) == 10
    for n in range(10):
        assert embeds[n]["description"].rstrip("`\n").endswith(f"END OF {n}")
    text = "\n".join(shown(m) for m in sent)
    assert "END OF 10" in text
    assert "END OF 11" in text
    assert "1: output line 79" in text


async def test_an_activity_edited_in_place_edits_its_embeds() -> None:
    running = _activity(_line("⏳", "Bash", "make test"))
    failed = _activity(
        _line("❌", "Bash", "make test", "exit 2"),
        Details(summary="error", blocks=(Code(code="E   assert 1 == 2\nFAILED t.py::test"),)),
    )
    more = _activity(
        _line("❌", "Bash", "make test", "exit 2"),
        Details(summary="error", blocks=(Code(code="E   assert 1 == 2\nFAILED t.py::test"),)),
        _line("✅", "Edit", "t.py", "+1 −1"),
        Details(summary="diff", blocks=(Diff(path="t.py", unified="-a\n+b", added=1, removed=1),)),
    )
    async with FakeDiscord(limits=Limits.loose()) as fake:
        async with started(fake) as (adapter, core):
            await core.create_thread(adapter, SESSION, "edits")
            for version in (running, failed, more):
                await adapter.send_message(SESSION, version)
        assert fake.violations == []
        (sent,) = _thread_messages(fake)  # one message, edited twice
    assert [len(v.embeds) for v in sent.edits] == [0, 1]
    assert [e["color"] for e in sent.embeds] == [0xED4245, 0x57F287]
    assert "FAILED t.py::test" in sent.embeds[0]["description"]
    assert sent.embeds[1]["description"] == "```diff\n-a\n+b\n```"
    assert sent.content.splitlines() == [
        "❌ **Bash** make test *— exit 2*",
        "✅ **Edit** t.py *— +1 −1*",
    ]
    # and a version without outputs takes the embeds away again
    async with FakeDiscord(limits=Limits.loose()) as fake:
        async with started(fake) as (adapter, core):
            await core.create_thread(adapter, SESSION, "edits")
            for version in (failed, running):
                await adapter.send_message(SESSION, version)
        (sent,) = _thread_messages(fake)
    assert sent.embeds == []
    assert sent.content == "⏳ **Bash** make test"


async def test_the_outbox_measures_the_content_not_what_goes_into_embeds() -> None:
    output = Details(summary="output", blocks=(Code(code="z" * 3000),))
    blocks = (_line("✅", "Bash", "make"), output)
    async with FakeDiscord(limits=Limits.loose()) as fake:
        async with started(fake) as (adapter, core):
            await core.create_thread(adapter, SESSION, "measure")
            assert adapter.measure(blocks) == len("✅ **Bash** make")
            # eleven outputs: the eleventh is in the content, and counts there
            many = tuple(b for _ in range(11) for b in blocks)
            assert adapter.measure(many) > 3000
            await adapter.send_message(
                SESSION, OutgoingMessage(type="tool_update", text="", blocks=many)
            )
        assert fake.violations == []
        sent = _thread_messages(fake)
    assert len(sent) >= 2  # split by its content, each part within 2000
    for each in sent:
        _within_limits(each)


async def test_an_error_is_a_red_embed_and_agent_text_stays_inert() -> None:
    error = OutgoingMessage(type="error", text="Run failed: **boom** @everyone `x")
    title = _activity(
        _line("❌", "Bash", "echo **hi** ```", "exit 1"),
        Details(summary="error", blocks=(Code(code="```\n@everyone\n```"),)),
    )
    async with FakeDiscord(limits=Limits.loose()) as fake:
        async with started(fake) as (adapter, core):
            await core.create_thread(adapter, SESSION, "errors")
            await adapter.send_message(SESSION, error)
            await adapter.send_message(SESSION, title)
        assert fake.violations == []
        first, second = _thread_messages(fake)
    (embed,) = first.embeds
    assert embed["color"] == 0xED4245
    assert visible(render(embed["title"])) == "⚠️ Run failed: **boom** @everyone `x"
    assert "@\u200beveryone" in embed["title"]  # a mention broken, as everywhere
    assert first.content == ""
    (tool,) = second.embeds
    assert visible(render(tool["title"])).startswith("❌ Bash echo **hi** ```")
    # the output's own fences cannot close the embed's code block early
    assert tool["description"].startswith("```\n")
    assert tool["description"].count("```") == 2


async def test_the_fake_refuses_a_colour_discord_refuses() -> None:
    async with FakeDiscord(limits=Limits.loose()) as fake, started(fake) as (adapter, core):
        await core.create_thread(adapter, SESSION, "colour")
        thread = await adapter.client.fetch_channel(fake.threads(TEXT_CHANNEL_ID)[0].id)
        assert isinstance(thread, discord.Thread)
        with pytest.raises(discord.HTTPException) as caught:
            await thread.send(embed=discord.Embed(title="t", color=0x1000000))
    assert caught.value.code == 50035
    assert "embeds.0.color" in str(caught.value)
