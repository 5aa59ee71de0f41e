"""Pure parsing: a Slack interaction payload -> a typed interaction of ours, or ``None``."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal
from urllib.parse import urlsplit

from adapters.httpguard import is_loopback
from adapters.slack.model import ids

SLACK_HOOKS: Final = "hooks.slack.com"
"""The host of Slack's ``response_url``s (``https://hooks.slack.com/actions/T…/…/…``)."""
MAX_RESPONSE_URL: Final = 2048
"""Longer than any ``response_url`` Slack mints (about 80 characters)."""


@dataclass(frozen=True, slots=True)
class Origin:
    """Who acted (their id and name, as the payload gives it), and on which message."""

    user: str
    channel: str | None = None
    message_ts: str | None = None
    trigger_id: str | None = None
    name: str | None = None
    response_url: str | None = field(default=None, compare=False)
    """Where Slack takes a reply to this click (checked by ``response_url``); not compared:
    it says how to answer the person, not who acted where."""
    view_id: str | None = None
    """The whole-plan modal the person acted in (or on top of): shown again once decided."""


@dataclass(frozen=True, slots=True)
class Pick:
    """A button or menu choice that answers a one-question request at once."""

    request_id: str
    question: int
    option: int
    origin: Origin


@dataclass(frozen=True, slots=True)
class DraftChange:
    """A form widget changed: the options now chosen for one question."""

    request_id: str
    question: int
    options: tuple[int, ...]
    origin: Origin


@dataclass(frozen=True, slots=True)
class OpenText:
    """ "Other…", "Answer…" or "Decline with feedback…": open the free-text modal."""

    request_id: str
    question: int
    origin: Origin


@dataclass(frozen=True, slots=True)
class _Whole:
    """A click on a whole request, not on one of its questions."""

    request_id: str
    origin: Origin


class ReadPlan(_Whole):
    """ "Read the whole plan": open the plan in a modal, Approve and Decline at its end."""


@dataclass(frozen=True, slots=True)
class Submit(_Whole):
    """The form's Submit, with the choices its message showed to the person."""

    selections: Mapping[int, tuple[int, ...]] = field(default_factory=dict)


class Dismiss(_Whole):
    """The person chose not to answer at all."""


class ConfirmSkip(_Whole):
    """The person confirmed sending the form with nothing chosen (a skip)."""


@dataclass(frozen=True, slots=True)
class TextAnswer:
    """Free text submitted from the modal for one question."""

    request_id: str
    question: int
    text: str
    origin: Origin
    input_block_id: str


@dataclass(frozen=True, slots=True)
class Approve:
    """Allow once or Reject, clicked on a tool-permission approval."""

    request_id: str
    outcome: Literal["allowed-once", "rejected"]
    origin: Origin


Interaction = (
    Pick | DraftChange | OpenText | ReadPlan | Submit | Dismiss | TextAnswer | ConfirmSkip | Approve
)


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def acting_name(body: Mapping[str, Any]) -> str | None:
    """The acting person's name from the payload's ``user`` (``name``, else ``username``)."""
    user = _dict(body.get("user"))
    name = _str(user.get("name")) or _str(user.get("username"))
    return name[:80] if name else None


def response_url(body: Mapping[str, Any]) -> str | None:
    """The payload's ``response_url`` if it can be Slack's, else ``None``."""
    value = body.get("response_url")
    if not isinstance(value, str) or not 0 < len(value) <= MAX_RESPONSE_URL:
        return None
    if not value.isprintable() or " " in value:
        return None  # urlsplit would silently drop tabs and newlines
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError:
        return None
    host = parts.hostname or ""
    if "@" in parts.netloc or parts.fragment or len(parts.path) < 2:
        return None
    slack = parts.scheme == "https" and host == SLACK_HOOKS and port in (None, 443)
    local = parts.scheme in ("http", "https") and is_loopback(host)
    return value if slack or local else None


def answers_here(url: str, api_url: str) -> bool:
    """Whether the bot may POST to ``url`` (a ``response_url`` that ``response_url`` took)
    when it calls Slack's Web API at ``api_url``."""
    try:
        hook, api = urlsplit(url), urlsplit(api_url)
        if hook.scheme == "https" and hook.hostname == SLACK_HOOKS:
            return hook.port in (None, 443)
        where = (hook.scheme, hook.hostname, hook.port)
        return hook.hostname is not None and where == (api.scheme, api.hostname, api.port)
    except ValueError:
        return False


def _chosen(state: Mapping[str, Any]) -> tuple[int, ...] | None:
    """Option indices from one element's state or action (``None``: not a choice element)."""
    if "selected_options" in state:
        raw = state.get("selected_options")
        options = raw if isinstance(raw, list) else []
    elif "selected_option" in state:
        one = state.get("selected_option")
        options = [one] if isinstance(one, dict) else []
    else:
        return None
    found = (ids.parse_index(_dict(option).get("value")) for option in options)
    return tuple(dict.fromkeys(index for index in found if index is not None))


def _inputs(
    payload: Mapping[str, Any], request_id: str, kind: ids.ActionKind
) -> Iterator[tuple[str, ids.BlockRef, dict[str, Any]]]:
    """The ``kind`` inputs of ``request_id`` in the ``state`` of a view or of a message."""
    for block, actions in _dict(_dict(payload.get("state")).get("values")).items():
        ref = ids.parse_block_id(block)
        if ref is not None and ref.request_id == request_id:
            for action, state in _dict(actions).items():
                if ids.parse_action_id(action) == kind:
                    yield block, ref, _dict(state)


def _selections(body: Mapping[str, Any], request_id: str) -> dict[int, tuple[int, ...]]:
    return {
        ref.question: chosen
        for _, ref, state in _inputs(body, request_id, "draft")
        if ref.question is not None and (chosen := _chosen(state)) is not None
    }


def origin_of(body: Mapping[str, Any]) -> Origin | None:
    """Who acted where, from a ``block_actions`` payload (``None``: no user id in it)."""
    user = _str(_dict(body.get("user")).get("id"))
    if user is None:
        return None
    container, view = _dict(body.get("container")), _dict(body.get("view"))
    return Origin(
        user=user,
        channel=_str(container.get("channel_id")) or _str(_dict(body.get("channel")).get("id")),
        message_ts=_str(container.get("message_ts")) or _str(_dict(body.get("message")).get("ts")),
        trigger_id=_str(body.get("trigger_id")),
        name=acting_name(body),
        response_url=response_url(body),
        view_id=_str(view.get("id")) if view.get("type") == "modal" else None,
    )


def parse_block_actions(body: Mapping[str, Any]) -> Interaction | None:
    """The interaction a ``block_actions`` payload carries, or ``None`` if it is not ours."""
    if not isinstance(body, Mapping) or body.get("type") != "block_actions":
        return None
    actions = body.get("actions")
    if not isinstance(actions, list) or not actions:
        return None
    action = _dict(actions[0])
    ref, origin = ids.parse_block_id(action.get("block_id")), origin_of(body)
    if ref is None or origin is None:
        return None
    rid, kind = ref.request_id, ids.parse_action_id(action.get("action_id"))
    if kind is None:
        approval = ids.APPROVAL_ACTION_PATTERN.match(str(action.get("action_id")))
        if approval is None:
            return None
        return Approve(rid, "allowed-once" if approval.group(1) == "allow" else "rejected", origin)
    if kind == "submit":
        return Submit(rid, origin, _selections(body, rid))
    if kind in ("dismiss", "read"):
        return (Dismiss if kind == "dismiss" else ReadPlan)(rid, origin)
    if kind == "link" or ref.question is None:
        return None  # a link: Slack opens the URL, nothing for us to do
    if kind == "text":
        return OpenText(rid, ref.question, origin)
    if kind == "draft":
        chosen = _chosen(action)
        return None if chosen is None else DraftChange(rid, ref.question, chosen, origin)
    # kind == "pick": a button's value, or a menu's selected option
    if action.get("type") == "button":
        option = ids.parse_index(action.get("value"))
    else:
        chosen = _chosen(action)
        option = chosen[0] if chosen else None
    return None if option is None else Pick(rid, ref.question, option, origin)


def parse_view_submission(body: Mapping[str, Any]) -> TextAnswer | ConfirmSkip | None:
    """What a ``view_submission`` of our modal carries (free text, a skip), or ``None``."""
    if not isinstance(body, Mapping) or body.get("type") != "view_submission":
        return None
    view = _dict(body.get("view"))
    kind = ids.parse_callback_id(view.get("callback_id"))
    if kind is None:
        return None
    ref = ids.parse_private_metadata(view.get("private_metadata"))
    user = _str(_dict(body.get("user")).get("id"))
    if ref is None or user is None:
        return None
    # No response_url of its own: the one of the click that opened the modal, carried in
    # its external_id (an earlier release's modal: in its metadata), checked again.
    carried = ids.parse_external_id(view.get("external_id")) or ref.reply_url
    reply = response_url({"response_url": carried})
    under = None if kind == "skip" else _str(view.get("previous_view_id"))  # the plan's modal
    origin = Origin(user, name=acting_name(body), response_url=reply, view_id=under)
    if kind == "skip":
        return ConfirmSkip(ref.request_id, origin)
    for block, _, state in _inputs(view, ref.request_id, "text"):
        text = state.get("value")
        return TextAnswer(
            ref.request_id, ref.question, text if isinstance(text, str) else "", origin, block
        )
    return None
