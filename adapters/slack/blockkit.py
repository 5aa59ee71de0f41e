"""Block Kit limits, checked before Slack sees a payload (pure, no I/O).

``check_message(blocks, text)`` and ``check_view(view)`` return one line per broken limit,
each naming the JSON path and the limit, for example::

    blocks[3].elements[0].text.text: 81 characters, Slack allows at most 75

An empty list means the payload is within every limit this module knows (slack-platform.md
§1.1). Characters are counted with Python ``len`` (code points); Slack's own counting of
astral characters is unverified, so callers should leave headroom for emoji.

The blocks and elements covered are the ones the Slack provider may send: section, header,
context, divider, actions, input, markdown (messages only), image, and rich_text (checked
loosely); buttons, static and multi-static selects, checkboxes, radio buttons, overflow
menus, plain-text inputs and images. Any other type is reported as unsupported, and so is a
field the type does not have, since Slack rejects those too.

``message_problems`` / ``view_problems`` give the same findings as ``Problem`` records with a
``code`` (``invalid_blocks``, ``msg_blocks_too_long``, ``msg_too_long``) and a ``warning``
flag, for callers that must tell the kinds apart (the sandbox's Web API stand-in).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "ACCESSORY_ELEMENT_TYPES",
    "ACTIONS_ELEMENT_TYPES",
    "BLOCK_TYPES",
    "ELEMENT_TYPES",
    "INPUT_ELEMENT_TYPES",
    "INVALID_BLOCKS",
    "MAX_ACCESSIBILITY_LABEL",
    "MAX_ACTIONS_ELEMENTS",
    "MAX_ACTION_ID",
    "MAX_ALT_TEXT",
    "MAX_BLOCKS_MESSAGE",
    "MAX_BLOCKS_MODAL",
    "MAX_BLOCK_ID",
    "MAX_BUTTON_TEXT",
    "MAX_BUTTON_URL",
    "MAX_BUTTON_VALUE",
    "MAX_CALLBACK_ID",
    "MAX_CHECKBOX_OPTIONS",
    "MAX_CONFIRM_BUTTON",
    "MAX_CONFIRM_TEXT",
    "MAX_CONFIRM_TITLE",
    "MAX_CONTEXT_ELEMENTS",
    "MAX_EXTERNAL_ID",
    "MAX_HEADER_TEXT",
    "MAX_IMAGE_URL",
    "MAX_INPUT_HINT",
    "MAX_INPUT_LABEL",
    "MAX_INPUT_LENGTH",
    "MAX_MARKDOWN_TOTAL",
    "MAX_MESSAGE_TEXT",
    "MAX_MODAL_CLOSE",
    "MAX_MODAL_SUBMIT",
    "MAX_MODAL_TITLE",
    "MAX_OPTIONS",
    "MAX_OPTION_DESCRIPTION",
    "MAX_OPTION_GROUPS",
    "MAX_OPTION_GROUP_LABEL",
    "MAX_OPTION_TEXT",
    "MAX_OPTION_URL",
    "MAX_OPTION_VALUE",
    "MAX_OVERFLOW_OPTIONS",
    "MAX_PLACEHOLDER",
    "MAX_PRIVATE_METADATA",
    "MAX_RADIO_OPTIONS",
    "MAX_SECTION_FIELDS",
    "MAX_SECTION_FIELD_TEXT",
    "MAX_SECTION_TEXT",
    "MAX_TEXT",
    "MAX_VIEW_STACK",
    "MESSAGE_TEXT_BUDGET",
    "MSG_BLOCKS_TOO_LONG",
    "MSG_TOO_LONG",
    "RECOMMENDED_MESSAGE_TEXT",
    "Problem",
    "block_text_length",
    "check_message",
    "check_view",
    "message_problems",
    "view_problems",
]

# Surfaces.
MAX_BLOCKS_MESSAGE: Final = 50
MAX_BLOCKS_MODAL: Final = 100
MESSAGE_TEXT_BUDGET: Final = 12_000
"""Sum of all text in a message's blocks; above it Slack answers ``msg_blocks_too_long``."""
MAX_MESSAGE_TEXT: Final = 40_000
RECOMMENDED_MESSAGE_TEXT: Final = 4_000
MAX_MARKDOWN_TOTAL: Final = 12_000

# Ids.
MAX_BLOCK_ID: Final = 255
MAX_ACTION_ID: Final = 255

# Text objects and blocks.
MAX_TEXT: Final = 3000
MAX_SECTION_TEXT: Final = 3000
MAX_SECTION_FIELDS: Final = 10
MAX_SECTION_FIELD_TEXT: Final = 2000
MAX_HEADER_TEXT: Final = 150
MAX_CONTEXT_ELEMENTS: Final = 10
MAX_ACTIONS_ELEMENTS: Final = 25
MAX_INPUT_LABEL: Final = 2000
MAX_INPUT_HINT: Final = 2000
MAX_IMAGE_URL: Final = 3000
MAX_ALT_TEXT: Final = 2000

# Elements.
MAX_BUTTON_TEXT: Final = 75
MAX_BUTTON_VALUE: Final = 2000
MAX_BUTTON_URL: Final = 3000
MAX_ACCESSIBILITY_LABEL: Final = 75
MAX_CONFIRM_TITLE: Final = 100
MAX_CONFIRM_TEXT: Final = 300
MAX_CONFIRM_BUTTON: Final = 30
MAX_PLACEHOLDER: Final = 150
MAX_OPTIONS: Final = 100
MAX_OPTION_GROUPS: Final = 100
MAX_OPTION_GROUP_LABEL: Final = 75
MAX_OPTION_TEXT: Final = 75
MAX_OPTION_VALUE: Final = 150
MAX_OPTION_DESCRIPTION: Final = 75
MAX_OPTION_URL: Final = 3000
MAX_CHECKBOX_OPTIONS: Final = 10
MAX_RADIO_OPTIONS: Final = 10
MAX_OVERFLOW_OPTIONS: Final = 5
MAX_INPUT_LENGTH: Final = 3000

# Modals.
MAX_MODAL_TITLE: Final = 24
MAX_MODAL_SUBMIT: Final = 24
MAX_MODAL_CLOSE: Final = 24
MAX_PRIVATE_METADATA: Final = 3000
MAX_CALLBACK_ID: Final = 255
MAX_EXTERNAL_ID: Final = 255
MAX_VIEW_STACK: Final = 3

_BLOCK_FIELDS: Final[Mapping[str, frozenset[str]]] = {
    "section": frozenset({"text", "fields", "accessory", "expand"}),
    "header": frozenset({"text"}),
    "context": frozenset({"elements"}),
    "divider": frozenset(),
    "actions": frozenset({"elements"}),
    "input": frozenset({"label", "element", "hint", "optional", "dispatch_action"}),
    "markdown": frozenset({"text"}),
    "image": frozenset({"image_url", "slack_file", "alt_text", "title"}),
    "rich_text": frozenset({"elements"}),
}
BLOCK_TYPES: Final = frozenset(_BLOCK_FIELDS)

_SELECT_FIELDS: Final = frozenset(
    {"options", "option_groups", "placeholder", "confirm", "focus_on_load"}
)
_ELEMENT_FIELDS: Final[Mapping[str, frozenset[str]]] = {
    "button": frozenset({"text", "value", "url", "style", "confirm", "accessibility_label"}),
    "static_select": _SELECT_FIELDS | {"initial_option"},
    "multi_static_select": _SELECT_FIELDS | {"initial_options", "max_selected_items"},
    "checkboxes": frozenset({"options", "initial_options", "confirm", "focus_on_load"}),
    "radio_buttons": frozenset({"options", "initial_option", "confirm", "focus_on_load"}),
    "overflow": frozenset({"options", "confirm"}),
    "plain_text_input": frozenset(
        {
            "initial_value",
            "multiline",
            "min_length",
            "max_length",
            "placeholder",
            "dispatch_action_config",
            "focus_on_load",
        }
    ),
    "image": frozenset({"image_url", "slack_file", "alt_text"}),
}
ELEMENT_TYPES: Final = frozenset(_ELEMENT_FIELDS)
_CHOICE_TYPES: Final = frozenset(
    {"static_select", "multi_static_select", "checkboxes", "radio_buttons"}
)
ACTIONS_ELEMENT_TYPES: Final = _CHOICE_TYPES | {"button", "overflow"}
ACCESSORY_ELEMENT_TYPES: Final = ACTIONS_ELEMENT_TYPES | {"image"}
INPUT_ELEMENT_TYPES: Final = _CHOICE_TYPES | {"plain_text_input"}

_TEXT_TYPES: Final = frozenset({"plain_text", "mrkdwn"})
_TEXT_FIELDS: Final = frozenset({"type", "text", "emoji", "verbatim"})
_OPTION_FIELDS: Final = frozenset({"text", "value", "description", "url"})
_CONFIRM_FIELDS: Final = frozenset({"title", "text", "confirm", "deny", "style"})
_STYLES: Final = frozenset({"primary", "danger"})
_TRIGGERS: Final = frozenset({"on_enter_pressed", "on_character_entered"})

INVALID_BLOCKS: Final = "invalid_blocks"
MSG_BLOCKS_TOO_LONG: Final = "msg_blocks_too_long"
MSG_TOO_LONG: Final = "msg_too_long"


@dataclass(frozen=True, slots=True)
class Problem:
    """One broken limit: the JSON path, what is wrong, a machine code, and its severity."""

    path: str
    message: str
    code: str = INVALID_BLOCKS
    warning: bool = False

    def __str__(self) -> str:
        """``path: message``, the form ``check_message`` returns."""
        return f"{self.path}: {self.message}"


def check_message(blocks: list[dict[str, Any]], text: str | None = None) -> list[str]:
    """Every limit a message with these ``blocks`` and top-level ``text`` breaks."""
    return [str(p) for p in message_problems(blocks, text) if not p.warning]


def check_view(view: dict[str, Any]) -> list[str]:
    """Every limit this modal ``view`` breaks."""
    return [str(p) for p in view_problems(view) if not p.warning]


def message_problems(blocks: object, text: object = None) -> list[Problem]:
    """Errors and warnings for a message, as ``Problem`` records."""
    checker = _Checker(modal=False)
    checker.blocks(blocks, MAX_BLOCKS_MESSAGE)
    if checker.markdown_total > MAX_MARKDOWN_TOTAL:
        checker.add(
            "blocks",
            f"{checker.markdown_total} characters in markdown blocks, "
            f"Slack allows at most {MAX_MARKDOWN_TOTAL} in one message",
        )
    total = block_text_length(blocks) if isinstance(blocks, list) else 0
    if total > MESSAGE_TEXT_BUDGET:
        checker.add(
            "blocks",
            f"{total} characters of text in all blocks, "
            f"Slack allows at most {MESSAGE_TEXT_BUDGET} (msg_blocks_too_long)",
            MSG_BLOCKS_TOO_LONG,
        )
    if text is not None:
        if not isinstance(text, str):
            checker.add("text", "must be a string")
        elif len(text) > MAX_MESSAGE_TEXT:
            checker.add("text", _too_long(len(text), MAX_MESSAGE_TEXT), MSG_TOO_LONG)
        elif len(text) > RECOMMENDED_MESSAGE_TEXT:
            checker.problems.append(
                Problem(
                    "text",
                    f"{len(text)} characters, Slack recommends at most {RECOMMENDED_MESSAGE_TEXT}",
                    MSG_TOO_LONG,
                    warning=True,
                )
            )
    return checker.problems


def view_problems(view: object) -> list[Problem]:
    """Errors for a modal view, as ``Problem`` records."""
    checker = _Checker(modal=True)
    if not isinstance(view, Mapping):
        checker.add("view", f"must be an object, got {_kind(view)}")
        return checker.problems
    if view.get("type") != "modal":
        checker.add("type", f"must be 'modal', got {view.get('type')!r}")
    checker.text(view.get("title"), "title", MAX_MODAL_TITLE, plain=True)
    checker.text(view.get("close"), "close", MAX_MODAL_CLOSE, plain=True, required=False)
    checker.text(view.get("submit"), "submit", MAX_MODAL_SUBMIT, plain=True, required=False)
    for key, limit in (
        ("private_metadata", MAX_PRIVATE_METADATA),
        ("callback_id", MAX_CALLBACK_ID),
        ("external_id", MAX_EXTERNAL_ID),
    ):
        checker.string(view.get(key), key, limit, required=False)
    for key in ("clear_on_close", "notify_on_close", "submit_disabled"):
        checker.boolean(view.get(key), key)
    blocks = view.get("blocks")
    if blocks is None:
        checker.add("blocks", "required")
    else:
        checker.blocks(blocks, MAX_BLOCKS_MODAL)
    has_input = isinstance(blocks, list) and any(
        isinstance(b, Mapping) and b.get("type") == "input" for b in blocks
    )
    if has_input and view.get("submit") is None:
        checker.add("submit", "required when the view has an input block")
    return checker.problems


def block_text_length(blocks: Iterable[object]) -> int:
    """Characters of text in ``blocks``, as counted against ``MESSAGE_TEXT_BUDGET``.

    Counted: the ``text`` of every text object (labels, options, placeholders, dialogs
    included), of every markdown block and of every rich_text leaf. Not counted: ids, values,
    urls and other non-display strings.
    """
    total = 0
    for block in blocks:
        total += _display_text(block)
    return total


def _display_text(node: object) -> int:
    if isinstance(node, list):
        return sum(_display_text(n) for n in node)
    if not isinstance(node, Mapping):
        return 0
    total = 0
    kind = node.get("type")
    text = node.get("text")
    if isinstance(text, str) and kind in _TEXT_TYPES | {"markdown", "text", "link"}:
        total += len(text)
    for key, value in node.items():
        if key != "text" or not isinstance(value, str):
            total += _display_text(value)
    return total


def _too_long(n: int, limit: int, noun: str = "characters") -> str:
    return f"{n} {noun}, Slack allows at most {limit}"


def _kind(value: object) -> str:
    return "null" if value is None else type(value).__name__


class _Checker:
    """Walks one payload, collecting problems and the running text totals."""

    def __init__(self, *, modal: bool) -> None:
        self.modal = modal
        self.problems: list[Problem] = []
        self.markdown_total = 0
        self._block_ids: dict[str, str] = {}

    def add(self, path: str, message: str, code: str = INVALID_BLOCKS) -> None:
        self.problems.append(Problem(path, message, code))

    # Scalars.

    def string(
        self,
        value: object,
        path: str,
        limit: int | None,
        *,
        required: bool = True,
        minimum: int = 0,
    ) -> None:
        if value is None:
            if required:
                self.add(path, "required")
            return
        if not isinstance(value, str):
            self.add(path, f"must be a string, got {_kind(value)}")
        elif limit is not None and len(value) > limit:
            self.add(path, _too_long(len(value), limit))
        elif len(value) < minimum:
            self.add(path, f"{len(value)} characters, Slack requires at least {minimum}")

    def boolean(self, value: object, path: str) -> None:
        if value is not None and not isinstance(value, bool):
            self.add(path, f"must be true or false, got {_kind(value)}")

    def integer(self, value: object, path: str, low: int, high: int | None) -> int | None:
        if value is None:
            return None
        if not isinstance(value, int) or isinstance(value, bool):
            self.add(path, f"must be an integer, got {_kind(value)}")
            return None
        if value < low:
            self.add(path, f"is {value}, Slack requires at least {low}")
        elif high is not None and value > high:
            self.add(path, f"is {value}, Slack allows at most {high}")
        return value

    def fields(self, obj: Mapping[str, Any], path: str, allowed: Iterable[str], what: str) -> None:
        allowed = set(allowed)
        for key in obj:
            if key not in allowed:
                self.add(f"{path}.{key}", f"not a field of {what}")

    def items(
        self,
        value: object,
        path: str,
        limit: int | None,
        *,
        minimum: int = 1,
        required: bool = True,
    ) -> list[Any]:
        if value is None:
            if required:
                self.add(path, "required")
            return []
        if not isinstance(value, list):
            self.add(path, f"must be a list, got {_kind(value)}")
            return []
        if limit is not None and len(value) > limit:
            self.add(path, _too_long(len(value), limit, "items"))
        elif len(value) < minimum:
            self.add(path, f"{len(value)} items, Slack requires at least {minimum}")
        return value

    # Text objects.

    def text(
        self,
        value: object,
        path: str,
        limit: int = MAX_TEXT,
        *,
        plain: bool = False,
        required: bool = True,
    ) -> None:
        if value is None:
            if required:
                self.add(path, "required")
            return
        if not isinstance(value, Mapping):
            self.add(path, f"must be a text object, got {_kind(value)}")
            return
        kind = value.get("type")
        if kind not in _TEXT_TYPES:
            self.add(f"{path}.type", f"must be plain_text or mrkdwn, got {kind!r}")
        elif plain and kind != "plain_text":
            self.add(f"{path}.type", f"must be plain_text, got {kind!r}")
        self.fields(value, path, _TEXT_FIELDS, "a text object")
        if kind == "mrkdwn" and "emoji" in value:
            self.add(f"{path}.emoji", "only plain_text takes emoji")
        if kind == "plain_text" and "verbatim" in value:
            self.add(f"{path}.verbatim", "only mrkdwn takes verbatim")
        self.boolean(value.get("emoji"), f"{path}.emoji")
        self.boolean(value.get("verbatim"), f"{path}.verbatim")
        self.string(value.get("text"), f"{path}.text", limit, minimum=1)

    # Blocks.

    def blocks(self, blocks: object, limit: int) -> None:
        if not isinstance(blocks, list):
            self.add("blocks", f"must be a list of blocks, got {_kind(blocks)}")
            return
        if len(blocks) > limit:
            surface = "modal" if self.modal else "message"
            self.add("blocks", f"{len(blocks)} blocks, Slack allows at most {limit} in a {surface}")
        for i, block in enumerate(blocks):
            self.block(block, f"blocks[{i}]")

    def block(self, block: object, path: str) -> None:
        if not isinstance(block, Mapping):
            self.add(path, f"must be a block object, got {_kind(block)}")
            return
        kind = block.get("type")
        if not isinstance(kind, str) or kind not in _BLOCK_FIELDS:
            self.add(f"{path}.type", f"unsupported block type {kind!r}")
            return
        self.fields(block, path, _BLOCK_FIELDS[kind] | {"type", "block_id"}, f"a {kind} block")
        block_id = block.get("block_id")
        self.string(block_id, f"{path}.block_id", MAX_BLOCK_ID, required=False, minimum=1)
        if isinstance(block_id, str):
            first = self._block_ids.setdefault(block_id, path)
            if first != path:
                self.add(f"{path}.block_id", f"{block_id!r} is already used by {first}")
        _BLOCK_CHECKS[kind](self, block, path)

    def _section(self, block: Mapping[str, Any], path: str) -> None:
        if block.get("text") is None and block.get("fields") is None:
            self.add(path, "a section needs text or fields")
        self.text(block.get("text"), f"{path}.text", MAX_SECTION_TEXT, required=False)
        fields = self.items(
            block.get("fields"), f"{path}.fields", MAX_SECTION_FIELDS, required=False
        )
        for i, field in enumerate(fields):
            self.text(field, f"{path}.fields[{i}]", MAX_SECTION_FIELD_TEXT)
        self.boolean(block.get("expand"), f"{path}.expand")
        if block.get("accessory") is not None:
            self.element(
                block["accessory"], f"{path}.accessory", ACCESSORY_ELEMENT_TYPES, "a section", {}
            )

    def _header(self, block: Mapping[str, Any], path: str) -> None:
        self.text(block.get("text"), f"{path}.text", MAX_HEADER_TEXT, plain=True)

    def _context(self, block: Mapping[str, Any], path: str) -> None:
        elements = self.items(block.get("elements"), f"{path}.elements", MAX_CONTEXT_ELEMENTS)
        for i, element in enumerate(elements):
            where = f"{path}.elements[{i}]"
            kind = element.get("type") if isinstance(element, Mapping) else None
            if kind in _TEXT_TYPES:
                self.text(element, where)
            else:
                self.element(element, where, frozenset({"image"}), "a context block", {})

    def _divider(self, block: Mapping[str, Any], path: str) -> None:
        pass

    def _actions(self, block: Mapping[str, Any], path: str) -> None:
        elements = self.items(block.get("elements"), f"{path}.elements", MAX_ACTIONS_ELEMENTS)
        action_ids: dict[str, str] = {}
        for i, element in enumerate(elements):
            where = f"{path}.elements[{i}]"
            self.element(element, where, ACTIONS_ELEMENT_TYPES, "an actions block", action_ids)

    def _input(self, block: Mapping[str, Any], path: str) -> None:
        self.text(block.get("label"), f"{path}.label", MAX_INPUT_LABEL, plain=True)
        self.text(block.get("hint"), f"{path}.hint", MAX_INPUT_HINT, plain=True, required=False)
        self.boolean(block.get("optional"), f"{path}.optional")
        self.boolean(block.get("dispatch_action"), f"{path}.dispatch_action")
        if block.get("element") is None:
            self.add(f"{path}.element", "required")
        else:
            where = f"{path}.element"
            self.element(block["element"], where, INPUT_ELEMENT_TYPES, "an input block", {})

    def _markdown(self, block: Mapping[str, Any], path: str) -> None:
        if self.modal:
            self.add(f"{path}.type", "markdown blocks are allowed only in messages")
        text = block.get("text")
        self.string(text, f"{path}.text", None, minimum=1)
        if isinstance(text, str):
            self.markdown_total += len(text)

    def _image(self, block: Mapping[str, Any], path: str) -> None:
        self._image_source(block, path)
        self.text(block.get("title"), f"{path}.title", MAX_ALT_TEXT, plain=True, required=False)

    def _rich_text(self, block: Mapping[str, Any], path: str) -> None:
        self.items(block.get("elements"), f"{path}.elements", None, minimum=0)

    # Elements.

    def element(
        self,
        element: object,
        path: str,
        allowed: frozenset[str],
        where: str,
        action_ids: dict[str, str],
    ) -> None:
        if not isinstance(element, Mapping):
            self.add(path, f"must be an element object, got {_kind(element)}")
            return
        kind = element.get("type")
        if not isinstance(kind, str) or kind not in _ELEMENT_FIELDS:
            self.add(f"{path}.type", f"unsupported element type {kind!r}")
            return
        if kind not in allowed:
            self.add(f"{path}.type", f"a {kind} is not allowed in {where}")
            return
        interactive = kind != "image"
        extra = {"type", "action_id"} if interactive else {"type"}
        self.fields(element, path, _ELEMENT_FIELDS[kind] | extra, f"a {kind}")
        action_id = element.get("action_id")
        if interactive:
            self.string(action_id, f"{path}.action_id", MAX_ACTION_ID, required=False, minimum=1)
        if isinstance(action_id, str):
            first = action_ids.setdefault(action_id, path)
            if first != path:
                self.add(f"{path}.action_id", f"{action_id!r} is already used by {first}")
        if element.get("confirm") is not None:
            self.confirm(element["confirm"], f"{path}.confirm")
        _ELEMENT_CHECKS[kind](self, element, path)

    def _button_element(self, element: Mapping[str, Any], path: str) -> None:
        self.text(element.get("text"), f"{path}.text", MAX_BUTTON_TEXT, plain=True)
        self.string(element.get("value"), f"{path}.value", MAX_BUTTON_VALUE, required=False)
        self.string(element.get("url"), f"{path}.url", MAX_BUTTON_URL, required=False)
        label = element.get("accessibility_label")
        self.string(label, f"{path}.accessibility_label", MAX_ACCESSIBILITY_LABEL, required=False)
        style = element.get("style")
        if style is not None and style not in _STYLES:
            self.add(f"{path}.style", f"must be 'primary' or 'danger', got {style!r}")

    def _static_select_element(self, element: Mapping[str, Any], path: str) -> None:
        values = self._select(element, path)
        self._initial(element.get("initial_option"), f"{path}.initial_option", values)

    def _multi_static_select_element(self, element: Mapping[str, Any], path: str) -> None:
        values = self._select(element, path)
        initial = element.get("initial_options")
        for i, option in enumerate(
            self.items(initial, f"{path}.initial_options", None, required=False)
        ):
            self._initial(option, f"{path}.initial_options[{i}]", values)
        self.integer(element.get("max_selected_items"), f"{path}.max_selected_items", 1, None)

    def _checkboxes_element(self, element: Mapping[str, Any], path: str) -> None:
        values = self.options(element.get("options"), f"{path}.options", MAX_CHECKBOX_OPTIONS)
        initial = element.get("initial_options")
        for i, option in enumerate(
            self.items(initial, f"{path}.initial_options", None, required=False)
        ):
            self._initial(option, f"{path}.initial_options[{i}]", values)

    def _radio_buttons_element(self, element: Mapping[str, Any], path: str) -> None:
        values = self.options(element.get("options"), f"{path}.options", MAX_RADIO_OPTIONS)
        self._initial(element.get("initial_option"), f"{path}.initial_option", values)

    def _overflow_element(self, element: Mapping[str, Any], path: str) -> None:
        self.options(
            element.get("options"), f"{path}.options", MAX_OVERFLOW_OPTIONS, menu=True, urls=True
        )

    def _plain_text_input_element(self, element: Mapping[str, Any], path: str) -> None:
        most = self.integer(element.get("max_length"), f"{path}.max_length", 1, MAX_INPUT_LENGTH)
        least = self.integer(element.get("min_length"), f"{path}.min_length", 0, MAX_INPUT_LENGTH)
        if most is not None and least is not None and 0 < most < least:
            self.add(f"{path}.min_length", f"is {least}, more than max_length {most}")
        limit = most if most is not None and 1 <= most <= MAX_INPUT_LENGTH else MAX_INPUT_LENGTH
        self.string(element.get("initial_value"), f"{path}.initial_value", limit, required=False)
        self._input_common(element, path)
        self.boolean(element.get("multiline"), f"{path}.multiline")
        config = element.get("dispatch_action_config")
        if config is None:
            return
        where = f"{path}.dispatch_action_config"
        if not isinstance(config, Mapping):
            self.add(where, f"must be an object, got {_kind(config)}")
            return
        self.fields(config, where, {"trigger_actions_on"}, "a dispatch action configuration")
        for i, trigger in enumerate(
            self.items(
                config.get("trigger_actions_on"), f"{where}.trigger_actions_on", 2, required=False
            )
        ):
            if trigger not in _TRIGGERS:
                self.add(
                    f"{where}.trigger_actions_on[{i}]",
                    f"must be 'on_enter_pressed' or 'on_character_entered', got {trigger!r}",
                )

    def _image_element(self, element: Mapping[str, Any], path: str) -> None:
        self._image_source(element, path)

    def _image_source(self, image: Mapping[str, Any], path: str) -> None:
        has_url, has_file = image.get("image_url") is not None, image.get("slack_file") is not None
        if has_url == has_file:
            self.add(path, "give exactly one of image_url and slack_file")
        self.string(image.get("image_url"), f"{path}.image_url", MAX_IMAGE_URL, required=False)
        self.string(image.get("alt_text"), f"{path}.alt_text", MAX_ALT_TEXT, minimum=1)

    def _input_common(self, element: Mapping[str, Any], path: str) -> None:
        """The fields every input-capable element shares: placeholder, focus_on_load."""
        self.text(
            element.get("placeholder"),
            f"{path}.placeholder",
            MAX_PLACEHOLDER,
            plain=True,
            required=False,
        )
        self.boolean(element.get("focus_on_load"), f"{path}.focus_on_load")

    # Composition objects.

    def _select(self, element: Mapping[str, Any], path: str) -> dict[str, str]:
        """Options or option groups of a menu; returns option value -> option text."""
        self._input_common(element, path)
        options, groups = element.get("options"), element.get("option_groups")
        if options is not None and groups is not None:
            self.add(path, "give options or option_groups, not both")
        if options is None and groups is None:
            self.add(f"{path}.options", "required (or option_groups)")
            return {}
        if options is not None:
            return self.options(options, f"{path}.options", MAX_OPTIONS, menu=True)
        values: dict[str, str] = {}
        seen: dict[str, str] = {}
        for i, group in enumerate(self.items(groups, f"{path}.option_groups", MAX_OPTION_GROUPS)):
            where = f"{path}.option_groups[{i}]"
            if not isinstance(group, Mapping):
                self.add(where, f"must be an option group, got {_kind(group)}")
                continue
            self.fields(group, where, {"label", "options"}, "an option group")
            self.text(group.get("label"), f"{where}.label", MAX_OPTION_GROUP_LABEL, plain=True)
            values |= self.options(
                group.get("options"), f"{where}.options", MAX_OPTIONS, menu=True, seen=seen
            )
        return values

    def options(
        self,
        options: object,
        path: str,
        limit: int,
        *,
        menu: bool = False,
        urls: bool = False,
        seen: dict[str, str] | None = None,
    ) -> dict[str, str]:
        """Check a list of option objects; returns option value -> option text."""
        seen = {} if seen is None else seen
        values: dict[str, str] = {}
        for i, option in enumerate(self.items(options, path, limit)):
            where = f"{path}[{i}]"
            if not isinstance(option, Mapping):
                self.add(where, f"must be an option object, got {_kind(option)}")
                continue
            allowed = _OPTION_FIELDS if urls else _OPTION_FIELDS - {"url"}
            self.fields(option, where, allowed, "an option here")
            self.text(option.get("text"), f"{where}.text", MAX_OPTION_TEXT, plain=menu)
            self.text(
                option.get("description"),
                f"{where}.description",
                MAX_OPTION_DESCRIPTION,
                plain=menu,
                required=False,
            )
            self.string(option.get("url"), f"{where}.url", MAX_OPTION_URL, required=False)
            value = option.get("value")
            self.string(value, f"{where}.value", MAX_OPTION_VALUE, minimum=1)
            if isinstance(value, str):
                first = seen.setdefault(value, where)
                if first != where:
                    self.add(f"{where}.value", f"{value!r} is already used by {first}")
                values[value] = _option_text(option)
        return values

    def _initial(self, option: object, path: str, values: Mapping[str, str]) -> None:
        if option is None:
            return
        if not isinstance(option, Mapping):
            self.add(path, f"must be an option object, got {_kind(option)}")
            return
        value = option.get("value")
        if not isinstance(value, str) or values.get(value) != _option_text(option):
            self.add(path, f"matches no option (value {value!r})")

    def confirm(self, dialog: object, path: str) -> None:
        if not isinstance(dialog, Mapping):
            self.add(path, f"must be a confirmation dialog, got {_kind(dialog)}")
            return
        self.fields(dialog, path, _CONFIRM_FIELDS, "a confirmation dialog")
        self.text(dialog.get("title"), f"{path}.title", MAX_CONFIRM_TITLE, plain=True)
        self.text(dialog.get("text"), f"{path}.text", MAX_CONFIRM_TEXT)
        self.text(dialog.get("confirm"), f"{path}.confirm", MAX_CONFIRM_BUTTON, plain=True)
        self.text(dialog.get("deny"), f"{path}.deny", MAX_CONFIRM_BUTTON, plain=True)
        style = dialog.get("style")
        if style is not None and style not in _STYLES:
            self.add(f"{path}.style", f"must be 'primary' or 'danger', got {style!r}")


_Check = Callable[[_Checker, Mapping[str, Any], str], None]
_BLOCK_CHECKS: Final[Mapping[str, _Check]] = {
    "section": _Checker._section,
    "header": _Checker._header,
    "context": _Checker._context,
    "divider": _Checker._divider,
    "actions": _Checker._actions,
    "input": _Checker._input,
    "markdown": _Checker._markdown,
    "image": _Checker._image,
    "rich_text": _Checker._rich_text,
}
_ELEMENT_CHECKS: Final[Mapping[str, _Check]] = {
    "button": _Checker._button_element,
    "static_select": _Checker._static_select_element,
    "multi_static_select": _Checker._multi_static_select_element,
    "checkboxes": _Checker._checkboxes_element,
    "radio_buttons": _Checker._radio_buttons_element,
    "overflow": _Checker._overflow_element,
    "plain_text_input": _Checker._plain_text_input_element,
    "image": _Checker._image_element,
}


def _option_text(option: Mapping[str, Any]) -> str:
    text = option.get("text")
    body = text.get("text") if isinstance(text, Mapping) else None
    return body if isinstance(body, str) else ""
