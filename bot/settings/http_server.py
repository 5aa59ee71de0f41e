"""The HTTP server's settings: where it listens, the API's tokens (required unless ``HOST`` is
loopback), what a client may ask of it (a part of ``Settings``)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    Field,
    SecretStr,
    ValidationInfo,
    field_validator,
)

from adapters.httpguard import LOOPBACK_NAMES, is_loopback
from bot.settings.checks import Seconds, Secret, check_host, host_names
from bot.settings.text import NamedTokens, distinct_tokens, plural, show, token_file, token_list


class ServerSettings(BaseModel):
    """``HOST``, ``PORT``, ``BOT_API_TOKEN*``, ``ALLOWED_HOSTS`` and the clients' limits."""

    host: Annotated[str, AfterValidator(check_host)] = Field(
        "127.0.0.1",
        description="Address the HTTP server (API, /healthz, /slack/events) binds.",
    )
    port: int = Field(
        3000, ge=0, le=65535, description="Port of that server; 0 picks any free port."
    )
    bot_api_tokens: Annotated[NamedTokens, BeforeValidator(token_list)] = Field(
        (),
        description="Several API tokens, each with a name: name:token,name:token. A question "
        "belongs to the token that asked it; other tokens get 404 for it.",
    )
    bot_api_tokens_file: Annotated[NamedTokens, BeforeValidator(token_file)] = Field(
        (), description="A file of name:token lines (# comments), read beside BOT_API_TOKENS."
    )
    bot_api_token: Secret | None = Field(
        None,
        description="Bearer token the HTTP API requires (named default; at least 16 "
        "characters off loopback). Unset, with no BOT_API_TOKENS: the API is open, so HOST "
        "must be a loopback address.",
    )
    max_open_questions: int = Field(
        10_000,
        ge=1,
        description="Open questions asked through the API of one process; more get 429 with "
        "Retry-After.",
    )
    max_open_per_token: int = Field(
        1_000,
        ge=1,
        description="Open questions one API token may have in one process; more get 429 with "
        "Retry-After.",
    )
    max_unsigned_body_bytes: int = Field(
        16 * 1024 * 1024,
        ge=65_536,
        description="Bytes of request bodies read at once before they can be authenticated "
        "(Slack's, whose signature covers the whole body), counting bodies over 64 KiB; more "
        "get 503 unread.",
    )
    max_polls_per_token: int = Field(
        64,
        ge=1,
        description="Long-polls (GET ?wait=) one API token may have waiting at once; more get "
        "429. All together never take the last eighth of MAX_CONNECTIONS (kept for Slack).",
    )
    allowed_hosts: Annotated[tuple[str, ...], BeforeValidator(host_names)] = Field(
        (),
        description="Comma-separated host names the bot answers to besides loopback names "
        "and HOST (the public name a reverse proxy passes on). Any other Host header gets 421.",
    )
    webhook_hosts: Annotated[tuple[str, ...], BeforeValidator(host_names)] = Field(
        (),
        description="Comma-separated host names a question's callback URL may name (webhooks). "
        "Unset: callbacks are refused.",
    )
    webhook_allow_private: bool = Field(
        False,
        description="Let webhooks reach private, loopback and link-local addresses (refused "
        "by default, also when a name resolves to one).",
    )
    max_body_bytes: int = Field(262_144, gt=0, description="Largest HTTP API request body.")
    header_timeout: Seconds = Field(
        10.0,
        gt=0,
        description="Seconds a client has to send a request's headers; also how long an idle "
        "keep-alive connection stays open. Slower clients are disconnected.",
    )
    body_timeout: Seconds = Field(
        30.0, gt=0, description="Seconds a client has to send a request's body; slower: 408."
    )
    max_connections: int = Field(
        1024,
        ge=1,
        description="Open connections at most; more are answered 503 and closed at once.",
    )

    @field_validator("bot_api_token")
    @classmethod
    def _token_needed_beyond_loopback(
        cls, value: SecretStr | None, info: ValidationInfo
    ) -> SecretStr | None:
        host, tokens = info.data.get("host"), _tokens(value, info.data)
        distinct_tokens(tokens)
        if host is None or is_loopback(host):
            return value
        if not tokens:
            raise ValueError(
                f"required because HOST={show(host)} is not a loopback address; without it anyone "
                "who reaches the port could ask questions and read answers. Set BOT_API_TOKEN "
                "to a long random string, or set HOST=127.0.0.1."
            )
        _long_enough(tokens, f"HOST={show(host)} is not loopback")
        return value

    @field_validator("allowed_hosts")
    @classmethod
    def _token_needed_for_other_names(
        cls, value: tuple[str, ...], info: ValidationInfo
    ) -> tuple[str, ...]:
        tokens = _tokens(info.data.get("bot_api_token"), info.data)
        if value and "bot_api_token" in info.data and not tokens:
            raise ValueError(
                "names hosts beyond loopback (a public name a reverse proxy passes on), so "
                "the API needs BOT_API_TOKEN or BOT_API_TOKENS: without one, anyone who "
                "reaches that name could ask questions and read answers."
            )
        if value:
            _long_enough(tokens, "ALLOWED_HOSTS is set")
        return value

    @property
    def bracketed_host(self) -> str:
        """``HOST`` as a URL names it: an IPv6 address in brackets."""
        return f"[{self.host}]" if ":" in self.host else self.host

    @property
    def api_tokens(self) -> dict[str, str]:
        """The API's bearer tokens by name (``BOT_API_TOKEN`` is named ``default``)."""
        tokens = _tokens(self.bot_api_token, dict(self))
        return {name: secret.get_secret_value() for name, secret in tokens}

    def _auth(self) -> str:
        names = sorted(self.api_tokens)
        if not names:
            return "off (loopback only)"
        if names == ["default"]:
            return "on (BOT_API_TOKEN)"
        return f"on ({plural(len(names), 'token')}: {', '.join(names)})"

    @property
    def served_hosts(self) -> frozenset[str] | None:
        """The ``Host`` names the bot's server answers to; ``None`` when any is served."""
        # check_host normalised it (0:0::0 is ::), keeping an IPv6 scope (::%eth0)
        wildcard = self.host.partition("%")[0] in ("0.0.0.0", "::")
        if wildcard and not self.allowed_hosts:
            return None
        names = {*LOOPBACK_NAMES, *self.allowed_hosts}
        if not wildcard:
            names.add(self.host.lower())
        return frozenset(names)

    def _hosts_served(self) -> str:
        if self.served_hosts is None:
            return "any Host header (HOST is a wildcard and ALLOWED_HOSTS is unset)"
        return ", ".join(sorted(self.served_hosts))


MIN_TOKEN = 16
"""The shortest API token taken while the API is reachable beyond loopback."""


def _tokens(default: SecretStr | None, data: dict[str, Any]) -> list[tuple[str, SecretStr]]:
    """The API's tokens validated so far, by name: ``default`` (if set), then the named ones."""
    named = [*(data.get("bot_api_tokens") or ()), *(data.get("bot_api_tokens_file") or ())]
    return named if default is None else [("default", default), *named]


def _long_enough(tokens: list[tuple[str, SecretStr]], why: str) -> None:
    """A ``ValueError`` naming the first token (by name, never its value) shorter than
    ``MIN_TOKEN`` characters: off loopback a short token can be guessed."""
    for name, secret in tokens:
        if len(secret.get_secret_value()) < MIN_TOKEN:
            raise ValueError(
                f"the token named {name!r} is shorter than {MIN_TOKEN} characters, and {why}: "
                "anyone who reaches the port could guess it. Use a long random string, e.g. "
                "python -c 'import secrets; print(secrets.token_urlsafe(32))'."
            )
