"""``Checker``: walks one Block Kit payload against the rows of ``table.py``."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from adapters.slack.blockkit import (
    INVALID_BLOCKS,
    MAX_ACTION_ID,
    MAX_BLOCK_ID,
    MAX_INPUT_LENGTH,
    MAX_OPTION_GROUPS,
    Problem,
    too_long,
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
    Rule,
    Special,
    String,
    Text,
    kind_of,
)
from adapters.slack.sandbox.blockcheck.table import (
    BLOCKS,
    ELEMENTS,
    MAX_IMAGE_URL,
    MENU_OPTIONS,
    OPTION_GROUP,
    SECTION_TEXT,
    TEXT_FIELDS,
    TEXT_IN_CONTEXT,
    TEXT_TYPES,
)

__all__ = ["Checker"]

Values = dict[str, str]
"""Option value -> option text, of the options a menu or choice element offers."""


def _at(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _option_text(option: Mapping[str, Any]) -> str:
    text = option.get("text")
    body = text.get("text") if isinstance(text, Mapping) else None
    return body if isinstance(body, str) else ""


class Checker:
    """Collects the problems of one payload (a message's blocks, or a modal)."""

    def __init__(self, *, modal: bool) -> None:
        self.modal = modal
        self.problems: list[Problem] = []
        self._block_ids: dict[str, str] = {}

    def add(self, path: str, message: str, code: str = INVALID_BLOCKS) -> None:
        """Record one problem at ``path``."""
        self.problems.append(Problem(path, message, code))

    # -- rows -------------------------------------------------------------------------

    def fields(self, obj: Mapping[str, Any], path: str, allowed: Iterable[str], what: str) -> None:
        """Report every field of ``obj`` that is not ``allowed``."""
        allowed = set(allowed)
        for key in obj:
            if key not in allowed:
                self.add(f"{path}.{key}", f"not a field of {what}")

    def rules(self, obj: Mapping[str, Any], path: str, row: Row) -> None:
        """Check every field of ``row`` in ``obj``, in the row's order."""
        values: Values = {}
        done: set[str] = set()
        for key, rule in row.items():
            if not isinstance(rule, Special):
                values = self.rule(rule, obj.get(key), _at(path, key)) or values
            elif rule.name not in done:  # one check covers all of its fields
                done.add(rule.name)
                values = _SPECIAL[rule.name](self, obj, path, key, values) or values

    def rule(self, rule: Rule, value: object, path: str) -> Values | None:
        """Check one value against its rule; options return what they offer."""
        match rule:
            case Text():
                self.text(value, path, rule)
            case String(limit, required, minimum):
                self.string(value, path, limit, required=required, minimum=minimum)
            case Flag():
                if value is not None and not isinstance(value, bool):
                    self.add(path, f"must be true or false, got {kind_of(value)}")
            case Integer(low, high):
                self.integer(value, path, low, high)
            case OneOf(allowed):
                if value is not None and value not in allowed:
                    self.add(path, f"must be {' or '.join(map(repr, allowed))}, got {value!r}")
            case Items(limit, minimum, required, each):
                items = self.items(value, path, limit, minimum=minimum, required=required)
                if each is not None:
                    for i, item in enumerate(items):
                        self.rule(each, item, f"{path}[{i}]")
            case Object(row, what):
                if value is not None and not isinstance(value, Mapping):
                    self.add(path, f"must be {what}, got {kind_of(value)}")
                elif value is not None:
                    self.fields(value, path, row, what)
                    self.rules(value, path, row)
            case Elements():
                self.elements(value, path, rule)
            case Options():
                return self.options(value, path, rule)
        return None

    # -- scalars and text objects -----------------------------------------------------

    def string(
        self, value: object, path: str, limit: int | None, *, required: bool, minimum: int = 0
    ) -> None:
        """A string of ``minimum`` to ``limit`` characters."""
        if value is None:
            if required:
                self.add(path, "required")
        elif not isinstance(value, str):
            self.add(path, f"must be a string, got {kind_of(value)}")
        elif limit is not None and len(value) > limit:
            self.add(path, too_long(len(value), limit))
        elif len(value) < minimum:
            self.add(path, f"{len(value)} characters, Slack requires at least {minimum}")

    def integer(self, value: object, path: str, low: int, high: int | None) -> None:
        """An integer from ``low`` to ``high``."""
        if value is None:
            return
        if not isinstance(value, int) or isinstance(value, bool):
            self.add(path, f"must be an integer, got {kind_of(value)}")
        elif value < low:
            self.add(path, f"is {value}, Slack requires at least {low}")
        elif high is not None and value > high:
            self.add(path, f"is {value}, Slack allows at most {high}")

    def items(
        self, value: object, path: str, limit: int | None, *, minimum: int = 1, required: bool
    ) -> list[Any]:
        """A list of ``minimum`` to ``limit`` items; returns the items to look into."""
        if value is None:
            if required:
                self.add(path, "required")
            return []
        if not isinstance(value, list):
            self.add(path, f"must be a list, got {kind_of(value)}")
            return []
        if limit is not None and len(value) > limit:
            self.add(path, too_long(len(value), limit, "items"))
        elif len(value) < minimum:
            self.add(path, f"{len(value)} items, Slack requires at least {minimum}")
        return value

    def text(self, value: object, path: str, rule: Text) -> None:
        """A ``plain_text`` or ``mrkdwn`` text object."""
        if value is None:
            if rule.required:
                self.add(path, "required")
            return
        if not isinstance(value, Mapping):
            self.add(path, f"must be a text object, got {kind_of(value)}")
            return
        kind = value.get("type")
        if kind not in TEXT_TYPES:
            self.add(f"{path}.type", f"must be plain_text or mrkdwn, got {kind!r}")
        elif rule.plain and kind != "plain_text":
            self.add(f"{path}.type", f"must be plain_text, got {kind!r}")
        self.fields(value, path, TEXT_FIELDS, "a text object")
        if kind == "mrkdwn" and "emoji" in value:
            self.add(f"{path}.emoji", "only plain_text takes emoji")
        if kind == "plain_text" and "verbatim" in value:
            self.add(f"{path}.verbatim", "only mrkdwn takes verbatim")
        self.rule(Flag(), value.get("emoji"), f"{path}.emoji")
        self.rule(Flag(), value.get("verbatim"), f"{path}.verbatim")
        self.string(value.get("text"), f"{path}.text", rule.limit, required=True, minimum=1)

    # -- blocks, elements, options ----------------------------------------------------

    def blocks(self, blocks: object, limit: int) -> None:
        """A surface's list of blocks, at most ``limit``."""
        if not isinstance(blocks, list):
            self.add("blocks", f"must be a list of blocks, got {kind_of(blocks)}")
            return
        if len(blocks) > limit:
            surface = "modal" if self.modal else "message"
            self.add("blocks", f"{len(blocks)} blocks, Slack allows at most {limit} in a {surface}")
        for i, block in enumerate(blocks):
            self.block(block, f"blocks[{i}]")

    def typed(
        self, obj: object, path: str, table: Mapping[str, Row], what: str
    ) -> tuple[Mapping[str, Any], str] | None:
        """``obj`` and its type if it is ``what`` (``a block``) of a type ``table`` has."""
        if not isinstance(obj, Mapping):
            self.add(path, f"must be {what} object, got {kind_of(obj)}")
            return None
        kind = obj.get("type")
        if not isinstance(kind, str) or kind not in table:
            self.add(f"{path}.type", f"unsupported {what.split()[-1]} type {kind!r}")
            return None
        return obj, kind

    def block(self, value: object, path: str) -> None:
        """One block, by its type's row."""
        if (typed := self.typed(value, path, BLOCKS, "a block")) is None:
            return
        block, kind = typed
        self.fields(block, path, BLOCKS[kind].keys() | {"type", "block_id"}, f"a {kind} block")
        self._unique(block, path, "block_id", MAX_BLOCK_ID, self._block_ids)
        self.rules(block, path, BLOCKS[kind])

    def elements(self, value: object, path: str, rule: Elements) -> None:
        """One element, or a list of them (action ids unique within the list)."""
        if rule.many is None:
            if value is not None:
                self.element(value, path, rule, {})
            elif rule.required:
                self.add(path, "required")
            return
        action_ids: dict[str, str] = {}
        for i, element in enumerate(self.items(value, path, rule.many, required=rule.required)):
            where = f"{path}[{i}]"
            if rule.texts and isinstance(element, Mapping) and element.get("type") in TEXT_TYPES:
                self.text(element, where, TEXT_IN_CONTEXT)
            else:
                self.element(element, where, rule, action_ids)

    def element(self, value: object, path: str, rule: Elements, action_ids: dict[str, str]) -> None:
        """One element, by its type's row, where ``rule`` allows its type."""
        if (typed := self.typed(value, path, ELEMENTS, "an element")) is None:
            return
        element, kind = typed
        if kind not in rule.allowed:
            self.add(f"{path}.type", f"a {kind} is not allowed in {rule.where}")
            return
        interactive = kind != "image"
        extra = {"type", "action_id"} if interactive else {"type"}
        self.fields(element, path, ELEMENTS[kind].keys() | extra, f"a {kind}")
        if interactive:
            self._unique(element, path, "action_id", MAX_ACTION_ID, action_ids)
        self.rules(element, path, ELEMENTS[kind])

    def options(
        self, options: object, path: str, rule: Options, seen: dict[str, str] | None = None
    ) -> Values:
        """A list of option objects with unique values; returns value -> text."""
        seen = {} if seen is None else seen
        values: Values = {}
        for i, option in enumerate(self.items(options, path, rule.limit, required=rule.required)):
            where = f"{path}[{i}]"
            if not isinstance(option, Mapping):
                self.add(where, f"must be an option object, got {kind_of(option)}")
                continue
            self.fields(option, where, rule.row, "an option here")
            self.rules(option, where, rule.row)
            value = option.get("value")
            if isinstance(value, str):
                self._unique(option, where, "value", None, seen, check=False)
                values[value] = _option_text(option)
        return values

    def _unique(
        self,
        obj: Mapping[str, Any],
        path: str,
        key: str,
        limit: int | None,
        seen: dict[str, str],
        *,
        check: bool = True,
    ) -> None:
        value = obj.get(key)
        if check:
            self.string(value, f"{path}.{key}", limit, required=False, minimum=1)
        if isinstance(value, str):
            first = seen.setdefault(value, path)
            if first != path:
                self.add(f"{path}.{key}", f"{value!r} is already used by {first}")


# -- the rules that span several fields ---------------------------------------------------


def _section(c: Checker, obj: Mapping[str, Any], path: str, key: str, values: Values) -> None:
    if obj.get("text") is None and obj.get("fields") is None:
        c.add(path, "a section needs text or fields")
    c.text(obj.get("text"), f"{path}.text", SECTION_TEXT)


def _markdown(c: Checker, obj: Mapping[str, Any], path: str, key: str, values: Values) -> None:
    if c.modal:
        c.add(f"{path}.type", "markdown blocks are allowed only in messages")
    c.string(obj.get("text"), f"{path}.text", None, required=True, minimum=1)


def _image(c: Checker, obj: Mapping[str, Any], path: str, key: str, values: Values) -> None:
    if (obj.get("image_url") is None) == (obj.get("slack_file") is None):
        c.add(path, "give exactly one of image_url and slack_file")
    c.string(obj.get("image_url"), f"{path}.image_url", MAX_IMAGE_URL, required=False)


def _menu(c: Checker, obj: Mapping[str, Any], path: str, key: str, values: Values) -> Values:
    options, groups = obj.get("options"), obj.get("option_groups")
    if options is not None and groups is not None:
        c.add(path, "give options or option_groups, not both")
    if options is None and groups is None:
        c.add(f"{path}.options", "required (or option_groups)")
        return {}
    if options is not None:
        return c.options(options, f"{path}.options", MENU_OPTIONS)
    found: Values = {}
    seen: dict[str, str] = {}  # values are unique across groups
    groups = c.items(groups, f"{path}.option_groups", MAX_OPTION_GROUPS, required=True)
    for i, group in enumerate(groups):
        where = f"{path}.option_groups[{i}]"
        if not isinstance(group, Mapping):
            c.add(where, f"must be an option group, got {kind_of(group)}")
            continue
        c.fields(group, where, OPTION_GROUP, "an option group")
        c.rule(OPTION_GROUP["label"], group.get("label"), f"{where}.label")
        found |= c.options(group.get("options"), f"{where}.options", MENU_OPTIONS, seen)
    return found


def _initial(c: Checker, obj: Mapping[str, Any], path: str, key: str, values: Values) -> None:
    chosen, where = obj.get(key), _at(path, key)
    if key == "initial_options":
        for i, option in enumerate(c.items(chosen, where, None, required=False)):
            _among(c, option, f"{where}[{i}]", values)
    else:
        _among(c, chosen, where, values)


def _among(c: Checker, option: object, path: str, values: Values) -> None:
    if option is None:
        return
    if not isinstance(option, Mapping):
        c.add(path, f"must be an option object, got {kind_of(option)}")
        return
    value = option.get("value")
    if not isinstance(value, str) or values.get(value) != _option_text(option):
        c.add(path, f"matches no option (value {value!r})")


def _initial_value(c: Checker, obj: Mapping[str, Any], path: str, key: str, values: Values) -> None:
    def number(value: object) -> int | None:
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    most, least = number(obj.get("max_length")), number(obj.get("min_length"))
    if most is not None and least is not None and 0 < most < least:
        c.add(f"{path}.min_length", f"is {least}, more than max_length {most}")
    limit = most if most is not None and 1 <= most <= MAX_INPUT_LENGTH else MAX_INPUT_LENGTH
    c.string(obj.get("initial_value"), f"{path}.initial_value", limit, required=False)


_Special = Callable[[Checker, Mapping[str, Any], str, str, Values], Values | None]
_SPECIAL: Final[Mapping[str, _Special]] = {
    "section": _section,
    "markdown": _markdown,
    "image": _image,
    "menu": _menu,
    "initial": _initial,
    "initial_value": _initial_value,
}
