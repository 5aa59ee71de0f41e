"""Who may use the HTTP API, which questions are theirs (an HMAC tag of the token in the id,
so any process tells without storing), and how many each may keep open."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Final

_NONCE: Final = 16
"""Hex characters of an id's random (or key-derived) part; the tag is as long."""


class ApiTokens:
    """The API's bearer tokens by name, and the question ids each of them owns."""

    def __init__(self, tokens: Mapping[str, str]) -> None:
        self._secrets = {name: secret.encode() for name, secret in tokens.items()}

    @property
    def separated(self) -> bool:
        """Whether questions are kept apart per token (several tokens)."""
        return len(self._secrets) > 1

    def bearer(self, header: str) -> str | tuple[str, str] | None:
        """The token name an ``Authorization`` header carries (``None`` when no token is
        required), or the refusal: (cause, message)."""
        if not self._secrets:
            return None
        scheme, _, given = header.partition(" ")
        if not header.isascii():
            return "bad_authorization", "Authorization is not ASCII"
        raw, name = given.strip().encode(), None
        for token, secret in self._secrets.items():  # every token compared: no early exit to time
            if hmac.compare_digest(raw, secret):
                name = token
        if scheme.lower() != "bearer" or name is None:
            return "unauthorized", "a valid bearer token is required"
        return name

    def tagged_id(self, name: str | None, key: str | None) -> str | None:
        """A question id owned by token ``name`` (random, or derived from an idempotency
        key); ``None`` when questions are not kept apart (no token, or one)."""
        if name is None or not self.separated:
            return None
        if key is None:
            nonce = secrets.token_hex(_NONCE // 2)
        else:
            nonce = hashlib.sha256(f"api:{name}:{key}".encode()).hexdigest()[:_NONCE]
        return nonce + self._tag(name, nonce)

    def owns(self, name: str | None, request_id: str) -> bool:
        """Whether the question ``request_id`` may be seen by token ``name``."""
        if not self.separated:
            return True
        if name is None or len(request_id) != 2 * _NONCE:
            return False
        nonce, tag = request_id[:_NONCE], request_id[_NONCE:]
        return hmac.compare_digest(tag.encode(), self._tag(name, nonce).encode())

    def owner_of(self, request_id: str) -> str | None:
        """The token whose tag question ``request_id`` carries; ``None`` when it carries
        none (questions are not kept apart, or it was not asked with a token)."""
        if not self.separated:
            return None
        return next((name for name in self._secrets if self.owns(name, request_id)), None)

    def _tag(self, name: str, nonce: str) -> str:
        digest = hmac.new(self._secrets[name], f"uq-question:{nonce}".encode(), "sha256")
        return digest.hexdigest()[:_NONCE]


class OpenQuestionCaps:
    """At most ``per_process`` open API questions, and ``per_token`` for each token."""

    def __init__(self, *, per_process: int, per_token: int) -> None:
        self.per_process = per_process
        self.per_token = per_token
        self._open: dict[str, str | None] = {}  # request id -> token name
        self._by_token: Counter[str | None] = Counter()

    def refusal(self, name: str | None) -> str | None:
        """Why one more question for token ``name`` is refused now; ``None`` if it is not."""
        if len(self._open) >= self.per_process:
            return f"this bot already has {self.per_process} open questions"
        if name is not None and self._by_token[name] >= self.per_token:
            return f"the token {name!r} already has {self.per_token} open questions"
        return None

    def take(self, request_id: str, name: str | None) -> None:
        """Take a slot for ``request_id`` (call right after ``refusal`` said ``None``)."""
        self._open[request_id] = name
        self._by_token[name] += 1

    def holds(self, request_id: str) -> bool:
        """Whether ``request_id`` has a slot."""
        return request_id in self._open

    def give_back(self, request_id: str) -> None:
        """The question ended: free its slot (idempotent)."""
        if request_id in self._open:
            self._by_token -= Counter([self._open.pop(request_id)])


class PollCaps:
    """Long-polls one token may hold, and all together (the rest stay for /slack/events)."""

    def __init__(self, per_token: int, total: int) -> None:
        self.per_token, self.total = per_token, total
        self._held: Counter[str | None] = Counter()

    @property
    def count(self) -> int:
        """Long-polls waiting right now."""
        return self._held.total()

    def refusal(self, name: str | None) -> str | None:
        """Whose cap a new long-poll of token ``name`` is over; ``None`` when it may wait."""
        if self._held[name] >= self.per_token:
            return f"this token's {self.per_token}"
        return "the server's" if self.count >= self.total else None

    @contextmanager
    def held(self, name: str | None) -> Iterator[None]:
        """Count one long-poll of token ``name`` while the block runs."""
        self._held[name] += 1
        try:
            yield
        finally:
            self._held -= Counter([name])


def asker_of(asked: str | None) -> tuple[bool, str | None]:
    """Whether ``asked`` (a question's ``asked_by``) is the HTTP API, and the token's name."""
    if asked == "api":
        return True, None
    if asked is not None and asked.startswith("api:"):
        return True, asked[len("api:") :]
    return False, None


def asked_by(name: str | None) -> str:
    """Who an API request is in the audit trail: ``api:<token name>``; ``api`` on an open
    API (no token configured). Never the token itself."""
    return "api" if name is None else f"api:{name}"
