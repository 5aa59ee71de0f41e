"""What a person's click produces: the ``actions[0]`` entry and ``state.values`` (pure).

A click is described the way a person sees the message: the element's ``action_id`` (with
``block_id`` when the id repeats across blocks), or the text on a button or an option. The
current selections of the message's stateful elements are passed as ``values``, keyed by
``action_id`` or by ``(block_id, action_id)``:

- ``static_select`` / ``radio_buttons``: an option value (or option text), or ``None``;
- ``multi_static_select`` / ``checkboxes``: a list of option values (or texts);
- ``plain_text_input``: the typed text, or ``None``.

Elements with no entry keep their ``initial_option(s)`` / ``initial_value``, as in Slack.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

__all__ = [
    "STATEFUL_TYPES",
    "Selection",
    "Target",
    "Values",
    "action_entry",
    "find_target",
    "selection_of",
    "state_values",
    "targets",
    "with_choice",
]

Selection: TypeAlias = str | Sequence[str] | None
Values: TypeAlias = Mapping[str | tuple[str, str], Selection]

STATEFUL_TYPES: Final = frozenset(
    {"static_select", "multi_static_select", "checkboxes", "radio_buttons", "plain_text_input"}
)
_SINGLE: Final = frozenset({"static_select", "radio_buttons", "overflow"})
_MULTI: Final = frozenset({"multi_static_select", "checkboxes"})
_MISSING: Final = object()


@dataclass(frozen=True, slots=True)
class Target:
    """An interactive element and the block it sits in."""

    block: Mapping[str, Any]
    element: Mapping[str, Any]

    @property
    def block_id(self) -> str:
        """The block's id."""
        return str(self.block.get("block_id", ""))

    @property
    def action_id(self) -> str:
        """The element's action id."""
        return str(self.element.get("action_id", ""))

    @property
    def type(self) -> str:
        """The element type (``button``, ``checkboxes``, ...)."""
        return str(self.element.get("type", ""))


def targets(blocks: Sequence[Mapping[str, Any]]) -> Iterator[Target]:
    """Every interactive element in ``blocks``, in display order."""
    for block in blocks:
        elements: list[Any] = []
        if block.get("type") == "actions":
            elements = list(block.get("elements") or [])
        for key in ("accessory", "element"):
            if isinstance(block.get(key), Mapping):
                elements.append(block[key])
        for element in elements:
            if isinstance(element, Mapping) and element.get("type") != "image":
                yield Target(block, element)


def find_target(
    blocks: Sequence[Mapping[str, Any]],
    *,
    action_id: str | None = None,
    block_id: str | None = None,
    text: str | None = None,
) -> tuple[Target, str | None]:
    """The element a click means, and the option value when ``text`` named an option.

    ``text`` matches a button's label first, then an option's text. ``LookupError`` when
    nothing or more than one element matches.
    """
    found: list[tuple[Target, str | None]] = []
    for target in targets(blocks):
        if action_id is not None and target.action_id != action_id:
            continue
        if block_id is not None and target.block_id != block_id:
            continue
        if text is None or (target.type == "button" and _label(target.element) == text):
            found.append((target, None))
    if text is not None and not found:
        for target in targets(blocks):
            if (action_id or target.action_id) != target.action_id:
                continue
            if (block_id or target.block_id) != target.block_id:
                continue
            option = _option(target.element, text)
            if option is not None:
                found.append((target, str(option.get("value"))))
    if len(found) != 1:
        wanted = ", ".join(
            f"{k}={v!r}"
            for k, v in (("action_id", action_id), ("block_id", block_id), ("text", text))
            if v is not None
        )
        raise LookupError(f"{len(found)} elements match {wanted or 'nothing given'}")
    return found[0]


def selection_of(target: Target, values: Values) -> Selection:
    """The element's current selection: from ``values``, else its initial state."""
    chosen = values.get((target.block_id, target.action_id), _MISSING)
    if chosen is _MISSING:
        chosen = values.get(target.action_id, _MISSING)
    if chosen is not _MISSING:
        return chosen  # type: ignore[return-value]
    element = target.element
    if target.type == "plain_text_input":
        initial = element.get("initial_value")
        return str(initial) if initial is not None else None
    if target.type in _MULTI:
        return [str(o.get("value")) for o in element.get("initial_options") or []]
    initial_option = element.get("initial_option")
    return str(initial_option.get("value")) if isinstance(initial_option, Mapping) else None


def with_choice(target: Target, option_value: str | None, values: Values) -> Values:
    """``values`` after choosing ``option_value`` on ``target`` (ticking toggles a checkbox)."""
    if option_value is None:
        return values
    key = (target.block_id, target.action_id)
    if target.type in _MULTI:
        current = selection_of(target, values)
        chosen = [current] if isinstance(current, str) else list(current or [])
        if option_value in chosen:
            chosen.remove(option_value)
        else:
            chosen.append(option_value)
        return {**values, key: chosen}
    return {**values, key: option_value}


def state_values(
    blocks: Sequence[Mapping[str, Any]], values: Values | None = None
) -> dict[str, dict[str, dict[str, Any]]]:
    """``state.values`` for every stateful element in ``blocks``."""
    values = values or {}
    state: dict[str, dict[str, dict[str, Any]]] = {}
    for target in targets(blocks):
        if target.type in STATEFUL_TYPES:
            entry = {"type": target.type, **_chosen(target, selection_of(target, values))}
            state.setdefault(target.block_id, {})[target.action_id] = entry
    return state


def action_entry(target: Target, selection: Selection, action_ts: str) -> dict[str, Any]:
    """The ``actions[0]`` entry of a ``block_actions`` payload for this element."""
    element = target.element
    entry: dict[str, Any] = {
        "type": target.type,
        "action_id": target.action_id,
        "block_id": target.block_id,
        "action_ts": action_ts,
    }
    if target.type == "button":
        entry["text"] = copy.deepcopy(element.get("text"))
        for key in ("value", "style", "url"):
            if key in element:
                entry[key] = element[key]
    else:
        entry.update(_chosen(target, selection))
    return entry


def _chosen(target: Target, selection: Selection) -> dict[str, Any]:
    if target.type == "plain_text_input":
        return {"value": selection if isinstance(selection, str) else None}
    if target.type in _MULTI:
        chosen = [selection] if isinstance(selection, str) else list(selection or [])
        return {"selected_options": [_option_or_fail(target, c) for c in chosen]}
    if target.type in _SINGLE:
        if selection is not None and not isinstance(selection, str):
            raise ValueError(f"{target.action_id}: a {target.type} takes one option")
        option = None if selection is None else _option_or_fail(target, selection)
        return {"selected_option": option}
    return {}


def _option_or_fail(target: Target, wanted: str) -> dict[str, Any]:
    option = _option(target.element, wanted)
    if option is None:
        raise ValueError(f"{target.action_id}: no option with value or text {wanted!r}")
    return copy.deepcopy(dict(option))


def _option(element: Mapping[str, Any], wanted: str) -> Mapping[str, Any] | None:
    options: list[Mapping[str, Any]] = list(element.get("options") or [])
    for group in element.get("option_groups") or []:
        options.extend(group.get("options") or [])
    for option in options:
        if option.get("value") == wanted:
            return option
    for option in options:
        if _label(option) == wanted:
            return option
    return None


def _label(obj: Mapping[str, Any]) -> str | None:
    text = obj.get("text")
    return text.get("text") if isinstance(text, Mapping) else None
