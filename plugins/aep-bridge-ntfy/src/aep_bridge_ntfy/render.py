"""How things look in a notification: plain text bodies, titles, and emoji tags.

ntfy shows the body as plain text (the channel never sets `markdown`), so agent text goes out
as it is. Tags that are emoji short codes show as emoji before the title.
"""

from __future__ import annotations

from typing import Final

from aep_bridge import OutcomeStatus, OutgoingMessage, PermissionOption, PermissionRequest

from .client import MAX_ACTIONS

_KIND_TAGS: Final[dict[str, str]] = {
    "thought": "thought_balloon",
    "tool_call": "hammer_and_wrench",
    "tool_update": "hammer_and_wrench",
    "plan": "clipboard",
    "usage": "bar_chart",
    "session_end": "checkered_flag",
    "error": "rotating_light",
    "attachment": "paperclip",
    "system_message": "information_source",
}

_REQUEST_TAGS: Final[dict[str, str]] = {
    "permission": "lock",
    "auth": "key",
    "review": "eyes",
}

_OUTCOME_TAGS: Final[dict[OutcomeStatus, str]] = {
    OutcomeStatus.ANSWERED: "white_check_mark",
    OutcomeStatus.ANSWERED_ELSEWHERE: "computer",
    OutcomeStatus.EXPIRED: "hourglass",
    OutcomeStatus.DISMISSED: "wastebasket",
    OutcomeStatus.REFUSED: "no_entry",
    OutcomeStatus.UNDELIVERED: "warning",
}

_NOTIFICATION_TAGS: Final[dict[str, str]] = {
    "completed": "white_check_mark",
    "error": "rotating_light",
    "permission": "lock",
    "input_required": "question",
    "budget_warning": "moneybag",
}


def message_tags(content: OutgoingMessage) -> list[str]:
    """Tags for an agent message; unknown kinds from a newer core get none."""
    tag = _KIND_TAGS.get(str(content.type))
    return [tag] if tag else []


def request_tags(request: PermissionRequest) -> list[str]:
    return [_REQUEST_TAGS.get(request.kind, "question")]


def outcome_tags(status: OutcomeStatus) -> list[str]:
    tag = _OUTCOME_TAGS.get(status)
    return [tag] if tag else []


def notification_tags(kind: str) -> list[str]:
    tag = _NOTIFICATION_TAGS.get(kind)
    return [tag] if tag else []


def message_text(content: OutgoingMessage) -> str:
    """The body for an agent message; ntfy needs something, so an empty one names its kind."""
    if content.text:
        return content.text
    if content.attachment is not None:
        return content.attachment.file_name
    return f"[{content.type}]"


def buttoned(request: PermissionRequest) -> tuple[PermissionOption, ...]:
    """The options that get a button: none on an informational card, else the first three."""
    return () if request.informational else request.options[:MAX_ACTIONS]


def card_text(request: PermissionRequest) -> str:
    """A card's body: the question, and in words whatever the buttons cannot offer."""
    lines = [request.title]
    if request.description:
        lines.append(request.description)
    if request.informational:
        lines.append("Answer this where the agent runs.")
    else:
        shown = len(buttoned(request))
        rest = request.options[shown:]
        if rest:
            lines.append("")
            lines.append(f"More options, without buttons here (ntfy shows at most {MAX_ACTIONS}):")
            lines += [f"{n}. {option.label}" for n, option in enumerate(rest, start=shown + 1)]
            lines.append("Choose one of these in the agent's terminal or another channel.")
    if request.expires_at is not None:
        lines.append(f"Expires {request.expires_at:%Y-%m-%d %H:%M %Z}".rstrip())
    return "\n".join(lines)


def outcome_text(request: PermissionRequest, summary: str) -> str:
    return f"{request.title}\n{summary}"


def titled(title: str, part: int, parts: int) -> str:
    """A notification title, numbered when a message arrives in several parts."""
    return f"{title} ({part}/{parts})" if parts > 1 else title
