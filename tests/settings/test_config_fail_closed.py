"""Settings fail closed: an allow-list that names nobody is refused, a secret pasted into the
wrong setting is never echoed, log redaction leaves prose alone, a review policy's problem
names its key, and ``python -m bot`` says so on stderr with exit code 2."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from bot.logs import JsonFormatter, TextFormatter, redact
from bot.settings.config import SETTING_NAMES, ConfigError, Settings, load_settings

BOT = "xoxb-1111-2222-BOTSECRETvalue"
APP = "xapp-1-A111-3333-APPSECRETvalue"
SIGNING = "8f14e45fceea167a5a36dedd4bea2543"
API = "api-token-APISECRET-0123456789"
SOCKET = {"SLACK_BOT_TOKEN": BOT, "SLACK_APP_TOKEN": APP, "SLACK_CHANNEL": "C0123ABCD"}
HTTP = {"SLACK_BOT_TOKEN": BOT, "SLACK_SIGNING_SECRET": SIGNING, "SLACK_CHANNEL": "C0123ABCD"}


def problems_of(env: dict[str, str], env_file: Path | None = None) -> list[str]:
    """The problems ``env`` gives, which must be some."""
    with pytest.raises(ConfigError) as caught:
        load_settings(env, env_file)
    return caught.value.problems


def problem_for(name: str, env: dict[str, str], env_file: Path | None = None) -> str:
    """The one problem that names ``name``."""
    found = [p for p in problems_of(env, env_file) if p.startswith(f"{name}:")]
    assert len(found) == 1, problems_of(env, env_file)
    return found[0]


def run_bot(env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python -m bot`` with only ``env`` (and what Python needs), in ``cwd`` (no .env)."""
    clean = {k: v for k, v in os.environ.items() if k not in SETTING_NAMES}
    clean.update(env, PORT="0", SANDBOX_PORT="0")
    return subprocess.run(
        [sys.executable, "-m", "bot"],
        env=clean,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,  # a guard: the bot refuses these settings at once
        check=False,
    )


# --- 1. an allow-list that names nobody -----------------------------------------------------

ALLOW_LISTS = [
    "SLACK_ALLOWED_USERS",
    "SLACK_ALLOWED_USERGROUPS",
    "DSH_APPROVERS",
    "DSH_APPROVER_USERGROUPS",
]


@pytest.mark.parametrize("name", ALLOW_LISTS)
@pytest.mark.parametrize("value", [",", " , ,", ",,,"])
def test_an_allow_list_of_separators_only_is_refused(name: str, value: str) -> None:
    problem = problem_for(name, {**SOCKET, name: value})
    assert "names no" in problem
    assert "leave" in problem and "empty" in problem


@pytest.mark.parametrize("name", ALLOW_LISTS)
def test_an_allow_list_of_separators_in_the_env_file_is_refused(name: str, tmp_path: Path) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text(f"{name}=, ,\n", encoding="utf-8")
    assert "names no" in problem_for(name, {}, env_file)


@pytest.mark.parametrize("name", ALLOW_LISTS)
@pytest.mark.parametrize("value", ["", "   "])
def test_a_blank_allow_list_is_still_unset(name: str, value: str) -> None:
    assert getattr(load_settings({**SOCKET, name: value}, None), name.lower()) == ()


def test_an_allow_list_built_in_code_from_separators_is_refused() -> None:
    with pytest.raises(ValidationError) as caught:
        Settings(slack_allowed_users=" , ")
    assert "names no user ids" in str(caught.value)
    assert Settings(slack_allowed_users="").slack_allowed_users == ()


@pytest.mark.slow
def test_python_m_bot_refuses_a_template_whose_parts_are_unset(tmp_path: Path) -> None:
    """``SLACK_ALLOWED_USERS="${A},${B}"`` with A and B unset reaches the bot as ``,``."""
    result = run_bot({"SLACK_ALLOWED_USERS": ","}, tmp_path)
    assert result.returncode == 2, result.stderr
    assert "SLACK_ALLOWED_USERS: ',' names no user ids" in result.stderr


# --- 2. a secret pasted into the wrong setting ----------------------------------------------

SHORT = "hunter2hunter2hunter2"  # a low-entropy secret: only being known tells it apart


@pytest.mark.parametrize(
    ("env", "name", "secret"),
    [
        ({**HTTP, "SLACK_CHANNEL": SIGNING}, "SLACK_CHANNEL", SIGNING),
        ({"BOT_API_TOKEN": API, "SLACK_MENTION": API}, "SLACK_MENTION", API),
        ({"BOT_API_TOKEN": API, "REDIS_PREFIX": f"x {API}"}, "REDIS_PREFIX", API),
        ({"BOT_API_TOKEN": SHORT, "SLACK_CHANNEL": SHORT}, "SLACK_CHANNEL", SHORT),
        (
            {"BOT_API_TOKEN": SHORT, "SLACK_ALLOWED_USERS": f"U1,{SHORT}"},
            "SLACK_ALLOWED_USERS",
            SHORT,
        ),
        ({"BOT_API_TOKENS": f"ci:{SHORT}", "SLACK_MENTION": SHORT}, "SLACK_MENTION", SHORT),
        (
            {"DSH_HOST_URL": "https://d.example/", "DSH_HOST_TOKEN": SHORT, "HOST": f"{SHORT}!"},
            "HOST",
            SHORT,
        ),
        (
            {"REDIS_URL": f"redis://app:{SHORT}@cache/0", "REDIS_PREFIX": f"{SHORT}!"},
            "REDIS_PREFIX",
            SHORT,
        ),
        # type errors are worded from the input after validation
        ({"BOT_API_TOKEN": SHORT, "PORT": SHORT}, "PORT", SHORT),
        ({"BOT_API_TOKEN": SHORT, "LOG_LEVEL": SHORT}, "LOG_LEVEL", SHORT),
        ({"BOT_API_TOKEN": SHORT, "QUESTION_TIMEOUT": SHORT}, "QUESTION_TIMEOUT", SHORT),
    ],
)
def test_a_secret_in_the_wrong_setting_is_not_echoed(
    env: dict[str, str], name: str, secret: str
) -> None:
    problem = problem_for(name, env)
    assert secret not in problem
    assert secret[:8] not in problem
    assert "not shown" in problem


def test_a_secret_from_the_tokens_file_is_not_echoed(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"# API tokens\nci:{SHORT}\n", encoding="utf-8")
    problem = problem_for(
        "SLACK_CHANNEL", {"BOT_API_TOKENS_FILE": str(tokens), "SLACK_CHANNEL": SHORT}
    )
    assert SHORT not in problem and "not shown" in problem


@pytest.mark.parametrize(
    "value",
    [
        SIGNING,  # hex, like a signing secret
        "ghp_Xq7rT2mZ9kLp4Vw8Yb1Nc6Hd3Fs0Ja5Ge",  # another service's token
        "dGhpcyBpcyBhIHNlY3JldCB2YWx1ZQ==",  # base64
    ],
)
def test_a_value_shaped_like_a_secret_is_not_echoed_even_when_no_setting_holds_it(
    value: str,
) -> None:
    problem = problem_for("SLACK_CHANNEL", {"SLACK_CHANNEL": value})
    assert value not in problem and value[:8] not in problem
    assert "not shown" in problem


def test_a_secret_in_the_wrong_setting_is_not_echoed_by_settings_built_in_code() -> None:
    with pytest.raises(ValidationError) as caught:
        Settings(
            slack_bot_token=BOT,
            slack_signing_secret=SIGNING,
            slack_channel=SIGNING,
        )
    assert SIGNING not in str(caught.value) and SIGNING not in repr(caught.value.errors())


@pytest.mark.parametrize(
    ("env", "name", "shown"),
    [
        ({"SLACK_CHANNEL": "#general"}, "SLACK_CHANNEL", "'#general'"),
        ({"SLACK_ALLOWED_USERS": "U1, alice"}, "SLACK_ALLOWED_USERS", "'alice'"),
        ({"REDIS_URL": "redis://cache:6379/zero"}, "REDIS_URL", "redis://cache:6379/zero"),
        ({"BOT_API_TOKEN": API, "PORT": "http"}, "PORT", "'http'"),
        ({"HOST": "not a host!"}, "HOST", "'not a host!'"),
    ],
)
def test_ordinary_values_are_still_quoted(env: dict[str, str], name: str, shown: str) -> None:
    assert shown in problem_for(name, env)


@pytest.mark.slow
def test_python_m_bot_does_not_echo_the_signing_secret(tmp_path: Path) -> None:
    env = {**HTTP, "SLACK_CHANNEL": SIGNING}
    result = run_bot(env, tmp_path)
    assert result.returncode == 2, result.stderr
    assert "SLACK_CHANNEL:" in result.stderr
    assert SIGNING not in result.stderr and SIGNING[:8] not in result.stderr
    assert SIGNING not in result.stdout


# --- 3. log redaction -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "a valid bearer token is required",
        "Bearer token missing",
        "the BEARER authentication scheme",
        "send Authorization: Bearer <token>",
    ],
)
def test_redaction_leaves_prose_about_bearer_tokens_alone(text: str) -> None:
    assert redact(text) == text


@pytest.mark.parametrize(
    "token",
    [
        API,
        "abc123def",  # short, but a digit says it is no word
        "abcdefghijklmnopqrst",  # long enough to be a credential, letters only
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl",  # a JWT
        "dGhpcyBpcyBhIHNlY3JldA==",
    ],
)
@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER"])
def test_redaction_still_hides_a_bearer_credential(token: str, scheme: str) -> None:
    shown = redact(f"request failed: Authorization: {scheme} {token} (401)")
    assert token not in shown
    assert shown == "request failed: Authorization: [redacted] (401)"


def test_formatters_redact_credentials_but_not_the_sentence() -> None:
    record = logging.LogRecord(
        "bot", logging.WARNING, __file__, 1, "a valid bearer token is required", None, None
    )
    record.header = f"Bearer {API}"
    text = TextFormatter().format(record)
    assert "a valid bearer token is required" in text and API not in text
    data = json.loads(JsonFormatter().format(record))
    assert data["message"] == "a valid bearer token is required"
    assert data["header"] == "[redacted]"


# --- 4. DSH_REVIEW_POLICY names the key at fault --------------------------------------------


@pytest.mark.parametrize(
    ("policy", "fragments"),
    [
        ('{"approvals": 2, "bogus": 1}', ["bogus", "unknown key"]),
        (
            '{"approvals": 2, "required": [{"usergroups": ["S1"], "cuont": 1}]}',
            ["required[0].cuont", "unknown key"],
        ),
        ('{"approvals": "many"}', ["approvals", "integer"]),
        ('{"approvals": 1, "reviewers": {}}', ["reviewers", "at least one user"]),
        ('{"approvals": ', ["not valid JSON", "line 1 column"]),
        ("approvals=2", ["not valid JSON"]),
        ("[1, 2]", ["JSON object"]),
    ],
)
def test_a_bad_review_policy_names_what_is_wrong(policy: str, fragments: list[str]) -> None:
    problem = problem_for("DSH_REVIEW_POLICY", {"DSH_REVIEW_POLICY": policy})
    for fragment in fragments:
        assert fragment in problem, problem
    assert "valid dictionary" not in problem
    assert "Extra inputs" not in problem


def test_a_good_review_policy_still_loads(tmp_path: Path) -> None:
    policy = '{"approvals": 2, "required": [{"usergroups": ["S0123ABCD"]}]}'
    settings = load_settings({"DSH_REVIEW_POLICY": policy}, None)
    assert settings.dsh_review_policy is not None
    assert settings.dsh_review_policy.approvals == 2
    env_file = tmp_path / ".env"
    env_file.write_text(f"DSH_REVIEW_POLICY='{policy}'\n", encoding="utf-8")
    from_file = load_settings({}, env_file).dsh_review_policy
    assert from_file == settings.dsh_review_policy


@pytest.mark.parametrize(
    "value",
    ["#release-coordination-2025", "deploy-approvers-group-01", "engineering-announcements-2024"],
)
def test_a_name_joined_by_hyphens_is_shown_in_its_error(value: str) -> None:
    """Names are words joined by - or _: the credential heuristic leaves them shown, so a
    person sees which value was wrong."""
    problem = problem_for("SLACK_CHANNEL", {**SOCKET, "SLACK_CHANNEL": value})
    assert repr(value) in problem and "not shown" not in problem


@pytest.mark.parametrize(
    "value", ["8f14e45fceea167a5a36dedd4bea2543", "Zx9Qk2Lm8Np4Rt6Vw1Yb3Cd5", "a+b/9" * 5]
)
def test_a_value_shaped_like_a_credential_is_still_hidden(value: str) -> None:
    problem = problem_for("SLACK_CHANNEL", {**SOCKET, "SLACK_CHANNEL": value})
    assert value not in problem and "looks like a secret" in problem
