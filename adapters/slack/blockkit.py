"""Slack's Block Kit limits, and the check before a post: slack_sdk's models check each block's
own limits, ``totals`` what no block shows; Slack's other rules are the sandbox's to check."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from slack_sdk.errors import SlackObjectFormationError
from slack_sdk.models.basic_objects import JsonObject
from slack_sdk.models.blocks import Block, BlockElement, MarkdownTextObject, PlainTextObject

MAX_BLOCKS_MESSAGE: Final = 50
MAX_BLOCKS_MODAL: Final = 100
MESSAGE_TEXT_BUDGET: Final = 12_000
"""Sum of all text in a message's blocks; above it Slack answers ``msg_blocks_too_long``."""
MAX_MARKDOWN_TOTAL: Final = 12_000
MAX_MESSAGE_TEXT: Final = 40_000
RECOMMENDED_MESSAGE_TEXT: Final = 4_000
MAX_BLOCK_ID: Final = 255
MAX_ACTION_ID: Final = 255
MAX_SECTION_TEXT: Final = 3000
MAX_HEADER_TEXT: Final = 150
MAX_INPUT_LABEL: Final = 2000
MAX_BUTTON_TEXT: Final = 75
MAX_CONFIRM_TEXT: Final = 300
MAX_OPTIONS: Final = 100
MAX_OPTION_GROUPS: Final = 100
MAX_OPTION_TEXT: Final = 75
MAX_OPTION_DESCRIPTION: Final = 75
MAX_CHECKBOX_OPTIONS: Final = 10
MAX_RADIO_OPTIONS: Final = 10
MAX_INPUT_LENGTH: Final = 3000
MAX_MODAL_TITLE: Final = 24
MAX_MODAL_SUBMIT: Final = 24
MAX_MODAL_CLOSE: Final = 24
MAX_PRIVATE_METADATA: Final = 3000
MAX_EXTERNAL_ID: Final = 255

INVALID_BLOCKS: Final = "invalid_blocks"
MSG_BLOCKS_TOO_LONG: Final = "msg_blocks_too_long"
MSG_TOO_LONG: Final = "msg_too_long"

_DISPLAY_TYPES: Final = frozenset({"plain_text", "mrkdwn", "markdown", "text", "link"})
_UNCHECKED: Final = frozenset({"rich_text"})
"""Block types slack_sdk's models check nothing of: parsing one would only cost time."""


@dataclass(frozen=True, slots=True)
class Problem:
    """One broken limit: the JSON path, what is wrong, Slack's error code, and its severity."""

    path: str
    message: str
    code: str = INVALID_BLOCKS
    warning: bool = False

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


def too_long(n: int, limit: int, noun: str = "characters") -> str:
    """The message for ``n`` characters (or items) over ``limit``."""
    return f"{n} {noun}, Slack allows at most {limit}"


def check_message(blocks: list[dict[str, Any]], text: str | None = None) -> list[str]:
    """Every limit a message with these ``blocks`` and top-level ``text`` breaks: slack_sdk's
    word on each block, then ``totals`` (its warnings left out)."""
    problems = []
    if len(blocks) > MAX_BLOCKS_MESSAGE:
        said = too_long(len(blocks), MAX_BLOCKS_MESSAGE, "blocks")
        problems.append(f"blocks: {said} in a message")
    for i, block in enumerate(blocks):
        if block.get("type") in _UNCHECKED:
            continue
        try:
            _validate(Block.parse(_with_elements(block)))
        except SlackObjectFormationError as exc:
            problems.append(f"blocks[{i}]: {exc}")
    return problems + [str(p) for p in totals(blocks, text) if not p.warning]


def _element_types() -> dict[str, type[JsonObject]]:
    """slack_sdk's element model of each type, looked up once (``BlockElement.parse`` is slow)."""
    found: dict[str, type[JsonObject]] = {
        "plain_text": PlainTextObject,
        "mrkdwn": MarkdownTextObject,
    }
    for cls in BlockElement._get_sub_block_elements():
        kind = getattr(cls, "type", None)
        if isinstance(kind, str):
            found.setdefault(kind, cls)  # the first, as ``BlockElement.parse`` finds it
    return found


_ELEMENT_TYPES: Final = _element_types()


def _with_elements(block: dict[str, Any]) -> dict[str, Any]:
    """``block`` with its elements as slack_sdk's models, for ``Block.parse``."""

    def model(element: object) -> object:
        if not isinstance(element, dict) or element.get("type") not in _ELEMENT_TYPES:
            return element
        fields = {k: v for k, v in element.items() if k != "type"}
        return _ELEMENT_TYPES[element["type"]](**fields)

    built = dict(block)
    for key in ("elements", "accessory", "element"):
        value = block.get(key)
        if value is not None:
            built[key] = [model(e) for e in value] if isinstance(value, list) else model(value)
    return built


def _validate(model: JsonObject | None) -> None:
    """slack_sdk's checks of ``model`` and every object in it (``to_dict``'s, without
    building the dict again); ``None`` is an unknown type, the sandbox's to name."""
    if model is None:
        return
    model.validate_json()
    for value in vars(model).values():
        for item in value if isinstance(value, list | tuple) else (value,):
            if isinstance(item, JsonObject):
                _validate(item)


def totals(blocks: object, text: object = None) -> list[Problem]:
    """The limits of a whole message: markdown in all blocks, text in all blocks, ``text``."""
    problems = []
    listed = blocks if isinstance(blocks, list) else []
    markdown = sum(
        len(b["text"])
        for b in listed
        if isinstance(b, dict) and b.get("type") == "markdown" and isinstance(b.get("text"), str)
    )
    if markdown > MAX_MARKDOWN_TOTAL:
        said = too_long(markdown, MAX_MARKDOWN_TOTAL, "characters in markdown blocks")
        problems.append(Problem("blocks", f"{said} in one message"))
    total = block_text_length(listed)
    if total > MESSAGE_TEXT_BUDGET:
        said = too_long(total, MESSAGE_TEXT_BUDGET, "characters of text in all blocks")
        problems.append(Problem("blocks", f"{said} (msg_blocks_too_long)", MSG_BLOCKS_TOO_LONG))
    if text is not None and not isinstance(text, str):
        problems.append(Problem("text", "must be a string"))
    elif text is not None and len(text) > MAX_MESSAGE_TEXT:
        problems.append(Problem("text", too_long(len(text), MAX_MESSAGE_TEXT), MSG_TOO_LONG))
    elif text is not None and len(text) > RECOMMENDED_MESSAGE_TEXT:
        said = f"{len(text)} characters, Slack recommends at most {RECOMMENDED_MESSAGE_TEXT}"
        problems.append(Problem("text", said, MSG_TOO_LONG, warning=True))
    return problems


def block_text_length(node: object) -> int:
    """Characters of text in ``node``: a list of blocks, a block or a part of one
    (``MESSAGE_TEXT_BUDGET``)."""
    if isinstance(node, list):
        return sum(block_text_length(n) for n in node)
    if not isinstance(node, dict):
        return 0
    text = node.get("text")
    own = len(text) if isinstance(text, str) and node.get("type") in _DISPLAY_TYPES else 0
    return own + sum(block_text_length(v) for v in node.values() if isinstance(v, dict | list))
