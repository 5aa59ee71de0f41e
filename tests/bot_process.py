"""Run ``python -m bot`` as a subprocess, the way an operator does, for the end-to-end tests.

::

    async with BotProcess.start({"SLACK_BOT_TOKEN": ..., "PORT": "0"}, cwd=tmp_path) as bot:
        ...  # bot.url is the address it printed ("bot listening on http://…")
        code = await bot.stop(signal.SIGTERM)

The child gets a clean environment: nothing of ours (SLACK_*, REDIS_*, BOT_*, …) leaks in
from the test runner, only what the test passes; ``cwd`` is a directory without a ``.env``.
stdout and stderr are read continuously (so the child never blocks on a full pipe) and kept
for the assertions. The process is always killed on the way out.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any, Final

from bot.settings.config import SETTING_NAMES

__all__ = [
    "READY_LINE",
    "BotProcess",
    "clean_environment",
    "fresh_store_path",
    "run_bot_command",
    "run_command",
]

READY_LINE: Final = "bot listening on "
"""What the bot prints on stdout once every server is up, followed by its URL."""

ROOT: Final = Path(__file__).resolve().parent.parent
"""The repository (put on ``PYTHONPATH`` so ``python -m bot`` imports this tree)."""

_STORE_DIR: Final = Path(tempfile.mkdtemp(prefix="uq-test-stores-"))


def fresh_store_path() -> str:
    """A new SQLite store file in this run's temporary directory (for in-process bots)."""
    return str(_STORE_DIR / f"{uuid.uuid4().hex}.db")


_OURS: Final = ("SLACK_", "REDIS_", "BOT_", "DSH_", "SANDBOX_", "LOG_", "QUESTION_")


def clean_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """``os.environ`` without any bot setting, plus ``extra`` and this tree on PYTHONPATH."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in SETTING_NAMES and not key.startswith(_OURS)
    }
    env["PYTHONPATH"] = os.pathsep.join(
        part for part in (str(ROOT), os.environ.get("PYTHONPATH", "")) if part
    )
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


async def run_command(
    argv: list[str], env: Mapping[str, str], *, cwd: Path, within: float = 30.0
) -> tuple[int, str, str]:
    """Run ``argv`` with exactly ``env`` to completion; returns (exit code, stdout, stderr).

    The process is killed if it outlives ``within`` seconds.
    """
    proc = await asyncio.create_subprocess_exec(
        *argv,
        env=dict(env),
        cwd=cwd,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), within)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode is not None
    return proc.returncode, out.decode(errors="replace"), err.decode(errors="replace")


async def run_bot_command(
    args: list[str], env: Mapping[str, str], *, cwd: Path, within: float = 30.0
) -> tuple[int, str, str]:
    """Run ``python -m bot ARGS`` to completion; returns (exit code, stdout, stderr)."""
    argv = [sys.executable, "-m", "bot", *args]
    return await run_command(argv, clean_environment(env), cwd=cwd, within=within)


class BotProcess:
    """A running ``python -m bot``: its URL, its output so far, and how to stop it."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.url = ""
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        self._ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._readers = [
            asyncio.ensure_future(self._pump(proc.stdout, self.stdout, ready=True)),
            asyncio.ensure_future(self._pump(proc.stderr, self.stderr, ready=False)),
        ]

    @classmethod
    @contextlib.asynccontextmanager
    async def start(
        cls, env: Mapping[str, str], *, cwd: Path, ready_within: float = 30.0
    ) -> AsyncIterator[BotProcess]:
        """Start the bot with exactly ``env`` (over a clean base) and wait until it listens."""
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bot",
            env=clean_environment(env),
            cwd=cwd,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        bot = cls(proc)
        try:
            await bot._wait_ready(ready_within)
            yield bot
        finally:
            await bot.kill()

    async def _pump(
        self, stream: asyncio.StreamReader | None, lines: list[str], *, ready: bool
    ) -> None:
        assert stream is not None
        while True:
            raw = await stream.readline()
            if not raw:
                break
            line = raw.decode(errors="replace").rstrip("\n")
            lines.append(line)
            if ready and line.startswith(READY_LINE) and not self._ready.done():
                self._ready.set_result(line[len(READY_LINE) :].strip())
        if not self._ready.done():
            self._ready.set_exception(
                RuntimeError(f"the bot closed {'stdout' if ready else 'stderr'} before listening")
            )

    async def _wait_ready(self, within: float) -> None:
        exited = asyncio.ensure_future(self.proc.wait())
        contenders: set[asyncio.Future[Any]] = {self._ready, exited}
        try:
            done, _ = await asyncio.wait(
                contenders, timeout=within, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            exited.cancel()
        if self._ready.done() and self._ready.exception() is None:
            self.url = self._ready.result()
            return
        await asyncio.sleep(0.1)  # let the readers take the last lines
        if not done:
            raise AssertionError(f"the bot did not start within {within} s:\n{self.output}")
        raise AssertionError(f"the bot exited with {self.proc.returncode}:\n{self.output}")

    @property
    def output(self) -> str:
        """Everything the bot printed so far, stdout then stderr."""
        return "\n".join(["--- stdout", *self.stdout, "--- stderr", *self.stderr])

    @property
    def returncode(self) -> int | None:
        """The exit code, once it has exited."""
        return self.proc.returncode

    async def stop(self, signum: int = signal.SIGTERM, *, within: float = 10.0) -> int:
        """Send ``signum`` and wait up to ``within`` seconds for the exit code."""
        if self.proc.returncode is None:
            self.proc.send_signal(signum)
        code = await asyncio.wait_for(self.proc.wait(), within)
        await self._drain()
        return code

    async def kill(self) -> None:
        """Kill the process if it still runs, and stop reading its output."""
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
            await self.proc.wait()
        await self._drain()
        if not self._ready.done():
            self._ready.cancel()

    async def _drain(self) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.gather(*self._readers, return_exceptions=True), 5)
        for reader in self._readers:
            reader.cancel()
