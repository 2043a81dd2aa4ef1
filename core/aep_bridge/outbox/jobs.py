"""What the outbox queues: `Job`s, their priorities, and how each becomes an adapter call.

A job is built once and may be submitted to several channels (the bridge shares the jobs of
one rendering between channels that see the same thing): its message is serialized once, at
construction, and that JSON is both what is persisted and, parsed lazily, its `payload`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from enum import IntEnum
from typing import Any, Final, Literal, get_args

from .. import markup
from ..contract.types import (
    NotificationMessage,
    OutgoingMessage,
    PermissionOutcome,
    PermissionRequest,
)
from ..text.text import ELLIPSIS, LengthUnit, measure, split_markdown, truncate_markdown


class Priority(IntEnum):
    """Which waiting call goes first: the lowest value that may run now."""

    QUESTION = 0  # permission cards and their updates
    NOTIFICATION = 1  # send_notification
    FINAL = 2  # messages that notify (OutgoingMessage.notify), session end, errors, renames
    LIVE = 3  # live chatter: thoughts, tool updates, progress, streaming edits


Op = Literal[
    "send_message",
    "send_permission_request",
    "update_permission_request",
    "send_notification",
    "rename_session_thread",
    "archive_session_thread",
    "delete_session_thread",
]
OPS: Final[frozenset[str]] = frozenset(get_args(Op))
#: ops saved under an older name (contract 1.1), read back under today's
RENAMED: Final = {"archive_session_topic": "archive_session_thread"}
_FINAL_KINDS: Final = frozenset({"session_end", "error"})

#: the adapter call's arguments and the payload's JSON text
Prepared = tuple[tuple[Any, ...], str]


def card_key(card_id: str) -> str:
    """The `coalesce` key of a card's job."""
    return f"card:{card_id}"


def outcome_key(card_id: str) -> str:
    """The `coalesce` key of a card's update."""
    return f"outcome:{card_id}"


def message_key(key: str) -> str:
    """The `coalesce` key of a keyed message (`OutgoingMessage.key`)."""
    return f"message:{key}"


class Job:
    """One persisted platform call: what to call, for which session, and how urgent it is.

    `payload` is JSON: `{"content": OutgoingMessage dump}` for `send_message`,
    `{"request": ...}` for `send_permission_request`, `{"request": ..., "outcome": ...}` for
    `update_permission_request`, `{"notification": ...}` for `send_notification`,
    `{"name": ...}` for `rename_session_thread`, `{}` for the others. The constructors
    (`Job.message`, `Job.permission`, ...) build it and pick the usual priority; they keep
    the call's arguments and the payload's JSON text (`prepared`), and parse `payload` from
    that text only when something reads it.
    """

    __slots__ = (
        "_payload",
        "after",
        "coalesce",
        "droppable",
        "op",
        "prepared",
        "priority",
        "session_id",
    )

    def __init__(
        self,
        op: Op,
        session_id: str | None,
        payload: dict[str, Any] | None,
        priority: Priority,
        coalesce: str | None = None,
        droppable: bool = False,
        *,
        prepared: Prepared | None = None,
    ) -> None:
        if payload is None and prepared is None:
            raise ValueError("a job needs a payload")
        self.op: Op = op
        self.session_id = session_id
        self.priority = Priority(priority)
        #: a later job with the same key (in the same session) replaces an unsent earlier one
        self.coalesce = coalesce
        #: debug and info chatter: may be dropped under backpressure (counted)
        self.droppable = droppable
        #: the adapter call's arguments and `payload` as JSON, when the constructor had them
        #: at hand (`submit` would rebuild both); not persisted
        self.prepared = prepared
        self._payload = payload
        #: the key of the job of the same session this one waits for (`notification`)
        after = None if payload is None else payload.get("after")
        self.after: str | None = after if isinstance(after, str) else None

    @property
    def payload(self) -> dict[str, Any]:
        """The payload as JSON data (parsed from `prepared` on first use)."""
        if self._payload is None:
            assert self.prepared is not None
            self._payload = json.loads(self.prepared[1])
        return self._payload

    def json(self) -> str:
        """The payload as the JSON text persisted for it."""
        if self.prepared is not None:
            return self.prepared[1]
        return json.dumps(self._payload, ensure_ascii=False, separators=(",", ":"))

    def with_payload(self, payload: dict[str, Any]) -> Job:
        """The same job carrying another payload (a piece of a split message)."""
        return Job(self.op, self.session_id, payload, self.priority, self.coalesce, self.droppable)

    def __repr__(self) -> str:
        return (
            f"Job({self.op!r}, {self.session_id!r}, {self.priority.name}, "
            f"coalesce={self.coalesce!r}, droppable={self.droppable})"
        )

    @classmethod
    def message(
        cls,
        session_id: str,
        content: OutgoingMessage,
        *,
        priority: Priority | None = None,
        droppable: bool = False,
    ) -> Job:
        """A message in the session's thread.

        By default a message that notifies (or ends the session, or reports an error) is
        FINAL and anything else LIVE; a keyed message (one card, edited) coalesces on its key.
        """
        if priority is None:
            final = content.notify or content.type in _FINAL_KINDS
            priority = Priority.FINAL if final else Priority.LIVE
        coalesce = None if content.key is None else message_key(content.key)
        text = f'{{"content":{content.model_dump_json()}}}'
        return cls(
            "send_message",
            session_id,
            None,
            priority,
            coalesce,
            droppable,
            prepared=((session_id, content), text),
        )

    @classmethod
    def permission(
        cls, session_id: str, request: PermissionRequest, *, priority: Priority = Priority.QUESTION
    ) -> Job:
        """A question card: in its thread's order, after what its session did before it,
        which it takes ahead of other sessions' chatter while it is open; a card whose
        question closed before it went out is lowered to thread rank (`Priority.FINAL`) where
        it waits (`Outbox.demote`, key `card_key`)."""
        text = f'{{"request":{request.model_dump_json()}}}'
        return cls(
            "send_permission_request",
            session_id,
            None,
            priority,
            card_key(request.id),
            prepared=((session_id, request), text),
        )

    @classmethod
    def permission_update(
        cls,
        session_id: str,
        request: PermissionRequest,
        outcome: PermissionOutcome,
        *,
        priority: Priority = Priority.QUESTION,
    ) -> Job:
        """What became of a card; a later outcome for the same card replaces an unsent one.
        It follows its card (`after`): while the card waits in its thread or is in flight,
        the update waits for it, as an edit of a message not yet sent would be lost."""
        after = card_key(request.id)
        text = (
            f'{{"request":{request.model_dump_json()},"outcome":{outcome.model_dump_json()},'
            f'"after":{json.dumps(after)}}}'
        )
        job = cls(
            "update_permission_request",
            session_id,
            None,
            priority,
            outcome_key(request.id),
            prepared=((session_id, request, outcome), text),
        )
        job.after = after
        return job

    @classmethod
    def notification(
        cls, notification: NotificationMessage, *, key: str | None = None, after: str | None = None
    ) -> Job:
        """A heads-up outside the thread (counted against `limit_keys(None)`); with a `key`,
        one that `Outbox.withdraw` can take back while it is unsent. With `after`, the key of
        a job of the same session (a question's card, `card_key`) it waits for: it starts
        only once that one is neither queued nor in flight, so it can link to what it sent."""
        text = f'{{"notification":{notification.model_dump_json()}'
        if after is not None:
            text += f',"after":{json.dumps(after)}'
        job = cls(
            "send_notification",
            notification.session_id,
            None,
            Priority.NOTIFICATION,
            key,
            prepared=((notification,), text + "}"),
        )
        job.after = after
        return job

    @classmethod
    def rename(cls, session_id: str, name: str) -> Job:
        """Rename the session's thread; only the latest unsent name is sent."""
        return cls("rename_session_thread", session_id, {"name": name}, Priority.FINAL, "rename")

    @classmethod
    def archive(cls, session_id: str) -> Job:
        """Close or archive the session's thread."""
        return cls("archive_session_thread", session_id, {}, Priority.FINAL)

    @classmethod
    def delete(cls, session_id: str) -> Job:
        """Remove the session's thread."""
        return cls("delete_session_thread", session_id, {}, Priority.FINAL)


def arguments(job: Job) -> tuple[Any, ...]:
    """The adapter call's arguments, parsed from the payload: a bad job fails at `submit`."""
    if job.prepared is not None:
        return job.prepared[0]
    if job.op not in OPS:
        raise ValueError(f"unknown outbox operation {job.op!r}")
    if job.op == "send_notification":
        return (NotificationMessage.model_validate(job.payload["notification"]),)
    session = job.session_id
    if session is None:
        raise ValueError(f"{job.op} needs a session_id")
    payload = job.payload
    if job.op == "send_message":
        return (session, OutgoingMessage.model_validate(payload["content"]))
    if job.op == "send_permission_request":
        return (session, PermissionRequest.model_validate(payload["request"]))
    if job.op == "update_permission_request":
        return (
            session,
            PermissionRequest.model_validate(payload["request"]),
            PermissionOutcome.model_validate(payload["outcome"]),
        )
    if job.op == "rename_session_thread":
        name = payload["name"]
        if not isinstance(name, str):
            raise ValueError("rename_session_thread needs a string name")
        return (session, name)
    return (session,)


# -- fitting the platform ----------------------------------------------------------------


def _with_blocks(content: dict[str, Any], blocks: markup.Blocks) -> dict[str, Any]:
    """A message's JSON dump with these blocks, and their plain rendering as its text."""
    dump = [block.model_dump(mode="json") for block in blocks]
    return {**content, "text": markup.plain(blocks), "blocks": dump}


def fit(job: Job, limit: int, unit: LengthUnit, size: markup.Measure) -> tuple[list[Job], bool]:
    """`job` as it will be sent: a long message split, or cut if it is one card's edit; and
    whether it was split. `size` measures blocks as the adapter does."""
    if job.op != "send_message":
        return [job], False
    message = job.prepared[0][1] if job.prepared is not None else None
    if isinstance(message, OutgoingMessage):  # the common case: nothing to parse
        if message.blocks:
            if size(message.blocks) <= limit:
                return [job], False
        elif measure(message.text, unit) <= limit:
            return [job], False
    content = job.payload.get("content")
    if not isinstance(content, dict) or not isinstance(content.get("text"), str):
        return [job], False
    if content.get("blocks"):
        return _fit_blocks(job, content, message, limit, size)
    text: str = content["text"]
    if measure(text, unit) <= limit:
        return [job], False
    if content.get("key") is not None or job.coalesce is not None:
        cut = truncate_markdown(text, limit, unit)
        return [job.with_payload({**job.payload, "content": {**content, "text": cut}})], False
    pieces = split_markdown(text, limit, unit)
    jobs = []
    for index, piece in enumerate(pieces):
        last = index == len(pieces) - 1
        dump = {**content, "text": piece}
        if not last:  # the attachment and the alert go with the end of the message
            dump["attachment"] = None
            dump["notify"] = False
        jobs.append(job.with_payload({**job.payload, "content": dump}))
    return jobs, True


def longest_cut(
    message: OutgoingMessage,
    accepts: Callable[[OutgoingMessage], bool],
    limit: int,
    unit: LengthUnit,
    size: markup.Measure,
) -> OutgoingMessage | None:
    """The longest cut of `message` at its end (as `fit` cuts one message's edit, ending
    with "…") that `accepts`; None when not even its first words do. A dozen tries at most."""
    job = Job.message("cut", message)
    best = None
    low, high = 1, limit
    while low <= high:
        middle = (low + high) // 2
        pieces, _ = fit(job, middle, unit, size)
        cut = arguments(pieces[0])[1]
        assert isinstance(cut, OutgoingMessage)
        if accepts(cut):
            best, low = cut, middle + 1
        else:
            high = middle - 1
    return best


def _fit_blocks(
    job: Job,
    content: dict[str, Any],
    message: object,
    limit: int,
    size: markup.Measure,
) -> tuple[list[Job], bool]:
    """A message with blocks, split between (or inside) its blocks at the platform's
    limit as the adapter measures them (`markup.split`), each piece's text its plain
    rendering; one card's edit keeps its first piece, ending with "…"."""
    if not isinstance(message, OutgoingMessage):
        message = OutgoingMessage.model_validate(content)
    blocks: markup.Blocks = message.blocks
    if size(blocks) <= limit:
        return [job], False
    if content.get("key") is not None or job.coalesce is not None:
        ellipsis = markup.Paragraph(spans=(markup.Span(text=ELLIPSIS),))
        probe = (markup.Paragraph(spans=(markup.Span(text="x"),)),)
        room = limit - (size((*probe, ellipsis)) - size(probe))
        if room < 1:
            head = markup.split(blocks, limit, size)[0]
        else:
            head = (*markup.split(blocks, room, size)[0], ellipsis)
        return [job.with_payload({**job.payload, "content": _with_blocks(content, head)})], False
    pieces = markup.split(blocks, limit, size)
    jobs = []
    for index, piece in enumerate(pieces):
        dump = _with_blocks(content, piece)
        if index < len(pieces) - 1:  # the attachment and the alert go with the end
            dump["attachment"] = None
            dump["notify"] = False
        jobs.append(job.with_payload({**job.payload, "content": dump}))
    return jobs, True
