"""A local stand-in for Slack: the Web API subset the provider uses, in memory, over HTTP.

- ``records``: the data (users, groups, channels, messages, views, triggers, files).
- ``state``: ``Workspace``, the in-memory model and every state change, pure.
- ``methods``: Web API methods over that model, pure.
- ``blockcheck``: every Block Kit rule Slack documents, checked as Slack checks a payload.
- ``webapi``: ``SlackStandIn``, the aiohttp server, with fault injection and a call log.
- ``ratelimits``: ``RateLimiter``, Slack's published rate limits, enforced when switched on.
- ``clicks`` and ``signing``: the payloads a person's click produces, signed as Slack signs.
"""

from adapters.slack.sandbox.calllog import Call, CallLog
from adapters.slack.sandbox.faults import Fault, FaultKind, Faults
from adapters.slack.sandbox.ratelimits import RateLimiter
from adapters.slack.sandbox.records import (
    Change,
    Channel,
    Ephemeral,
    Message,
    SlackError,
    User,
    Usergroup,
    View,
)
from adapters.slack.sandbox.signing import (
    block_actions_payload,
    build_interaction_request,
    send_interaction,
    view_submission_payload,
)
from adapters.slack.sandbox.state import Workspace
from adapters.slack.sandbox.webapi import DEFAULT_TOKEN, SlackStandIn

__all__ = [
    "DEFAULT_TOKEN",
    "Call",
    "CallLog",
    "Change",
    "Channel",
    "Ephemeral",
    "Fault",
    "FaultKind",
    "Faults",
    "Message",
    "RateLimiter",
    "SlackError",
    "SlackStandIn",
    "User",
    "Usergroup",
    "View",
    "Workspace",
    "block_actions_payload",
    "build_interaction_request",
    "send_interaction",
    "view_submission_payload",
]
