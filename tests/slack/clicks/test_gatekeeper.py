"""Who may answer a group-restricted question when Slack's group lookup fails for a moment."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.asks.authorize import Gatekeeper
from adapters.slack.sandbox import SlackStandIn

pytestmark = pytest.mark.timeout(30)

LOG = logging.getLogger("tests.gatekeeper")


@pytest.fixture
async def slack() -> AsyncIterator[SlackStandIn]:
    async with SlackStandIn() as standin:
        yield standin


def lookups(slack: SlackStandIn) -> int:
    return slack.calls.count("usergroups.users.list")


async def test_one_failed_lookup_does_not_shut_a_group_out_for_the_whole_ttl(
    slack: SlackStandIn,
) -> None:
    alice = slack.workspace.add_user("alice").id
    group = slack.workspace.add_usergroup("oncall", [alice]).id
    client = AsyncWebClient(token=slack.token, base_url=slack.url)
    keeper = Gatekeeper(client, ttl=60.0, retry=0.2, logger=LOG)
    slack.faults.add(method="usergroups.users.list", kind="server_error", status=503)
    assert await keeper.allowed(alice, None, [group]) is False  # Slack failed: not known
    assert await keeper.allowed(alice, None, [group]) is False  # not asked again at once
    assert lookups(slack) == 1
    await asyncio.sleep(0.3)
    assert await keeper.allowed(alice, None, [group]) is True  # asked again, not 60 s later
    assert lookups(slack) == 2


async def test_a_failed_refresh_keeps_the_members_last_read(slack: SlackStandIn) -> None:
    alice = slack.workspace.add_user("alice").id
    group = slack.workspace.add_usergroup("oncall", [alice]).id
    client = AsyncWebClient(token=slack.token, base_url=slack.url)
    keeper = Gatekeeper(client, ttl=0.1, retry=0.2, logger=LOG)
    assert await keeper.allowed(alice, None, [group]) is True
    await asyncio.sleep(0.15)  # expired
    slack.faults.add(method="usergroups.users.list", kind="server_error", status=503)
    assert await keeper.allowed(alice, None, [group]) is True  # the last members, kept
    assert keeper.decide_cached(alice, None, [group]) is True  # for the retry interval
    assert lookups(slack) == 2


async def test_a_group_slack_says_does_not_exist_is_not_asked_again_every_few_seconds(
    slack: SlackStandIn,
) -> None:
    """``no_such_subteam`` will not change in 5 s: kept the ttl, so clicks on a question
    naming a deleted group do not spend the method's small budget."""
    alice = slack.workspace.add_user("alice").id
    client = AsyncWebClient(token=slack.token, base_url=slack.url)
    keeper = Gatekeeper(client, ttl=60.0, retry=0.1, logger=LOG)
    assert await keeper.allowed(alice, None, ["S0GONE"]) is False
    await asyncio.sleep(0.2)
    assert await keeper.allowed(alice, None, ["S0GONE"]) is False
    assert lookups(slack) == 1
