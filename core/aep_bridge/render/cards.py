"""Cards: an `attention.requested` as the card a channel shows with buttons (and the plain
card when that fails), and a form's answer mapped back to the request's AEP ids.
"""

from __future__ import annotations

import logging
import shlex
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final

from .. import tools
from ..aep.capture import synthesize_prompt
from ..aep.envelope import Event
from ..aep.payloads import AttentionRequested
from ..aep.redaction import digest
from ..aep.registry import CAPTURE_RANK, Capture
from ..contract.types import FormChoice, FormField, PermissionOption, PermissionRequest
from ..markup import Blocks, Code, Diff, Paragraph, Quote, Span, map_text, parse_markdown, plain
from ..tools import ToolCall
from .base import RendererBase
from .helpers import (
    MAX_LABEL,
    MAX_TEXT,
    MEDIUM,
    NORMAL,
    SHORT,
    _clip_blocks,
    _typed,
    _unfold,
)
from .steer import is_instruction_request
from .tool import _kept_args

log = logging.getLogger(__name__)

#: events whose card failed to render, remembered so the error is logged once per event
_FAILED_CARDS_KEPT: Final = 1024
#: the longest command or change a card shows (the rest is cut, saying how much: never silently)
MAX_CARD_CODE: Final = 2_000
_REDACTED_RANK: Final = CAPTURE_RANK["redacted"]
_ALLOW_WORDS: Final = ("allow", "approve", "accept", "yes", "proceed", "grant", "continue", "ok")


class CardsMixin(RendererBase):
    """The card of an `attention.requested`; the core owns the card and its lifecycle."""

    def permission_request(
        self, event: Event, card_id: str, *, ceiling: Capture, session_name: str | None = None
    ) -> tuple[PermissionRequest, list[str]]:
        """An `attention.requested` as the card a channel shows, and its AEP option ids.

        Options get the short ids `o1`, `o2`, ...; the returned list holds the AEP option id
        of each, in the same order. Form fields are `f1`, `f2`, ... and the choices of each
        field `c1`, `c2`, ... (map answers back with `aep_form_values`). The prompt and labels
        honour both the event's capture and the ceiling, and all text is redacted.

        A card that cannot be rendered (a bug, a value nobody foresaw) becomes a plain one,
        its title and options and no more (`fallback_card`), so the question can still be
        answered; the error is logged once per event. `session_name` is the session's name
        as the channel's thread and heads-ups show it (the card names it under its title).
        """
        return self.permission_cards(event, card_id, [(ceiling, session_name)])[0]

    def option_ids(self, event: Event) -> list[str]:
        """The AEP ids of an `attention.requested`'s options, in the order its cards number
        them (`o1`, `o2`, ...): what `permission_request` returns beside the card, without
        drawing one (the core stores them when the request opens, before any channel's card
        is drawn). An option's id is structure: no ceiling hides it."""
        payload = _typed(event, AttentionRequested)
        return [option.id for option in payload.options or []] if payload is not None else []

    def permission_cards(
        self, event: Event, card_id: str, looks: Sequence[tuple[Capture, str | None]]
    ) -> list[tuple[PermissionRequest, list[str]]]:
        """`permission_request` for each `(ceiling, session_name)` of `looks` (the channels
        of one request), in order: each ceiling's card is rendered once and named for each
        channel. A card costs as much as a dozen events' messages, and every channel of a
        request shows the same one at the same ceiling."""
        rendered: dict[Capture, tuple[PermissionRequest, list[str]] | None] = {}
        out: list[tuple[PermissionRequest, list[str]]] = []
        for ceiling, session_name in looks:
            if ceiling not in rendered:
                rendered[ceiling] = self._card_or_none(event, card_id, ceiling)
            card = rendered[ceiling]
            if card is not None:
                name = self._line(session_name, MAX_LABEL * 2) if session_name else ""
                named = card[0].model_copy(update={"session_name": name or None})
                out.append((named, list(card[1])))
            else:
                out.append(self.fallback_card(event, card_id, ceiling=ceiling))
        return out

    def _card_or_none(
        self, event: Event, card_id: str, ceiling: Capture
    ) -> tuple[PermissionRequest, list[str]] | None:
        """The card at `ceiling`, or None when it cannot be rendered (logged once per event:
        the caller shows `fallback_card`)."""
        try:
            return self._permission_card(event, card_id, ceiling=ceiling)
        except Exception:
            if event.id not in self._failed_cards:
                self._failed_cards[event.id] = None
                while len(self._failed_cards) > _FAILED_CARDS_KEPT:
                    self._failed_cards.popitem(last=False)
                log.exception(
                    "rendering the card of %s failed; a plain card is shown instead", event.id
                )
            return None

    def fallback_card(
        self, event: Event, card_id: str, *, ceiling: Capture
    ) -> tuple[PermissionRequest, list[str]]:
        """The plain card of an `attention.requested`: a title and the options (their labels,
        redacted, where the ceiling and the event's capture show the agent's words, else their
        ids), no prompt, no form, no expiry."""
        data = event.data if isinstance(event.data, Mapping) else {}
        words = min(CAPTURE_RANK[ceiling], CAPTURE_RANK.get(event.capture, 0)) >= _REDACTED_RANK
        options: list[PermissionOption] = []
        aep_ids: list[str] = []
        raw_options = data.get("options")
        for index, option in enumerate(raw_options if isinstance(raw_options, list) else []):
            if not isinstance(option, Mapping) or not isinstance(option.get("id"), str):
                continue
            label = option.get("label") if words else None
            shown = self._line(label if isinstance(label, str) else None, MAX_LABEL)
            shown = shown or self._line(option["id"], MAX_LABEL)
            options.append(
                PermissionOption(
                    id=f"o{len(options) + 1}",
                    label=shown or f"Option {index + 1}",
                    is_allow=_is_allow(option["id"]),
                )
            )
            aep_ids.append(option["id"])
        who = self._line(event.agent, MAX_LABEL) or "the agent"
        request = PermissionRequest(
            id=card_id,
            kind="other",
            title=f"{who} asks a question",
            options=tuple(options),
            accepts_text=not options,
        )
        return request, aep_ids

    def _permission_card(
        self, event: Event, card_id: str, *, ceiling: Capture
    ) -> tuple[PermissionRequest, list[str]]:
        gated = self._gate(event, ceiling)
        payload = _typed(gated, AttentionRequested)
        kind = payload.kind if payload is not None else "other"
        title = self._request_title(gated, kind)
        if payload is not None:
            description = self._text(payload.prompt, MEDIUM * 5)
        else:
            description = self._text(synthesize_prompt(gated.agent, "attention", gated.subject))
        options: list[PermissionOption] = []
        aep_ids: list[str] = []
        for index, option in enumerate((payload.options or []) if payload else [], start=1):
            label = self._line(option.label, MAX_LABEL) or self._line(option.id, MAX_LABEL)
            options.append(
                PermissionOption(
                    id=f"o{index}", label=label or f"Option {index}", is_allow=_is_allow(option.id)
                )
            )
            aep_ids.append(option.id)
        fields: list[FormField] = []
        if payload is not None and kind == "form":
            for index, spec in enumerate(payload.fields or [], start=1):
                choices = tuple(
                    FormChoice(
                        id=f"c{j}",
                        label=self._line(c.label, MAX_LABEL) or self._line(c.id, MAX_LABEL),
                    )
                    for j, c in enumerate(spec.choices or [], start=1)
                )
                fields.append(
                    FormField(
                        id=f"f{index}",
                        type=spec.type,
                        label=self._line(spec.label, SHORT) or f"Field {index}",
                        required=bool(spec.required),
                        multi=bool(spec.multi),
                        other=bool(spec.other),
                        choices=choices,
                        min=spec.min,
                        max=spec.max,
                    )
                )
        respond_via = payload.respond_via if payload is not None else None
        informational = respond_via is not None and "control" not in respond_via
        accepts_text = not informational and (
            kind in ("permission", "input", "other", "form") or not options
        )
        details: Blocks = ()
        if payload is not None and kind == "permission":
            details = self._card_details(gated, payload, ceiling)
            if details:
                details = _clip_blocks(map_text(details, self.redactor.text), MAX_TEXT // 4)
                description = plain(details)
        elif payload is not None and is_instruction_request(event):
            details = self._steer_details(payload)
            description = plain(details)
        request = PermissionRequest(
            id=card_id,
            kind=kind,
            title=title,
            description=description,
            details=details,
            options=tuple(options),
            fields=tuple(fields),
            accepts_text=accepts_text,
            informational=informational,
            expires_at=_parse_time(payload.expires_at) if payload is not None else None,
        )
        return request, aep_ids

    def _steer_details(self, payload: AttentionRequested) -> Blocks:
        """A held Stop's card ("claude-code finished: what next?"): what the agent said last
        (its `context.last_assistant_message`, there only at a `full` ceiling: `context` is
        content), quoted above the question, so a person answers knowing where it stopped."""
        context = payload.context if isinstance(payload.context, Mapping) else {}
        said = context.get("last_assistant_message")
        words = self._text(said, MEDIUM * 5) if isinstance(said, str) else ""
        prompt = self._text(payload.prompt, MEDIUM)
        out: list[Any] = []
        if words:
            out.append(Quote(blocks=_words(words)))
        if prompt:
            out.append(Paragraph(spans=(Span(text=prompt, bold=True),)))
        return tuple(out)

    def _card_details(self, event: Event, payload: AttentionRequested, ceiling: Capture) -> Blocks:
        """What a permission card asks to approve, in the order a person judges it: the
        working folder; exactly what will happen (the whole command in a code block, the
        change as the activity draws it, the URL, the file); then the agent's reason, as
        markdown. The call is the one that caused the request (`cause`), else the request's
        own `context` (`tool_name`, `tool_input`, `cwd`: carried at capture `full`). Without
        either (a hook's request at `redacted` carries neither), the prompt (`_prompt_blocks`)."""
        context = payload.context if isinstance(payload.context, Mapping) else {}
        seen = self._call(event, ceiling, f"event:{event.cause}") if event.cause else None
        cwd = _text_of(context.get("cwd")) or (seen.cwd if seen is not None else None)
        cwd = cwd or self._cwd(event, ceiling)
        own = _context_call(context, cwd)
        # the request's own words on what it asks win over the call it names, unless they are
        # that call (a `cause` is the emitter's word, and could name a harmless earlier call)
        call = seen if seen is not None and seen.args and _agrees(seen, own, context) else own
        if call is None:
            call = _prompt_call(payload.prompt, seen, cwd)
        out: list[Any] = []
        if cwd:
            folder = tools.display_path(cwd, None)
            out.append(Paragraph(spans=(Span(text="Folder: "), Span(text=folder, code=True))))
        prompt = self._text(payload.prompt, MEDIUM * 5)
        if call is None:
            return (*out, *_prompt_blocks(prompt, event.subject))
        view = self._view(call, None, NORMAL)
        command = call.args.get("command") or call.args.get("cmd")
        if isinstance(command, list) and all(isinstance(x, str) for x in command):
            command = shlex.join(command)
        if isinstance(command, str) and command.strip():
            out.append(Code(code=_fold(command.strip(), MAX_CARD_CODE), language="bash"))
        else:
            changes = [b for block in view.details for b in _unfold(block)]
            if not changes or not isinstance(changes[0], Diff):  # a diff names its file
                out.append(Paragraph(spans=view.title))
            if changes:
                out.extend(_clip_blocks(tuple(changes), MAX_CARD_CODE))
        reason = call.args.get("description") or call.args.get("justification")
        if isinstance(reason, str) and reason.strip():
            out.extend(_words(self._text(reason, MEDIUM)))
        elif prompt and not _restates(prompt, call, event.subject):
            out.extend(_prompt_blocks(prompt, event.subject))
        return tuple(out)


def _text_of(value: Any) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def _context_call(context: Mapping[str, Any], cwd: str | None) -> ToolCall | None:
    """The tool call a request's `context` names (`tool_name`, `tool_input`), if any."""
    name = _text_of(context.get("tool_name"))
    args = context.get("tool_input")
    if name is None or not isinstance(args, Mapping):
        return None
    return ToolCall(name=name, args=_kept_args(args), cwd=cwd)  # bounded, as a seen call's


def _fold(text: str, limit: int) -> str:
    """`text` whole when it fits in `limit` characters, else its start and how much is left
    out: a card never cuts what it asks to approve silently."""
    if len(text) <= limit:
        return text
    head = text[: limit - 40].rstrip()
    return f"{head}\n… ({len(text) - len(head):,} more characters)"


#: the argument a hook's permission prompt quotes, in the order the AEP mapping picks it
#: (`aep_bridge.agents.mapping.permission_prompt`)
_PROMPT_KEYS: Final = ("command", "file_path", "notebook_path", "url", "pattern", "query", "path")
#: the most places a prompt's reason may start that are tried against the call's digest
_MAX_SPLITS: Final = 32
#: the longest prompt read as a command and its reason (longer: shown as words)
_MAX_PROMPT_READ: Final = 4 * MAX_CARD_CODE


def _prompt_call(prompt: str | None, seen: ToolCall | None, cwd: str | None) -> ToolCall | None:
    """The call a hook's prompt (`Permission requested: Bash — npm test (Run the tests)`)
    spells out, when it is exactly the call the request is about: the call was seen without
    its arguments (the agent's capture is `metadata`), but with their `args_digest`, taken
    over the originals. The prompt is read as the mapping writes it (the quoted argument,
    then the reason in parentheses) only where that reading gives the same digest, so an
    agent's reason cannot pose as part of the command, nor a command's tail as its reason.
    A prompt that matches no reading (the redaction changed it, the call had more
    arguments) gives None: the card shows it as written."""
    if seen is None or not seen.args_digest or not isinstance(prompt, str):
        return None
    if len(prompt) > _MAX_PROMPT_READ:  # a huge one is shown as words, not hashed per split
        return None
    head = f"{_header(seen.name)} — "
    if not prompt.startswith(head):
        return None
    rest = prompt[len(head) :]
    readings: list[dict[str, str]] = [{key: rest} for key in _PROMPT_KEYS]
    if rest.endswith(")"):
        starts = [i for i in range(len(rest) - 1) if rest.startswith(" (", i)][-_MAX_SPLITS:]
        for start in starts:
            quoted, reason = rest[:start], rest[start + 2 : -1]
            readings += [{key: quoted, "description": reason} for key in _PROMPT_KEYS]
    for args in readings:
        if digest(args) == seen.args_digest:
            return ToolCall(name=seen.name, args=args, cwd=cwd)
    return None


def _header(subject: str | None) -> str:
    return f"Permission requested: {subject}" if subject else "Permission requested"


def _prompt_blocks(prompt: str, subject: str | None) -> Blocks:
    """A request's prompt on a card that has no tool call to show. The hooks' prompt (the
    AEP mapping's `Permission requested: Bash — npm test (Run the tests)`) loses its header,
    which the card's title says, and is not read as markdown (a command's `*` is no
    emphasis): what it asks, in code when it is that alone (no reason in parentheses), else
    as it is. Any other prompt is the agent's words, rendered as markdown."""
    head = _header(subject)
    if prompt == head:
        return ()
    if not prompt.startswith(head + " — "):
        return _words(prompt)
    rest = prompt[len(head) + 3 :].strip()
    if " (" in rest or rest.endswith(")") or "\n" in rest:
        return (Paragraph(spans=(Span(text=rest),)),)
    return (Code(code=_fold(rest, MAX_CARD_CODE)),)


def _restates(prompt: str, call: ToolCall, subject: str | None) -> bool:
    """Whether a prompt says no more than the card's details: it opens with the header
    (`Permission requested: Bash`), or it repeats the command, path or URL the card shows."""
    if prompt.startswith(_header(subject)) or prompt.startswith("Permission requested"):
        return True
    for key in ("command", "cmd", "file_path", "notebook_path", "url", "path"):
        value = call.args.get(key)
        if isinstance(value, str) and value.strip() and value.strip() == prompt.strip():
            return True
    return False


def _agrees(seen: ToolCall, own: ToolCall | None, context: Mapping[str, Any]) -> bool:
    """Whether the call a request names is the one its own `context` describes (or it has
    none): the same tool, and its input has the call's digest."""
    if own is None:
        return True
    return seen.name == own.name and digest(context.get("tool_input")) == seen.args_digest


def _words(text: str) -> Blocks:
    """The agent's words on a card (its reason, its prompt), as markdown within a paragraph:
    bold, code spans and links, but no block of its own (a fenced block, a heading, a
    quote) that could pass for the card's own lines, such as a second command."""
    return tuple(
        block if isinstance(block, Paragraph) else Paragraph(spans=(Span(text=plain((block,))),))
        for block in parse_markdown(text)
    )


def aep_form_values(request: Event, values: Mapping[str, Any]) -> dict[str, Any]:
    """A form answered on a card (`f1`, `c2`, ...) in the AEP ids of `request`'s fields.

    Field `fN` is the request's N-th field, choice `cM` of a select field its M-th choice.
    Values of unknown fields are dropped; a select value that names no card choice is kept
    as it is (the `other` free text of AEP-0006).
    """
    payload = _typed(request, AttentionRequested)
    specs = (payload.fields or []) if payload is not None else []
    out: dict[str, Any] = {}
    for card_id, value in values.items():
        index = _index(card_id, "f")
        if index is None or index >= len(specs):
            continue
        spec = specs[index]
        if spec.type == "select":
            ids = [c.id for c in spec.choices or []]
            if isinstance(value, list):
                value = [_choice_id(v, ids) for v in value]
            else:
                value = _choice_id(value, ids)
        out[spec.id] = value
    return out


def _choice_id(value: Any, ids: Sequence[str]) -> Any:
    index = _index(value, "c")
    return ids[index] if index is not None and index < len(ids) else value


def _is_allow(option_id: str) -> bool:
    word = option_id.strip().lower()
    return any(word.startswith(w) for w in _ALLOW_WORDS)


def _index(card_id: Any, prefix: str) -> int | None:
    if isinstance(card_id, str) and card_id.startswith(prefix) and card_id[1:].isdigit():
        index = int(card_id[1:]) - 1
        return index if index >= 0 else None
    return None


def _parse_time(value: str | None) -> datetime | None:
    """An RFC 3339 time as UTC, which every channel can format as it likes; None for a time
    that does not parse or that UTC cannot hold (9999-12-31T23:59:59-14:00 is year 10000 in
    UTC: an expiry nobody will wait for)."""
    if not value:
        return None
    try:
        when = datetime.fromisoformat(value.upper().replace("Z", "+00:00"))
        return (when if when.tzinfo else when.replace(tzinfo=UTC)).astimezone(UTC)
    except (ValueError, OverflowError):
        return None
