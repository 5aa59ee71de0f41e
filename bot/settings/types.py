"""The types settings are made of, shared by :mod:`bot.settings.config` and its parts."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, SecretStr, ValidationError, model_validator
from pydantic_settings import BaseSettings, NoDecode

from bot.settings.checks import PERSON, USER, USERGROUP, id_list, no_whitespace
from bot.settings.secrecy import hiding, holds_secret, secret_values
from bot.settings.text import hide_inputs

__all__ = ["HidesSecrets", "Mode", "PersonIds", "Seconds", "Secret", "UserIds", "UsergroupIds"]

Mode = Literal["socket", "http", "sandbox"]
Secret = Annotated[SecretStr, BeforeValidator(no_whitespace)]
"""A secret setting: never shown; whitespace inside it is refused (a copy-paste slip)."""
Seconds = Annotated[float, Field(allow_inf_nan=False), "seconds"]
"""A finite number of seconds (bounds go on the field)."""
Ids = tuple[str, ...]
UserIds = Annotated[Ids, NoDecode, BeforeValidator(id_list(USER, "user ids (U…, W…)"))]
UsergroupIds = Annotated[Ids, NoDecode, BeforeValidator(id_list(USERGROUP, "user group ids (S…)"))]
PersonIds = Annotated[
    Ids, NoDecode, BeforeValidator(id_list(PERSON, "user or user group ids (U…, S…)"))
]
"""Comma-separated Slack ids: of users, of user groups, of either."""


class HidesSecrets(BaseSettings):
    """A part of the settings whose messages never quote a secret of any setting: inputs that
    hold one are hidden and wrapped in ``SecretStr`` in the errors raised."""

    @model_validator(mode="wrap")
    @classmethod
    def _hide_secrets(cls, data: Any, handler: Any) -> Any:
        if not isinstance(data, dict):
            return handler(data)
        secrets = secret_values(cls.model_fields, data)
        with hiding(secrets):
            try:
                return handler(data)
            except ValidationError as exc:
                raise hide_inputs(exc, lambda text: holds_secret(text, secrets)) from None
