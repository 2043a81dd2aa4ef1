"""A card's components: an option's button, a form's "Fill in" and the form's modal.

Buttons are discord.py `DynamicItem`s: everything needed to answer one is in its custom_id
(`aep:{card key}:{option}`, `aepf:{card key}`), so a card posted before a restart still
answers. A press or a submitted form is handed to the channel (`CardAnswers`), which asks the
core; nothing here decides who may answer.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, Final, Protocol

import discord

from aep_bridge import FormField, PermissionRequest

from .look import (
    MAX_BUTTONS,
    MAX_CUSTOM_ID,
    MAX_FORM_FIELDS,
    MAX_MODAL_LABEL,
    MAX_MODAL_TITLE,
    card_key,
    custom_id,
    label,
    shorten,
)

#: a form's modal's custom_id: this and the card key
FORM_MODAL: Final = "aepm:"
#: the custom_id of a card's button (its `DynamicItem` template): an option's,
#: `aep:{card key}:{option}`, or a form's "Fill in", `aepf:{card key}`
BUTTON_TEMPLATE: Final = r"aep(?::(?P<card>.+):(?P<option>\d+)|f:(?P<form>.+))"


class CardAnswers(Protocol):
    """Who a press or a form is handed to: the channel (`DiscordChannel`)."""

    async def on_press(
        self, interaction: discord.Interaction[Any], key: str, option: int
    ) -> None: ...

    async def on_form(self, interaction: discord.Interaction[Any], key: str) -> None: ...

    async def on_form_submit(
        self, interaction: discord.Interaction[Any], modal: FormModal
    ) -> None: ...


def _answers(interaction: discord.Interaction[Any]) -> CardAnswers | None:
    """The channel whose client received `interaction` (its `adapter`)."""
    answers: CardAnswers | None = getattr(interaction.client, "adapter", None)
    return answers


def _pressed(match: re.Match[str]) -> tuple[str, int | None]:
    """A card button's custom_id (`BUTTON_TEMPLATE`) read: the card key, and the option's
    index (None for a form's "Fill in")."""
    if match["form"] is not None:
        return match["form"], None
    return match["card"], int(match["option"])


class CardButton(
    discord.ui.DynamicItem[discord.ui.Button[Any]],
    template=BUTTON_TEMPLATE,
):
    """A button on a card: an option's (`option`, its index), or with None a form's "Fill
    in", which opens the form as a modal for the person who pressed. Everything needed to
    answer it is in its custom_id, so it works for any card, posted before a restart too."""

    def __init__(self, key: str, option: int | None, text: str = "", allow: bool = False) -> None:
        if option is None:
            button: discord.ui.Button[Any] = discord.ui.Button(
                label="Fill in ✏️", style=discord.ButtonStyle.primary, custom_id=f"aepf:{key}"
            )
        else:
            style = discord.ButtonStyle.success if allow else discord.ButtonStyle.secondary
            button = discord.ui.Button(
                label=text or str(option + 1), style=style, custom_id=f"aep:{key}:{option}"
            )
        super().__init__(button)
        self.key = key
        self.option = option

    @classmethod
    async def from_custom_id(
        cls,
        interaction: discord.Interaction[Any],
        item: discord.ui.Item[Any],
        match: re.Match[str],
        /,
    ) -> CardButton:
        return cls(*_pressed(match))

    async def callback(self, interaction: discord.Interaction[Any]) -> None:
        answers = _answers(interaction)
        if answers is None:
            return
        if self.option is None:
            await answers.on_form(interaction, self.key)
        else:
            await answers.on_press(interaction, self.key, self.option)


def dropped_press(interaction: discord.Interaction[Any]) -> tuple[str, int | None] | None:
    """A press of one of our buttons that discord.py drops, as `(card key, option index)`
    (`None` for a form's "Fill in"), else None.

    discord.py hands a press to a `DynamicItem` only when its component is on the message as
    the interaction carries it (`ViewStore.schedule_dynamic_item_call`). A person whose client
    had not yet redrawn the card's last edit (the question closed, its buttons gone) can still
    press, and Discord sends the press with the message as it is now: discord.py answers
    nothing, and the person sees "This interaction failed". Such a press is the channel's to
    answer (`DiscordChannel._on_interaction`)."""
    if interaction.type is not discord.InteractionType.component:
        return None
    custom = dict(interaction.data or {}).get("custom_id")
    if not isinstance(custom, str):
        return None
    message = interaction.message
    if message is not None:
        shown = (getattr(item, "custom_id", None) for item in _walk(message.components))
        if custom in shown:
            return None  # on the message: discord.py hands it to its DynamicItem
    pressed = re.fullmatch(BUTTON_TEMPLATE, custom)
    return None if pressed is None else _pressed(pressed)


def _walk(items: Any) -> Iterator[Any]:
    """Every component at any depth (action rows and their children)."""
    for item in items or ():
        yield item
        yield from _walk(getattr(item, "children", None))


class FormModal(discord.ui.Modal):
    """A form's fields, one component each: words and numbers as text inputs, choices and
    yes/no as select menus. Submitted, it goes to the core as the card's answer."""

    def __init__(self, adapter: CardAnswers, card_id: str, request: PermissionRequest) -> None:
        super().__init__(
            title=shorten(request.title, MAX_MODAL_TITLE),
            timeout=900,
            custom_id=f"{FORM_MODAL}{card_key(card_id)}",
        )
        self.adapter = adapter
        self.card_id = card_id
        self.request = request
        self.inputs: list[discord.ui.TextInput[Any] | discord.ui.Select[Any]] = []
        #: a choice field that also takes words: its "or in your words" box, by field index
        self.others: dict[int, discord.ui.TextInput[Any]] = {}
        # a modal holds five components: a choice with "other" gets a menu and a box while
        # they fit, else a box alone that names the choices
        room = MAX_FORM_FIELDS - len(request.fields)
        for index, field in enumerate(request.fields):
            component: discord.ui.TextInput[Any] | discord.ui.Select[Any]
            other = field.type == "select" and field.other
            if other and room > 0:
                room -= 1
                self.others[index] = discord.ui.TextInput(
                    custom_id=f"o{index}", required=False, max_length=4000
                )
            if field.type in ("string", "number") or (other and index not in self.others):
                component = discord.ui.TextInput(
                    custom_id=f"f{index}",
                    required=field.required,
                    placeholder=_placeholder(field),
                    max_length=4000,
                )
            else:
                choices = (
                    [("Yes", "y"), ("No", "n")]
                    if field.type == "boolean"
                    else [(c.label, str(i)) for i, c in enumerate(field.choices[:25])]
                )
                component = discord.ui.Select(
                    custom_id=f"f{index}",
                    options=[
                        discord.SelectOption(label=shorten(text, 100) or "…", value=value)
                        for text, value in choices
                    ],
                    # with a box beside it, words may answer instead of the menu
                    min_values=1 if field.required and not other else 0,
                    max_values=len(choices) if field.multi else 1,
                    required=field.required and not other,
                )
            self.inputs.append(component)
            name = shorten(field.label, MAX_MODAL_LABEL) or field.id
            self.add_item(discord.ui.Label(text=name, component=component))
            if index in self.others:
                box = shorten(f"{field.label or field.id}: or in your words", MAX_MODAL_LABEL)
                self.add_item(discord.ui.Label(text=box, component=self.others[index]))

    async def on_submit(self, interaction: discord.Interaction[Any], /) -> None:
        await self.adapter.on_form_submit(interaction, self)

    def values(self) -> dict[str, Any] | str:
        """The answers by field id and choice id, or what is wrong with them."""
        found: dict[str, Any] = {}
        for index, (field, component) in enumerate(
            zip(self.request.fields, self.inputs, strict=True)
        ):
            words = self.others[index].value.strip() if index in self.others else ""
            box = component if isinstance(component, discord.ui.TextInput) else None
            if words or (field.type == "select" and box is not None):
                text = words or (box.value.strip() if box is not None else "")
                if text:
                    found[field.id] = _choice_or_words(field, text)
                elif field.required:
                    return f"{field.label or field.id}: pick one or write your own"
            elif isinstance(component, discord.ui.TextInput):
                text = component.value.strip()
                if not text:
                    continue
                if field.type == "number":
                    try:
                        found[field.id] = float(text)
                    except ValueError:
                        return f"{field.label}: a number, please"
                else:
                    found[field.id] = text
            elif component.values:
                if field.type == "boolean":
                    found[field.id] = component.values[0] == "y"
                elif field.multi:
                    found[field.id] = [field.choices[int(v)].id for v in component.values]
                else:
                    found[field.id] = field.choices[int(component.values[0])].id
            elif field.required and field.other:
                return f"{field.label or field.id}: pick one or write your own"
        return found


def _placeholder(field: FormField) -> str | None:
    """A text box's hint: a number, or, for a choice that takes words, the choices."""
    if field.type == "number":
        return "a number"
    if field.type == "select":
        return shorten("e.g. " + ", ".join(c.label for c in field.choices), 100)
    return None


def _choice_or_words(field: FormField, text: str) -> str | list[str]:
    """Words typed for a choice field: a choice's id when they name one (its label or id,
    any case), else the words themselves, as the agent asked for with `other`."""
    wanted = text.casefold()
    for choice in field.choices:
        if wanted in (choice.label.casefold(), choice.id.casefold()):
            return [choice.id] if field.multi else choice.id
    return [text] if field.multi else text


def card_view(request: PermissionRequest) -> discord.ui.View | None:
    """One button per option (none for an informational card), five a row."""
    if request.informational:
        return None
    view = discord.ui.View(timeout=None)
    key = card_key(request.id)
    if request.fields:
        if len(request.fields) > MAX_FORM_FIELDS:
            return None
        view.add_item(CardButton(key, None))
        return view
    if not request.options:
        return None
    for index, option in enumerate(request.options[:MAX_BUTTONS]):
        assert len(custom_id(request, index)) <= MAX_CUSTOM_ID
        view.add_item(CardButton(key, index, label(option.label), option.is_allow))
    return view
