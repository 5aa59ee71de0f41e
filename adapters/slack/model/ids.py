"""One definition of how request ids travel through Slack."""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from typing import Final, Literal, get_args

from adapters.slack.blockkit import (
    MAX_ACTION_ID,
    MAX_BLOCK_ID,
    MAX_EXTERNAL_ID,
    MAX_PRIVATE_METADATA,
)

__all__ = [
    "ACTION_PATTERN",
    "APPROVAL_ACTION_PATTERN",
    "CALLBACK_PATTERN",
    "PREFIX",
    "ActionKind",
    "ApprovalKind",
    "BlockRef",
    "ModalRef",
    "ViewKind",
    "action_id",
    "approval_action_id",
    "block_id",
    "callback_id",
    "external_id",
    "key_request_id",
    "new_request_id",
    "option_value",
    "parse_action_id",
    "parse_block_id",
    "parse_callback_id",
    "parse_external_id",
    "parse_index",
    "parse_private_metadata",
    "private_metadata",
]

PREFIX: Final = "aq1"
SEP: Final = ":"
MAX_ID_LENGTH: Final = min(MAX_BLOCK_ID, MAX_ACTION_ID)
"""The longest ``block_id`` / ``action_id`` Slack takes."""

ActionKind = Literal[
    "pick",  # a button or menu choice that answers a one-question request at once
    "draft",  # a radio, checkbox or menu change inside a form: remembered, not an answer
    "text",  # "Other…" / "Answer…" / "Decline with feedback…": opens a modal
    "submit",  # the form's Submit
    "dismiss",  # the person declines to answer at all
    "link",  # the asker's link (a URL button: Slack opens it, the click needs only an ack)
    "read",  # "Read the whole plan": opens a long plan whole in a modal
]
ViewKind = Literal[
    "text",  # the free-text modal (Other…, Answer…, Decline with feedback…)
    "skip",  # "Submit with nothing selected?": the confirmation of an empty Submit
]
_ACTION_KINDS: Final = frozenset(get_args(ActionKind))
_VIEW_KINDS: Final = frozenset(get_args(ViewKind))

# ``\Z``, not ``$`` (which also matches before a trailing newline), and ASCII digits only
# (``\d`` matches any Unicode digit): an id either is exactly ours or is not ours.
ACTION_PATTERN: Final = re.compile(
    r"^aq1\.(pick|draft|text|submit|dismiss|link|read)(?:\.[0-9]{1,3})?\Z"
)
CALLBACK_PATTERN: Final = re.compile(r"^aq1\.(text|skip)\Z")

ApprovalKind = Literal["allow", "reject"]
"""The two buttons of a tool-permission approval (never routed to the question handler)."""
APPROVAL_ACTION_PATTERN: Final = re.compile(r"^aq1\.(allow|reject)\Z")


def approval_action_id(kind: ApprovalKind) -> str:
    """The ``action_id`` of an approval button: ``aq1.allow`` or ``aq1.reject``."""
    return f"{PREFIX}.{kind}"


_REQUEST_ID = re.compile(r"^[a-z0-9]{8,40}\Z")
_INDEX = re.compile(r"^[0-9]{1,5}\Z")
_PART = re.compile(r"^[a-z]{1,3}[0-9]{0,6}\Z")
MAX_INDEX: Final = 99_999
MAX_SUFFIX: Final = 999


def new_request_id() -> str:
    """A fresh random request id (20 lowercase hex characters)."""
    return secrets.token_hex(10)


def key_request_id(key: str) -> str:
    """The request id for an idempotency key: the same key always gives the same id."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:20]


def _check_request_id(request_id: str) -> None:
    if not _REQUEST_ID.match(request_id):
        raise ValueError(f"request id {request_id!r} must be 8–40 characters of [a-z0-9]")


def _check_index(index: int, what: str) -> None:
    if not 0 <= index <= MAX_INDEX:
        raise ValueError(f"{what} {index} must be between 0 and {MAX_INDEX}")


@dataclass(frozen=True, slots=True)
class BlockRef:
    """What a ``block_id`` of ours names: a request, a question in it (or none), a part."""

    request_id: str
    question: int | None
    part: str


@dataclass(frozen=True, slots=True)
class ModalRef:
    """What a modal's ``private_metadata`` names: the request, the question and, in a modal
    an earlier release opened, the click's ``response_url`` (``interactions`` checks it)."""

    request_id: str
    question: int
    reply_url: str | None = None


def block_id(request_id: str, question: int | None, part: str) -> str:
    """Pack a ``block_id``; ``part`` is a short tag plus a revision (``c3``)."""
    _check_request_id(request_id)
    if not _PART.match(part):
        raise ValueError(f"block part {part!r} must be 1–3 letters and up to 6 digits")
    if question is not None:
        _check_index(question, "a question index")
    index = "-" if question is None else str(question)
    return SEP.join((PREFIX, request_id, index, part))


def parse_block_id(value: object) -> BlockRef | None:
    """Unpack a ``block_id`` of ours, or ``None``."""
    if not isinstance(value, str) or len(value) > MAX_ID_LENGTH:
        return None
    fields = value.split(SEP)
    if len(fields) != 4 or fields[0] != PREFIX:
        return None
    _, request_id, index, part = fields
    if not _REQUEST_ID.match(request_id) or not _PART.match(part):
        return None
    if index == "-":
        return BlockRef(request_id, None, part)
    if not _INDEX.match(index):
        return None
    return BlockRef(request_id, int(index), part)


def action_id(kind: ActionKind, n: int | None = None) -> str:
    """Pack an ``action_id`` for a widget kind; ``n`` keeps it unique inside one block."""
    if kind not in _ACTION_KINDS:
        raise ValueError(f"unknown action kind {kind!r}")
    if n is not None and not 0 <= n <= MAX_SUFFIX:
        raise ValueError(f"an action id suffix must be between 0 and {MAX_SUFFIX}, not {n}")
    return f"{PREFIX}.{kind}" if n is None else f"{PREFIX}.{kind}.{n}"


def parse_action_id(value: object) -> ActionKind | None:
    """The widget kind of an ``action_id`` of ours, or ``None``."""
    if not isinstance(value, str):
        return None
    match = ACTION_PATTERN.match(value)
    if match is None:
        return None
    kind = match.group(1)
    return kind if kind in _ACTION_KINDS else None  # type: ignore[return-value]


def option_value(index: int) -> str:
    """The ``value`` carried by a button or menu option: the option's index."""
    _check_index(index, "an option index")
    return str(index)


def parse_index(value: object) -> int | None:
    """An option or question index from a ``value``, or ``None`` if it is not one."""
    if not isinstance(value, str) or not _INDEX.match(value):
        return None
    return int(value)


def callback_id(kind: ViewKind) -> str:
    """A modal's ``callback_id``."""
    if kind not in _VIEW_KINDS:
        raise ValueError(f"unknown view kind {kind!r}")
    return f"{PREFIX}.{kind}"


def parse_callback_id(value: object) -> ViewKind | None:
    """The modal kind of a ``callback_id`` of ours, or ``None``."""
    match = CALLBACK_PATTERN.match(value) if isinstance(value, str) else None
    if match is None:
        return None
    return "skip" if match.group(1) == "skip" else "text"


def private_metadata(request_id: str, question: int) -> str:
    """A modal's ``private_metadata``: the request and question it answers."""
    _check_request_id(request_id)
    _check_index(question, "a question index")
    return SEP.join((PREFIX, request_id, str(question)))


def parse_private_metadata(value: object) -> ModalRef | None:
    """Unpack a modal's ``private_metadata``, or ``None`` if it is not ours."""
    if not isinstance(value, str) or len(value) > MAX_PRIVATE_METADATA:
        return None
    fields = value.split(SEP, 3)
    if len(fields) < 3 or fields[0] != PREFIX:
        return None
    request_id, index = fields[1], fields[2]
    if not _REQUEST_ID.match(request_id) or not _INDEX.match(index):
        return None
    reply_url = fields[3] if len(fields) == 4 else None
    if reply_url is not None and not reply_url.startswith(("https://", "http://")):
        return None
    return ModalRef(request_id, int(index), reply_url)


EXTERNAL_PREFIX: Final = "aq1r"
_EXTERNAL_ID = re.compile(r"^aq1r\.[0-9a-f]{16}\.(.+)\Z", re.DOTALL)


def external_id(reply_url: str | None) -> str | None:
    """A modal's ``external_id`` carrying ``reply_url`` (the ``response_url`` of the click
    that opens it), fresh each call: Slack refuses an ``external_id`` another view of the
    team has (``duplicate_external_id``). ``None`` when there is no URL or it would not
    fit Slack's 255 characters (the modal then goes without one)."""
    if not reply_url:
        return None
    packed = f"{EXTERNAL_PREFIX}.{secrets.token_hex(8)}.{reply_url}"
    return packed if len(packed) <= MAX_EXTERNAL_ID else None


def parse_external_id(value: object) -> str | None:
    """The reply URL a modal's ``external_id`` of ours carries, or ``None`` (not ours, or
    ``""``: Slack's word for none). Unchecked: ``interactions`` checks it as a click's."""
    if not isinstance(value, str) or len(value) > MAX_EXTERNAL_ID:
        return None
    match = _EXTERNAL_ID.match(value)
    return match.group(1) if match else None
