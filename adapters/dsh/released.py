"""Requests a stopped bot released to the store: which are this host's, to adopt on replay
or close as gone."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final

from adapters.dsh.asks import APPROVAL_GONE_NOTE, GONE_NOTE, ask_key
from adapters.dsh.host import describe
from adapters.slack import SlackQuestionProvider

KEY_PREFIX: Final = ask_key("")


async def close_released(
    records: SlackQuestionProvider,
    asker: str,
    held: Callable[[str], bool],
    closing: set[str],
    closed: Callable[[str, bool], None],
    logger: logging.Logger,
) -> None:
    """Close as gone the open requests of ``asker`` a stopped bot released that nothing
    ``held``: no process owns them, and left open their message would take answers the host
    never gets. ``closed(rpc_id, ended)`` follows each attempt."""
    try:
        found = await records.store.open_records()
    except Exception as exc:  # the store is down: the next replay looks again
        logger.warning(
            "dsh host: could not list the released requests", extra={"error": describe(exc)}
        )
        return
    for record in found:
        key = record.key  # this host's request, no process owns (a stopped bot released it)
        if record.owner is not None or record.asked_by != asker or key is None:
            continue
        if not key.startswith(KEY_PREFIX):
            continue
        rpc_id = key.removeprefix(KEY_PREFIX)
        if held(rpc_id):
            continue
        logger.info("dsh host: released request not replayed; closing it", extra={"rpc_id": rpc_id})
        closing.add(rpc_id)
        ended = False
        try:
            gone = GONE_NOTE if record.approval is None else APPROVAL_GONE_NOTE
            await records.abort(record.id, gone)
            ended = True
        except Exception as exc:  # the store is down: the next replay tries again
            logger.warning(
                "dsh host: could not close a released request",
                extra={"rpc_id": rpc_id, "error": describe(exc)},
            )
        finally:
            closing.discard(rpc_id)
        closed(rpc_id, ended)
