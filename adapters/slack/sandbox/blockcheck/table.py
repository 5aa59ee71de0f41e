"""Every Block Kit type the sandbox takes, with its fields' rules (the numbers the renderer
sizes with are ``adapters.slack.blockkit``'s)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from adapters.slack.blockkit import (
    MAX_BUTTON_TEXT,
    MAX_CHECKBOX_OPTIONS,
    MAX_CONFIRM_TEXT,
    MAX_EXTERNAL_ID,
    MAX_HEADER_TEXT,
    MAX_INPUT_LABEL,
    MAX_INPUT_LENGTH,
    MAX_MODAL_CLOSE,
    MAX_MODAL_SUBMIT,
    MAX_MODAL_TITLE,
    MAX_OPTION_DESCRIPTION,
    MAX_OPTION_TEXT,
    MAX_OPTIONS,
    MAX_PRIVATE_METADATA,
    MAX_RADIO_OPTIONS,
    MAX_SECTION_TEXT,
)
from adapters.slack.sandbox.blockcheck.rules import (
    Elements,
    Flag,
    Integer,
    Items,
    Object,
    OneOf,
    Options,
    Row,
    Special,
    String,
    Text,
)

MAX_TEXT: Final = 3000
MAX_SECTION_FIELDS: Final = 10
MAX_SECTION_FIELD_TEXT: Final = 2000
MAX_CONTEXT_ELEMENTS: Final = 10
MAX_ACTIONS_ELEMENTS: Final = 25
MAX_INPUT_HINT: Final = 2000
MAX_IMAGE_URL: Final = 3000
MAX_ALT_TEXT: Final = 2000

MAX_BUTTON_VALUE: Final = 2000
MAX_BUTTON_URL: Final = 3000
MAX_ACCESSIBILITY_LABEL: Final = 75
MAX_CONFIRM_TITLE: Final = 100
MAX_CONFIRM_BUTTON: Final = 30
MAX_PLACEHOLDER: Final = 150
MAX_OPTION_GROUP_LABEL: Final = 75
MAX_OPTION_VALUE: Final = 150
MAX_OPTION_URL: Final = 3000
MAX_OVERFLOW_OPTIONS: Final = 5

MAX_CALLBACK_ID: Final = 255
MAX_VIEW_STACK: Final = 3


_STYLE: Final = OneOf(("primary", "danger"))

# -- text objects -------------------------------------------------------------------------

TEXT_TYPES: Final = frozenset({"plain_text", "mrkdwn"})
TEXT_FIELDS: Final = frozenset({"type", "text", "emoji", "verbatim"})
"""Every field of a text object (``emoji``: plain_text only; ``verbatim``: mrkdwn only)."""
TEXT_IN_CONTEXT: Final = Text(MAX_TEXT, required=True)
"""A text object standing among a context block's elements."""
SECTION_TEXT: Final = Text(MAX_SECTION_TEXT)
"""A section's text (a section needs it or ``fields``)."""

# -- composition objects ------------------------------------------------------------------

OPTION: Final[Row] = {
    "text": Text(MAX_OPTION_TEXT, required=True),
    "value": String(MAX_OPTION_VALUE, required=True, minimum=1),
    "description": Text(MAX_OPTION_DESCRIPTION),
}
"""An option of checkboxes or radio buttons (mrkdwn allowed)."""
MENU_OPTION: Final[Row] = {
    "text": Text(MAX_OPTION_TEXT, plain=True, required=True),
    "value": String(MAX_OPTION_VALUE, required=True, minimum=1),
    "description": Text(MAX_OPTION_DESCRIPTION, plain=True),
}
"""An option of a select menu (plain text only)."""
MENU_OPTIONS: Final = Options(MAX_OPTIONS, MENU_OPTION)
"""A select menu's options (or one option group's)."""
OVERFLOW_OPTION: Final[Row] = {**MENU_OPTION, "url": String(MAX_OPTION_URL)}
"""An option of an overflow menu (may open a URL)."""
OPTION_GROUP: Final[Row] = {
    "label": Text(MAX_OPTION_GROUP_LABEL, plain=True, required=True),
    "options": MENU_OPTIONS,
}
_CONFIRM_ROW: Final[Row] = {
    "title": Text(MAX_CONFIRM_TITLE, plain=True, required=True),
    "text": Text(MAX_CONFIRM_TEXT, required=True),
    "confirm": Text(MAX_CONFIRM_BUTTON, plain=True, required=True),
    "deny": Text(MAX_CONFIRM_BUTTON, plain=True, required=True),
    "style": _STYLE,
}
_CONFIRM: Final = Object(_CONFIRM_ROW, "a confirmation dialog")

# -- elements -----------------------------------------------------------------------------

_FOCUS: Final[Row] = {"focus_on_load": Flag()}
_MENU: Final[Row] = {
    "options": Special("menu"),  # options or option_groups: one of them
    "option_groups": Special("menu"),
    "placeholder": Text(MAX_PLACEHOLDER, plain=True),
    "confirm": _CONFIRM,
    **_FOCUS,
}
_IMAGE: Final[Row] = {
    "image_url": Special("image"),  # image_url or slack_file: exactly one
    "slack_file": Special("image"),
    "alt_text": String(MAX_ALT_TEXT, required=True, minimum=1),
}

ELEMENTS: Final[Mapping[str, Row]] = {
    "button": {
        "text": Text(MAX_BUTTON_TEXT, plain=True, required=True),
        "value": String(MAX_BUTTON_VALUE),
        "url": String(MAX_BUTTON_URL),
        "accessibility_label": String(MAX_ACCESSIBILITY_LABEL),
        "style": _STYLE,
        "confirm": _CONFIRM,
    },
    "static_select": {**_MENU, "initial_option": Special("initial")},
    "multi_static_select": {
        **_MENU,
        "initial_options": Special("initial"),
        "max_selected_items": Integer(1, None),
    },
    "checkboxes": {
        "options": Options(MAX_CHECKBOX_OPTIONS, OPTION),
        "initial_options": Special("initial"),
        "confirm": _CONFIRM,
        **_FOCUS,
    },
    "radio_buttons": {
        "options": Options(MAX_RADIO_OPTIONS, OPTION),
        "initial_option": Special("initial"),
        "confirm": _CONFIRM,
        **_FOCUS,
    },
    "overflow": {"options": Options(MAX_OVERFLOW_OPTIONS, OVERFLOW_OPTION), "confirm": _CONFIRM},
    "plain_text_input": {
        "max_length": Integer(1, MAX_INPUT_LENGTH),
        "min_length": Integer(0, MAX_INPUT_LENGTH),
        "initial_value": Special("initial_value"),  # within max_length
        "placeholder": Text(MAX_PLACEHOLDER, plain=True),
        "multiline": Flag(),
        "dispatch_action_config": Object(
            {
                "trigger_actions_on": Items(
                    2, each=OneOf(("on_enter_pressed", "on_character_entered"))
                )
            },
            "a dispatch action configuration",
        ),
        **_FOCUS,
    },
    "image": _IMAGE,
}
"""Every element type the provider may send, and its fields."""
ELEMENT_TYPES: Final = frozenset(ELEMENTS)
_CHOICE_TYPES: Final = frozenset(
    {"static_select", "multi_static_select", "checkboxes", "radio_buttons"}
)
ACTIONS_ELEMENT_TYPES: Final = _CHOICE_TYPES | {"button", "overflow"}
ACCESSORY_ELEMENT_TYPES: Final = ACTIONS_ELEMENT_TYPES | {"image"}
INPUT_ELEMENT_TYPES: Final = _CHOICE_TYPES | {"plain_text_input"}

# -- blocks and views ---------------------------------------------------------------------

BLOCKS: Final[Mapping[str, Row]] = {
    "section": {
        "text": Special("section"),  # SECTION_TEXT or fields, or both
        "fields": Items(MAX_SECTION_FIELDS, each=Text(MAX_SECTION_FIELD_TEXT, required=True)),
        "accessory": Elements(ACCESSORY_ELEMENT_TYPES, "a section"),
        "expand": Flag(),
    },
    "header": {"text": Text(MAX_HEADER_TEXT, plain=True, required=True)},
    "context": {
        "elements": Elements(
            frozenset({"image"}),
            "a context block",
            many=MAX_CONTEXT_ELEMENTS,
            required=True,
            texts=True,
        )
    },
    "divider": {},
    "actions": {
        "elements": Elements(
            ACTIONS_ELEMENT_TYPES, "an actions block", many=MAX_ACTIONS_ELEMENTS, required=True
        )
    },
    "input": {
        "label": Text(MAX_INPUT_LABEL, plain=True, required=True),
        "hint": Text(MAX_INPUT_HINT, plain=True),
        "optional": Flag(),
        "dispatch_action": Flag(),
        "element": Elements(INPUT_ELEMENT_TYPES, "an input block", required=True),
    },
    "markdown": {"text": Special("markdown")},  # messages only; counts toward a total
    "image": {**_IMAGE, "title": Text(MAX_ALT_TEXT, plain=True)},
    "rich_text": {"elements": Items(None, minimum=0, required=True)},  # checked loosely
}
"""Every block type the provider may send, and its fields."""
BLOCK_TYPES: Final = frozenset(BLOCKS)

VIEW: Final[Row] = {
    "title": Text(MAX_MODAL_TITLE, plain=True, required=True),
    "close": Text(MAX_MODAL_CLOSE, plain=True),
    "submit": Text(MAX_MODAL_SUBMIT, plain=True),
    "private_metadata": String(MAX_PRIVATE_METADATA),
    "callback_id": String(MAX_CALLBACK_ID),
    "external_id": String(MAX_EXTERNAL_ID),
    "clear_on_close": Flag(),
    "notify_on_close": Flag(),
    "submit_disabled": Flag(),
}
"""A modal's own fields (its type and blocks are checked apart)."""

HOME_VIEW: Final[Row] = {
    key: rule
    for key, rule in VIEW.items()
    if key in ("private_metadata", "callback_id", "external_id")
}
"""An App Home (``home``) view's own fields: no title, close or submit."""
