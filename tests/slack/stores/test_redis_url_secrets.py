"""A Redis URL's password never shows, even written wrongly: an unencoded ``/``, ``?`` or
``#`` in it ends the URL's host part early, so the rest of the password would be read as a
path, query or port. Such a URL is refused at start with what to do; a library caller gets
an error without it (and without a chained one quoting it); logs never show any of it."""

from __future__ import annotations

import logging
import traceback

import pytest

from adapters.slack.stores.contract import StoreUnavailable
from adapters.slack.stores.redis import RedisPendingStore
from adapters.urls import redact_url
from bot.logs import TextFormatter
from bot.settings.config import ConfigError, load_settings
from tests.settings.test_config_fail_closed import SOCKET

SECRET = "S3cr3tPw"
BROKEN = [
    f"redis://:{SECRET}/x@127.0.0.1:6399/0",
    f"redis://:ab/{SECRET}@127.0.0.1:6399/0",
    f"redis://:{SECRET}?x@127.0.0.1:6399/0",
    f"redis://default:{SECRET}#x@127.0.0.1:6399/0",
    f"redis://default:{SECRET}?x@127.0.0.1:6399/0?socket_timeout=1",
]


@pytest.mark.parametrize("url", BROKEN)
def test_redact_url_shows_nothing_of_a_password_that_ends_the_host_part_early(url: str) -> None:
    shown = redact_url(url)
    assert SECRET not in shown and "x@" not in shown
    assert shown == "redis://(an @ after its host part: not shown)"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (f"redis://:{SECRET}@127.0.0.1:6379/0", "redis://:***@127.0.0.1:6379/0"),
        (f"redis://u:{SECRET}%2Fx@h:6379/0", "redis://***:***@h:6379/0"),
        ("redis://h:6379/0?socket_timeout=1", "redis://h:6379/0?…"),
        ("https://slack.com/api/", "https://slack.com/api/"),
    ],
)
def test_redact_url_of_well_formed_urls_is_unchanged(url: str, shown: str) -> None:
    assert redact_url(url) == shown


@pytest.mark.parametrize("url", BROKEN)
def test_such_a_redis_url_is_refused_at_start_without_its_password(url: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings({**SOCKET, "REDIS_URL": url, "STORE": "redis"})
    [problem] = [p for p in caught.value.problems if p.startswith("REDIS_URL:")]
    assert SECRET not in problem and "Percent-encode" in problem, problem


@pytest.mark.parametrize("url", BROKEN)
def test_a_library_caller_gets_an_error_without_the_password(url: str) -> None:
    with pytest.raises(ValueError) as caught:
        RedisPendingStore(url, prefix="uq-url-secrets", process_id="p")
    whole = "".join(traceback.format_exception(caught.value))
    assert SECRET not in whole
    assert "REDIS_URL=redis://(an @ after its host part: not shown)" in str(caught.value)


def test_a_bad_url_option_is_named_with_redis_url() -> None:
    with pytest.raises(ValueError) as caught:
        RedisPendingStore("redis://h/0?socket_timeout=abc", prefix="p", process_id="p")
    assert str(caught.value) == (
        "REDIS_URL=redis://h/0?… is not a usable Redis URL: "
        "Invalid value for 'socket_timeout' in connection URL"
    )


@pytest.mark.slow
async def test_an_unreachable_redis_is_said_in_one_sentence(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The refused connection's reason ends with its own full stop: not doubled."""
    store = RedisPendingStore(
        f"redis://:{SECRET}@127.0.0.1:1/0", prefix="uq-url-secrets", process_id="p", op_timeout=1
    )
    with caplog.at_level(logging.DEBUG), pytest.raises(StoreUnavailable) as caught:
        await store.start()
    await store.close()
    message = str(caught.value)
    assert "REDIS_URL=redis://:***@127.0.0.1:1/0" in message and ".." not in message
    assert SECRET not in message
    logged = "\n".join(TextFormatter().format(r) for r in caplog.records)
    assert SECRET not in logged


def test_a_secret_pasted_into_host_is_not_echoed() -> None:
    """HOST given the API token's value (a valid host name): the token problem that quotes
    HOST does not show it."""
    token = "hunter2hunter2hunter2x"
    with pytest.raises(ConfigError) as caught:
        load_settings({**SOCKET, "HOST": "hunter2", "BOT_API_TOKENS": f"ci:{token},other:hunter2"})
    text = "\n".join(caught.value.problems)
    assert "hunter2" not in text.replace("hunter2hunter2", ""), text
