"""manifest.yml: valid against Slack's schema, and its scopes match the code's Web API calls.

The scopes come from ``bot.app.scopes.METHOD_SCOPES``; an ``ast`` scan of ``bot/`` and
``adapters/`` finds every Web API call, so a new call without an entry there fails here.
"""

from __future__ import annotations

import ast
import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft7Validator
from slack_sdk.web.async_client import AsyncWebClient

from bot.app.scopes import BOT_SCOPES, METHOD_SCOPES, scopes_for
from tests.source_tree import parse

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "manifest.yml"
SCHEMA = (
    Path(__file__).resolve().parents[3]
    / "shared"
    / "reference"
    / "data"
    / "manifest.schema.1.0.0.json"
)
SCANNED = ("bot", "adapters")
NOT_SCANNED = (ROOT / "adapters" / "slack" / "sandbox",)  # it serves the Web API, not calls it

# --- the scanner ----------------------------------------------------------------------------

# Client helpers that are not one Web API method each.
_COMPOSITE = {
    "files_upload_v2": ("files.getUploadURLExternal", "files.completeUploadExternal"),
    "chat_stream": ("chat.startStream", "chat.appendStream", "chat.stopStream"),
}
# Every Web API wrapper of slack_sdk's client, by its Python name: ``chat_postMessage``.
CLIENT_METHODS: dict[str, tuple[str, ...]] = {
    name: _COMPOSITE.get(name, (name.replace("_", "."),))
    for name, member in vars(AsyncWebClient).items()
    if callable(member) and not name.startswith("_") and name != "api_call"
}
DYNAMIC = "<api_call with a computed method name>"


def web_api_calls(source: str) -> list[tuple[str, int]]:
    """(Web API method, line) for each Web API call in ``source``.

    Finds ``<anything>.chat_postMessage`` (called or passed on), ``<anything>.api_call("m")``
    and bolt's ``say(...)`` (a ``chat.postMessage``). The wrapper names are those of
    slack_sdk's ``AsyncWebClient``, so the scan does not depend on what the client is called.
    """
    found: list[tuple[str, int]] = []
    for node in ast.walk(parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in CLIENT_METHODS:
            found += [(method, node.lineno) for method in CLIENT_METHODS[node.attr]]
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr == "api_call":
                method = _api_call_method(node)
                if method != DYNAMIC or not _forwards(func):
                    found.append((method, node.lineno))
            elif isinstance(func, ast.Name) and func.id == "say":
                found.append(("chat.postMessage", node.lineno))
    return sorted(found, key=lambda item: (item[1], item[0]))


def _forwards(func: ast.Attribute) -> bool:
    """``super().api_call(method, ...)`` with a computed name: a client subclass passing on
    a call its caller named (the caller's own call is the one scanned)."""
    owner = func.value
    return (
        isinstance(owner, ast.Call)
        and isinstance(owner.func, ast.Name)
        and owner.func.id == "super"
    )


def _api_call_method(call: ast.Call) -> str:
    """The literal method name of an ``api_call(...)``, or ``DYNAMIC``."""
    args = [call.args[0]] if call.args else []
    args += [kw.value for kw in call.keywords if kw.arg == "api_method"]
    if args and isinstance(args[0], ast.Constant) and isinstance(args[0].value, str):
        return args[0].value
    return DYNAMIC


def scan_project() -> dict[str, list[str]]:
    """Web API method -> the ``path:line`` places in bot/ and adapters/ that call it."""
    calls: dict[str, list[str]] = {}
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*.py")):
            if any(path.is_relative_to(skip) for skip in NOT_SCANNED):
                continue
            for method, line in web_api_calls(path.read_text(encoding="utf-8")):
                calls.setdefault(method, []).append(f"{path.relative_to(ROOT)}:{line}")
    return calls


def test_scanner_finds_calls_on_any_client() -> None:
    snippet = """
async def post(app, client, self, say, respond):
    await app.client.chat_postMessage(channel="C1", text="hi")
    await client.views_open(trigger_id="t", view={})
    await self._web.chat_update(channel="C1", ts="1", text="x")
    await client.api_call("usergroups.users.list", params={"usergroup": "S1"})
    await client.api_call(api_method="chat.postEphemeral")
    await client.api_call(method_name)
    await app.client.files_upload_v2(channel="C1", content="plan")
    retry = client.conversations_open
    await say("hello")
    await respond("no Web API call: response_url")
    client.close()
    items.append("chat_postMessage")
    def chat_delete(self): ...
    await super().api_call(api_method, **kwargs)
    await super().api_call("chat.update", json={})
"""
    assert web_api_calls(snippet) == [
        ("chat.postMessage", 3),
        ("views.open", 4),
        ("chat.update", 5),
        ("usergroups.users.list", 6),
        ("chat.postEphemeral", 7),
        (DYNAMIC, 8),
        ("files.completeUploadExternal", 9),
        ("files.getUploadURLExternal", 9),
        ("conversations.open", 10),
        ("chat.postMessage", 11),
        ("chat.update", 17),
    ]


def test_scanner_converts_wrapper_names_to_method_names() -> None:
    assert CLIENT_METHODS["chat_postMessage"] == ("chat.postMessage",)
    assert CLIENT_METHODS["usergroups_users_list"] == ("usergroups.users.list",)
    assert CLIENT_METHODS["files_getUploadURLExternal"] == ("files.getUploadURLExternal",)
    assert "api_call" not in CLIENT_METHODS


# --- the manifest ---------------------------------------------------------------------------


def load_manifest() -> dict[str, Any]:
    """manifest.yml, parsed."""
    manifest = yaml.safe_load(MANIFEST.read_text(encoding="utf-8"))
    assert isinstance(manifest, dict)
    return manifest


def http_variant(text: str) -> dict[str, Any]:
    """The manifest with its commented-out HTTP ``settings:`` block in place of the live one."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == "# settings:")
    block: list[str] = []
    for line in lines[start:]:
        if not line.startswith("#"):
            break
        block.append(re.sub(r"^# ?", "", line))
    replacement = yaml.safe_load("\n".join(block))
    assert isinstance(replacement, dict)
    assert list(replacement) == ["settings"]
    variant = copy.deepcopy(yaml.safe_load(text))
    variant.update(replacement)
    return dict(variant)


@pytest.fixture(scope="module")
def schema_validator() -> Draft7Validator:
    """Slack's official manifest schema (v1), read from the shared reference folder."""
    if not SCHEMA.is_file():
        pytest.skip(f"Slack's manifest schema is not at {SCHEMA} (the shared reference folder)")
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    Draft7Validator.check_schema(schema)
    return Draft7Validator(schema, format_checker=Draft7Validator.FORMAT_CHECKER)


def schema_errors(validator: Draft7Validator, manifest: dict[str, Any]) -> list[str]:
    """Each schema error as ``path: message``."""
    return [
        f"{'/'.join(map(str, error.absolute_path)) or '(root)'}: {error.message}"
        for error in validator.iter_errors(manifest)
    ]


def test_manifest_matches_slacks_schema(schema_validator: Draft7Validator) -> None:
    manifest = load_manifest()
    assert manifest["_metadata"]["major_version"] == 1
    assert schema_errors(schema_validator, manifest) == []


def test_commented_http_variant_matches_slacks_schema(schema_validator: Draft7Validator) -> None:
    variant = http_variant(MANIFEST.read_text(encoding="utf-8"))
    assert schema_errors(schema_validator, variant) == []
    settings = variant["settings"]
    assert settings["socket_mode_enabled"] is False
    assert settings["interactivity"] == {
        "is_enabled": True,
        "request_url": "https://YOUR-HOST/slack/events",
    }
    assert settings["event_subscriptions"] == {
        "request_url": "https://YOUR-HOST/slack/events",
        "bot_events": ["app_home_opened"],
    }
    assert {k: v for k, v in variant.items() if k != "settings"} == {
        k: v for k, v in load_manifest().items() if k != "settings"
    }


def test_manifest_turns_on_what_the_bot_needs() -> None:
    manifest = load_manifest()
    settings, features = manifest["settings"], manifest["features"]
    assert settings["interactivity"]["is_enabled"] is True
    assert settings["socket_mode_enabled"] is True
    assert "request_url" not in settings["interactivity"]  # Socket Mode needs none
    # the one event: a person opened the Home tab ("Waiting for you")
    assert settings["event_subscriptions"] == {"bot_events": ["app_home_opened"]}
    assert features["app_home"]["home_tab_enabled"] is True
    assert features["bot_user"]["always_online"] is True
    assert features["app_home"]["messages_tab_enabled"] is True  # DMs from the bot
    assert settings.get("token_rotation_enabled") is not True  # the bot never refreshes


# --- scopes ---------------------------------------------------------------------------------


def manifest_bot_scopes() -> list[str]:
    """The manifest's bot scopes, in file order."""
    scopes = load_manifest()["oauth_config"]["scopes"]
    assert set(scopes) == {"bot"}, "the bot needs no user scopes"
    bot = scopes["bot"]
    assert isinstance(bot, list)
    return [str(scope) for scope in bot]


def test_manifest_requests_exactly_the_scopes_of_method_scopes() -> None:
    scopes = manifest_bot_scopes()
    assert len(scopes) == len(set(scopes)), "a scope is listed twice"
    assert sorted(scopes) == list(BOT_SCOPES)


def test_method_scopes_names_real_web_api_methods() -> None:
    known = {method for methods in CLIENT_METHODS.values() for method in methods}
    assert sorted(set(METHOD_SCOPES) - known) == []


@pytest.mark.slow
def test_every_web_api_call_in_the_code_has_its_scopes_listed() -> None:
    calls = scan_project()
    missing = {method: places for method, places in calls.items() if method not in METHOD_SCOPES}
    assert missing == {}, (
        "these Web API calls are not in bot/app/scopes.py METHOD_SCOPES; add each with its bot "
        f"scopes (and the scopes to manifest.yml): {missing}"
    )


@pytest.mark.slow
def test_manifest_scopes_are_those_the_calls_in_the_code_need() -> None:
    calls = scan_project()
    if not calls:
        pytest.skip("no Web API calls under bot/ or adapters/ yet")
    needed = scopes_for(method for method in calls if method in METHOD_SCOPES)
    requested = sorted(manifest_bot_scopes())
    unused = sorted(set(requested) - set(needed))
    assert unused == [], (
        f"manifest.yml requests {unused}, which no Web API call in bot/ or adapters/ needs; "
        "remove them there, with their methods in bot/app/scopes.py METHOD_SCOPES"
    )
    assert requested == list(needed)
