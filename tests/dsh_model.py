"""A scripted model for the real dsh host: an Anthropic Messages streaming server on 127.0.0.1.

A test writes a script (a list of steps) and sends its tag in the prompt; on every model call
the host makes, the server finds the latest message holding a tag, counts the tool calls made
since, and answers the next step. After the last step it says ``DONE <latest tool result>``.
It keeps no per-call state, so a retried call or a restarted host gets the same answer::

    tag = model.script(ask({"id": "color", "question": "Which?", "options": [...]}))
    await driver.prompt(sid, f"pick a color {tag}")       # tool call id: f"{tag[1:-1]}-0"

It runs on a thread of its own (its own event loop), so one model serves a whole module's
tests whatever their event loops.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aiohttp import web

__all__ = ["ScriptedModel", "Step", "ask", "bash", "call_id", "exit_plan", "say"]

_TAG = re.compile(r"\[script:([0-9a-f]{12})\]")


@dataclass(frozen=True)
class Step:
    """One model answer: a tool call (``tool`` and its ``arguments``) or plain ``text``."""

    tool: str | None = None
    arguments: Mapping[str, Any] | None = None
    text: str = ""


def ask(*questions: Mapping[str, Any]) -> Step:
    """Call ``ask_user_question`` with these questions (a batch when several)."""
    return Step("ask_user_question", {"questions": list(questions)})


def exit_plan(plan: str) -> Step:
    """Call ``exit_plan_mode`` (a plan review; the session must be in plan mode: ``/plan``)."""
    return Step("exit_plan_mode", {"plan": plan})


def bash(command: str, justification: str = "The task needs files outside the workspace.") -> Step:
    """Call ``bash`` asking for ``danger-full-access``: the host asks for an approval."""
    arguments = {
        "description": "Run the requested command",
        "command": command,
        "sandbox_permissions": "danger-full-access",
        "justification": justification,
    }
    return Step("bash", arguments)


def say(text: str) -> Step:
    """Answer plain text and end the turn."""
    return Step(text=text)


def call_id(tag: str, step: int = 0) -> str:
    """The tool call id the model gives step ``step`` of the script tagged ``tag``."""
    return f"{tag.removeprefix('[script:').removesuffix(']')}-{step}"


def _texts(message: Mapping[str, Any]) -> list[str]:
    content = message.get("content")
    if isinstance(content, str):
        return [content]
    texts: list[str] = []
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict) and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif isinstance(block, dict) and block.get("type") == "tool_result":
            inner = block.get("content")
            texts.extend(_texts({"content": inner}) if inner is not None else [])
    return texts


def _blocks(message: Mapping[str, Any], kind: str) -> list[Mapping[str, Any]]:
    content = message.get("content")
    items = content if isinstance(content, list) else []
    return [b for b in items if isinstance(b, dict) and b.get("type") == kind]


class ScriptedModel:
    """The model server; ``start()`` gives its base URL, ``script()`` registers steps."""

    def __init__(self) -> None:
        self._scripts: dict[str, tuple[Step, ...]] = {}
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self.calls = 0
        """How many model calls the host made (all scripts)."""
        self.url = ""

    def script(self, *steps: Step) -> str:
        """Register ``steps``; returns the tag to put in the prompt (``[script:<12 hex>]``)."""
        key = uuid.uuid4().hex[:12]
        with self._lock:
            self._scripts[key] = steps
        return f"[script:{key}]"

    def start(self) -> str:
        """Serve on a thread of its own; the base URL (``http://127.0.0.1:PORT``)."""
        self._loop = loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=loop.run_forever, daemon=True)
        self._thread.start()
        self.url = asyncio.run_coroutine_threadsafe(self._serve(), loop).result(10)
        return self.url

    def stop(self) -> None:
        loop, thread, self._loop = self._loop, self._thread, None
        if loop is None or thread is None:
            return
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()

    async def _serve(self) -> str:
        app = web.Application()
        app.router.add_post("/v1/messages", self._messages)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        return f"http://127.0.0.1:{port}"

    def next_step(self, messages: Sequence[Mapping[str, Any]]) -> tuple[str, Step]:
        """The step that answers this history, and its tool call id (pure; tests use it too)."""
        for index in range(len(messages) - 1, -1, -1):
            found = [m for t in _texts(messages[index]) for m in _TAG.findall(t)]
            if not found:
                continue
            key = found[-1]
            later = messages[index + 1 :]
            made = sum(len(_blocks(m, "tool_use")) for m in later if m.get("role") == "assistant")
            with self._lock:
                steps = self._scripts.get(key, ())
            if made < len(steps):
                return f"{key}-{made}", steps[made]
            results = [t for m in later if m.get("role") == "user" for t in _texts(m)]
            return f"{key}-{made}", say(f"DONE {results[-1] if results else ''}")
        return "none", say("OK")

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.calls += 1
        messages = [m for m in body.get("messages", []) if isinstance(m, dict)]
        call_id, step = self.next_step(messages)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for event in _events(str(body.get("model", "scripted")), call_id, step):
            data = json.dumps(event)
            await response.write(f"event: {event['type']}\ndata: {data}\n\n".encode())
        await response.write_eof()
        return response


def _events(model: str, call_id: str, step: Step) -> list[dict[str, Any]]:
    """The SSE events of one streamed answer (Anthropic Messages)."""
    usage = {"input_tokens": 10, "output_tokens": 1}
    message = {"id": f"msg-{call_id}", "type": "message", "role": "assistant", "model": model}
    start = {"type": "message_start", "message": {**message, "content": [], "usage": usage}}
    if step.tool is None:
        block: dict[str, Any] = {"type": "text", "text": ""}
        delta: dict[str, Any] = {"type": "text_delta", "text": step.text}
        stop = "end_turn"
    else:
        block = {"type": "tool_use", "id": call_id, "name": step.tool, "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(step.arguments)}
        stop = "tool_use"
    return [
        start,
        {"type": "content_block_start", "index": 0, "content_block": block},
        {"type": "content_block_delta", "index": 0, "delta": delta},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": 5}},
        {"type": "message_stop"},
    ]
