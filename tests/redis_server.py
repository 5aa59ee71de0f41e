"""A private ``redis-server`` for tests that stop or restart Redis (never the shared one).

::

    async with RedisServer.start(tmp_path) as server:
        ...  # server.url is redis://127.0.0.1:<port>/0
        await server.restart()  # same port, same data (AOF, fsync on every write)
        await server.stop()     # gone for good (until ``start_again``)

The server runs in a temporary directory on a free port, with
``--appendonly yes --appendfsync always --save ""``: every acknowledged write is on disk
before the reply, so a restart, even after ``SIGKILL``, comes back with the same keys.
``RedisServer.start(path, appendonly=False)`` keeps nothing on disk instead (a restart comes
back empty: what shows that a test's restart is one). Its output is kept for the failure
messages. It is always killed on the way out.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import signal
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Final

import redis.asyncio as aioredis
from redis.exceptions import RedisError

__all__ = ["REDIS_SERVER", "RedisServer", "free_port"]

REDIS_SERVER: Final = shutil.which("redis-server") or "redis-server"
"""The binary (``redis-server`` on ``PATH``)."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class RedisServer:
    """One private ``redis-server`` process: its URL, and how to restart or stop it."""

    def __init__(self, directory: Path, port: int, *, appendonly: bool = True) -> None:
        self.directory = directory
        self.port = port
        self.appendonly = appendonly
        self.proc: asyncio.subprocess.Process | None = None
        self.output: list[str] = []
        self.starts = 0
        self._reader: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:<port>/0``."""
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def running(self) -> bool:
        """Whether the server process is alive."""
        return self.proc is not None and self.proc.returncode is None

    @classmethod
    @contextlib.asynccontextmanager
    async def start(
        cls, directory: Path, *, within: float = 10.0, appendonly: bool = True
    ) -> AsyncIterator[RedisServer]:
        """Start a server with its data in ``directory`` on a free port; kill it afterwards.

        ``appendonly=False``: no append-only file (nor snapshot), so a restart loses every key.
        """
        await asyncio.to_thread(directory.mkdir, parents=True, exist_ok=True)
        server: RedisServer | None = None
        problem: BaseException | None = None
        for _ in range(5):  # a free port can be taken between the probe and the bind
            server = cls(directory, free_port(), appendonly=appendonly)
            try:
                await server._launch(within)
                break
            except _PortTaken as exc:
                problem = exc
                await server._kill()
        else:
            raise AssertionError(f"could not start redis-server: {problem}")
        assert server is not None
        try:
            yield server
        finally:
            await server._kill()

    async def _launch(self, within: float) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            REDIS_SERVER,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self.directory),
            "--appendonly",
            "yes" if self.appendonly else "no",
            "--appendfsync",
            "always",
            "--save",
            "",
            "--daemonize",
            "no",
            "--protected-mode",
            "no",
            "--loglevel",
            "notice",
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        self.starts += 1
        self._reader = asyncio.ensure_future(self._pump(self.proc))
        await self._until_answering(within)

    async def _pump(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdout is not None
        while raw := await proc.stdout.readline():
            self.output.append(raw.decode(errors="replace").rstrip("\n"))

    async def _until_answering(self, within: float) -> None:
        """Wait until the server answers PING with its data loaded (fails after ``within``)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        client = aioredis.from_url(self.url, socket_connect_timeout=1, socket_timeout=1)
        try:
            while True:
                assert self.proc is not None
                if self.proc.returncode is not None:
                    await asyncio.sleep(0.05)  # let the reader take the last lines
                    text = "\n".join(self.output[-20:])
                    if "Address already in use" in text:
                        raise _PortTaken(text)
                    raise AssertionError(
                        f"redis-server exited with {self.proc.returncode}:\n{text}"
                    )
                try:
                    if await client.ping():
                        return
                except RedisError:  # refused, or still loading the append-only file
                    pass
                if loop.time() > deadline:
                    raise AssertionError(f"redis-server did not answer within {within} s")
                await asyncio.sleep(0.02)
        finally:
            await client.aclose()

    async def stop(self, signum: int = signal.SIGKILL) -> None:
        """Stop the server (``SIGKILL`` by default: a crash; the AOF keeps every write)."""
        if self.proc is not None and self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signum)
            async with asyncio.timeout(10):
                await self.proc.wait()
        if self._reader is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._reader, 2)
            self._reader.cancel()
            self._reader = None

    async def start_again(self, *, within: float = 10.0) -> None:
        """Start the stopped server again on the same port with the same data directory."""
        if self.running:
            raise RuntimeError("the Redis server is still running")
        await self._launch(within)

    async def restart(self, signum: int = signal.SIGKILL, *, within: float = 10.0) -> None:
        """Stop the server and start it again on the same port; returns once it answers."""
        await self.stop(signum)
        await self.start_again(within=within)

    async def _kill(self) -> None:
        with contextlib.suppress(Exception):
            await self.stop(signal.SIGKILL)


class _PortTaken(Exception):
    """redis-server could not bind its port."""
