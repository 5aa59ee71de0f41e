"""The types settings are made of, shared by :mod:`bot.config` and its parts."""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import BeforeValidator, Field, SecretStr
from pydantic_settings import NoDecode

from bot.config_checks import USER, USERGROUP, id_list, no_whitespace

__all__ = [
    "DEFAULT_STORE_PATH",
    "LogFormat",
    "LogLevel",
    "Mode",
    "Seconds",
    "Secret",
    "StoreKind",
    "UserIds",
    "UsergroupIds",
]

Mode = Literal["socket", "http", "sandbox"]
StoreKind = Literal["memory", "sqlite", "redis"]
DEFAULT_STORE_PATH: Final = "slack-questions.db"
LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR"]
LogFormat = Literal["json", "text"]
Secret = Annotated[SecretStr, BeforeValidator(no_whitespace)]
"""A secret setting: never shown; whitespace inside it is refused (a copy-paste slip)."""
Seconds = Annotated[float, Field(allow_inf_nan=False), "seconds"]
"""A finite number of seconds (bounds go on the field)."""
UserIds = Annotated[tuple[str, ...], NoDecode, BeforeValidator(id_list(USER, "user ids (U…, W…)"))]
"""Comma-separated Slack user ids."""
UsergroupIds = Annotated[
    tuple[str, ...], NoDecode, BeforeValidator(id_list(USERGROUP, "user group ids (S…)"))
]
"""Comma-separated Slack user group ids."""
