"""The settings of the DeepSeek Harness host the bot serves (``DSH_*``; a part of ``Settings``)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BeforeValidator, Field

from bot.questions.review import ReviewPolicy
from bot.settings.checks import json_object, url
from bot.settings.types import HidesSecrets, Secret, UsergroupIds, UserIds

__all__ = ["DshSettings"]


class DshSettings(HidesSecrets):
    """``DSH_*``: the harness host, its plan reviews' policy, who decides its approvals."""

    dsh_host_url: Annotated[str, AfterValidator(url("http", "https"))] | None = Field(
        None,
        description="http(s) URL of a DeepSeek Harness web host to serve; the whole URL "
        "`dsh web` prints (http://127.0.0.1:PORT/?token=…) carries its launch token.",
    )
    dsh_host_token: Secret | None = Field(
        None, description="The host's launch token (dsh 0.2; 0.1.1: its Bearer token)."
    )
    dsh_protocol: Literal["auto", "0.2", "0.1"] = Field(
        "auto",
        description="The dsh protocol: auto (0.2 when the host answers /connect, else "
        "0.1.1-rc.2), 0.2 or 0.1.",
    )
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
