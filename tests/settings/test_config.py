"""bot.settings: modes, every malformed value, secrets kept out of sight, .env, loopback."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import SecretStr, ValidationError

from adapters.urls import redact_url
from bot.settings.config import (
    SETTING_NAMES,
    SETTINGS_HELP,
    ConfigError,
    Settings,
    load_settings,
)
from bot.settings.text import holds_secret, problem, render_help, show

BOT = "xoxb-1111-2222-BOTSECRETvalue"
APP = "xapp-1-A111-3333-APPSECRETvalue"
SIGNING = "8f14e45fceea167a5a36dedd4bea2543"
API = "api-token-APISECRET-0123456789"
DSH = "dsh-token-DSHSECRET"
REDIS_PASSWORD = "REDISPASSWORD42"
SECRETS = (BOT, APP, SIGNING, API, DSH, REDIS_PASSWORD)


def load(env: dict[str, str], env_file: Path | None = None) -> Settings:
    """Settings from ``env`` only (no .env unless given)."""
    return load_settings(env, env_file)


def problems_of(env: dict[str, str], env_file: Path | None = None) -> list[str]:
    """The problems ``env`` gives, which must be some."""
    with pytest.raises(ConfigError) as caught:
        load_settings(env, env_file)
    return caught.value.problems


def problem_for(name: str, env: dict[str, str]) -> str:
    """The one problem that names ``name``."""
    found = [p for p in problems_of(env) if p.startswith(f"{name}:")]
    assert len(found) == 1, found
    return found[0]


SOCKET = {"SLACK_BOT_TOKEN": BOT, "SLACK_APP_TOKEN": APP, "SLACK_CHANNEL": "C0123ABCD"}
HTTP = {"SLACK_BOT_TOKEN": BOT, "SLACK_SIGNING_SECRET": SIGNING, "SLACK_CHANNEL": "C0123ABCD"}


# --- modes ----------------------------------------------------------------------------------


def test_no_credentials_is_the_sandbox_with_defaults() -> None:
    settings = load({})
    assert settings == Settings()
    assert settings.mode == "sandbox"
    assert settings.slack_channel is None
    assert (settings.host, settings.port, settings.sandbox_port) == ("127.0.0.1", 3000, 3001)
    assert (settings.redis_url, settings.redis_prefix, settings.store) == (None, "uq", "memory")
    assert settings.bot_api_token is None
    assert settings.max_body_bytes == 262144
    assert (settings.question_timeout, settings.shutdown_grace) == (None, 5.0)
    assert (settings.log_level, settings.log_format) == ("INFO", "text")
    assert settings.notes == ()


def test_bot_and_app_token_is_socket_mode() -> None:
    settings = load(SOCKET)
    assert settings.mode == "socket"
    assert isinstance(settings.slack_bot_token, SecretStr)
    assert settings.slack_bot_token.get_secret_value() == BOT
    assert settings.slack_app_token is not None
    assert settings.slack_app_token.get_secret_value() == APP
    assert settings.slack_channel == "C0123ABCD"


def test_bot_token_and_signing_secret_is_http_mode() -> None:
    settings = load(HTTP)
    assert settings.mode == "http"
    assert settings.slack_signing_secret is not None
    assert settings.slack_signing_secret.get_secret_value() == SIGNING


def test_all_three_is_socket_mode_and_says_so() -> None:
    settings = load({**SOCKET, "SLACK_SIGNING_SECRET": SIGNING})
    assert settings.mode == "socket"
    (note,) = settings.notes
    assert "SLACK_SIGNING_SECRET" in note and "Socket Mode" in note
    assert ("note", note) in settings.describe()


def test_a_bot_token_alone_explains_both_ways_to_complete_it() -> None:
    problem = problem_for("SLACK_BOT_TOKEN", {"SLACK_BOT_TOKEN": BOT, "SLACK_CHANNEL": "C1"})
    assert "SLACK_APP_TOKEN" in problem and "Socket Mode" in problem
    assert "SLACK_SIGNING_SECRET" in problem and "/slack/events" in problem


@pytest.mark.parametrize(
    "env",
    [
        {"SLACK_APP_TOKEN": APP},
        {"SLACK_SIGNING_SECRET": SIGNING},
        {"SLACK_APP_TOKEN": APP, "SLACK_SIGNING_SECRET": SIGNING},
    ],
)
def test_app_token_or_signing_secret_without_a_bot_token_is_an_error(env: dict[str, str]) -> None:
    problem = problem_for("SLACK_BOT_TOKEN", {**env, "SLACK_CHANNEL": "C1"})
    assert "missing" in problem
    assert all(name in problem for name in env)


@pytest.mark.parametrize("base", [SOCKET, HTTP])
def test_the_channel_is_required_with_slack_credentials(base: dict[str, str]) -> None:
    env = {k: v for k, v in base.items() if k != "SLACK_CHANNEL"}
    assert "required" in problem_for("SLACK_CHANNEL", env)


@pytest.mark.parametrize("channel", ["C0123ABCD", "G0123", "D024BE91L", "U024BE7LH", "W0123"])
def test_any_channel_user_or_dm_id_is_a_destination(channel: str) -> None:
    assert load({**SOCKET, "SLACK_CHANNEL": channel}).slack_channel == channel
    assert load({"SLACK_CHANNEL": channel}).slack_channel == channel  # sandbox


def test_empty_values_count_as_unset() -> None:
    env = {name: "" for name in SETTING_NAMES}
    assert load(env) == Settings()
    assert load({"SLACK_APP_TOKEN": "  ", "PORT": " "}).mode == "sandbox"


# --- malformed values -----------------------------------------------------------------------

MALFORMED = [
    ("SLACK_BOT_TOKEN", "xoxp-1-user-token", "xoxb-"),
    ("SLACK_BOT_TOKEN", "nonsense", "xoxb-"),
    ("SLACK_BOT_TOKEN", "xoxe.xoxb-1-rotating", "expiring"),
    ("SLACK_APP_TOKEN", "xoxb-swapped", "xapp-"),
    ("SLACK_APP_TOKEN", "xapp-with space", "whitespace"),
    ("SLACK_SIGNING_SECRET", "xoxb-not-a-secret", "App Credentials"),
    ("SLACK_CHANNEL", "#general", "not its name"),
    ("SLACK_CHANNEL", "c0123abcd", "is not a channel"),
    ("SLACK_API_URL", "ftp://example.com/api/", "http"),
    ("SLACK_API_URL", "localhost:8888/api", "http"),
    ("SLACK_ALLOWED_USERS", "U123, alice", "'alice'"),
    ("SLACK_ALLOWED_USERGROUPS", "S123,U123", "'U123'"),
    ("DSH_APPROVERS", "U123, @bob", "'@bob'"),
    ("DSH_APPROVER_USERGROUPS", "U123", "'U123'"),
    ("SLACK_MENTION", "@here", "<!here>"),
    ("SLACK_MENTION", "<!everyone>", "is not one of"),
    ("REDIS_URL", "http://localhost:6379", "redis://"),
    ("REDIS_URL", "redis://", "no host"),
    ("REDIS_URL", "redis://localhost:6379/zero", "database number"),
    ("REDIS_URL", "redis://localhost:99999", "not a valid URL"),
    ("REDIS_URL", "unix://", "socket path"),
    ("REDIS_PREFIX", "has space", "letters"),
    ("HOST", "not a host!", "IP address"),
    ("PORT", "http", "whole number"),
    ("PORT", "65536", "0 to 65535"),
    ("PORT", "-1", "0 to 65535"),
    ("MAX_BODY_BYTES", "0", "at least 1"),
    ("MAX_BODY_BYTES", "1.5", "whole number"),
    ("QUESTION_TIMEOUT", "0", "more than 0"),
    ("QUESTION_TIMEOUT", "soon", "seconds"),
    ("SHUTDOWN_GRACE", "-1", "0 or more"),
    ("SHUTDOWN_GRACE", "nan", "seconds"),
    ("DSH_HOST_URL", "example.com", "http"),
    ("SANDBOX_PORT", "3000", "also PORT"),
    ("SANDBOX_PORT", "abc", "whole number"),
    ("LOG_LEVEL", "verbose", "DEBUG, INFO, WARNING, ERROR"),
    ("LOG_FORMAT", "xml", "json, text"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "value", "fragment"), MALFORMED)
def test_a_malformed_value_gives_a_message_naming_it(name: str, value: str, fragment: str) -> None:
    env = {name: value}
    if name.startswith("SLACK_") and name != "SLACK_CHANNEL":
        env = {**SOCKET, **env}  # a complete Slack setup, so only this value is wrong
    assert fragment in problem_for(name, env)


def test_every_problem_is_reported_at_once() -> None:
    env = {name: value for name, value, _ in MALFORMED if name != "SANDBOX_PORT"}
    env |= {"SANDBOX_PORT": "abc", "BOT_API_TOKEN": API}
    problems = problems_of(env)
    named = {problem.partition(":")[0] for problem in problems}
    assert named == {name for name, _, _ in MALFORMED}
    assert len(problems) == len(named)


def test_problems_between_settings_are_reported_with_malformed_values() -> None:
    env = {
        "SLACK_BOT_TOKEN": BOT,  # alone: no way to deliver clicks
        "PORT": "http",
        "HOST": "0.0.0.0",  # not loopback, and no BOT_API_TOKEN
        "DSH_HOST_TOKEN": DSH,  # without DSH_HOST_URL
        "LOG_LEVEL": "loud",
    }
    problems = problems_of(env)
    named = [problem.partition(":")[0] for problem in problems]
    assert named == ["SLACK_BOT_TOKEN", "PORT", "BOT_API_TOKEN", "DSH_HOST_TOKEN", "LOG_LEVEL"]
    assert_no_secret(str(ConfigError(problems)))


def test_settings_built_in_code_read_no_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PORT", "4000")
    monkeypatch.setenv("SLACK_BOT_TOKEN", BOT)
    assert Settings().port == 3000
    assert Settings(port=5).port == 5
    assert Settings().mode == "sandbox"


def test_a_mode_given_in_code_must_match_the_credentials() -> None:
    with pytest.raises(ValidationError) as caught:
        Settings(mode="socket")
    assert "the credentials choose sandbox" in str(caught.value)
    assert (
        Settings(
            mode="http", slack_bot_token=BOT, slack_signing_secret=SIGNING, slack_channel="C1"
        ).mode
        == "http"
    )


def test_config_error_lists_each_problem() -> None:
    error = ConfigError(["PORT: bad", "HOST: bad"])
    assert error.problems == ["PORT: bad", "HOST: bad"]
    text = str(error)
    assert text.startswith("2 problems in the settings:")
    assert "  - PORT: bad\n  - HOST: bad" in text
    assert "--help" in text
    assert str(ConfigError(["PORT: bad"])).startswith("1 problem in the settings:")


def test_dsh_token_needs_its_url() -> None:
    assert "DSH_HOST_URL" in problem_for("DSH_HOST_TOKEN", {"DSH_HOST_TOKEN": DSH})


def test_a_token_in_the_url_and_another_in_dsh_host_token_is_refused() -> None:
    env = {"DSH_HOST_URL": "http://127.0.0.1:1/?token=one", "DSH_HOST_TOKEN": "two"}
    assert "give it once" in problem_for("DSH_HOST_TOKEN", {"MODE": "sandbox", **env})


def test_the_url_dsh_web_prints_carries_its_token_and_never_shows_it() -> None:
    url = f"http://127.0.0.1:13080/?token={DSH}"
    settings = load({"MODE": "sandbox", "DSH_HOST_URL": url})
    assert settings.dsh_host_url == "http://127.0.0.1:13080/"
    assert settings.dsh_host_token is not None
    assert settings.dsh_host_token.get_secret_value() == DSH
    described = dict(settings.describe())["dsh host"]
    assert described == "http://127.0.0.1:13080/ (with token)"
    assert "DSHSECRET" not in repr(settings) and "DSHSECRET" not in str(settings.describe())


def test_a_dsh_token_over_plain_http_to_another_machine_is_noted() -> None:
    remote = load({"MODE": "sandbox", "DSH_HOST_URL": f"http://dsh.example:13080/?token={DSH}"})
    assert any("travels unencrypted" in note for note in remote.notes), remote.notes
    local = load({"MODE": "sandbox", "DSH_HOST_URL": f"http://127.0.0.1:13080/?token={DSH}"})
    assert not any("unencrypted" in note for note in local.notes), local.notes


# --- values that are fine -------------------------------------------------------------------


def test_lists_mentions_and_choices_are_parsed() -> None:
    settings = load(
        {
            "MODE": "sandbox",  # asked for: the allow-lists alone would refuse the sandbox
            "SLACK_ALLOWED_USERS": " U123 ,W456,, U123 ",
            "SLACK_ALLOWED_USERGROUPS": "S0614TZR7",
            "DSH_APPROVERS": "U0APPROVE1,U0APPROVE1, W0APPROVE2",
            "DSH_APPROVER_USERGROUPS": "S0ONCALL",
            "SLACK_MENTION": "<!subteam^S0614TZR7>",
            "LOG_LEVEL": "warn",
            "LOG_FORMAT": "JSON",
            "QUESTION_TIMEOUT": "90.5",
            "SHUTDOWN_GRACE": "0",
            "PORT": "0",
            "SANDBOX_PORT": "0",
            "MAX_BODY_BYTES": "1048576",
        }
    )
    assert settings.slack_allowed_users == ("U123", "W456")
    assert settings.slack_allowed_usergroups == ("S0614TZR7",)
    assert settings.dsh_approvers == ("U0APPROVE1", "W0APPROVE2")
    assert settings.dsh_approver_usergroups == ("S0ONCALL",)
    assert settings.slack_mention == "<!subteam^S0614TZR7>"
    assert (settings.log_level, settings.log_format) == ("WARNING", "json")
    assert (settings.question_timeout, settings.shutdown_grace) == (90.5, 0.0)
    assert (settings.port, settings.sandbox_port, settings.max_body_bytes) == (0, 0, 1048576)
    facts = dict(settings.describe())
    assert facts["listen"] == "127.0.0.1:any free port"
    assert facts["answerers"] == "only 2 users and 1 user group"
    assert facts["question timeout"] == "90.5 s"


@pytest.mark.parametrize("mention", ["<!here>", "<!channel>", "<@U024BE7LH>", "<@W0123>"])
def test_each_kind_of_mention_is_accepted(mention: str) -> None:
    assert load({"SLACK_MENTION": mention}).slack_mention == mention


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        ("http://127.0.0.1:8888/api", "http://127.0.0.1:8888/api/"),
        ("https://slack.example/api/", "https://slack.example/api/"),
    ],
)
def test_the_api_url_gets_its_trailing_slash(given: str, kept: str) -> None:
    assert load({"SLACK_API_URL": given}).slack_api_url == kept


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (
            "redis://localhost:6379/0",
            "redis redis://localhost:6379/0 (prefix uq, finished kept 90 days)",
        ),
        (
            f"rediss://:{REDIS_PASSWORD}@cache:6380",
            "redis rediss://:***@cache:6380 (prefix uq, finished kept 90 days)",
        ),
        (
            f"redis://app:{REDIS_PASSWORD}@cache/2",
            "redis redis://***:***@cache/2 (prefix uq, finished kept 90 days)",
        ),
        (
            "unix:///run/redis.sock",
            "redis unix:///run/redis.sock (prefix uq, finished kept 90 days)",
        ),
    ],
)
def test_redis_urls_are_accepted_and_shown_without_password(url: str, shown: str) -> None:
    settings = load({"REDIS_URL": url, "MODE": "sandbox"})
    assert settings.store == "redis"
    assert settings.redis_url is not None and settings.redis_url.get_secret_value() == url
    assert dict(settings.describe())["store"] == shown
    assert REDIS_PASSWORD not in repr(settings)


def test_the_store_defaults_to_sqlite_outside_the_sandbox() -> None:
    http = load(HTTP)
    assert (http.store, http.store_path, http.retention_days) == (
        "sqlite",
        "slack-questions.db",
        90.0,
    )
    assert dict(http.describe())["store"] == "sqlite slack-questions.db (finished kept 90 days)"
    assert load(SOCKET).store == "sqlite"
    assert load({}).store == "memory"  # the sandbox
    chosen = load({**HTTP, "STORE": "MEMORY", "STORE_PATH": "/var/lib/q.db"})
    assert (chosen.store, chosen.store_path) == ("memory", "/var/lib/q.db")
    assert load({"STORE": "sqlite", "RETENTION_DAYS": "7.5"}).store == "sqlite"
    assert load({"STORE": "sqlite", "RETENTION_DAYS": "7.5"}).retention_days == 7.5


@pytest.mark.parametrize(
    ("env", "problem"),
    [
        ({"STORE": "disk"}, "STORE: 'disk' is not one of memory, sqlite, redis."),
        ({"STORE": "redis"}, "STORE: redis needs REDIS_URL"),
        ({"RETENTION_DAYS": "0"}, "RETENTION_DAYS: '0' is not a number (more than 0)."),
        ({"RETENTION_DAYS": "nan"}, "RETENTION_DAYS: 'nan'"),
    ],
)
def test_bad_store_settings_are_named(env: dict[str, str], problem: str) -> None:
    with pytest.raises(ConfigError) as info:
        load(env)
    assert any(p.startswith(problem) for p in info.value.problems), info.value.problems


def test_redact_url() -> None:
    assert redact_url("redis://u:pw@h:1/0") == "redis://***:***@h:1/0"
    assert redact_url("redis://h:1/0") == "redis://h:1/0"
    assert redact_url("https://h/x?token=abc") == "https://h/x?…"


# --- the loopback rule ----------------------------------------------------------------------


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"])
def test_a_loopback_host_needs_no_api_token(host: str) -> None:
    settings = load({"HOST": host})
    assert settings.bot_api_token is None
    assert dict(settings.describe())["api auth"] == "off (loopback only)"


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.20", "bot.example.com"])
def test_any_other_host_needs_an_api_token(host: str) -> None:
    problem = problem_for("BOT_API_TOKEN", {"HOST": host})
    assert "loopback" in problem and "HOST" in problem
    settings = load({"HOST": host, "BOT_API_TOKEN": API})
    assert settings.host == host
    assert dict(settings.describe())["api auth"] == "on (BOT_API_TOKEN)"


def test_an_ipv6_host_is_bracketed_in_the_listen_address() -> None:
    settings = load({"HOST": "[::1]", "PORT": "8080"})
    assert settings.host == "::1"
    assert ("listen", "[::1]:8080") in settings.describe()


def test_http_mode_on_loopback_notes_the_proxy() -> None:
    assert any("reverse proxy" in note for note in load(HTTP).notes)


# --- secrets --------------------------------------------------------------------------------

ALL_SECRETS = {
    **SOCKET,
    "SLACK_SIGNING_SECRET": SIGNING,
    "BOT_API_TOKEN": API,
    "DSH_HOST_URL": "https://dsh.example/",
    "DSH_HOST_TOKEN": DSH,
    "REDIS_URL": f"redis://app:{REDIS_PASSWORD}@cache:6379/0",
    "HOST": "0.0.0.0",
}


def assert_no_secret(text: str) -> None:
    """None of the test's secrets, nor a telling part of one, is in ``text``."""
    for secret in SECRETS:
        assert secret not in text
    for part in ("BOTSECRET", "APPSECRET", "APISECRET", "DSHSECRET", SIGNING[:8]):
        assert part not in text


def test_secrets_never_appear_in_repr_str_or_describe() -> None:
    settings = load(ALL_SECRETS)
    assert settings.mode == "socket"
    assert_no_secret(repr(settings))
    assert_no_secret(str(settings))
    assert_no_secret(repr(settings.describe()))
    assert_no_secret(repr(settings.model_dump()))


def test_secrets_never_appear_in_errors() -> None:
    env = {**ALL_SECRETS, "PORT": "nope", "REDIS_URL": f"http://app:{REDIS_PASSWORD}@cache"}
    problems = problems_of(env)
    assert len(problems) == 2  # PORT and REDIS_URL
    assert_no_secret(str(ConfigError(problems)))


@pytest.mark.parametrize(
    "env",
    [
        {"SLACK_BOT_TOKEN": APP, "SLACK_APP_TOKEN": BOT},  # swapped
        {"SLACK_BOT_TOKEN": BOT + " " + APP},  # two pasted together
        {"SLACK_SIGNING_SECRET": BOT},  # a token where the secret goes
        {"SLACK_CHANNEL": BOT},  # a token where no secret is expected
        {"SLACK_ALLOWED_USERS": f"U1,{APP}"},
        {"BOT_API_TOKEN": API + " x", "HOST": "0.0.0.0"},
        {"DSH_HOST_TOKEN": DSH},
        {"REDIS_URL": f"redis://app:{REDIS_PASSWORD}@cache:6379/x"},
    ],
)
def test_malformed_secrets_are_not_echoed(env: dict[str, str]) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(env, None)
    assert_no_secret(str(caught.value))
    assert_no_secret(repr(caught.value))


def test_the_model_hides_input_in_its_own_errors() -> None:
    with pytest.raises(ValidationError) as caught:
        Settings(port=BOT)
    assert BOT not in str(caught.value)


def test_settings_are_frozen() -> None:
    settings = load({})
    with pytest.raises(ValidationError):
        settings.port = 1  # type: ignore[misc]


# --- .env -----------------------------------------------------------------------------------


def write_env(tmp_path: Path, text: str) -> Path:
    """A .env file holding ``text``."""
    path = tmp_path / ".env"
    path.write_text(text, encoding="utf-8")
    return path


def test_env_file_lines_comments_and_quotes(tmp_path: Path) -> None:
    path = write_env(
        tmp_path,
        "\n".join(
            [
                "# the bot's settings",
                "",
                f"SLACK_BOT_TOKEN={BOT}",
                f"export SLACK_APP_TOKEN = '{APP}'",
                'SLACK_CHANNEL="C0123ABCD"   # the team channel',
                "SLACK_MENTION=<!here> # inline comment after a space",
                "BOT_API_TOKEN=abc#not-a-comment",
                "LOG_FORMAT='json' # quoted, then a comment",
                'DSH_HOST_URL="https://dsh.example/a\\"b"',
                "   PORT=4000   ",
                "PORT=4001",
                "SOME_OTHER_TOOL=ignored",
            ]
        ),
    )
    settings = load({}, path)
    assert settings.mode == "socket"
    assert settings.slack_app_token is not None
    assert settings.slack_app_token.get_secret_value() == APP
    assert settings.slack_channel == "C0123ABCD"
    assert settings.slack_mention == "<!here>"
    assert settings.bot_api_token is not None
    assert settings.bot_api_token.get_secret_value() == "abc#not-a-comment"
    assert settings.log_format == "json"
    assert settings.dsh_host_url == 'https://dsh.example/a"b'
    assert settings.port == 4001  # the later line wins
    assert settings.notes == ()


def test_the_environment_wins_over_the_env_file(tmp_path: Path) -> None:
    path = write_env(tmp_path, f"SLACK_BOT_TOKEN={BOT}\nSLACK_APP_TOKEN={APP}\nPORT=4000\n")
    settings = load({"PORT": "5000", "SLACK_CHANNEL": "C1"}, path)
    assert (settings.mode, settings.port, settings.slack_channel) == ("socket", 5000, "C1")
    # Set but empty in the environment: unset, even though .env has it.
    assert load({"SLACK_BOT_TOKEN": "", "SLACK_APP_TOKEN": ""}, path).mode == "sandbox"
    # A JSON value wins whole: none of the file's keys is merged into it.
    path = write_env(tmp_path, 'DSH_REVIEW_POLICY={"approvals": 3, "declines": 2}\n')
    policy = load({"DSH_REVIEW_POLICY": '{"approvals": 2}'}, path).dsh_review_policy
    assert policy is not None and (policy.approvals, policy.declines) == (2, 1)


def test_env_file_problems_name_the_line_not_the_value(tmp_path: Path) -> None:
    # A quoted value may span lines (python-dotenv), so a quote left open runs to the end.
    path = write_env(
        tmp_path,
        f"SLACK_BOT_TOKEN={BOT}\n{APP}\n\n9KEY=1\nPORT=x\nSLACK_APP_TOKEN='{APP}\nLOG_LEVEL=INFO\n",
    )
    problems = problems_of({}, path)
    assert f"{path} line 2: expected KEY=VALUE." in problems
    assert f"{path} line 4: expected KEY=VALUE." in problems
    assert any(p.startswith(f"{path} line 6: cannot be read as KEY=VALUE") for p in problems)
    assert any(p.startswith("PORT:") for p in problems)
    assert len(problems) == 5  # the fifth: SLACK_BOT_TOKEN set alone
    assert_no_secret(str(ConfigError(problems)))


def test_text_after_a_closing_quote_is_a_problem_and_the_next_line_still_counts(
    tmp_path: Path,
) -> None:
    path = write_env(tmp_path, f"SLACK_BOT_TOKEN='{BOT}' trailing\nPORT=x\n")
    problems = problems_of({}, path)
    assert any(p.startswith(f"{path} line 1: cannot be read") for p in problems)
    assert any(p.startswith("PORT:") for p in problems)
    assert_no_secret(str(ConfigError(problems)))


def test_env_file_values_are_taken_literally(tmp_path: Path) -> None:
    path = write_env(tmp_path, "HOME=/root\nBOT_API_TOKEN=abc${HOME}def\n")
    settings = load({"HOME": "/root"}, path)
    assert settings.bot_api_token is not None
    assert settings.bot_api_token.get_secret_value() == "abc${HOME}def"


@pytest.mark.parametrize(
    ("environ", "dotenv", "expected"),
    [
        ({}, "PORT=4000", 4000),  # .env alone
        ({"PORT": "5000"}, "PORT=4000", 5000),  # the environment wins
        ({"PORT": ""}, "PORT=4000", 3000),  # set but empty in the environment: unset
        ({"PORT": "   "}, "PORT=4000", 3000),  # blank is empty
        ({}, "PORT=", 3000),  # empty in .env: unset
        ({"port": "5000"}, "PORT=4000", 4000),  # names are exact: lower case is not ours
        ({"PORT": "5000"}, "", 5000),
    ],
)
def test_env_file_precedence(
    tmp_path: Path, environ: dict[str, str], dotenv: str, expected: int
) -> None:
    assert load(environ, write_env(tmp_path, dotenv + "\n")).port == expected


def test_each_variable_comes_from_where_it_is_set(tmp_path: Path) -> None:
    path = write_env(tmp_path, f"SLACK_BOT_TOKEN={BOT}\nSLACK_CHANNEL=C0FILE\nLOG_LEVEL=DEBUG\n")
    settings = load({"SLACK_APP_TOKEN": APP, "SLACK_CHANNEL": "C0ENV"}, path)
    assert (settings.mode, settings.slack_channel, settings.log_level) == (
        "socket",
        "C0ENV",
        "DEBUG",
    )


def test_a_malformed_value_in_the_env_file_names_its_variable(tmp_path: Path) -> None:
    path = write_env(tmp_path, "SANDBOX_PORT=lots\n")
    assert problems_of({}, path) == ["SANDBOX_PORT: 'lots' is not a whole number from 0 to 65535."]


def test_a_misspelt_setting_in_the_env_file_is_noted(tmp_path: Path) -> None:
    path = write_env(tmp_path, "SLACK_BOT_TOKN=x\nOPENAI_API_KEY=y\n")
    (note,) = load({}, path).notes
    assert "SLACK_BOT_TOKN" in note and "typo" in note


def test_a_missing_env_file_is_fine_and_none_reads_no_file(tmp_path: Path) -> None:
    assert load({}, tmp_path / "absent.env") == Settings()
    write_env(tmp_path, "PORT=4000\n")
    assert load({}, None).port == 3000


def test_an_unreadable_env_file_is_a_problem(tmp_path: Path) -> None:
    (problem,) = problems_of({}, tmp_path)  # a directory
    assert problem.startswith(f"{tmp_path}: cannot be read")


def test_defaults_read_os_environ_and_dot_env_in_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in SETTING_NAMES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    write_env(tmp_path, "PORT=4000\nLOG_LEVEL=DEBUG\n")
    monkeypatch.setenv("LOG_LEVEL", "ERROR")
    settings = load_settings()
    assert (settings.port, settings.log_level) == (4000, "ERROR")


# --- help -----------------------------------------------------------------------------------


def test_the_help_lists_every_setting_and_every_field_has_one() -> None:
    for name in SETTING_NAMES:
        assert f"\n  {name} " in SETTINGS_HELP
    fields = set(Settings.model_fields) - {"notes"}
    assert fields == {name.lower() for name in SETTING_NAMES}
    assert all(len(line) <= 100 for line in SETTINGS_HELP.splitlines())


def test_the_help_is_generated_from_the_fields() -> None:
    flat = " ".join(SETTINGS_HELP.split())
    for name in SETTING_NAMES:
        field = Settings.model_fields[name.lower()]
        assert field.description, f"{name} has no description"
        default = field.default
        extra = field.json_schema_extra
        shown = (
            extra["shown_default"]
            if isinstance(extra, dict) and "shown_default" in extra
            else "-"
            if default in (None, ())
            else f"{default:g}"
            if isinstance(default, float)
            else str(default)
        )
        row = f"{name} {shown} {field.description}"
        assert row in flat, row
    secrets = [n for n in sorted(SETTING_NAMES) if "Secret." in flat.split(n + " ", 1)[1][:400]]
    assert {
        "SLACK_BOT_TOKEN",
        "SLACK_APP_TOKEN",
        "SLACK_SIGNING_SECRET",
        "BOT_API_TOKEN",
        "DSH_HOST_TOKEN",
        "REDIS_URL",
    } <= set(secrets)


def test_the_help_of_redis_url_names_the_store_used_without_it() -> None:
    """Without REDIS_URL the store is SQLite (memory only in the sandbox), as ``STORE`` says."""
    flat = " ".join(SETTINGS_HELP.split())
    row = flat[flat.index(" REDIS_URL ") : flat.index(" REDIS_PREFIX ")]
    assert "Unset: the store is SQLite at STORE_PATH (memory in the sandbox)." in row
    assert "in memory, one process" not in row
    # and STORE's default column does not claim memory: the loader picks it when unset
    assert " STORE auto Where questions live:" in flat


def test_a_new_field_appears_in_the_help_with_its_bounds_in_its_errors() -> None:
    from pydantic import ConfigDict, Field

    class Extended(Settings):
        model_config = ConfigDict(frozen=True)
        poll_limit: int = Field(7, ge=1, le=50, description="How many polls at once.")

    fields = {name.upper(): f for name, f in Extended.model_fields.items()}
    # columns are as wide as the longest name and default (STORE_PATH's, today)
    assert re.search(r"\n  POLL_LIMIT {2,}7 {2,}How many polls at once\.", render_help(fields))
    with pytest.raises(ValidationError) as caught:
        Extended(poll_limit="99")
    (error,) = caught.value.errors()
    assert problem(error, Extended.model_fields) == (
        "POLL_LIMIT: '99' is not a whole number from 1 to 50."
    )


@pytest.mark.parametrize("env", [{}, SOCKET, HTTP, ALL_SECRETS])
def test_settings_survive_a_round_trip_through_model_dump(env: dict[str, str]) -> None:
    settings = load(env)
    assert Settings(**settings.model_dump()) == settings


# --- what the help promises, and the bounds a setting needs --------------------------------


def test_store_auto_is_the_default_help_shows() -> None:
    """``--help`` says STORE defaults to ``auto``; saying so explicitly chooses as unset."""
    assert re.search(r"STORE\s+auto\b", SETTINGS_HELP), SETTINGS_HELP
    assert load({**HTTP, "STORE": "auto"}).store == "sqlite"
    assert load({"STORE": "AUTO"}).store == "memory"  # the sandbox
    assert load({"STORE": "auto", "REDIS_URL": "redis://cache/0", **HTTP}).store == "redis"


def test_allowed_hosts_beyond_loopback_need_an_api_token() -> None:
    """A proxy passing a public name on to a loopback HOST would expose an open API."""
    problem = problem_for("ALLOWED_HOSTS", {"ALLOWED_HOSTS": "bot.example.com"})
    assert "BOT_API_TOKEN" in problem
    named = load({"ALLOWED_HOSTS": "bot.example.com", "BOT_API_TOKENS": f"ci:{API}"})
    assert named.allowed_hosts == ("bot.example.com",)
    settings = load({"ALLOWED_HOSTS": "bot.example.com", "BOT_API_TOKEN": API})
    assert settings.served_hosts is not None and "bot.example.com" in settings.served_hosts


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "0:0::0", "::%eth0", "[::%eth0]"])
def test_a_wildcard_host_serves_any_host_name(host: str) -> None:
    assert load({"HOST": host, "BOT_API_TOKEN": API}).served_hosts is None
    named = load({"HOST": "192.168.1.20", "BOT_API_TOKEN": API}).served_hosts
    assert named is not None and "192.168.1.20" in named


@pytest.mark.parametrize("value", ["604801", "1e17"])
def test_question_timeout_is_bounded_like_the_apis(value: str) -> None:
    problem = problem_for("QUESTION_TIMEOUT", {"QUESTION_TIMEOUT": value})
    assert "604800" in problem
    assert load({"QUESTION_TIMEOUT": "604800"}).question_timeout == 604800.0


@pytest.mark.parametrize(
    "env",
    [
        {"HOST": "0.0.0.0", "BOT_API_TOKEN": "x"},
        {"HOST": "0.0.0.0", "BOT_API_TOKEN": API, "BOT_API_TOKENS": "ci:short-secret"},
        {"ALLOWED_HOSTS": "bot.example.com", "BOT_API_TOKEN": "fifteen-chars!!"},
    ],
)
def test_a_short_api_token_is_refused_where_the_api_is_reachable(env: dict[str, str]) -> None:
    (found,) = problems_of(env)
    assert "shorter than 16 characters" in found
    for secret in ("short-secret", "fifteen-chars!!"):
        assert secret not in found
    assert load({**env, "HOST": "127.0.0.1", "ALLOWED_HOSTS": ""}).host == "127.0.0.1"  # loopback
    assert load({"HOST": "0.0.0.0", "BOT_API_TOKEN": "s" * 16}).host == "0.0.0.0"  # the boundary


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"BOT_API_TOKENS": "a:xxxxxxxxxxxxxxxx1,a:yyyyyyyyyyyyyyyy2"},
            "BOT_API_TOKENS: the name 'a' is given twice.",
        ),
        (
            {"BOT_API_TOKENS": "a:xxxxxxxxxxxxxxxx1,b:xxxxxxxxxxxxxxxx1"},
            "BOT_API_TOKENS: one token is given twice (a, b).",
        ),
        (
            {"BOT_API_TOKEN": "yyyyyyyyyyyyyyyy2", "BOT_API_TOKENS": "default:xxxxxxxxxxxxxxxx1"},
            "BOT_API_TOKEN: the name 'default' is given twice.",
        ),
    ],
)
def test_an_api_token_name_or_token_given_twice_is_refused(
    env: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load(env)
    assert caught.value.problems == [message]


def test_a_long_value_is_cut_short_in_a_message() -> None:
    assert show("long-name-" * 10) == repr(("long-name-" * 10)[:57] + "...")


def test_a_value_that_is_a_good_part_of_a_secret_counts_as_holding_it() -> None:
    assert holds_secret("PART-OF-IT", ["the-whole-PART-OF-IT-secret"])
    assert not holds_secret("PART", ["the-whole-PART-OF-IT-secret"])  # too short to tell
