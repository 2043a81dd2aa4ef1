"""What a thread says, in as few calls as fit: plain messages queued one after another in a
session's lane are merged into one where the platform's one-message limit allows. Ahead of a
card (`plan`), so the context a person reads above a question costs about one call, not one
per line; and when a message's slot comes (`at_head`), so a busy agent's lines that waited for
the platform's pace go out together rather than one a slot, falling ever further behind.

Only messages that look alike on every channel merge: `send_message` jobs of one type (a
reply, a thought, a system line or a tool line: `MERGING`), with the same priority and the
same `metadata` but for what describes their own content (`OWN_METADATA`: the tool calls
shown under a reply), no attachment, never tried yet, and all with blocks or all without.
Their texts are joined by a blank line, their blocks concatenated; the merged message
notifies if any of them did, and its metadata is what they agree on, each part's own under
`parts` where they differ.

A keyed message (one the core edits later: a reply a run's footer joins, a stretch of tool
calls) merges only where the outbox can find it again (`merged.MergedPosts`, on a channel that
shows a card's context): as a first post (its session never posted its key before:
`Entry.first`), never the thread's header. The merged message then takes a key of its own
(`merged_key`), and a later edit of one of its parts redraws it whole. A run holding a keyed
message leaves a quarter of the limit free (`KEYED_ROOM`): the footers and late call lines its
parts still take fit there, rather than being cut.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from .. import markup
from ..contract.types import OutgoingMessage
from ..text.text import LengthUnit, measure
from .context import HEADER_KEY
from .jobs import Job, Priority, message_key
from .lanes import Entry

#: the kinds of message that read the same merged: a channel gives a plan, usage, an error, an
#: attachment or the session's end a look (or a meaning: the web page's usage and state) of
#: its own, so those are never merged
MERGING: Final = frozenset({"text", "thought", "system_message", "tool_call", "tool_update"})
#: the key prefix of a merged message that holds keyed parts (`merged.MergedPosts`)
MERGED: Final = "merged:"
#: the share of the limit a run holding a keyed message leaves free for its parts' later edits
KEYED_ROOM: Final = 4  # a quarter


def merged_key(keys: Iterable[str]) -> str:
    """The key of a merged message whose parts have `keys` (in order, at least one): its
    first part's with `MERGED` before it, or that part's own when it is a merged message
    already (it goes on under its key, the others joining it). Unique in its session: a key
    is a first post once."""
    first = next(iter(keys))
    return first if first.startswith(MERGED) else MERGED + first


@dataclass(frozen=True, slots=True)
class Merge:
    """`into` becomes `job` (its call's arguments `args`); `gone` are merged into it."""

    into: Entry
    gone: tuple[Entry, ...]
    job: Job
    args: tuple[Any, ...]


def _message(entry: Entry) -> OutgoingMessage | None:
    """The message of a job that may merge, else None."""
    if (
        entry.op != "send_message"
        or entry.dead
        or entry.in_flight
        or entry.attempts
        or entry.job is None
        or entry.priority is Priority.QUESTION
        or len(entry.args) != 2
    ):
        return None
    content = entry.args[1]
    if not isinstance(content, OutgoingMessage) or content.attachment:
        return None
    if content.type not in MERGING:
        return None
    if entry.job.coalesce is not None or content.key is not None:
        # a later edit must find its part: only a first post (a keyed message whose session
        # never posted its key; `Entry.first`), never the thread's header
        if entry.first is not True or content.key is None:
            return None
        if content.key.startswith(HEADER_KEY) or entry.job.coalesce != message_key(content.key):
            return None
    return content


#: metadata that describes a message's own content (the tool calls shown under a reply):
#: messages that differ only there still look alike, as their blocks show it
OWN_METADATA: Final = frozenset({"activity", "tools", "parts"})


def _alike(a: OutgoingMessage, b: OutgoingMessage) -> bool:
    if a.type != b.type or bool(a.blocks) != bool(b.blocks):
        return False
    if a.metadata == b.metadata:
        return True
    shared = (a.metadata.keys() | b.metadata.keys()) - OWN_METADATA
    return all(a.metadata.get(key) == b.metadata.get(key) for key in shared)


def _metadata(messages: Sequence[OutgoingMessage]) -> dict[str, Any]:
    """A merged message's metadata: what its parts agree on, and each part's own under
    `parts` where they differ (a channel that renders the structure finds it there)."""
    first = messages[0].metadata
    if all(m.metadata == first for m in messages[1:]):
        return first
    common = {
        key: value
        for key, value in first.items()
        if all(key in m.metadata and m.metadata[key] == value for m in messages[1:])
    }
    parts = [part for m in messages for part in m.metadata.get("parts", [m.metadata])]
    return {**{k: v for k, v in common.items() if k != "parts"}, "parts": parts}


def joined(messages: Sequence[OutgoingMessage]) -> OutgoingMessage:
    """`messages` as one: their texts joined by a blank line, their blocks concatenated (a
    message without blocks, among others with, as one paragraph of its text), notifying if
    any did; keyed `merged_key` of their keys when any has one."""
    first = messages[0]
    blocks: markup.Blocks = ()
    if any(m.blocks for m in messages):
        blocks = tuple(b for m in messages for b in (m.blocks or _paragraph(m.text)))
    keys = [m.key for m in messages if m.key is not None]
    return first.model_copy(
        update={
            "text": "\n\n".join(m.text for m in messages),
            "blocks": blocks,
            "notify": any(m.notify for m in messages),
            "key": merged_key(keys) if keys else None,
            "metadata": _metadata(messages),
        }
    )


def _paragraph(text: str) -> markup.Blocks:
    return (markup.Paragraph(spans=(markup.Span(text=text),)),)


def plan(
    entries: Iterable[Entry], limit: int, unit: LengthUnit, size: markup.Measure
) -> list[Merge]:
    """The merges of consecutive alike messages among `entries` (a lane's, in order), each
    one message within `limit` as the platform measures it."""
    merges: list[Merge] = []
    run: list[tuple[Entry, OutgoingMessage]] = []
    length = 0  # the run's text joined, in `unit` (a blank line counts 2 in every unit)
    keyed = limit - limit // KEYED_ROOM  # the limit of a run holding a keyed message
    run_keyed = False  # whether the run holds one

    def close() -> None:
        if len(run) > 1:
            head = run[0][0]
            assert head.session_id is not None
            content = joined([m for _, m in run])
            droppable = all(e.droppable for e, _ in run)
            job = Job.message(head.session_id, content, priority=head.priority, droppable=droppable)
            merges.append(
                Merge(head, tuple(e for e, _ in run[1:]), job, (head.session_id, content))
            )
        run.clear()

    for entry in entries:
        if entry.dead:
            continue
        message = _message(entry)
        if message is None:
            close()
            continue
        own = 0 if message.blocks else measure(message.text, unit)
        if run:
            head, first = run[0]
            room = keyed if message.key is not None or run_keyed else limit
            if message.blocks:
                fits = size((*(b for _, m in run for b in m.blocks), *message.blocks)) <= room
            else:
                fits = length + 2 + own <= room
            if not (_alike(first, message) and entry.priority is head.priority and fits):
                close()
        length = own if not run else length + 2 + own
        run_keyed = (run_keyed and bool(run)) or message.key is not None
        run.append((entry, message))
    close()
    return merges


#: how far into a lane `at_head` looks for messages to merge into the one going out
HEAD_SCAN: Final = 64


def at_head(
    entries: Iterable[Entry], limit: int, unit: LengthUnit, size: markup.Measure
) -> Merge | None:
    """The merge of the first of `entries` (a lane's, in order: the one whose slot came)
    with the alike messages queued right behind it, or None when nothing merges into it."""
    run: list[Entry] = []
    for entry in entries:
        if entry.dead:
            continue
        if _message(entry) is None or len(run) == HEAD_SCAN:
            break
        run.append(entry)
    if len(run) < 2:
        return None
    merges = plan(run, limit, unit, size)
    if not merges or merges[0].into is not run[0]:
        return None
    return merges[0]
