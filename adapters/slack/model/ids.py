"""How request ids travel through Slack: each id packed only if it unpacks to what was packed,
and anything not exactly ours unpacked to ``None``."""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Literal

from adapters.slack.blockkit import MAX_EXTERNAL_ID, MAX_PRIVATE_METADATA

PREFIX: Final = "aq1"
SEP: Final = ":"

ActionKind = Literal["pick", "draft", "text", "submit", "dismiss", "link", "read"]
"""A widget's kind: ``pick`` answers a one-question request at once, ``draft`` is a form's
change (remembered), ``text`` opens the free-text modal, ``submit`` and ``dismiss`` end it,
``link`` is the asker's URL button (only acked), ``read`` opens a long plan whole."""
ViewKind = Literal["text", "skip"]
"""A modal's kind: free text, or "Submit with nothing selected?"."""

# ``\Z``, not ``$`` (which also matches before a trailing newline), and ASCII digits only
# (``\d`` matches any Unicode digit): an id either is exactly ours or is not ours.
ACTION_PATTERN: Final = re.compile(
    r"^aq1\.(pick|draft|text|submit|dismiss|link|read)(?:\.[0-9]{1,3})?\Z"
)
CALLBACK_PATTERN: Final = re.compile(r"^aq1\.(text|skip)\Z")
APPROVAL_ACTION_PATTERN: Final = re.compile(r"^aq1\.(allow|reject)\Z")
"""The two buttons of a tool-permission approval."""
_BLOCK_ID = re.compile(r"aq1:([a-z0-9]{8,40}):(-|[0-9]{1,5}):([a-z]{1,3}[0-9]{0,6})\Z")
_METADATA = re.compile(r"aq1:([a-z0-9]{8,40}):([0-9]{1,5})(?::(https?://.*))?\Z", re.DOTALL)
_INDEX = re.compile(r"[0-9]{1,5}\Z")
_EXTERNAL_ID = re.compile(r"aq1r\.[0-9a-f]{16}\.(.+)\Z", re.DOTALL)


def new_request_id() -> str:
    """A fresh random request id (20 lowercase hex characters)."""
    return secrets.token_hex(10)


def key_request_id(key: str) -> str:
    """The request id for an idempotency key: the same key always gives the same id."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:20]


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


def _first(pattern: re.Pattern[str], value: object, limit: int = 255) -> str | None:
    match = pattern.match(value) if isinstance(value, str) and len(value) <= limit else None
    return None if match is None else match.group(1)


def _packed(packed: str, parse: Callable[[str], object], expected: object, what: str) -> str:
    if parse(packed) != expected:
        raise ValueError(f"{packed!r} would not unpack as {what}")
    return packed


def block_id(request_id: str, question: int | None, part: str) -> str:
    """A ``block_id``: a request id of 8–40 of ``[a-z0-9]``, a question index up to 99,999
    (or none) and a part (1–3 letters and up to 6 digits: a tag and a revision, ``c3``)."""
    packed = SEP.join((PREFIX, request_id, "-" if question is None else str(question), part))
    return _packed(packed, parse_block_id, BlockRef(request_id, question, part), "a block id")


def parse_block_id(value: object) -> BlockRef | None:
    """Unpack a ``block_id`` of ours, or ``None``."""
    match = _BLOCK_ID.match(value) if isinstance(value, str) else None
    if match is None:
        return None
    request_id, index, part = match.groups()
    return BlockRef(request_id, None if index == "-" else int(index), part)


def action_id(kind: ActionKind, n: int | None = None) -> str:
    """An ``action_id`` for a widget kind; ``n`` (0–999) keeps it unique inside one block."""
    packed = f"{PREFIX}.{kind}" if n is None else f"{PREFIX}.{kind}.{n}"
    return _packed(packed, parse_action_id, kind, "an action id")


def parse_action_id(value: object) -> ActionKind | None:
    """The widget kind of an ``action_id`` of ours, or ``None``."""
    return _first(ACTION_PATTERN, value)  # type: ignore[return-value]


def approval_action_id(kind: Literal["allow", "reject"]) -> str:
    """The ``action_id`` of an approval button: ``aq1.allow`` or ``aq1.reject``."""
    return f"{PREFIX}.{kind}"


def option_value(index: int) -> str:
    """The ``value`` carried by a button or menu option: the option's index (0–99,999)."""
    return _packed(str(index), parse_index, index, "an index")


def parse_index(value: object) -> int | None:
    """An option or question index from a ``value``, or ``None`` if it is not one."""
    return int(value) if isinstance(value, str) and _INDEX.match(value) else None


def callback_id(kind: ViewKind) -> str:
    """A modal's ``callback_id``."""
    return _packed(f"{PREFIX}.{kind}", parse_callback_id, kind, "a kind")


def parse_callback_id(value: object) -> ViewKind | None:
    """The modal kind of a ``callback_id`` of ours, or ``None``."""
    return _first(CALLBACK_PATTERN, value)  # type: ignore[return-value]


def private_metadata(request_id: str, question: int) -> str:
    """A modal's ``private_metadata``: the request and question it answers."""
    packed = SEP.join((PREFIX, request_id, str(question)))
    return _packed(packed, parse_private_metadata, ModalRef(request_id, question), "metadata")


def parse_private_metadata(value: object) -> ModalRef | None:
    """Unpack a modal's ``private_metadata``, or ``None`` if it is not ours."""
    if not isinstance(value, str) or len(value) > MAX_PRIVATE_METADATA:
        return None
    match = _METADATA.match(value)
    if match is None:
        return None
    request_id, index, reply_url = match.groups()
    return ModalRef(request_id, int(index), reply_url)


def external_id(reply_url: str | None) -> str | None:
    """A modal's ``external_id`` carrying ``reply_url`` (the ``response_url`` of the click
    that opens it), fresh each call: Slack refuses one another view of the team has. ``None``
    when there is no URL or it would not fit (the modal then goes without one)."""
    if not reply_url:
        return None
    packed = f"aq1r.{secrets.token_hex(8)}.{reply_url}"
    return packed if len(packed) <= MAX_EXTERNAL_ID else None


def parse_external_id(value: object) -> str | None:
    """The reply URL a modal's ``external_id`` of ours carries, or ``None`` (not ours, or
    ``""``: Slack's word for none). Unchecked: ``interactions`` checks it as a click's."""
    return _first(_EXTERNAL_ID, value, MAX_EXTERNAL_ID)
