"""Interaction requests exactly as Slack sends them: payload shapes, form body, v0 signature.

``block_actions_payload`` / ``view_submission_payload`` build the JSON Slack would deliver
(slack-platform.md §2.2); ``build_interaction_request`` wraps one in the signed
``application/x-www-form-urlencoded`` body (``payload=<JSON>``) and headers that bolt's request
verification accepts; ``send_interaction`` POSTs it.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import urlencode

import aiohttp
from slack_sdk.signature import SignatureVerifier

__all__ = [
    "DEFAULT_APP_ID",
    "DEFAULT_TEAM",
    "block_actions_payload",
    "build_event_request",
    "build_interaction_request",
    "send_interaction",
    "view_submission_payload",
]

DEFAULT_TEAM: Final[Mapping[str, str]] = {"id": "T0SANDBOX", "domain": "sandbox"}
DEFAULT_APP_ID: Final = "A0SANDBOX"
_VERIFICATION_TOKEN: Final = "sandbox-verification-token"


def build_interaction_request(
    payload: Mapping[str, Any] | str, signing_secret: str, *, timestamp: int | None = None
) -> tuple[str, dict[str, str]]:
    """The raw body and headers of an interaction request signed with ``signing_secret``.

    ``payload`` is the interaction, or its JSON text as it should be sent.
    """
    text = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
    body = urlencode({"payload": text})
    stamp = str(int(time.time()) if timestamp is None else timestamp)
    signature = SignatureVerifier(signing_secret).generate_signature(timestamp=stamp, body=body)
    if signature is None:  # slack_sdk returns None only for a missing timestamp or body
        raise ValueError("could not sign the interaction")
    headers = {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Slack-Request-Timestamp": stamp,
        "X-Slack-Signature": signature,
    }
    return body, headers


def build_event_request(
    event: Mapping[str, Any], signing_secret: str, *, team_id: str, api_app_id: str
) -> tuple[str, dict[str, str]]:
    """The raw body and headers of an Events API ``event_callback`` carrying ``event``."""
    stamp = str(int(time.time()))
    body = json.dumps(
        {
            "token": "sandbox",
            "team_id": team_id,
            "api_app_id": api_app_id,
            "event": dict(event),
            "type": "event_callback",
            "event_id": f"Ev{int(time.time() * 1_000_000):X}",
            "event_time": int(stamp),
        },
        separators=(",", ":"),
    )
    signature = SignatureVerifier(signing_secret).generate_signature(timestamp=stamp, body=body)
    if signature is None:
        raise ValueError("could not sign the event")
    headers = {
        "Content-Type": "application/json",
        "X-Slack-Request-Timestamp": stamp,
        "X-Slack-Signature": signature,
    }
    return body, headers


async def send_interaction(
    session: aiohttp.ClientSession, url: str, payload: Mapping[str, Any], signing_secret: str
) -> tuple[int, str]:
    """POST a signed interaction to the app at ``url``; returns its status and body text."""
    body, headers = build_interaction_request(payload, signing_secret)
    async with session.post(url, data=body.encode(), headers=headers) as response:
        return response.status, await response.text()


def block_actions_payload(
    user: str | Mapping[str, Any],
    channel: str | Mapping[str, Any],
    message: Mapping[str, Any],
    action: Mapping[str, Any],
    *,
    state_values: Mapping[str, Any] | None = None,
    trigger_id: str = "",
    response_url: str = "",
    is_ephemeral: bool = False,
    team: Mapping[str, Any] = DEFAULT_TEAM,
    api_app_id: str = DEFAULT_APP_ID,
) -> dict[str, Any]:
    """A ``block_actions`` payload for ``action`` on ``message`` (a stored message dict)."""
    channel_ref = _channel_ref(channel)
    container: dict[str, Any] = {
        "type": "message",
        "message_ts": message["ts"],
        "channel_id": channel_ref["id"],
        "is_ephemeral": is_ephemeral,
    }
    if message.get("thread_ts"):
        container["thread_ts"] = message["thread_ts"]
    payload: dict[str, Any] = {
        "type": "block_actions",
        "user": _user_ref(user, team),
        "api_app_id": api_app_id,
        "token": _VERIFICATION_TOKEN,
        "container": container,
        "trigger_id": trigger_id,
        "team": dict(team),
        "enterprise": None,
        "is_enterprise_install": False,
        "channel": channel_ref,
        "state": {"values": copy.deepcopy(dict(state_values or {}))},
        "response_url": response_url,
        "actions": [copy.deepcopy(dict(action))],
    }
    if not is_ephemeral:
        payload["message"] = copy.deepcopy(dict(message))
    return payload


def view_submission_payload(
    user: str | Mapping[str, Any],
    view: Mapping[str, Any],
    state_values: Mapping[str, Any] | None = None,
    *,
    trigger_id: str = "",
    team: Mapping[str, Any] = DEFAULT_TEAM,
    api_app_id: str = DEFAULT_APP_ID,
) -> dict[str, Any]:
    """A ``view_submission`` payload for ``view`` (a view object) with these input values."""
    submitted = copy.deepcopy(dict(view))
    submitted["state"] = {"values": copy.deepcopy(dict(state_values or {}))}
    return {
        "type": "view_submission",
        "team": dict(team),
        "user": _user_ref(user, team),
        "api_app_id": api_app_id,
        "token": _VERIFICATION_TOKEN,
        "trigger_id": trigger_id,
        "view": submitted,
        "response_urls": [],
        "enterprise": None,
        "is_enterprise_install": False,
    }


def _user_ref(user: str | Mapping[str, Any], team: Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(user, str):
        return {"id": user, "username": user, "name": user, "team_id": team.get("id")}
    return dict(user)


def _channel_ref(channel: str | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(channel, str):
        return {"id": channel, "name": channel}
    return {"id": channel["id"], "name": channel.get("name", channel["id"])}
