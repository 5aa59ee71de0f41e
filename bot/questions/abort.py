"""``AbortController`` / ``AbortSignal`` as the web's: ``abort(reason)`` marks the signal aborted
once and calls every listener synchronously; providers listen or ``await signal.wait()``."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

_log = logging.getLogger(__name__)


class AbortError(Exception):
    """The default abort reason, like the web's ``AbortError`` DOMException."""

    def __init__(self, message: str = "This operation was aborted") -> None:
        super().__init__(message)


class AbortSignal:
    """Read side of an abort: ``aborted``, ``reason``, listeners and ``wait()``."""

    __slots__ = ("_aborted", "_listeners", "_reason", "_waiters")

    def __init__(self) -> None:
        self._aborted = False
        self._reason: object = None
        self._listeners: list[Callable[[object], None]] = []
        self._waiters: list[asyncio.Future[object]] = []

    @property
    def aborted(self) -> bool:
        """Whether ``abort()`` has been called."""
        return self._aborted

    @property
    def reason(self) -> object:
        """The reason given to ``abort()`` (an ``AbortError`` when none was given)."""
        return self._reason

    def add_listener(self, callback: Callable[[object], None]) -> Callable[[], None]:
        """Call ``callback(reason)`` once on abort; returns an idempotent remover. On an
        already-aborted signal it is never called (as on the web): check ``aborted`` first."""
        self._listeners.append(callback)

        def remove() -> None:
            if callback in self._listeners:
                self._listeners.remove(callback)

        return remove

    async def wait(self) -> object:
        """Wait until the signal is aborted and return the reason."""
        if self._aborted:
            return self._reason
        future: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        self._waiters.append(future)
        try:
            return await future
        finally:
            if future in self._waiters:
                self._waiters.remove(future)

    def throw_if_aborted(self) -> None:
        """Raise the reason (or an ``AbortError``) if the signal is aborted."""
        if self._aborted:
            reason = self._reason
            raise reason if isinstance(reason, BaseException) else AbortError(str(reason))

    def _abort(self, reason: object) -> None:
        if self._aborted:
            return
        self._aborted = True
        self._reason = AbortError() if reason is None else reason
        listeners, self._listeners = self._listeners, []
        for listener in listeners:
            # As on the web, a listener that raises is reported, not propagated: the other
            # listeners and every waiter must still learn of the abort.
            try:
                listener(self._reason)
            except Exception:
                _log.exception("abort listener %r raised", listener)
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(self._reason)

    @staticmethod
    def aborted_with(reason: object = None) -> AbortSignal:
        """A signal that is already aborted (the web's ``AbortSignal.abort()``)."""
        signal = AbortSignal()
        signal._abort(reason)
        return signal


class AbortController:
    """Owns one ``AbortSignal``; ``abort(reason=None)`` aborts it once."""

    __slots__ = ("_signal",)

    def __init__(self) -> None:
        self._signal = AbortSignal()

    @property
    def signal(self) -> AbortSignal:
        """The signal this controller aborts."""
        return self._signal

    def abort(self, reason: object = None) -> None:
        """Abort the signal; later calls do nothing."""
        self._signal._abort(reason)
