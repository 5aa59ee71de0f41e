"""The store settings: where questions live (memory, SQLite or Redis) and how long; a part of
``Settings``, which picks the store when ``STORE`` is unset."""

from __future__ import annotations

from typing import Annotated, Final, Literal, get_args

from pydantic import AfterValidator, BeforeValidator, Field

from bot.logs import redact_url
from bot.settings.checks import check_redis_prefix, check_redis_url, one_of
from bot.settings.types import HidesSecrets, Secret

__all__ = ["StoreSettings"]

StoreKind = Literal["memory", "sqlite", "redis"]
DEFAULT_STORE_PATH: Final = "slack-questions.db"


class StoreSettings(HidesSecrets):
    """``STORE``, ``STORE_PATH``, ``REDIS_*`` and ``RETENTION_DAYS``."""

    redis_url: Annotated[Secret, AfterValidator(check_redis_url)] | None = Field(
        None,
        description="redis://, rediss:// or unix:// URL of a Redis that several processes, on "
        "any hosts, share: their pending store (unless STORE says otherwise) and their Slack "
        "rate-limit budget. Unset: the store is SQLite at STORE_PATH (memory in the sandbox).",
    )
    redis_prefix: Annotated[str, AfterValidator(check_redis_prefix)] = Field(
        "uq", description="Prefix of every Redis key and channel."
    )
    store: Annotated[StoreKind, BeforeValidator(one_of(*get_args(StoreKind)))] = Field(
        "memory",
        description="Where questions live: sqlite (one file, survives restarts and crashes; "
        "several processes on one host), redis (several hosts; needs REDIS_URL) or memory "
        "(lost on exit). Unset: redis with REDIS_URL, memory in the sandbox, else sqlite.",
        # (the settings' loader picks it when unset: the field's own default is not it)
        json_schema_extra={"shown_default": "auto"},
    )
    store_path: str = Field(
        DEFAULT_STORE_PATH,
        min_length=1,
        description="The SQLite store's file (created if missing; relative to the working "
        "directory).",
    )
    retention_days: float = Field(
        90.0,
        gt=0,
        allow_inf_nan=False,
        description="Days finished questions and their audit trail are kept (every store).",
    )

    def _store(self) -> str:
        kept = f"finished kept {self.retention_days:g} days"
        if self.store == "memory":
            return "memory (one process, lost on exit)"
        if self.store == "sqlite":
            return f"sqlite {self.store_path} ({kept})"
        assert self.redis_url is not None
        url = redact_url(self.redis_url.get_secret_value())
        return f"redis {url} (prefix {self.redis_prefix}, {kept})"
