"""Logging in to a dsh 0.2 host (``/connect``) and the cookie answers carry: the launch token's
cookie dies with its socket; the browser cookie (``/?token=``) outlives a host restart."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final
from urllib.parse import urlencode

import aiohttp

from adapters.dsh.mux import login_path

__all__ = ["HostLogin", "LoginRefused"]

POST_TIMEOUT: Final = aiohttp.ClientTimeout(total=10.0)


class LoginRefused(Exception):
    """The host refused the login (the message says why and what to check)."""

    expected = True


class HostLogin:
    """The login of one host and its cookies."""

    def __init__(
        self,
        base_url: str,
        session: Callable[[], aiohttp.ClientSession],
        token: str | None,
        logger: logging.Logger,
    ) -> None:
        self._base = base_url
        self._session = session
        self._token = token
        self._logger = logger
        self.cookie: str | None = None
        """The cookie answers on the current socket carry."""
        self._browser: str | None = None
        self._fallback = False

    async def login(self) -> dict[str, str] | None:
        """Log in (``/connect``); the socket's headers, ``None`` for a 0.1.1 host, ``LoginRefused``
        otherwise. The first login keeps the browser cookie, tried once when a restarted host
        refuses the old launch token."""
        token = self._token or ""
        status, cookie = await self._get(login_path(token))
        if status in (302, 303):
            self.cookie, self._fallback = cookie, False
            if self._browser is None:
                status, browser = await self._get("/?" + urlencode({"token": token}))
                self._browser = browser if status == 303 and browser else None
            return {"Cookie": cookie} if cookie else {}
        if status == 401 and self._browser is not None and not self._fallback:
            self._fallback, self.cookie = True, self._browser
            self._logger.warning(
                "dsh host: the launch token was refused (did the host restart?); "
                "connecting with the browser cookie it gave before"
            )
            return {"Cookie": self._browser}
        if status == 401:
            self._browser = None
            raise LoginRefused(
                "the host refused the launch token: HTTP 401 (a dsh 0.2 host makes a new token "
                "on every start: set DSH_HOST_TOKEN, or DSH_HOST_URL to the whole URL it prints)"
            )
        if status in (404, 405) or 200 <= status < 300:
            return None
        raise LoginRefused(f"the host refused the login: HTTP {status}")

    async def _get(self, path: str) -> tuple[int, str]:
        """GET ``path`` without following redirects: the status, and the cookies it set."""
        async with self._session().get(
            self._base + path, allow_redirects=False, timeout=POST_TIMEOUT
        ) as response:
            cookies = "; ".join(f"{k}={m.value}" for k, m in response.cookies.items())
            return response.status, cookies

    def opened(self) -> None:
        """A new socket: a later refusal of the token may fall back on the browser cookie."""
        self._fallback = False

    def closed(self) -> None:
        """The socket closed: the ``/connect`` cookie dies with it."""
        if self.cookie != self._browser:
            self.cookie = None
