"""The real dsh host in the tests: ``dsh web`` from its wheel, talking to a scripted model.

``real_host`` (module-scoped: one host per test module, ~1.5 s and ~350 MB to start) runs
``dsh --profile web --patch <yml> --host 127.0.0.1 --port 0 --no-open`` with a fresh
``DSH_HOME``, ``PKG_NATIVE_CACHE_PATH`` and ``TMPDIR`` under pytest's temporary folder, reads
the launch URL (``?token=``) from its stdout, and sends SIGTERM at the end. Without ``dsh``
installed it skips, except under ``CI=true``, where it fails. Use it with ``tests.dsh_driver``::

    from tests.dsh_real import real_host   # the fixture
    async def test_x(real_host: RealHost) -> None:
        async with HostDriver(real_host) as driver:
            sid = await driver.create_session()
            tag = real_host.model.script(ask({"id": "q", "question": "Go?"}))
            await driver.prompt(sid, f"go {tag}")

``real_host.restart()`` keeps ``DSH_HOME`` and the port (a new launch token);
``freeze()``/``thaw()`` send SIGSTOP/SIGCONT. These block: call them with ``asyncio.to_thread``
when a bot runs in the test's own event loop.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.dsh_model import ScriptedModel

__all__ = ["DSH_VERSION", "RealHost", "dsh_command", "real_host"]

DSH_VERSION = "0.2.1-rc.2"
"""The release pinned in the dev extras (``deepseek-harness-runtime-bin==0.2.1rc2``)."""

_LAUNCH = re.compile(r"dsh web: (http://127\.0\.0\.1:(\d+))/\?token=([A-Za-z0-9_-]+)")
_START_WITHIN = 60.0  # seconds; ~1.5 s alone, much longer on a loaded 2-core machine


def dsh_command() -> str | None:
    """The ``dsh`` beside this Python (its wheel's console script), else one on PATH."""
    beside = Path(sys.executable).with_name("dsh")
    if beside.is_file():
        return str(beside)
    return shutil.which("dsh")


def _patch(model_url: str) -> str:
    """The ``--patch`` overlay: the scripted model, no title model, no telemetry export."""
    return (
        "- id: llm-deepseek\n"
        f"  config: {{baseURL: '{model_url}', apiKeyEnv: DEEPSEEK_API_KEY, thinking: disabled}}\n"
        "- id: session-title-llm\n  disabled: true\n"
        "- id: session-telemetry-otel\n  disabled: true\n"
    )


class RealHost:
    """One ``dsh web`` process and its scripted model; ``url``, ``token``, ``launch_url``."""

    def __init__(self, command: str, root: Path, model: ScriptedModel) -> None:
        self.command = command
        self.root = root
        self.model = model
        self.home = root / "home"
        self.workspace = root / "ws"
        self.url = ""
        self.token = ""
        self.port = 0
        self.starts = 0
        self._process: subprocess.Popen[bytes] | None = None
        for folder in (self.home, self.workspace, root / "cache", root / "tmp"):
            folder.mkdir(parents=True, exist_ok=True)
        (root / "patch.yml").write_text(_patch(model.url))

    @property
    def launch_url(self) -> str:
        """The URL the host printed (``http://127.0.0.1:PORT/?token=…``)."""
        return f"{self.url}/?token={self.token}"

    @property
    def pid(self) -> int:
        assert self._process is not None, "the host is not running"
        return self._process.pid

    def start(self) -> None:
        """Start the host (on ``self.port`` when it ran before) and wait for its launch URL."""
        self.starts += 1
        out = self.root / f"stdout-{self.starts}.txt"
        err = self.root / f"stderr-{self.starts}.txt"
        env = {
            **os.environ,
            "DSH_HOME": str(self.home),
            "PKG_NATIVE_CACHE_PATH": str(self.root / "cache"),
            "TMPDIR": str(self.root / "tmp"),
            "DEEPSEEK_API_KEY": "scripted-model",
        }
        args = [self.command, "--profile", "web", "--patch", str(self.root / "patch.yml")]
        args += ["--host", "127.0.0.1", "--port", str(self.port), "--no-open"]
        with out.open("wb") as stdout, err.open("wb") as stderr:
            self._process = subprocess.Popen(
                args, cwd=self.workspace, env=env, stdout=stdout, stderr=stderr,
                stdin=subprocess.DEVNULL,
            )  # fmt: skip
        deadline = time.monotonic() + _START_WITHIN
        while time.monotonic() < deadline:
            found = _LAUNCH.search(out.read_text(errors="replace"))
            if found:
                self.url, self.port, self.token = found[1], int(found[2]), found[3]
                return
            if self._process.poll() is not None:
                break
            time.sleep(0.02)
        self.stop()
        tail = err.read_text(errors="replace")[-2000:]
        raise RuntimeError(f"dsh web printed no launch URL within {_START_WITHIN:.0f} s: {tail}")

    def stop(self, sig: signal.Signals = signal.SIGTERM) -> int | None:
        """Stop the host (SIGTERM, SIGKILL after 10 s); its exit code."""
        process, self._process = self._process, None
        if process is None:
            return None
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGCONT)  # a frozen host cannot act on SIGTERM
            process.send_signal(sig)
        try:
            return process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            return process.wait(10)

    def restart(self) -> None:
        """Stop and start again: same ``DSH_HOME`` and port, a new launch token."""
        self.stop()
        self.start()

    def freeze(self) -> None:
        """SIGSTOP: the host holds its sockets open but answers nothing."""
        os.kill(self.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        os.kill(self.pid, signal.SIGCONT)

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None


@contextlib.contextmanager
def started_host(root: Path) -> Iterator[RealHost]:
    """A started host (and model) under ``root``; skips or fails when ``dsh`` is missing."""
    command = dsh_command()
    if command is None:
        reason = "dsh is not installed (pip install 'deepseek-harness-runtime-bin==0.2.1rc2')"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason}; CI=true, so the real-host tests fail", pytrace=False)
        pytest.skip(reason)
    model = ScriptedModel()
    model.start()
    host = RealHost(command, root, model)
    try:
        host.start()
        yield host
    finally:
        host.stop()
        model.stop()


@pytest.fixture(scope="module")
def real_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealHost]:
    """One real ``dsh web`` host for the module (restarted if a test left it stopped)."""
    with started_host(tmp_path_factory.mktemp("dsh")) as host:
        yield host


@pytest.fixture
def live_host(real_host: RealHost) -> RealHost:
    """The module's host, running and not frozen (a test may have stopped or frozen it)."""
    if not real_host.running:
        real_host.start()
    with contextlib.suppress(ProcessLookupError):
        real_host.thaw()
    return real_host
