"""The README's Python example, run as written against a rate-limited stand-in Slack.

Only Slack's address and secrets change (``AsyncApp`` points at the stand-in, which enforces
Slack's published limits 10 times faster). With the example's app serving clicks as
docs/python.md serves them (``adapters.slack.to_bolt_request``), a burst of 150 more
questions is asked into its one channel at once: every one is posted, none fails on Slack's
limits, and every one is answered; the example prints the answer its comment shows.
"""

from __future__ import annotations

import ast
import asyncio
import functools
import json
import re
from pathlib import Path
from typing import Any

import pytest
import slack_bolt.async_app
from aiohttp import web

import adapters.slack.provider
import bot.questions
from adapters.slack.pacing.rate_limits import SlackLimits
from adapters.slack.sandbox.ratelimits import RateLimiter
from adapters.slack.sandbox.webapi import SlackStandIn
from bot.questions import AskUserQuestionRequest, UserQuestionService
from tests.slack_harness import until
from tests.source_tree import parse

ROOT = Path(__file__).resolve().parents[2]
SECRET = "readme-example-secret"
SCALE = 10.0
BURST = 150


def example(marker: str = "SlackQuestionProvider(app") -> str:
    """The first Python block with ``marker`` (README, else docs/): by default the one that
    builds a ``SlackQuestionProvider``."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    for page in pages:
        if not page.is_file():
            continue
        for block in re.findall(r"```python\n(.*?)```", page.read_text("utf-8"), re.S):
            if marker in block:
                return str(block)
    raise AssertionError(f"no Python example has {marker}")


@pytest.mark.slow
async def test_the_readme_example_paces_a_burst_of_150_and_every_question_is_answered(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code = example()
    channel = re.search(r'channel="(\w+)"', code)
    assert channel, "the example names its channel"
    slack = SlackStandIn(
        signing_secret=SECRET, rate_limits=RateLimiter(SlackLimits(time_scale=SCALE))
    )
    slack.workspace.add_channel("agents", id=channel.group(1))
    alice = slack.workspace.add_user("alice").id
    made: dict[str, Any] = {}

    class StandInApp(slack_bolt.async_app.AsyncApp):
        """The example's ``AsyncApp``, on the stand-in's address, token and secret."""

        def __init__(self, **options: Any) -> None:
            options.update(token=slack.token, signing_secret=SECRET)
            super().__init__(**options)
            self.client.base_url = slack.url
            made["app"] = self

    class Service(UserQuestionService):
        def __init__(self) -> None:
            super().__init__()
            made["service"] = self

    monkeypatch.setattr(slack_bolt.async_app, "AsyncApp", StandInApp)
    monkeypatch.setattr(bot.questions, "UserQuestionService", Service)
    # Slack's published limits, run as fast as the stand-in runs them.
    scaled = functools.partial(SlackLimits, time_scale=SCALE)
    monkeypatch.setattr(adapters.slack.provider, "SlackLimits", scaled)

    tree = parse(code)
    tree.body = [node for node in tree.body if "asyncio.run" not in ast.unparse(node)]
    namespace: dict[str, Any] = {}
    exec(compile(tree, "README example", "exec"), namespace)

    async with slack:
        main = asyncio.ensure_future(namespace["main"]())
        await until(lambda: "service" in made and made["service"].provider, what="the provider")
        app, service = made["app"], made["service"]
        runner = await _serve(app)
        slack.interactivity_url = f"http://127.0.0.1:{runner.addresses[0][1]}/slack/events"
        wire = {"questions": [{"id": "go", "question": "Go?", "options": [{"label": "Yes"}]}]}
        burst = [
            asyncio.ensure_future(service.ask(AskUserQuestionRequest.model_validate(wire)))
            for _ in range(BURST)
        ]
        try:
            messages = slack.workspace.messages
            await until(
                lambda: (
                    len(messages.get(channel.group(1), [])) == BURST + 1
                    or any(t.done() for t in burst)
                ),
                within=60,
                what="every question posted",
            )
            failed = [t.exception() for t in burst if t.done()]
            assert failed == [], f"{len(failed)} of {BURST} failed, the first: {failed[0]}"
            for message in list(messages[channel.group(1)]):
                text = "Deploy" if "Deploy 2.3.1" in json.dumps(message.blocks) else "Yes"
                status, _ = await slack.deliver(slack.click(message, user=alice, text=text))
                assert status == 200
            answers = await asyncio.wait_for(asyncio.gather(*burst), 60)
            await asyncio.wait_for(main, 10)
        finally:
            for task in [*burst, main]:
                task.cancel()
            await asyncio.gather(*burst, main, return_exceptions=True)
            await service.provider.aclose(grace=2.0)
            await runner.cleanup()
    assert [a.to_wire() for a in answers] == [
        {"answers": [{"id": "go", "selected": ["Yes"]}]}
    ] * BURST
    printed = capsys.readouterr().out.strip().splitlines()[-1]
    promised = re.search(r"print\(answer\.to_wire\(\)\)\s*#\s*(\{.*\})", code)
    assert promised, "the example says what it prints"
    assert json.loads(printed.replace("'", '"')) == json.loads(promised.group(1))


async def _serve(app: slack_bolt.async_app.AsyncApp) -> web.AppRunner:
    """Serve ``app`` over HTTP as docs/python.md's example does (``web_app``, on aiohttp)."""
    code = example("from adapters.slack import to_bolt_request")
    namespace: dict[str, Any] = {"app": app}
    exec(compile(code, "serving example", "exec"), namespace)
    runner = web.AppRunner(namespace["web_app"], access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    return runner
