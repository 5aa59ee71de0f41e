"""The settings of the DeepSeek Harness host the bot serves (``DSH_*``; a part of ``Settings``)."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BeforeValidator, Field

from bot.questions.review import ReviewPolicy
from bot.settings.checks import json_object, url
from bot.settings.types import HidesSecrets, Secret, UsergroupIds, UserIds

__all__ = ["DshSettings"]


class DshSettings(HidesSecrets):
    """``DSH_*``: the harness host, its plan reviews' policy, who decides its approvals."""

    dsh_host_url: Annotated[str, AfterValidator(url("http", "https"))] | None = Field(
        None, description="http(s) URL of a DeepSeek Harness web host to serve."
    )
    dsh_host_token: Secret | None = Field(None, description="Token for DSH_HOST_URL.")
    dsh_review_policy: (
        Annotated[ReviewPolicy, BeforeValidator(json_object('{"approvals": 2}.'))] | None
    ) = Field(
        None,
        description='Review policy (JSON) for the dsh host\'s plan reviews, e.g. {"approvals": 2, '
        '"required": [{"usergroups": ["S0123ABCD"]}]}. Unset: one approval decides.',
    )
    dsh_approvers: UserIds = Field(
        (),
        description="Comma-separated user ids (U…, W…) who may decide the harness's tool "
        "approvals. With DSH_APPROVER_USERGROUPS: members of either. Unset (both): the people "
        "who may answer questions.",
    )
    dsh_approver_usergroups: UsergroupIds = Field(
        (), description="Comma-separated user group ids (S…) whose members may decide approvals."
    )
