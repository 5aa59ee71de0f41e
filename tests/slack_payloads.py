"""Builders for Slack interaction payloads, shaped like the ones Slack really sends.

Tests use these to turn a rendered message (or modal) into the payload a person's click,
choice or submission would produce, so parsing is always exercised against realistic
input rather than hand-written fragments. Shapes follow slack-platform.md §2.2 (the
``block_actions`` and ``view_submission`` examples from bolt-python's own tests, and the
docs' field list)::

    blocks = render_open(record).blocks
    payload = click(blocks, button_text="Approve")          # a button click
    payload = choose(blocks, question=1, labels=["Red"])     # a radio/checkbox/menu change
    payload = click(blocks, action_id="aq1.submit",          # Submit with the form's state
                    state_values=state_after(blocks, {1: ["Red"]}))
    payload = submit_view(render_text_modal(record, 0), "my answer")

What the builders reproduce from Slack:

- ``block_actions``: ``type``, ``user{id, username, name, team_id}``, ``api_app_id``,
  ``token``, ``container{type: "message", message_ts, channel_id, is_ephemeral}``,
  ``trigger_id``, ``team{id, domain}``, ``enterprise``, ``is_enterprise_install``,
  ``channel{id, name}``, ``message{type, subtype, text, user, bot_id, ts, team, blocks}``,
  ``state{values}``, ``response_url`` and one ``actions[]`` entry.
- The echoed ``message.blocks`` get a Slack-generated ``block_id`` wherever the app sent
  none (Slack fills them in), except ``markdown`` blocks, whose ``block_id`` Slack drops.
- ``state.values`` holds every stateful element of the message (radio buttons, checkboxes,
  static and multi-static selects), as the person currently sees it: the element's
  ``initial_option(s)`` unless the person changed it. Untouched single choices are
  ``selected_option: None``; untouched multiple choices are ``selected_options: []``.
- ``actions[0]`` is a button (``value``, ``text``, ``style`` when styled) or a choice
  element (``selected_option`` / ``selected_options``; ``None`` when a menu is cleared).
- ``view_submission``: the view echoed with ``id``, ``team_id``, ``hash``, ``state``,
  ``root_view_id`` and friends, plus ``response_urls: []``.

Every builder raises ``LookupError`` with the candidates it saw when the element asked
for is missing or ambiguous, so a failing test says what the message actually held.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from adapters.slack.model import ids

__all__ = [
    "ALICE",
    "API_APP_ID",
    "BOB",
    "CHANNEL",
    "MESSAGE_TS",
    "TEAM",
    "buttons",
    "choice_elements",
    "choose",
    "click",
    "find_button",
    "find_choice",
    "message_state",
    "option_text",
    "state_after",
    "submit_view",
    "user_object",
]

Block = dict[str, Any]
StateValues = dict[str, dict[str, dict[str, Any]]]

ALICE = "U0ALICE001"
"""A person who answers (the default ``user`` of every builder)."""
BOB = "U0BOB00002"
"""Another person, for races and authorization tests."""
CHANNEL = "C0QUESTION"
"""The channel the question message was posted in (default)."""
MESSAGE_TS = "1700000000.000100"
"""The question message's ``ts`` (default)."""
TEAM = "T0TEAM0001"
API_APP_ID = "A0APP00001"
BOT_ID = "B0BOT00001"
BOT_USER = "U0BOTUSER1"

STATEFUL_TYPES = frozenset({"radio_buttons", "checkboxes", "static_select", "multi_static_select"})
"""Element types whose value Slack reports in ``state.values``."""
MULTIPLE_TYPES = frozenset({"checkboxes", "multi_static_select"})
"""Stateful element types that hold several options (``selected_options``)."""

_counter = itertools.count(1)


def _next_ts() -> str:
    """A fresh, increasing ``action_ts`` / id suffix, as Slack's look."""
    return f"1700000100.{next(_counter):06d}"


def user_object(user: str) -> dict[str, str]:
    """The ``user`` object of an interaction payload for user id ``user``."""
    name = user.lower()
    return {"id": user, "username": name, "name": name, "team_id": TEAM}


def option_text(option: Mapping[str, Any]) -> str:
    """The displayed text of an option object."""
    text = option.get("text")
    return str(text.get("text")) if isinstance(text, Mapping) else ""


# ---------------------------------------------------------------------------------------
# Finding elements in rendered blocks


def _elements(blocks: Sequence[Mapping[str, Any]]) -> Iterable[tuple[Mapping[str, Any], Block]]:
    """(block, element) for every interactive element: actions elements, accessories, inputs."""
    for block in blocks:
        if block.get("type") == "actions":
            for element in block.get("elements", []):
                yield block, element
        elif block.get("type") == "section" and isinstance(block.get("accessory"), dict):
            yield block, block["accessory"]
        elif block.get("type") == "input" and isinstance(block.get("element"), dict):
            yield block, block["element"]


def _question_of(block: Mapping[str, Any]) -> int | None:
    ref = ids.parse_block_id(block.get("block_id"))
    return None if ref is None else ref.question


def _describe(block: Mapping[str, Any], element: Mapping[str, Any]) -> str:
    text = element.get("text")
    shown = f" {text.get('text')!r}" if isinstance(text, Mapping) else ""
    return (
        f"{element.get('type')}{shown} action_id={element.get('action_id')!r} "
        f"block_id={block.get('block_id')!r}"
    )


def _one(
    found: list[tuple[Mapping[str, Any], Block]],
    seen: list[tuple[Mapping[str, Any], Block]],
    what: str,
) -> tuple[Mapping[str, Any], Block]:
    if len(found) == 1:
        return found[0]
    listing = "\n  ".join(_describe(block, element) for block, element in seen) or "(none)"
    problem = "no" if not found else f"{len(found)}"
    raise LookupError(f"{problem} {what} in the message; it holds:\n  {listing}")


def buttons(blocks: Sequence[Mapping[str, Any]]) -> list[Block]:
    """Every button element in ``blocks``, in order."""
    return [element for _, element in _elements(blocks) if element.get("type") == "button"]


def choice_elements(blocks: Sequence[Mapping[str, Any]]) -> list[Block]:
    """Every stateful choice element (radio, checkboxes, selects) in ``blocks``, in order."""
    return [element for _, element in _elements(blocks) if element.get("type") in STATEFUL_TYPES]


def find_button(
    blocks: Sequence[Mapping[str, Any]],
    *,
    action_id: str | None = None,
    button_text: str | None = None,
    value: str | None = None,
    question: int | None = None,
) -> tuple[Mapping[str, Any], Block]:
    """The one button matching every given filter, with its block.

    ``button_text`` is the displayed (possibly shortened) text; ``question`` keeps buttons
    in blocks whose ``block_id`` names that question index.
    """
    seen = [(b, e) for b, e in _elements(blocks) if e.get("type") == "button"]
    found = [
        (block, element)
        for block, element in seen
        if (action_id is None or element.get("action_id") == action_id)
        and (button_text is None or option_text(element) == button_text)
        and (value is None or element.get("value") == value)
        and (question is None or _question_of(block) == question)
    ]
    what = (
        f"button matching action_id={action_id!r} text={button_text!r} value={value!r} "
        f"question={question!r}"
    )
    return _one(found, seen, what)


def find_choice(
    blocks: Sequence[Mapping[str, Any]],
    *,
    action_id: str | None = None,
    block_id: str | None = None,
    question: int | None = None,
    element_type: str | None = None,
) -> tuple[Mapping[str, Any], Block]:
    """The one radio/checkbox/select element matching every given filter, with its block."""
    seen = [(b, e) for b, e in _elements(blocks) if e.get("type") in STATEFUL_TYPES]
    found = [
        (block, element)
        for block, element in seen
        if (action_id is None or element.get("action_id") == action_id)
        and (block_id is None or block.get("block_id") == block_id)
        and (question is None or _question_of(block) == question)
        and (element_type is None or element.get("type") == element_type)
    ]
    what = (
        f"choice element matching action_id={action_id!r} block_id={block_id!r} "
        f"question={question!r} type={element_type!r}"
    )
    return _one(found, seen, what)


def _all_options(element: Mapping[str, Any]) -> list[Block]:
    if "option_groups" in element:
        return [option for group in element["option_groups"] for option in group["options"]]
    return list(element.get("options", []))


def _pick_options(
    element: Mapping[str, Any],
    labels: Sequence[str] | None,
    values: Sequence[str] | None,
) -> list[Block]:
    options = _all_options(element)
    chosen: list[Block] = []
    if labels is not None:
        for label in labels:
            matches = [o for o in options if option_text(o) == label]
            if len(matches) != 1:
                shown = [option_text(o) for o in options]
                raise LookupError(f"{len(matches)} options shown as {label!r}; options: {shown}")
            chosen.append(matches[0])
    if values is not None:
        for value in values:
            matches = [o for o in options if o.get("value") == value]
            if len(matches) != 1:
                raise LookupError(f"{len(matches)} options with value {value!r}")
            chosen.append(matches[0])
    return [copy.deepcopy(option) for option in chosen]


# ---------------------------------------------------------------------------------------
# State


def _element_state(element: Mapping[str, Any], chosen: list[Block] | None) -> dict[str, Any]:
    kind = str(element.get("type"))
    if kind in MULTIPLE_TYPES:
        if chosen is None:
            chosen = copy.deepcopy(list(element.get("initial_options", [])))
        return {"type": kind, "selected_options": chosen}
    if chosen is None:
        initial = element.get("initial_option")
        one = copy.deepcopy(initial) if isinstance(initial, dict) else None
    else:
        one = chosen[0] if chosen else None
    return {"type": kind, "selected_option": one}


def _echoed_block_id(block: Mapping[str, Any], position: int) -> str | None:
    block_id = block.get("block_id")
    if isinstance(block_id, str):
        return block_id
    if block.get("type") == "markdown":
        return None
    return f"Gen{position:02d}"  # Slack fills in an id like "XTkTR" for blocks sent without one


def _block_id_of(blocks: Sequence[Mapping[str, Any]], block: Mapping[str, Any]) -> str | None:
    """The ``block_id`` Slack reports for ``block`` (one of ``blocks``)."""
    position = next(i for i, candidate in enumerate(blocks) if candidate is block)
    return _echoed_block_id(block, position)


def message_state(blocks: Sequence[Mapping[str, Any]]) -> StateValues:
    """``state.values`` of a message as first shown: each choice element's initial state."""
    values: StateValues = {}
    for position, block in enumerate(blocks):
        if block.get("type") != "actions":
            continue
        block_id = _echoed_block_id(block, position)
        for element in block.get("elements", []):
            if element.get("type") in STATEFUL_TYPES and block_id is not None:
                action = str(element.get("action_id"))
                values.setdefault(block_id, {})[action] = _element_state(element, None)
    return values


def state_after(
    blocks: Sequence[Mapping[str, Any]],
    choices: Mapping[int, Sequence[str]],
    *,
    by: str = "label",
) -> StateValues:
    """``state.values`` after the person set question ``i``'s widget to ``choices[i]``.

    ``choices`` maps a question index to the displayed option texts (``by="label"``) or
    option values (``by="value"``) now chosen; an empty list clears the widget. Other
    widgets keep what they showed.
    """
    values = message_state(blocks)
    for question, wanted in choices.items():
        block, element = find_choice(blocks, question=question)
        labels, option_values = (wanted, None) if by == "label" else (None, wanted)
        chosen = _pick_options(element, labels, option_values)
        block_id = str(_block_id_of(blocks, block))
        values[block_id][str(element["action_id"])] = _element_state(element, chosen)
    return values


def _merge(base: StateValues, extra: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> None:
    for block_id, actions in extra.items():
        target = base.setdefault(block_id, {})
        for action_id, state in actions.items():
            target[action_id] = copy.deepcopy(dict(state))


# ---------------------------------------------------------------------------------------
# Payloads


def _echoed_blocks(blocks: Sequence[Mapping[str, Any]]) -> list[Block]:
    echoed = []
    for position, block in enumerate(blocks):
        copied = copy.deepcopy(dict(block))
        block_id = _echoed_block_id(block, position)
        if block_id is None:
            copied.pop("block_id", None)
        else:
            copied["block_id"] = block_id
        echoed.append(copied)
    return echoed


def _block_actions(
    blocks: Sequence[Mapping[str, Any]],
    action: Block,
    *,
    user: str,
    channel: str,
    ts: str,
    state: StateValues,
    trigger_id: str | None,
    thread_ts: str | None,
) -> dict[str, Any]:
    message: dict[str, Any] = {
        "type": "message",
        "subtype": "bot_message",
        "text": "This content can't be displayed.",
        "user": BOT_USER,
        "bot_id": BOT_ID,
        "ts": ts,
        "team": TEAM,
        "blocks": _echoed_blocks(blocks),
    }
    container: dict[str, Any] = {
        "type": "message",
        "message_ts": ts,
        "channel_id": channel,
        "is_ephemeral": False,
    }
    if thread_ts is not None:
        message["thread_ts"] = thread_ts
        container["thread_ts"] = thread_ts
    serial = _next_ts()
    return {
        "type": "block_actions",
        "user": user_object(user),
        "api_app_id": API_APP_ID,
        "token": "verification_token",
        "container": container,
        "trigger_id": trigger_id or f"{serial}.{TEAM}.trigger",
        "team": {"id": TEAM, "domain": "workspace-domain"},
        "enterprise": None,
        "is_enterprise_install": False,
        "channel": {"id": channel, "name": "questions"},
        "message": message,
        "state": {"values": state},
        "response_url": f"https://hooks.slack.com/actions/{TEAM}/{serial}/response",
        "actions": [action],
    }


def click(
    message_blocks: Sequence[Mapping[str, Any]],
    *,
    user: str = ALICE,
    channel: str = CHANNEL,
    ts: str = MESSAGE_TS,
    action_id: str | None = None,
    button_text: str | None = None,
    value: str | None = None,
    question: int | None = None,
    state_values: Mapping[str, Mapping[str, Mapping[str, Any]]] | None = None,
    trigger_id: str | None = None,
    thread_ts: str | None = None,
) -> dict[str, Any]:
    """The ``block_actions`` payload of ``user`` clicking a button of this message.

    The button is the only one matching every filter given (``action_id``, displayed
    ``button_text``, ``value``, ``question`` index in its ``block_id``). ``state.values``
    is the message's initial state (``message_state``) with ``state_values`` merged over
    it: pass ``state_after(...)`` to send the choices a person made before clicking.
    """
    block, element = find_button(
        message_blocks,
        action_id=action_id,
        button_text=button_text,
        value=value,
        question=question,
    )
    action: Block = {
        "action_id": element.get("action_id"),
        "block_id": _block_id_of(message_blocks, block),
        "text": copy.deepcopy(element.get("text")),
        "value": element.get("value"),
        "type": "button",
        "action_ts": _next_ts(),
    }
    if "style" in element:
        action["style"] = element["style"]
    state = message_state(message_blocks)
    if state_values is not None:
        _merge(state, state_values)
    return _block_actions(
        message_blocks,
        action,
        user=user,
        channel=channel,
        ts=ts,
        state=state,
        trigger_id=trigger_id,
        thread_ts=thread_ts,
    )


def choose(
    message_blocks: Sequence[Mapping[str, Any]],
    *,
    labels: Sequence[str] | None = None,
    values: Sequence[str] | None = None,
    user: str = ALICE,
    channel: str = CHANNEL,
    ts: str = MESSAGE_TS,
    action_id: str | None = None,
    block_id: str | None = None,
    question: int | None = None,
    state_values: Mapping[str, Mapping[str, Mapping[str, Any]]] | None = None,
    trigger_id: str | None = None,
) -> dict[str, Any]:
    """The ``block_actions`` payload of ``user`` changing a radio/checkbox/select element.

    The element is the only stateful one matching the filters (``action_id``,
    ``block_id``, ``question`` index in its ``block_id``). The options now chosen are given
    by displayed text (``labels``) and/or option ``values``; give none (or empty lists) for
    a deselection: a single choice then reports ``selected_option: None`` and a multiple
    choice ``selected_options: []``. Checkboxes and multi-selects report the *whole* new
    selection, as Slack does on every tick. ``state.values`` reflects the change too.
    """
    block, element = find_choice(
        message_blocks, action_id=action_id, block_id=block_id, question=question
    )
    chosen = _pick_options(element, labels, values)
    kind = str(element.get("type"))
    echoed_id = _block_id_of(message_blocks, block)
    action: Block = {
        "type": kind,
        "action_id": element.get("action_id"),
        "block_id": echoed_id,
    }
    if kind in MULTIPLE_TYPES:
        action["selected_options"] = chosen
    else:
        action["selected_option"] = chosen[0] if chosen else None
    if "placeholder" in element:
        action["placeholder"] = copy.deepcopy(element["placeholder"])
    action["action_ts"] = _next_ts()
    state = message_state(message_blocks)
    if state_values is not None:
        _merge(state, state_values)
    state.setdefault(str(echoed_id), {})[str(element.get("action_id"))] = _element_state(
        element, chosen
    )
    return _block_actions(
        message_blocks,
        action,
        user=user,
        channel=channel,
        ts=ts,
        state=state,
        trigger_id=trigger_id,
        thread_ts=None,
    )


def submit_view(
    view: Mapping[str, Any],
    text: str | None,
    user: str = ALICE,
    *,
    values: Mapping[str, Mapping[str, Mapping[str, Any]]] | None = None,
) -> dict[str, Any]:
    """The ``view_submission`` payload of ``user`` submitting this modal with ``text``.

    ``text`` goes into the modal's single ``plain_text_input`` (``None``: left empty, which
    Slack reports as ``value: None``). ``values`` replaces the computed ``state.values``
    entirely, for modals with several inputs or for malformed submissions.
    """
    if values is None:
        inputs = [
            (block, block["element"])
            for block in view.get("blocks", [])
            if block.get("type") == "input"
            and block.get("element", {}).get("type") == "plain_text_input"
        ]
        if len(inputs) != 1:
            raise LookupError(f"{len(inputs)} plain_text_input blocks in the view; pass values=")
        block, element = inputs[0]
        state: dict[str, Any] = {
            str(block.get("block_id")): {
                str(element.get("action_id")): {"type": "plain_text_input", "value": text}
            }
        }
    else:
        state = copy.deepcopy(dict(values))
    serial = _next_ts()
    view_id = f"V0{next(_counter):08d}"
    echoed = copy.deepcopy(dict(view))
    echoed.update(
        {
            "id": view_id,
            "team_id": TEAM,
            "type": view.get("type", "modal"),
            "blocks": _echoed_blocks(view.get("blocks", [])),
            "private_metadata": view.get("private_metadata", ""),
            "callback_id": view.get("callback_id", ""),
            "state": {"values": state},
            "hash": f"{serial}.HaSh",
            "clear_on_close": view.get("clear_on_close", False),
            "notify_on_close": view.get("notify_on_close", False),
            "previous_view_id": None,
            "root_view_id": view_id,
            "app_id": API_APP_ID,
            "external_id": view.get("external_id", ""),
            "app_installed_team_id": TEAM,
            "bot_id": BOT_ID,
        }
    )
    return {
        "type": "view_submission",
        "team": {"id": TEAM, "domain": "workspace-domain"},
        "user": user_object(user),
        "api_app_id": API_APP_ID,
        "token": "verification_token",
        "trigger_id": f"{serial}.{TEAM}.trigger",
        "view": echoed,
        "response_urls": [],
        "is_enterprise_install": False,
        "enterprise": None,
    }
