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
BUCKETS = "adapters/slack/pacing/buckets.py"
LANES = "adapters/slack/pacing/lanes.py"
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
        LANES,
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
        LANES,
        "        if entry.serial:\n            self.busy.add(lane)",
        "        if False:\n            self.busy.add(lane)",
    ),
    Mutant("busy lane never freed", SCHEDULER, "state.busy.discard(entry.lane)", "pass"),
    Mutant(
        "retry-after default",
        SCHEDULER,
        "_DEFAULT_RETRY_AFTER: Final = 1.0",
        "_DEFAULT_RETRY_AFTER: Final = 2.0",
    ),
    Mutant("negative retry-after", SCHEDULER, "return max(0.0, float(raw))", "return float(raw)"),
    Mutant(
        "rate_limited default",
        SCHEDULER,
        "default = RATE_LIMITED_RETRY_AFTER",
        "default = _DEFAULT_RETRY_AFTER",
    ),
    Mutant(
        "rate_limited ignored",
        SCHEDULER,
        "elif error_of(exc.response) == RATE_LIMITED:",
        "elif False:",
    ),
    Mutant("withdraw every tag", SCHEDULER, "if entry.tag == tag]", "]"),
    Mutant(
        "untag forgotten", LANES, "            self.tags[entry.tag] -= 1\n", "            pass\n"
    ),
    Mutant(
        "turns not rotated",
        LANES,
        "            self.turns.append(lane)\n            return lane",
        "            self.turns.appendleft(lane)\n            return lane",
    ),
    Mutant(
        "429 holds method not lane",
        BUCKETS,
        "            await self._budget.hold(buckets[-1], seconds)",
        "            await self._budget.hold(buckets[0], seconds)",
    ),
    Mutant(
        "second lane 429 holds lane",
        BUCKETS,
        "        if any(other != lane for other in held):",
        "        if False:",
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
        "adapters/slack/render/blocks/open_message.py",
        "if len(blocks) > MAX_BLOCKS_MESSAGE:",
        "if len(blocks) >= MAX_BLOCKS_MESSAGE:",
    ),
    Mutant(
        "button not listed",
        "adapters/slack/render/blocks/full_labels.py",
        "if len(o.label) > MAX_BUTTON_TEXT or o.description]",
        "if len(o.label) > MAX_BUTTON_TEXT + 1 or o.description]",
    ),
    Mutant(
        "menu label at 75 listed",
        "adapters/slack/render/blocks/full_labels.py",
        "if len(o.label) > MAX_OPTION_TEXT or",
        "if len(o.label) >= MAX_OPTION_TEXT or",
    ),
    Mutant(
        "description not listed",
        "adapters/slack/render/blocks/full_labels.py",
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
    Mutant("single-select two labels", TRANSITIONS, "for i in chosen[:1]])", "for i in chosen])"),
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
        "chosen = sorted({i for i in draft.selected if 0 <= i < len(labels)})",
        "chosen = sorted({i for i in draft.selected if i < len(labels)})",
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
        "    if not question.is_multi_select:\n        drafts[interaction.question].selected = []",
        "    if False:\n        drafts[interaction.question].selected = []",
    ),
    Mutant(
        "custom drops multi ticks",
        TRANSITIONS,
        "        return AskUserQuestionAnswerItem(id=question.id, selected=selected, custom=custom)",
        "        return AskUserQuestionAnswerItem(id=question.id, selected=[], custom=custom)",
    ),
    Mutant(
        "empty submit finishes", TRANSITIONS, "        if _is_empty(drafts):", "        if False:"
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
        '        if layout != "form":\n            return Ignore()\n        # The submitter',
        "        if False:\n            return Ignore()\n        # The submitter",
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
        equivalent="an approval never carries feedback: vote_of gives feedback only to a text answer, which is a decline",
    ),
    Mutant(
        "feedback dropped",
        TRANSITIONS,
        "    elif (feedback := combined_feedback(votes)) is not None:",
        "    elif False and (feedback := combined_feedback(votes)) is not None:",
    ),
]

GUARD = "adapters/httpguard.py"
BODY = "bot/api/body.py"
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
    Mutant(
        "api length at the limit",
        BODY,
        "if limit is not None and length is not None and length > limit:",
        "if limit is not None and length is not None and length >= limit:",
    ),
    Mutant(
        "api body at the limit",
        BODY,
        "    if limit is not None and len(body) > limit:",
        "    if limit is not None and len(body) >= limit:",
    ),
]
ACCESS = "bot/api/access.py"
KEYS = "bot/api/idempotency.py"
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
        "        if request_id in self._open:\n            name = self._open.pop(request_id)",
        "        if False:\n            name = self._open.pop(request_id)",
    ),
    Mutant("key of 256", KEYS, 'r"[\\x20-\\x7e]{1,255}"', 'r"[\\x20-\\x7e]{1,256}"'),
    Mutant("empty key", KEYS, 'r"[\\x20-\\x7e]{1,255}"', 'r"[\\x20-\\x7e]{0,255}"'),
    Mutant("tab in key", KEYS, 'r"[\\x20-\\x7e]{1,255}"', 'r"[\\x09-\\x7e]{1,255}"'),
]
RELAY = "adapters/dsh/approval_relay.py"
MATCHING = "adapters/dsh/matching.py"
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
        "unshowable approval waits",
        RELAY,
        '                    await self._decline(ask, f"{exc.message} ({exc.code}).")',
        "                    pass",
    ),
    Mutant(
        "unshowable approval allowed",
        RELAY,
        'approval_response(ask.rpc_id, ask.session_id, payload.approval_id, "rejected"),',
        'approval_response(ask.rpc_id, ask.session_id, payload.approval_id, "allowed-once"),',
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
    "voting": (
        ["tests/slack/clicks/test_click_rules.py", "tests/slack/clicks/test_team_review.py"],
        _VOTING,
    ),
}
