# ruff: noqa: E501  (the mutants quote code lines as they are)
"""The hand-made mutants of the weak areas of issue 41: one wrong line each, and the tests
that must notice it (run by ``tests/ci/mutate.py``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mutant:
    """One line made wrong: ``old`` (occurring once in ``file``) becomes ``new``."""

    name: str
    file: str
    old: str
    new: str
    equivalent: str = ""
    """Why no test can tell it from the real code, when it cannot."""


SCHEDULER = "adapters/slack/pacing/scheduler.py"
RATE_LIMITS = "adapters/slack/pacing/rate_limits.py"
_SCHEDULER_TESTS = [
    "tests/slack/pacing/test_scheduler_rules.py",
    "tests/slack/pacing/test_slack_scheduler.py",
    "tests/slack/pacing/test_ratelimit_holds.py",
    "tests/slack/pacing/test_lanes_fidelity.py",
]
_SCHEDULER = [
    Mutant(
        "429 re-queued last", SCHEDULER, "state.enqueue(entry, first=True)", "state.enqueue(entry)"
    ),
    Mutant(
        "lane head not kept",
        SCHEDULER,
        "            queued.appendleft(entry)",
        "            queued.append(entry)",
    ),
    Mutant(
        "cancel one cancels all",
        SCHEDULER,
        "if entry.waiters == 0 and state.remove(entry)",
        "if state.remove(entry)",
    ),
    Mutant("coalesced waiter not counted", SCHEDULER, "entry.waiters += 1", "entry.waiters = 1"),
    Mutant("coalescing keeps old send", SCHEDULER, "entry.send = send\n", "pass\n"),
    Mutant("no coalescing", SCHEDULER, "if key is not None and queued:", "if False:"),
    Mutant(
        "429 fails the call", SCHEDULER, "if retry_after is None or entry.waiters == 0:", "if True:"
    ),
    Mutant(
        "real error retried",
        SCHEDULER,
        "if retry_after is None or entry.waiters == 0:",
        "if entry.waiters == 0:",
    ),
    Mutant(
        "updates not serial",
        SCHEDULER,
        "            if entry.serial:\n                state.busy.add(lane)",
        "            if False:\n                state.busy.add(lane)",
    ),
    Mutant("busy lane never freed", SCHEDULER, "state.busy.discard(entry.lane)", "pass"),
    Mutant(
        "retry-after default",
        RATE_LIMITS,
        "_DEFAULT_RETRY_AFTER: Final = 1.0",
        "_DEFAULT_RETRY_AFTER: Final = 2.0",
    ),
    Mutant(
        "negative retry-after",
        RATE_LIMITS,
        "max(0.0, float(raw[0] if isinstance(raw, list | tuple) and raw else raw))",
        "float(raw[0] if isinstance(raw, list | tuple) and raw else raw)",
    ),
    Mutant(
        "rate_limited default",
        RATE_LIMITS,
        "default = RATE_LIMITED_RETRY_AFTER",
        "default = _DEFAULT_RETRY_AFTER",
    ),
    Mutant(
        "rate_limited ignored",
        RATE_LIMITS,
        "elif error_of(response) == RATE_LIMITED:",
        "elif False:",
    ),
    Mutant("withdraw every tag", SCHEDULER, "if entry.tag == tag]", "]"),
    Mutant(
        "untag forgotten",
        SCHEDULER,
        "            self.tags[entry.tag] -= 1\n",
        "            pass\n",
    ),
    Mutant(
        "turns not rotated",
        SCHEDULER,
        "                self.turns.move_to_end(lane)\n                return lane",
        "                return lane",
    ),
    Mutant(
        "429 holds method not lane",
        SCHEDULER,
        "await self._budget.hold(buckets[-1] if alone else buckets[0], seconds)",
        "await self._budget.hold(buckets[0] if alone else buckets[0], seconds)",
    ),
    Mutant(
        "second lane 429 holds lane",
        SCHEDULER,
        "        alone = all(other == lane for other in self.held)",
        "        alone = True",
    ),
]

MRKDWN = "adapters/slack/render/mrkdwn.py"
_MRKDWN_TESTS = [
    "tests/slack/render/test_link_defusing.py",
    "tests/slack/render/test_disguised_links.py",
    "tests/slack/render/test_plan_code_links.py",
    "tests/slack/render/test_plan_code_fences.py",
    "tests/slack/render/test_slack_mrkdwn.py",
    "tests/slack/render/test_limits_exact.py",
]
_MRKDWN = [
    Mutant(
        "no autolink check",
        MRKDWN,
        "    if _AUTOLINK_LIKE.search(line):\n        return None",
        "    if False:\n        return None",
    ),
    Mutant("table pipe ignored", MRKDWN, 'if "|" in line[start : runs[closer][1]]:', "if False:"),
    Mutant("escaped backtick opens", MRKDWN, "        if slashes % 2:", "        if False:"),
    Mutant(
        "open run trusted",
        MRKDWN,
        "            whole = False  # a span",
        "            whole = True  # a span",
    ),
    Mutant(
        "untrusted paragraph masked",
        MRKDWN,
        "            elif spans and trusted:",
        "            elif spans:",
    ),
    Mutant(
        "blank keeps distrust",
        MRKDWN,
        "            if _blank(line):\n                trusted = True",
        "            if False:\n                trusted = True",
    ),
    Mutant(
        "image kept as link",
        MRKDWN,
        'if not match["bang"] and text.strip() == url',
        "if text.strip() == url",
    ),
    Mutant(
        "unsafe url kept",
        MRKDWN,
        "text.strip() == url and _KEEPABLE.fullmatch(url):",
        "text.strip() == url:",
    ),
    Mutant(
        "angled url dropped",
        MRKDWN,
        'url = match["angled"] if match["angled"] is not None else match["url"]',
        'url = match["url"] or ""',
    ),
    Mutant("one pass only", MRKDWN, "_READABLE_PASSES: Final = 8", "_READABLE_PASSES: Final = 1"),
    Mutant(
        "definitions kept",
        MRKDWN,
        'text = _unmasked(_DEFINITION.sub(r"\\g<containers>\\g<label>:", masked), kept)',
        "text = _unmasked(masked, kept)",
    ),
    Mutant("closer kept", MRKDWN, 'return match[0].replace("](", _BROKEN)', "return match[0]"),
    Mutant(
        "kept image",
        MRKDWN,
        'if match["kept"] is None or match[0].startswith("!"):',
        'if match["kept"] is None:',
        equivalent="an image that shows its URL always matches _LINK and is rewritten by _visible on the first pass; one left after the passes is nested, so its text holds a space and never matches the kept form",
    ),
    Mutant(
        "masking trusted at once",
        MRKDWN,
        "            if rewritten == current:\n                return escape(current)",
        "            if True:\n                return escape(current)",
    ),
    Mutant(
        "mask chars let through",
        MRKDWN,
        "if _MASK_OPEN not in text and _MASK_CLOSE not in text:",
        "if True:",
    ),
    Mutant(
        "indented fence in list",
        MRKDWN,
        'if match is None or (match["indent"] and not top):',
        "if match is None:",
    ),
    Mutant(
        "backtick info",
        MRKDWN,
        'if match["fence"][0] == "`" and "`" in match["info"]:',
        "if False:",
    ),
    Mutant(
        "lazy indented code",
        MRKDWN,
        "if top and not after_paragraph and not blank and _indent(line) >= 4:",
        "if top and not blank and _indent(line) >= 4:",
    ),
    Mutant(
        "escape order",
        MRKDWN,
        '.replace("&", "&amp;").replace("<", "&lt;")',
        '.replace("<", "&lt;").replace("&", "&amp;")',
    ),
    Mutant("half entity", MRKDWN, '    if amp != -1 and ";" not in body[amp:]:', "    if False:"),
    Mutant(
        "half control", MRKDWN, '    if opened != -1 and ">" not in body[opened:]:', "    if False:"
    ),
]

LIMITS = "adapters/slack/blockkit.py"
_LIMITS_TESTS = [
    "tests/slack/render/test_limits_exact.py",
    "tests/slack/blockkit/test_blockkit.py",
]
_BLOCKS = [
    Mutant("button 76", LIMITS, "MAX_BUTTON_TEXT: Final = 75", "MAX_BUTTON_TEXT: Final = 76"),
    Mutant("option 74", LIMITS, "MAX_OPTION_TEXT: Final = 75", "MAX_OPTION_TEXT: Final = 74"),
    Mutant(
        "description 76",
        LIMITS,
        "MAX_OPTION_DESCRIPTION: Final = 75",
        "MAX_OPTION_DESCRIPTION: Final = 76",
    ),
    Mutant(
        "section 3001", LIMITS, "MAX_SECTION_TEXT: Final = 3000", "MAX_SECTION_TEXT: Final = 3001"
    ),
    Mutant("blocks 51", LIMITS, "MAX_BLOCKS_MESSAGE: Final = 50", "MAX_BLOCKS_MESSAGE: Final = 51"),
    Mutant(
        "shorten at the limit",
        MRKDWN,
        "    if len(text) <= limit:\n        return text",
        "    if len(text) < limit:\n        return text",
    ),
    Mutant(
        "shorten one short",
        MRKDWN,
        "return text[: limit - 1] + ELLIPSIS",
        "return text[: limit - 2] + ELLIPSIS",
    ),
    Mutant(
        "question at 3000 cut",
        "adapters/slack/render/blocks/parts.py",
        "if len(text) <= MAX_SECTION_TEXT:",
        "if len(text) < MAX_SECTION_TEXT:",
    ),
    Mutant(
        "50 blocks refused",
        "adapters/slack/render/blocks/message.py",
        "if len(blocks) > blockkit.MAX_BLOCKS_MESSAGE:",
        "if len(blocks) >= blockkit.MAX_BLOCKS_MESSAGE:",
    ),
    Mutant(
        "markdown total at the limit refused",
        LIMITS,
        "if markdown > MAX_MARKDOWN_TOTAL:",
        "if markdown >= MAX_MARKDOWN_TOTAL:",
    ),
    Mutant(
        "text budget at the limit refused",
        LIMITS,
        "if total > MESSAGE_TEXT_BUDGET:",
        "if total >= MESSAGE_TEXT_BUDGET:",
    ),
    Mutant("elements unchecked", LIMITS, "                _validate(item)", "                pass"),
    Mutant(
        "button not listed",
        "adapters/slack/render/blocks/options.py",
        "if len(o.label) > MAX_BUTTON_TEXT or o.description]",
        "if len(o.label) > MAX_BUTTON_TEXT + 1 or o.description]",
    ),
    Mutant(
        "menu label at 75 listed",
        "adapters/slack/render/blocks/options.py",
        "if len(o.label) > MAX_OPTION_TEXT or",
        "if len(o.label) >= MAX_OPTION_TEXT or",
    ),
    Mutant(
        "description not listed",
        "adapters/slack/render/blocks/options.py",
        'or len(o.description or "") > MAX_OPTION_DESCRIPTION',
        "",
    ),
]

TRANSITIONS = "adapters/slack/clicks/transitions.py"
TALLY = "adapters/slack/model/tally.py"
_CLICK_TESTS = [
    "tests/slack/clicks/test_click_rules.py",
    "tests/slack/clicks/test_slack_transitions.py",
]
_TRANSITIONS = [
    Mutant(
        "single-select two labels",
        TRANSITIONS,
        "chosen = [] if custom else chosen[:1]",
        "chosen = [] if custom else chosen",
    ),
    Mutant(
        "submit past the last",
        TRANSITIONS,
        "            if 0 <= index < count:",
        "            if 0 <= index:",
    ),
    Mutant(
        "submit negative",
        TRANSITIONS,
        "            if 0 <= index < count:",
        "            if index < count:",
    ),
    Mutant(
        "negative selection",
        TRANSITIONS,
        "for i in draft.selected if 0 <= i < len(labels)})]",
        "for i in draft.selected if i < len(labels)})]",
    ),
    Mutant(
        "choice keeps free text",
        TRANSITIONS,
        "if not question.is_multi_select and interaction.options and draft.custom:",
        "if False:",
    ),
    Mutant(
        "text keeps the choice",
        TRANSITIONS,
        "    if text and not question.is_multi_select:\n        drafts[interaction.question].selected = []",
        "    if False:\n        drafts[interaction.question].selected = []",
    ),
    Mutant(
        "custom drops multi ticks",
        TRANSITIONS,
        "    return AskUserQuestionAnswerItem(id=question.id, selected=chosen, custom=custom)",
        "    return AskUserQuestionAnswerItem(id=question.id, selected=[] if custom else chosen, custom=custom)",
    ),
    Mutant(
        "empty submit finishes",
        TRANSITIONS,
        '        if all(not d.selected and not (d.custom or "").strip() for d in drafts):',
        "        if False:",
    ),
]
_HANDLER = [
    Mutant(
        "question past the last",
        TRANSITIONS,
        "    if not 0 <= interaction.question < count:",
        "    if not interaction.question < count:",
    ),
    Mutant(
        "question index unchecked",
        TRANSITIONS,
        "    if not 0 <= interaction.question < count:",
        "    if False:",
    ),
    Mutant(
        "option past the last",
        TRANSITIONS,
        "if not 0 <= interaction.option < len(question.options or []):",
        "if not 0 <= interaction.option:",
    ),
    Mutant(
        "negative option",
        TRANSITIONS,
        "if not 0 <= interaction.option < len(question.options or []):",
        "if not interaction.option < len(question.options or []):",
    ),
    Mutant("pick in a form", TRANSITIONS, 'if layout not in ("plan", "tap", "menu"):', "if False:"),
    Mutant(
        "submit outside a form",
        TRANSITIONS,
        '    if isinstance(interaction, Submit | ConfirmSkip | DraftChange) and layout != "form":',
        "    if False:",
    ),
]
_VOTING = [
    Mutant(
        "other option declines",
        TRANSITIONS,
        "        if interaction.option not in (review.approve, review.decline):\n            return None",
        "        if False:\n            return None",
    ),
    Mutant(
        "declines one early",
        TALLY,
        "    if declines >= policy.declines:",
        "    if declines + 1 >= policy.declines:",
    ),
    Mutant(
        "declines one late",
        TALLY,
        "    if declines >= policy.declines:",
        "    if declines > policy.declines:",
    ),
    Mutant(
        "approvals one late",
        TALLY,
        "elif len(approvers) >= policy.approvals and not waiting:",
        "elif len(approvers) > policy.approvals and not waiting:",
    ),
    Mutant(
        "required not waited",
        TALLY,
        "elif len(approvers) >= policy.approvals and not waiting:",
        "elif len(approvers) >= policy.approvals:",
    ),
    Mutant(
        "required one short",
        TALLY,
        "if (have := sum(1 for v in approvers if index in v.required)) < group.count",
        "if (have := sum(1 for v in approvers if index in v.required)) < group.count - 1",
    ),
    Mutant(
        "same vote counted",
        TRANSITIONS,
        "if earlier is not None and (earlier.approve, earlier.feedback) == (vote.approve, vote.feedback):",
        "if False:",
    ),
    Mutant(
        "changed vote refused",
        TRANSITIONS,
        "if earlier is not None and (earlier.approve, earlier.feedback) == (vote.approve, vote.feedback):",
        "if earlier is not None:",
    ),
    Mutant(
        "blank feedback votes",
        TRANSITIONS,
        "    if isinstance(interaction, TextAnswer) and not interaction.text.strip():",
        "    if False:",
    ),
    Mutant(
        "approver feedback quoted",
        TALLY,
        "        if not v.approve and v.feedback and v.feedback.strip()",
        "        if v.feedback and v.feedback.strip()",
        equivalent="an approval never carries feedback: a vote gets feedback only from a text answer, which is a decline",
    ),
    Mutant(
        "feedback dropped",
        TRANSITIONS,
        "    if not approved and (feedback := combined_feedback(votes)) is not None:",
        "    if False and (feedback := combined_feedback(votes)) is not None:",
    ),
]

GUARD = "adapters/httpguard.py"
_HTTP = [
    Mutant(
        "length at the limit refused",
        GUARD,
        "return limit is not None and (length or 0) > limit",
        "return limit is not None and (length or 0) >= limit",
    ),
    Mutant(
        "length unchecked",
        GUARD,
        "return limit is not None and (length or 0) > limit",
        "return False",
    ),
    Mutant(
        "chunked unbounded",
        GUARD,
        "                request = request.clone(client_max_size=limit)",
        "                pass",
    ),
]
ACCESS = "bot/api/access.py"
KEYS = "bot/api/asking.py"
_CAPS = [
    Mutant(
        "process cap one late",
        ACCESS,
        "        if len(self._open) >= self.per_process:",
        "        if len(self._open) > self.per_process:",
    ),
    Mutant(
        "token cap one late",
        ACCESS,
        "if name is not None and self._by_token[name] >= self.per_token:",
        "if name is not None and self._by_token[name] > self.per_token:",
    ),
    Mutant(
        "slot never freed",
        ACCESS,
        "        if request_id in self._open:\n            self._by_token -= Counter",
        "        if False:\n            self._by_token -= Counter",
    ),
    Mutant("key of 256", KEYS, 'r"[\\x20-\\x7e]{1,255}"', 'r"[\\x20-\\x7e]{1,256}"'),
    Mutant("empty key", KEYS, 'r"[\\x20-\\x7e]{1,255}"', 'r"[\\x20-\\x7e]{0,255}"'),
    Mutant("tab in key", KEYS, 'r"[\\x20-\\x7e]{1,255}"', 'r"[\\x09-\\x7e]{1,255}"'),
]
RELAY = "adapters/dsh/runners.py"
MATCHING = "adapters/dsh/mux.py"
_DSH_RULES = [
    Mutant(
        "count unchecked",
        MATCHING,
        "    if len(answers) != len(questions):",
        "    if len(answers) > len(questions) + 99:",
    ),
    Mutant("order unchecked", MATCHING, "        if item.id != question.id:", "        if False:"),
    Mutant(
        "repeats allowed",
        MATCHING,
        "        if len(set(selected)) != len(selected):",
        "        if False:",
    ),
    Mutant(
        "blank custom allowed",
        MATCHING,
        '        if item.custom is not None and item.custom.strip(_JS_WHITESPACE) == "":',
        "        if False:",
    ),
    Mutant(
        "python whitespace", MATCHING, "item.custom.strip(_JS_WHITESPACE)", "item.custom.strip()"
    ),
    Mutant(
        "custom with a choice",
        MATCHING,
        "            if item.custom is not None and selected:",
        "            if False:",
    ),
    Mutant(
        "two labels single",
        MATCHING,
        "            if len(selected) > 1:",
        "            if len(selected) > 2:",
    ),
    Mutant(
        "unknown label", MATCHING, "            if label not in options:", "            if False:"
    ),
]
_DSH = [
    Mutant(
        "unshowable request waits",
        RELAY,
        '            await self._decline(ask, f"{error.message} ({error.code}).")',
        "            pass",
    ),
    Mutant(
        "unshowable approval allowed",
        RELAY,
        'DISMISSED if question else result("rejected")',
        'DISMISSED if question else result("allowed-once")',
    ),
]

OPEN = "adapters/dsh/open_requests.py"
LINK = "adapters/dsh/link.py"
_REPLAY_TESTS = [
    "tests/dsh/test_dsh_replay_window.py",
    "tests/dsh/test_dsh_replay_answers.py",
]
_SETTLED_ONCE = "_settle runs only from the window's timer, which saw() never starts once the replay is over and closed()/opened() replace"
_REPLAY = [
    Mutant("replayed id not noted", OPEN, "            self.seen.add(rpc_id)", "            pass"),
    Mutant(
        "window kept after its end",
        OPEN,
        "        if self.over:\n            return\n        if self.timer",
        "        if False:\n            return\n        if self.timer",
        equivalent="a timer started after the replay is over finds it over: _settle returns at once",
    ),
    Mutant(
        "window not restarted",
        OPEN,
        "        if self.timer is not None:\n            self.timer.cancel()\n        self.timer",
        "        if False:\n            self.timer.cancel()\n        self.timer",
    ),
    Mutant(
        "window halved",
        OPEN,
        "call_later(self.window, self.settle, self)",
        "call_later(self.window / 2, self.settle, self)",
    ),
    Mutant(
        "window doubled",
        OPEN,
        "call_later(self.window, self.settle, self)",
        "call_later(self.window * 2, self.settle, self)",
    ),
    Mutant("no window at open", OPEN, "        self._replay.saw()\n", "        pass\n"),
    Mutant(
        "window outlives its socket",
        OPEN,
        "        if self._replay is not None and self._replay.timer is not None:",
        "        if False:",
    ),
    Mutant(
        "settled twice",
        OPEN,
        "        if replay.over:\n            return\n        replay.over = True",
        "        if False:\n            return\n        replay.over = True",
        equivalent=_SETTLED_ONCE,
    ),
    Mutant(
        "replay never over",
        OPEN,
        "        replay.over = True\n",
        "        pass\n",
        equivalent="each later request restarts the window and _settle runs again, but every request the host holds reached this socket (replayed or live) and is in seen: a later pass ends only what the host no longer has, which the first pass ended or a responding ask's delivery ends",
    ),
    Mutant(
        "waiting kept",
        OPEN,
        "        self._waiting = {r: ask for r, ask in self._waiting.items() if r in replay.seen}",
        "        pass",
    ),
    Mutant(
        "late replays kept",
        OPEN,
        "        self._late = {rpc_id: ask for rpc_id, ask in self._late.items() if rpc_id in replay.seen}",
        "        pass",
    ),
    Mutant(
        "gone not remembered",
        OPEN,
        "            _remember(self._gone, ask.rpc_id)",
        "            pass",
    ),
    Mutant(
        "approval called question",
        OPEN,
        "ask.controller.abort(GONE_NOTE if ask.approval is None else APPROVAL_GONE_NOTE)",
        "ask.controller.abort(GONE_NOTE)",
    ),
    Mutant(
        "no released sweep",
        OPEN,
        "            self._close_released(replay), name=",
        "            asyncio.sleep(0), name=",
    ),
    Mutant(
        "closed released not remembered",
        OPEN,
        "                _remember(self._gone, rpc_id)\n",
        "                pass\n",
    ),
    Mutant(
        "late released replay dropped",
        OPEN,
        "            self._ask_late(rpc_id)\n",
        "            pass\n",
    ),
    Mutant(
        "held ignores the replay",
        OPEN,
        "rpc_id in held for held in (replay.seen, self._asks, self._waiting, self._closing)",
        "rpc_id in held for held in (self._asks, self._waiting, self._closing)",
        equivalent="a replayed request is admitted at once (open, waiting, or late while closing), so it is held by _asks, _waiting or _closing whenever it is in seen; one whose ask already ended is no longer released (owned, or ended)",
    ),
    Mutant(
        "late replay admitted at once",
        OPEN,
        "        if rpc_id in self._closing or (rpc_id in self._asks and rpc_id in self._gone):",
        "        if rpc_id in self._asks and rpc_id in self._gone:",
    ),
    Mutant(
        "late replay of a gone ask ignored",
        OPEN,
        "        if rpc_id in self._closing or (rpc_id in self._asks and rpc_id in self._gone):",
        "        if rpc_id in self._closing:",
    ),
    Mutant(
        "replay asks twice",
        OPEN,
        "        if rpc_id in self._asks or rpc_id in self._waiting:\n            return  # a replay",
        "        if False:\n            return  # a replay",
    ),
    Mutant(
        "gone ask not reopened", OPEN, "        if ask.rpc_id in self._gone:", "        if False:"
    ),
    Mutant(
        "aborted ask's record left open",
        OPEN,
        "        if not task.cancelled() and isinstance(reason, str):",
        "        if False:",
    ),
    Mutant(
        "late replay not asked after closing",
        OPEN,
        "        if self._ask_late(ask.rpc_id):\n            return",
        "        if False:\n            return",
    ),
    Mutant(
        "answering ask closed",
        "adapters/dsh/asks.py",
        'return self.phase == "asking" and not self.controller.signal.aborted',
        "return not self.controller.signal.aborted",
    ),
    Mutant(
        "replayed ask closed",
        OPEN,
        "if a.open and a.rpc_id not in replay.seen]",
        "if a.open]",
    ),
    Mutant(
        "ended ask closed again",
        "adapters/dsh/asks.py",
        'return self.phase == "asking" and not self.controller.signal.aborted',
        'return self.phase == "asking"',
        equivalent="a second abort of an aborted ask is ignored by its controller, and the rpcId it marks gone is of a request the host already settled (answered, cancelled, declined) or lost, which it never replays",
    ),
    Mutant(
        "owned record closed",
        OPEN,
        "            if record.owner is not None or record.asked_by != self._asker or key is None:",
        "            if record.asked_by != self._asker or key is None:",
    ),
    Mutant(
        "other host's record closed",
        OPEN,
        "            if record.owner is not None or record.asked_by != self._asker or key is None:",
        "            if record.owner is not None or key is None:",
    ),
    Mutant("wrong id", OPEN, "rpc_id = key.removeprefix(_KEY_PREFIX)", "rpc_id = key"),
    Mutant(
        "held ignored",
        OPEN,
        "                rpc_id in held for held in (replay.seen, self._asks, self._waiting, self._closing)\n            ):",
        "                ()\n            ):",
    ),
    Mutant(
        "closing not marked", OPEN, "            self._closing.add(rpc_id)\n", "            pass\n"
    ),
    Mutant(
        "released approval called question",
        OPEN,
        "                gone = GONE_NOTE if record.approval is None else APPROVAL_GONE_NOTE",
        "                gone = GONE_NOTE",
    ),
    Mutant(
        "closing never over",
        OPEN,
        "                self._closing.discard(rpc_id)",
        "                pass",
    ),
    Mutant(
        "ask keyed by socket",
        LINK,
        "                    value.event_id,\n                    value.session_id,",
        '                    f"{value.event_id}@{self.client_id}",\n                    value.session_id,',
    ),
    Mutant(
        "question keyed by session",
        "adapters/dsh/runners.py",
        "key, label = ask_key(ask.rpc_id), session_label(ask.session_id)",
        "key, label = ask_key(ask.session_id), session_label(ask.session_id)",
    ),
    Mutant(
        "approval keyed by session",
        RELAY,
        "            key=ask_key(ask.rpc_id),",
        "            key=ask_key(ask.session_id),",
    ),
    Mutant(
        "seen kept across sockets",
        OPEN,
        "        self._replay = _Replay(self._replay_window, self._settle)\n",
        "        self._replay = _Replay(self._replay_window, self._settle, self._replay.seen if self._replay else set())\n",
    ),
    Mutant(
        "request not seen",
        OPEN,
        "return self._replay is not None and rpc_id in self._replay.seen",
        "return self._replay is not None",
    ),
    Mutant(
        "sent before the replay",
        LINK,
        "            if client_id is not None and not self._requests.replayed(event_id):",
        "            if False:",
    ),
    Mutant(
        "lost request waited on",
        LINK,
        "                if ready_at is not None and loop.time() - ready_at > _REPLAY_WAIT:",
        "                if False:",
    ),
    Mutant("replay wait cut short", LINK, "_REPLAY_WAIT: Final = 2.0", "_REPLAY_WAIT: Final = 0.5"),
    Mutant(
        "replay wait before ready",
        LINK,
        "                if ready_at is not None and loop.time() - ready_at > _REPLAY_WAIT:",
        "                if ready_at is None or loop.time() - ready_at > _REPLAY_WAIT:",
        equivalent="respond checks whether the replay is over only with a clientId, and the ready item sets the clientId and _ready_at together (opened() clears both)",
    ),
]

LIFECYCLE = "adapters/slack/asks/lifecycle.py"
WAITS = "adapters/slack/asks/waits.py"
_KEYED_TESTS = [
    "tests/slack/asks/test_keyed_asks.py",
    "tests/slack/asks/test_slack_provider.py::test_idempotency_key_attaches_instead_of_posting_twice",
]
_KEYED = [
    Mutant(
        "key ignored",
        LIFECYCLE,
        "            ids.key_request_id(options.key) if options.key else ids.new_request_id()",
        "            ids.new_request_id()",
    ),
    Mutant(
        "key not looked up",
        LIFECYCLE,
        "        if options.key or options.request_id:",
        "        if options.request_id:",
    ),
    Mutant(
        "asked request not rejoined",
        LIFECYCLE,
        "            if existing is not None:\n                return await self.waits.rejoin(existing, signal, options.note",
        "            if False:\n                return await self.waits.rejoin(existing, signal, options.note",
    ),
    Mutant(
        "race posts twice",
        LIFECYCLE,
        "            if not await self._store.create(record, asked):",
        "            if not await self._store.create(record, asked) and False:",
    ),
    Mutant(
        "ended reopened without a note",
        WAITS,
        "        if not record.is_open and note is not None:",
        "        if not record.is_open:",
    ),
    Mutant(
        "ended never reopened",
        WAITS,
        "        if not record.is_open and note is not None:",
        "        if False:",
    ),
    Mutant(
        "reopened not shown",
        WAITS,
        "                record = reopened\n                self._sync.refresh(record.id)",
        "                record = reopened\n                pass",
        equivalent="the first waiter's refresh just below updates the message too; it is skipped only while another waiter of this process waits on the request, which is then open, so never reopened",
    ),
    Mutant(
        "ownership not taken",
        WAITS,
        "        if owner is not None and record.owner != owner:",
        "        if False:",
    ),
]

ASKING = "bot/api/asking.py"
_API_KEY_TESTS = [
    "tests/api/test_key_retries.py",
    "tests/api/test_api_lookup.py",
    "tests/api/test_consume_once.py",
]
_API_KEYS = [
    Mutant("label not compared", KEYS, '("label", "link", "callback")', '("link", "callback")'),
    Mutant(
        "channel not compared",
        KEYS,
        "    return same and (channel is None or (question.channel, question.thread_ts) == place)",
        "    return same",
    ),
    Mutant(
        "thread not compared",
        KEYS,
        "(question.channel, question.thread_ts) == place)",
        "question.channel == channel)",
    ),
    Mutant("link not compared", KEYS, '("label", "link", "callback")', '("label", "callback")'),
    Mutant(
        "callback not compared",
        KEYS,
        '("label", "link", "callback")',
        '("label", "link")',
    ),
    Mutant(
        "review not compared",
        KEYS,
        "        and question.review == post.review",
        "        and True",
    ),
    Mutant(
        "revises not compared",
        KEYS,
        "        and question.revises == post.revises",
        "        and True",
    ),
    Mutant(
        "reminders not compared",
        KEYS,
        "        and (post.remind is None or list(question.remind) == post.remind)",
        "        and True",
    ),
    Mutant(
        "left-out remind compared",
        KEYS,
        "        and (post.remind is None or list(question.remind) == post.remind)",
        "        and list(question.remind) == post.remind",
    ),
    Mutant(
        "times not compared",
        KEYS,
        "        and _same_times(question, post)",
        "        and True",
    ),
    Mutant("multiSelect default", KEYS, '            "multi_select": item.is_multi_select,', ""),
    Mutant(
        "empty options differ",
        KEYS,
        '"options": [o.model_dump(mode="json") for o in item.options or ()] or None,',
        '"options": [o.model_dump(mode="json") for o in item.options or ()],',
        equivalent="item.options or () already reads None and [] alike: both sides become [] instead of None",
    ),
    Mutant(
        "deadline absolute",
        KEYS,
        "    timeout = None if deadline is None else deadline - asked",
        "    timeout = deadline",
    ),
    Mutant(
        "reminders unsorted",
        KEYS,
        "    before = sorted(deadline - at for at in question.reminders)",
        "    before = list(deadline - at for at in question.reminders)",
    ),
    Mutant("exact float", KEYS, "abs_tol=1e-3", "abs_tol=0.0"),
    Mutant(
        "left-out timeout compared",
        KEYS,
        "        _as_said(post.timeout, timeout)",
        "        _as_said(post.timeout or 0.0, timeout)",
    ),
    Mutant(
        "reminder count",
        KEYS,
        "len(before) == len(reminders) and ",
        "",
    ),
    Mutant(
        "escalation delay not compared",
        KEYS,
        "        and _as_said(post.escalate_after, after)",
        "        and True",
    ),
    Mutant(
        "escalation target not compared",
        KEYS,
        "        and post.escalate_to in (None, question.escalate_to)",
        "        and True",
    ),
    Mutant(
        "lock not shared",
        KEYS,
        "return self.setdefault(request_id, asyncio.Lock())",
        "return asyncio.Lock()",
    ),
    Mutant(
        "lock never freed",
        KEYS,
        "class KeyLocks(weakref.WeakValueDictionary[str, asyncio.Lock]):",
        "class KeyLocks(dict[str, asyncio.Lock]):",
    ),
    Mutant(
        "retries not serialised",
        "bot/api/gateway.py",
        "        async with self._keys.held(request_id):",
        "        async with asyncio.timeout(None):",
    ),
    Mutant("api key ignored", "bot/api/gateway.py", 'f"api:{key}" if key else None', "None"),
    Mutant(
        "different body accepted",
        ASKING,
        "    if not same_request(existing, post, default_channel):",
        "    if False:",
    ),
    Mutant(
        "unshown called success",
        ASKING,
        "    if unshown and error is not None and error.code == DELIVERY_FAILED:",
        "    if False:",
    ),
    Mutant(
        "consumed answer replayed",
        ASKING,
        "    if existing.consumed_at is not None:",
        "    if False:",
    ),
    Mutant(
        "lookup asks",
        ASKING,
        'return problem(412, "RequestError", "NOT_ASKED", message) if lookup else None',
        "return None",
    ),
]

AREAS: dict[str, tuple[list[str], list[Mutant]]] = {
    "scheduler": (_SCHEDULER_TESTS, _SCHEDULER),
    "mrkdwn": (_MRKDWN_TESTS, _MRKDWN),
    "blockkit": (_LIMITS_TESTS, _BLOCKS),
    "transitions": (_CLICK_TESTS, _TRANSITIONS),
    "handler": (_CLICK_TESTS, _HANDLER),
    "http": (["tests/api/test_body_limits_exact.py"], _HTTP),
    "dsh": (["tests/dsh/test_dsh_approval_rules.py"], _DSH),
    "caps": (["tests/api/test_caps_exact.py"], _CAPS),
    "dsh-rules": (
        ["tests/dsh/test_dsh_answer_rules.py", "tests/dsh/test_dsh_protocol.py"],
        _DSH_RULES,
    ),
    "dsh-replay": (_REPLAY_TESTS, _REPLAY),
    "keyed-asks": (_KEYED_TESTS, _KEYED),
    "api-keys": (_API_KEY_TESTS, _API_KEYS),
    "voting": (
        ["tests/slack/clicks/test_click_rules.py", "tests/slack/clicks/test_team_review.py"],
        _VOTING,
    ),
}
