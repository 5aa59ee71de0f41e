"""Setting up as a newcomer meets it: the README's commands on a fresh clone, and the errors
a first run most often hits (a port already taken, Redis down or pointed at a missing
database), each naming the setting to change.

The fresh-clone check clones this repository (its committed ``HEAD``) into a temporary
folder, makes a virtual environment (with ``--system-site-packages``, so the dependencies
already installed are used instead of downloaded; only the build backend may be fetched from
the package index), runs the README's run command there and waits for "Sandbox ready", then
runs the README's test command (``bash .ci/run``) on one test module, in one process.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Final

import aiohttp
import pytest

from tests.bot_process import ROOT, BotProcess, clean_environment, run_bot_command, run_command
from tests.redis_server import free_port

README: Final = ROOT / "README.md"


def readme_setup() -> str:
    """The README's "Set up" section."""
    text = README.read_text(encoding="utf-8")
    match = re.search(r"^## Set up\n(.*?)^## ", text, re.S | re.M)
    assert match, "README has no '## Set up' section"
    return match.group(1)


# --- the README ------------------------------------------------------------------------------


def test_the_readme_set_up_gives_the_two_commands_and_what_they_do() -> None:
    setup = readme_setup()
    assert "git clone" in setup and "cd slack-user-questions" in setup
    assert "python -m venv .venv" in setup
    assert "pip install -e . && python -m bot" in setup  # runtime dependencies only
    assert "bash .ci/run" in setup
    for fact in ("PORT", "SANDBOX_PORT", ".env", "Chromium", "Redis", "apt-get"):
        assert fact in setup, fact


# --- the first run's usual errors ------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("setting", ["PORT", "SANDBOX_PORT"])
async def test_a_port_in_use_names_its_setting(tmp_path: Path, setting: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        other = "PORT" if setting == "SANDBOX_PORT" else "SANDBOX_PORT"
        env = {setting: str(port), other: "0"}
        code, out, err = await run_bot_command([], env, cwd=tmp_path)
    assert code == 1, err
    assert f"{setting}: 127.0.0.1:{port} is already in use" in err
    assert f"Set {setting} to a free port, or to 0" in err
    assert "Errno" not in err and "Traceback" not in err
    assert "Sandbox ready" not in out


@pytest.mark.slow
async def test_redis_down_and_a_missing_database_get_different_messages(
    tmp_path: Path, redis_url: str
) -> None:
    down = f"redis://127.0.0.1:{free_port()}/0"
    sandbox = {"REDIS_URL": down, "MODE": "sandbox"}
    code, _, err_down = await run_bot_command([], sandbox, cwd=tmp_path)
    assert code == 1
    assert "cannot reach the Redis pending store at REDIS_URL=" in err_down
    assert "Check that Redis is running" in err_down

    base = redis_url.rsplit("/", 1)[0] if re.search(r"/\d+$", redis_url) else redis_url
    sandbox = {"REDIS_URL": f"{base}/9999", "MODE": "sandbox"}
    code, _, err_db = await run_bot_command([], sandbox, cwd=tmp_path)
    assert code == 1
    assert "answers, but refused the database number in REDIS_URL" in err_db
    assert "DB index is out of range" in err_db
    assert "cannot reach" not in err_db and "Check that Redis is running" not in err_db
    assert "Traceback" not in err_down + err_db


# --- Chromium missing ------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(("ci", "outcome"), [("true", "(failed|errors?)"), ("", "skipped")])
async def test_without_chromium_the_browser_tests_fail_in_ci_and_skip_elsewhere(
    tmp_path: Path, ci: str, outcome: str
) -> None:
    env = clean_environment({"TEST_CHROMIUM": str(tmp_path / "no-chromium"), "CI": ci})
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfs"]
    code, text, _ = await run_command(
        [*argv, "tests/slack/sandbox/test_sandbox_browser.py"], env, cwd=ROOT, within=120
    )
    summary = text.strip().splitlines()[-1]
    assert re.search(rf"\d+ {outcome}", summary), text[-3000:]
    assert ("passed" in summary) is False
    if ci:
        assert code == 1
        assert "CI=true but Chromium is not installed" in text
    else:
        assert code == 0
        assert "Chromium is not installed" in text


# --- a fresh clone ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fresh_clone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """(clone, virtual environment): this repository cloned, an empty environment beside it."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout, so there is nothing to clone")
    base = tmp_path_factory.mktemp("fresh")
    clone, venv = base / "slack-user-questions", base / ".venv"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True, timeout=120)
    # --without-pip: pip comes from the system site packages (ensurepip takes ~20 s).
    subprocess.run(
        [sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)],
        check=True,
        timeout=120,
    )
    yield clone, venv


def venv_environment(venv: Path, **extra: str) -> dict[str, str]:
    """A clean environment with ``venv`` active (and no PYTHONPATH into this checkout)."""
    env = clean_environment(extra)
    env.pop("PYTHONPATH", None)
    env["VIRTUAL_ENV"] = str(venv)
    env["PATH"] = os.pathsep.join([str(venv / "bin"), env.get("PATH", "")])
    return env


async def shell(command: str, *, cwd: Path, env: dict[str, str], within: float) -> str:
    """Run ``command`` with bash; its output (stdout, then stderr), or a failure showing it."""
    code, out, err = await run_command(["bash", "-c", command], env, cwd=cwd, within=within)
    assert code == 0, f"`{command}` exited with {code}:\n{(out + err)[-4000:]}"
    return out + err


@pytest.fixture
async def started_sandbox(fresh_clone: tuple[Path, Path]) -> AsyncIterator[str]:
    """The README's run command on the fresh clone: the sandbox page's address."""
    clone, venv = fresh_clone
    env = venv_environment(venv, PORT="0", SANDBOX_PORT="0")
    # The README's command, split so the bot can be watched: the install, then the bot.
    await shell("python -m pip install --quiet -e .", cwd=clone, env=env, within=150)
    where = await shell(
        "python -c 'import bot; print(bot.__file__)'", cwd=clone, env=env, within=30
    )
    assert where.strip() == str(clone / "bot" / "__init__.py")
    proc = await asyncio.create_subprocess_exec(
        "python",
        "-m",
        "bot",
        cwd=clone,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    bot = BotProcess(proc)
    try:
        await bot._wait_ready(60)
        line = await asyncio.wait_for(_sandbox_line(bot), 10)
        yield line
    finally:
        await bot.kill()


async def _sandbox_line(bot: BotProcess) -> str:
    while True:
        for line in bot.stdout:
            if "Sandbox ready: open " in line:
                return line.split("Sandbox ready: open ", 1)[1].strip()
        await asyncio.sleep(0.05)


@pytest.mark.slow
@pytest.mark.timeout(400)
async def test_a_fresh_clone_runs_the_sandbox_and_passes_the_tests(
    fresh_clone: tuple[Path, Path], started_sandbox: str
) -> None:
    async with aiohttp.ClientSession() as http, http.get(started_sandbox) as page:
        assert page.status == 200
        assert "text/html" in page.content_type
    clone, venv = fresh_clone
    env = venv_environment(venv)
    env.pop("CI", None)  # one module here; the browser tests are not part of it
    # -n 0: one module needs no four workers (each would import and collect it again, ~6 s of
    # CPU the rest of the suite waits for); the outer run is the one that runs on workers.
    command = "bash .ci/run -p no:cacheprovider -n 0 tests/settings/test_config.py"
    out = await shell(command, cwd=clone, env=env, within=360)
    summary = re.findall(r"^.*\d+ passed.*$", out, re.M)
    assert summary, out[-2000:]
    assert "failed" not in summary[-1] and "error" not in summary[-1], summary[-1]
