"""The widgets a question is answered with: buttons, menus, radio buttons, checkboxes (pure)."""

from __future__ import annotations

from typing import Any, Final

from adapters.slack.blockkit import (
    MAX_BUTTON_TEXT,
    MAX_CHECKBOX_OPTIONS,
    MAX_OPTION_DESCRIPTION,
    MAX_OPTION_GROUPS,
    MAX_OPTION_TEXT,
    MAX_OPTIONS,
    MAX_RADIO_OPTIONS,
)
from adapters.slack.model import ids
from adapters.slack.model.record import Draft
from adapters.slack.render.blocks.parts import label, option_labels
from adapters.slack.render.blocks.rendered import Block
from adapters.slack.render.mrkdwn import plain
from bot.questions.errors import SLACK_LIMIT, UserQuestionError
from bot.questions.models import AskUserQuestionItem

__all__ = [
    "MAX_CHOICE_OPTIONS",
    "button",
    "button_labels",
    "dismiss_button",
    "draft_widget",
    "menu_options",
]

# Slack's limits are in blockkit.py; this is the renderer's own choice.
MAX_CHOICE_OPTIONS: Final = min(MAX_CHECKBOX_OPTIONS, MAX_RADIO_OPTIONS)
"""At most this many options are radio buttons or checkboxes in a form; more, a menu."""


def button_labels(question: AskUserQuestionItem) -> list[str]:
    """The text of each option's button: within Slack's limit, shortened ones never alike."""
    return option_labels(question.option_labels, MAX_BUTTON_TEXT)[0]


def _texts(question: AskUserQuestionItem) -> list[str]:
    """The text of each option in a menu, radio buttons or checkboxes (``option_labels``)."""
    return option_labels(question.option_labels, MAX_OPTION_TEXT)[0]


def _option(question: AskUserQuestionItem, index: int, texts: list[str]) -> Block:
    option = (question.options or [])[index]
    built: Block = {
        "text": plain(texts[index]),
        "value": ids.option_value(index),
    }
    if option.description:
        built["description"] = plain(option.description, MAX_OPTION_DESCRIPTION)
    return built


def menu_options(question: AskUserQuestionItem) -> dict[str, Any]:
    """A menu's ``options``, or ``option_groups`` of 100 when there are more."""
    count = len(question.options or [])
    texts = _texts(question)
    if count <= MAX_OPTIONS:
        return {"options": [_option(question, i, texts) for i in range(count)]}
    groups = []
    for start in range(0, count, MAX_OPTIONS):
        end = min(start + MAX_OPTIONS, count)
        groups.append(
            {
                "label": plain(f"Options {start + 1}–{end}"),
                "options": [_option(question, i, texts) for i in range(start, end)],
            }
        )
    if len(groups) > MAX_OPTION_GROUPS:
        raise UserQuestionError(
            f"question {question.id} has {count} options; a Slack menu holds at most "
            f"{MAX_OPTION_GROUPS * MAX_OPTIONS} (100 groups of 100 options)",
            SLACK_LIMIT,
        )
    return {"option_groups": groups}


def button(
    text: str, kind: ids.ActionKind, value: str, n: int | None = None, style: str | None = None
) -> Block:
    """A button of ours: ``kind`` (and ``n``) in its action id, ``value`` what it sends."""
    built: Block = {
        "type": "button",
        "text": plain(label(text, MAX_BUTTON_TEXT)),
        "action_id": ids.action_id(kind, n),
        "value": value,
    }
    if style:
        built["style"] = style
    return built


def dismiss_button() -> Block:
    """Dismiss, behind a confirmation."""
    dismiss = button("Dismiss", "dismiss", "0")
    dismiss["confirm"] = {
        "title": plain("Dismiss this question?"),
        "text": plain("The asker is told you chose not to answer."),
        "confirm": plain("Dismiss"),
        "deny": plain("Keep it"),
    }
    return dismiss


def draft_widget(question: AskUserQuestionItem, draft: Draft) -> Block:
    """A form question's choice: radio buttons or checkboxes, a menu past ten options."""
    count = len(question.options or [])
    chosen = [i for i in draft.selected if 0 <= i < count]
    multi = question.is_multi_select
    texts = _texts(question)
    widget: Block
    if count <= MAX_CHOICE_OPTIONS:
        widget = {
            "type": "checkboxes" if multi else "radio_buttons",
            "action_id": ids.action_id("draft"),
            "options": [_option(question, i, texts) for i in range(count)],
        }
    else:
        widget = {
            "type": "multi_static_select" if multi else "static_select",
            "action_id": ids.action_id("draft"),
            "placeholder": plain("Choose options…" if multi else "Choose an option…"),
            **menu_options(question),
        }
    if multi and chosen:
        widget["initial_options"] = [_option(question, i, texts) for i in chosen]
    elif not multi and chosen:
        widget["initial_option"] = _option(question, chosen[0], texts)
    return widget
