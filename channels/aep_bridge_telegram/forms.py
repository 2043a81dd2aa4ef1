"""Forms on Telegram: one field at a time, on the card itself.

Everyone in the topic shares the card; each person's progress (which field, the values so
far) is the channel's own display, kept in the card's record (`CardRecord.forms`). The
channel asks the core whether the person may answer before anything here runs, and holds
its card lock around each call; the finished form goes to the core (`answer_form`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final

from telegram import InlineKeyboardMarkup

from aep_bridge import ChannelUser, Resolution, ResolutionStatus

from .cards import CardRecord, Cards
from .format import form_step
from .look import _keyboard

#: why a form's button or words from another person's step filled nothing
OTHER_STEP: Final = "that was another step of the form; the card shows yours now"
#: a person's next field on show: nothing went to the agent yet (the toast says nothing)
STEP_SHOWN: Final = Resolution(status=ResolutionStatus.ACCEPTED, reason="the next field")

#: the core's `answer_form(card_id, values, user)`
Answer = Callable[[str, dict[str, Any], ChannelUser], Awaitable[Resolution]]
#: show a card's new text and buttons (message id, HTML, keyboard), without waiting for it
Show = Callable[[int, str, InlineKeyboardMarkup | None], None]


class Forms:
    """Moves a person through a form's fields on its card, and hands the finished form to the
    core."""

    def __init__(self, cards: Cards, answer: Answer, show: Show) -> None:
        self._cards = cards
        self._answer = answer
        self._show = show

    async def press(
        self, card_id: str, card: CardRecord, action: str, user: ChannelUser
    ) -> Resolution:
        """`f` starts (or shows the person's step again); the rest name the field they belong
        to, by position: `={i}.{c}` picks choice c of field i (`={i}.y`/`={i}.n` for yes/no),
        `+{i}.{c}` toggles choice c of a multi-select and `!{i}` is done with it, `-{i}` skips
        an optional field. An action fills the person's current field only if it names it:
        a button from someone else's step on the shared card, or a stale one, changes no
        value and shows the person's own step."""
        request = card.permission
        if card.closed:  # the core says why not (answered, expired)
            return await self._answer(card_id, {}, user)
        if not request.fields:  # a form's control on a card that is no form
            return Resolution(status=ResolutionStatus.REJECTED, reason="use the buttons")
        progress = card.forms.setdefault(user.id, {"field": 0, "values": {}})
        index = int(progress["field"])
        current = request.fields[index] if index < len(request.fields) else None
        if action == "f" or current is None:
            return await self._step(card_id, card, user)
        op = action[:1]
        named, _, picked = action[1:].partition(".")
        if named != str(index):
            shown = await self._step(card_id, card, user)
            if not shown.accepted:
                return shown
            return Resolution(status=ResolutionStatus.REJECTED, reason=OTHER_STEP)
        choices = current.choices
        if op == "=" and current.type == "boolean" and picked in ("y", "n"):
            progress["values"][current.id] = picked == "y"
            progress["field"] = index + 1
        elif op == "=" and picked.isdigit() and int(picked) < len(choices):
            progress["values"][current.id] = choices[int(picked)].id
            progress["field"] = index + 1
        elif op == "+" and picked.isdigit() and int(picked) < len(choices):
            chosen = progress["values"].setdefault(current.id, [])
            choice = choices[int(picked)].id
            chosen.remove(choice) if choice in chosen else chosen.append(choice)
        elif op == "!" or (op == "-" and not current.required):
            progress["field"] = index + 1
        return await self._step(card_id, card, user)

    async def value(
        self, card_id: str, card: CardRecord, user: ChannelUser, text: str
    ) -> Resolution:
        """Words replied to the card: the value of the person's current field, if it is the
        field on show and takes words."""
        request = card.permission
        progress = card.forms[user.id]
        index = int(progress["field"])
        if index >= len(request.fields):
            return await self._step(card_id, card, user)
        if card.showing != index:  # the words were written to another field on show
            shown = await self._step(card_id, card, user)
            if not shown.accepted:
                return shown
            return Resolution(status=ResolutionStatus.REJECTED, reason=OTHER_STEP)
        current = request.fields[index]
        if current.type == "number":
            try:
                progress["values"][current.id] = float(text)
            except ValueError:
                return Resolution(status=ResolutionStatus.REJECTED, reason="a number, please")
        elif current.type == "string" or (current.type == "select" and current.other):
            progress["values"][current.id] = text
        else:
            return Resolution(status=ResolutionStatus.REJECTED, reason="use the buttons")
        progress["field"] = index + 1
        return await self._step(card_id, card, user)

    async def _step(self, card_id: str, card: CardRecord, user: ChannelUser) -> Resolution:
        """Show the next field on the card, or hand the finished form to the core."""
        request = card.permission
        progress = card.forms[user.id]
        index = int(progress["field"])
        if index >= len(request.fields):
            del card.forms[user.id]
            await self._cards.save(card_id, card)
            return await self._answer(card_id, progress["values"], user)
        card.showing = index
        await self._cards.save(card_id, card)
        text = form_step(card.html, request, index)
        keyboard = _keyboard(request, (index, progress["values"]))
        self._show(card.message, text, keyboard)
        return STEP_SHOWN
