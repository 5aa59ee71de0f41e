"""Issue 38, item 4: the sandbox never starts by accident in a production setup.

With no Slack credentials the bot used to fall back to the sandbox whatever else was set; a
missing or empty SLACK_BOT_TOKEN next to a production Redis and a harness host started an
unauthenticated sandbox page that approved real tool calls. Now the start fails naming the
missing token, unless the sandbox is asked for (MODE=sandbox) or nothing of production is set.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from bot.settings.config import ConfigError, load_settings

pytestmark = pytest.mark.timeout(60)

PRODUCTION = {
    "REDIS_URL": "redis://127.0.0.1:6379/0",
    "DSH_HOST_URL": "http://127.0.0.1:9",
    "DSH_HOST_TOKEN": "t" * 32,
}


@pytest.mark.parametrize("name", sorted(PRODUCTION))
@pytest.mark.parametrize("bot_token", [None, ""])
def test_no_slack_token_next_to_a_production_setting_fails_naming_the_token(
    name: str, bot_token: str | None
) -> None:
    env = {name: PRODUCTION[name]}
    if name == "DSH_HOST_TOKEN":
        env["DSH_HOST_URL"] = PRODUCTION["DSH_HOST_URL"]
    if bot_token is not None:
        env["SLACK_BOT_TOKEN"] = bot_token
    with pytest.raises(ConfigError) as caught:
        load_settings(env, env_file=None)
    message = str(caught.value)
    assert "SLACK_BOT_TOKEN" in message and "MODE=sandbox" in message
    assert PRODUCTION[name] not in message  # names the setting, never quotes its value


def test_the_sandbox_still_starts_when_asked_for_or_when_nothing_of_production_is_set() -> None:
    assert load_settings({}, env_file=None).mode == "sandbox"
    assert load_settings({"BOT_API_TOKEN": "a" * 32}, env_file=None).mode == "sandbox"
    asked = load_settings({"MODE": "sandbox", **PRODUCTION}, env_file=None)
    assert asked.mode == "sandbox" and asked.store == "redis"


def test_the_audit_export_serves_nothing_so_reads_a_production_store_without_slack() -> None:
    settings = load_settings({"REDIS_URL": PRODUCTION["REDIS_URL"]}, env_file=None, serves=False)
    assert settings.store == "redis"


@pytest.mark.slow
def test_python_m_bot_exits_naming_the_missing_token_and_serves_nothing() -> None:
    env = {"PATH": "/usr/bin:/bin", **PRODUCTION, "SLACK_BOT_TOKEN": ""}
    env["PYTHONPATH"] = os.environ.get("PYTHONPATH", "")
    done = subprocess.run(
        [sys.executable, "-m", "bot"], env=env, capture_output=True, text=True, timeout=30
    )
    assert done.returncode != 0
    assert "SLACK_BOT_TOKEN" in done.stderr
    assert "sandbox" not in done.stdout.lower() or "does not start" in done.stderr
