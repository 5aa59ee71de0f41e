"""Long option labels that share their beginning stay tellable apart on every widget.

Slack shows at most 75 characters of a button's or an option's text. Two labels that agree
on their first 74 characters used to become the same ``…``-ended text: a person then chose
"all customers" or "internal staff only" by guessing. A shortened label now keeps its
beginning and its end ("Roll out the new payment service to… for internal staff only"),
and when even that reads the same, it carries its option's number, the number of its line
in the full list. Labels that fit, and shortened ones that do not collide, read as before.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.slack.blockkit import MAX_BUTTON_TEXT, MAX_OPTION_TEXT
from adapters.slack.model.record import Draft, PendingRecord
from adapters.slack.render.blocks.message import render_open
from adapters.slack.render.blocks.options import option_labels
from adapters.slack.render.blocks.parts import Rendered
from adapters.slack.render.mrkdwn import ELLIPSIS
from adapters.slack.sandbox.blockcheck import check_message
from bot.questions.models import AskUserQuestionItem
from tests.slack_harness import SlackHarness

Block = dict[str, Any]

STAFF = (
    "Roll out the new payment service to production behind the feature flag "
    "and then enable it for internal staff only"
)
CUSTOMERS = (
    "Roll out the new payment service to production behind the feature flag "
    "and then enable it for all customers at once"
)
PREFIX = "Migrate the orders database to the new cluster during the maintenance window "
SUFFIX = " then switch the traffic over and keep the old cluster for a week as a fallback"
"""Labels ``PREFIX + x + SUFFIX`` differ only in the middle: beginning and end agree."""

LIMIT = 75
assert LIMIT == MAX_BUTTON_TEXT == MAX_OPTION_TEXT


# --- helpers ---------------------------------------------------------------------------


def record(*questions: dict[str, Any], drafts: list[Draft] | None = None) -> PendingRecord:
    items = [
        AskUserQuestionItem.model_validate({"id": f"q{n}", "question": "Which one?", **q})
        for n, q in enumerate(questions)
    ]
    return PendingRecord(
        id="0123456789abcdef0123",
        owner="proc-1",
        channel="C0QUESTION",
        questions=items,
        drafts=drafts or [],
    )


def walk(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from walk(value)


def assert_within_limits(rendered: Rendered) -> None:
    assert check_message(rendered.blocks, rendered.text) == []
    for part in rendered.thread:
        assert check_message(part, "(continued)") == []


def answer_widgets(blocks: list[Block]) -> list[Block]:
    """The elements a question is answered with, one per question: the option buttons
    (as one pseudo-widget), a menu, radio buttons or checkboxes."""
    found: list[Block] = []
    for block in blocks:
        if block["type"] != "actions":
            continue
        buttons = [e for e in block["elements"] if ".pick." in e.get("action_id", "")]
        if buttons:
            found.append({"type": "buttons", "options": buttons})
        found.extend(e for e in block["elements"] if e["type"] in WIDGETS)
    return found


WIDGETS = ("static_select", "multi_static_select", "radio_buttons", "checkboxes")


def options_of(widget: Block) -> list[Block]:
    options = list(widget.get("options") or [])
    for group in widget.get("option_groups") or []:
        options.extend(group["options"])
    return options


def shown(widget: Block) -> list[str]:
    return [o["text"]["text"] for o in options_of(widget)]


def values(widget: Block) -> list[str]:
    return [o["value"] for o in options_of(widget)]


def numbered_lines(blocks: list[Block]) -> dict[int, str]:
    """Each numbered line of the full lists: its number as Slack shows it, and its text."""
    lines: dict[int, str] = {}
    for node in walk(blocks):
        if node.get("type") == "rich_text_list" and node.get("style") == "ordered":
            for n, line in enumerate(node["elements"], start=node.get("offset", 0) + 1):
                lines[n] = "".join(leaf["text"] for leaf in line["elements"])
    return lines


def assert_distinct(widget: Block, labels: list[str]) -> list[str]:
    """The widget shows one text per option, each within Slack's limit, no two alike; the
    values are the indexes. Returns the texts."""
    texts = shown(widget)
    assert values(widget) == [str(i) for i in range(len(labels))]
    assert all(0 < len(t) <= LIMIT for t in texts), texts
    assert len(set(texts)) == len(texts), texts
    for text, full in zip(texts, labels, strict=True):
        if len(full) <= LIMIT:
            assert text == full  # a label that fits reads exactly as typed
    return texts


def tails(count: int) -> list[str]:
    """``count`` long labels that share everything but their last few words."""
    ends = ["internal staff only", "all customers at once", "the beta testers", "one region"]
    ends += [f"customer segment number {i}" for i in range(count)]
    return [f"{CUSTOMERS[: -len('all customers at once')]}{end}" for end in ends[:count]]


LAYOUTS: dict[str, tuple[dict[str, Any], int, str]] = {
    # widget kind: (question fields, extra question, expected type)
    "buttons": ({}, 0, "buttons"),
    "static_select": ({}, 0, "static_select"),
    "radio_buttons": ({}, 1, "radio_buttons"),
    "checkboxes": ({"multiSelect": True}, 0, "checkboxes"),
    "multi_static_select": ({"multiSelect": True}, 0, "multi_static_select"),
    "form_static_select": ({}, 1, "static_select"),
}
"""How to get each widget kind: buttons up to 5 options, a menu past them; a form's radio
buttons and checkboxes up to 10, its menus past them."""


def render(kind: str, labels: list[str], drafts: list[Draft] | None = None) -> Block:
    fields, extra, expected = LAYOUTS[kind]
    question = {"options": [{"label": label} for label in labels], **fields}
    others = [{"question": "And?", "options": [{"label": "x"}, {"label": "y"}]}] * extra
    rendered = render_open(record(question, *others, drafts=drafts))
    assert_within_limits(rendered)
    widget = answer_widgets(rendered.blocks)[0]
    assert widget["type"] == expected
    return {"widget": widget, "rendered": rendered}


def counts(kind: str) -> list[int]:
    """Option counts that give ``kind``: 2 and 5 (buttons) or 10 and more (the others)."""
    return {
        "buttons": [2, 5],
        "static_select": [6, 10],
        "radio_buttons": [2, 10],
        "checkboxes": [2, 10],
        "multi_static_select": [11, 30],
        "form_static_select": [11, 30],
    }[kind]


CASES = [(kind, n) for kind in LAYOUTS for n in counts(kind)]


# --- a shared beginning ------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "count"), CASES)
def test_labels_sharing_their_first_75_characters_read_differently(kind: str, count: int) -> None:
    labels = tails(count)
    assert len({label[:LIMIT] for label in labels}) == 1  # the old cut made them one
    done = render(kind, labels)
    texts = assert_distinct(done["widget"], labels)
    # each carries its number and keeps its beginning and its distinguishing end
    for n, (text, full) in enumerate(zip(texts, labels, strict=True), start=1):
        assert text.startswith(f"{n}. Roll out the new payment service")
        assert ELLIPSIS in text
        assert full.endswith(text.split(ELLIPSIS)[-1].strip())
    assert texts[0].endswith("internal staff only")
    assert texts[1].endswith("all customers at once")


@pytest.mark.parametrize(("kind", "count"), CASES)
def test_labels_differing_only_in_the_last_character_read_differently(
    kind: str, count: int
) -> None:
    labels = [CUSTOMERS + " " + "x" * 20 + chr(ord("A") + i) for i in range(count)]
    texts = assert_distinct(render(kind, labels)["widget"], labels)
    assert [t[-1] for t in texts] == [chr(ord("A") + i) for i in range(count)]


@pytest.mark.parametrize(("kind", "count"), CASES)
def test_labels_differing_only_in_the_middle_carry_their_list_numbers(
    kind: str, count: int
) -> None:
    labels = [f"{PREFIX}(plan {chr(ord('A') + i)}){SUFFIX}" for i in range(count)]
    done = render(kind, labels)
    texts = assert_distinct(done["widget"], labels)
    assert [t.split(". ", 1)[0] for t in texts] == [str(i + 1) for i in range(count)]
    # the number is the line's number in the full list (in the message or its thread)
    rendered = done["rendered"]
    listed = numbered_lines([*rendered.blocks, *rendered.thread])
    assert listed == {i + 1: label for i, label in enumerate(labels)}


def test_a_numbered_label_maps_to_its_line_when_only_some_options_are_listed() -> None:
    labels = ["Short one", f"{PREFIX}(plan A){SUFFIX}", "Another", f"{PREFIX}(plan B){SUFFIX}"]
    done = render("buttons", labels)
    texts = assert_distinct(done["widget"], labels)
    assert texts[0] == "Short one" and texts[2] == "Another"  # as typed, no number
    assert texts[1].startswith("2. ") and texts[3].startswith("4. ")
    assert numbered_lines(done["rendered"].blocks) == {2: labels[1], 4: labels[3]}


def test_numbered_labels_in_a_thread_list_keep_their_numbers() -> None:
    labels = [f"{PREFIX}{i:03d}{SUFFIX}" + "y" * 40 for i in range(100)]
    done = render("static_select", labels)
    rendered = done["rendered"]
    assert rendered.thread  # the full list went to the thread
    texts = assert_distinct(done["widget"], labels)
    assert texts[41].startswith("42. ")
    assert numbered_lines(rendered.thread) == {i + 1: label for i, label in enumerate(labels)}


# --- boundaries, unicode, what does not change ---------------------------------------------


@pytest.mark.parametrize("kind", list(LAYOUTS))
def test_labels_of_exactly_75_characters_are_shown_whole(kind: str) -> None:
    count = counts(kind)[0]
    labels = [CUSTOMERS[: LIMIT - 1] + chr(ord("A") + i) for i in range(count)]
    assert all(len(label) == LIMIT for label in labels)
    assert shown(render(kind, labels)["widget"]) == labels


@pytest.mark.parametrize("kind", list(LAYOUTS))
def test_labels_of_76_characters_differing_at_the_end_read_differently(kind: str) -> None:
    count = counts(kind)[0]
    labels = [CUSTOMERS[:LIMIT] + chr(ord("A") + i) for i in range(count)]
    assert all(len(label) == LIMIT + 1 for label in labels)
    texts = assert_distinct(render(kind, labels)["widget"], labels)
    assert all(t.endswith(chr(ord("A") + i)) for i, t in enumerate(texts))


def test_a_75_character_label_beside_its_76_character_twin() -> None:
    labels = [CUSTOMERS[:LIMIT], CUSTOMERS[: LIMIT + 1]]
    texts = assert_distinct(render("buttons", labels)["widget"], labels)
    assert texts[0] == labels[0]


@pytest.mark.parametrize("kind", list(LAYOUTS))
def test_emoji_and_accents_are_not_split_and_still_differ(kind: str) -> None:
    family = "\U0001f468\u200d\U0001f469\u200d\U0001f467"  # one emoji of five code points
    base = "Déployer 🚀 la nouvelle version " + family * 12 + " puis activer pour "
    count = counts(kind)[0]
    ends = ["l'équipe interne 👩‍💻", "tous les clients 🌍", "les testeurs bêta 🧪"]
    ends += [f"le segment {i} ✅" for i in range(count)]
    labels = [base + end for end in ends[:count]]
    texts = assert_distinct(render(kind, labels)["widget"], labels)
    assert texts[0].endswith("l'équipe interne 👩‍💻")
    for text in texts:
        cut = text.index(ELLIPSIS)
        assert text[cut - 1 : cut] != "\u200d" and text[cut + 1 : cut + 2] != "\u200d"
        assert text[cut + 1 : cut + 2] not in ("\u0301", "\ufe0f")


def test_flags_are_not_split() -> None:
    labels = ["🇫🇷" * 60 + " the French team", "🇫🇷" * 60 + " the German team"]
    texts = assert_distinct(render("buttons", labels)["widget"], labels)
    for text in texts:
        head, end = text.split(ELLIPSIS)
        head = head.split(". ", 1)[1]
        assert len(head) % 2 == 0 and head == "🇫🇷" * (len(head) // 2)
        assert end.endswith(" team")


PIECES = st.sampled_from(["a", "b", " ", "word ", "é", "e\u0301", "👩\u200d💻", "🇫🇷", "1. ", "…"])


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.lists(PIECES, max_size=60).map("".join), min_size=1, max_size=12),
    st.sampled_from([8, 20, 75]),
)
def test_any_labels_that_differ_read_differently_when_one_is_shortened(
    labels: list[str], limit: int
) -> None:
    texts, numbered = option_labels(labels, limit)
    assert len(texts) == len(labels)
    assert all(len(text) <= limit for text in texts)
    cut = {i for i, text in enumerate(labels) if text.strip() and len(text) > limit}
    for i, text in enumerate(texts):
        if not cut:
            assert text == (labels[i] if labels[i].strip() else "(blank)")
        for j in cut:
            if i != j and labels[i] != labels[j]:
                assert text != texts[j], (labels, texts)
    assert not numbered or cut


def test_labels_that_fit_read_exactly_as_typed() -> None:
    labels = ["Deploy", "Wait", "Roll back"]
    for kind in ("buttons", "radio_buttons", "checkboxes"):
        assert shown(render(kind, labels)["widget"]) == labels


def test_a_long_label_that_collides_with_nothing_still_carries_its_number() -> None:
    labels = ["L" * 200, "short"]
    texts = shown(render("buttons", labels)["widget"])
    assert texts[1] == "short" and texts[0].startswith("1. L") and ELLIPSIS in texts[0]
    assert len(texts[0]) == LIMIT


def test_identical_labels_that_fit_stay_identical() -> None:
    labels = ["", "   ", "Same", "Same"]
    assert shown(render("buttons", labels)["widget"]) == ["(blank)", "(blank)", "Same", "Same"]


def test_a_label_typed_like_a_shortened_one_still_differs() -> None:
    labels = [STAFF, CUSTOMERS]
    first = shown(render("buttons", labels)["widget"])
    # a third label typed exactly as the second one is shown: the shortened ones give way
    labels.append(first[1])
    texts = shown(render("buttons", labels)["widget"])
    assert len(set(texts)) == 3 and all(len(t) <= LIMIT for t in texts)
    assert [t[:3] for t in texts] == ["1. ", "2. ", "3. "]  # then every label is numbered


def test_even_a_label_typed_like_a_numbered_one_cannot_make_two_alike() -> None:
    middle = [f"{PREFIX}(plan {c}){SUFFIX}" for c in "AB"]
    numbered = shown(render("buttons", middle)["widget"])
    labels = [*middle, numbered[0], numbered[1]]
    widget = render("buttons", labels)["widget"]
    texts = shown(widget)
    assert values(widget) == ["0", "1", "2", "3"]
    assert len(set(texts)) == 4 and all(len(t) <= LIMIT for t in texts)


def test_a_drafted_choice_repeats_the_shown_option_exactly() -> None:
    labels = tails(3)
    done = render("checkboxes", labels, drafts=[Draft(selected=[1, 2])])
    widget = done["widget"]
    assert widget["initial_options"] == options_of(widget)[1:3]
    done = render("radio_buttons", labels, drafts=[Draft(selected=[2])])
    assert done["widget"]["initial_option"] == options_of(done["widget"])[2]
    many = tails(12)
    done = render("multi_static_select", many, drafts=[Draft(selected=[0, 11])])
    chosen = done["widget"]["initial_options"]
    assert chosen == [options_of(done["widget"])[0], options_of(done["widget"])[11]]


def test_plan_review_approve_and_decline_read_differently() -> None:
    approve, decline = STAFF, CUSTOMERS
    question = {
        "question": "Approve this plan?",
        "detail": "# Plan",
        "options": [{"label": approve}, {"label": decline}],
        "intent": {"kind": "plan-review", "approve": approve},
    }
    rendered = render_open(record(question))
    assert_within_limits(rendered)
    picks = [
        e
        for b in rendered.blocks
        if b["type"] == "actions"
        for e in b["elements"]
        if ".pick." in e["action_id"]
    ]
    texts = [p["text"]["text"] for p in picks]
    assert [p["value"] for p in picks] == ["0", "1"]
    assert len(set(texts)) == 2 and all(len(t) <= LIMIT for t in texts)
    assert texts[0].endswith("internal staff only")


# --- through the Slack stand-in ---------------------------------------------------------


def ask(labels: list[str]) -> dict[str, Any]:
    options = [{"label": label} for label in labels]
    return {"questions": [{"id": "q", "question": "Same-prefix buttons?", "options": options}]}


@pytest.mark.parametrize("intended", [0, 1])
async def test_a_person_clicks_the_button_that_reads_like_their_option(intended: int) -> None:
    labels = [STAFF, CUSTOMERS]
    wanted = ["internal staff only", "all customers at once"][intended]
    async with SlackHarness() as h:
        task = h.ask(ask(labels))
        message = await h.posted()
        texts = [
            e["text"]["text"]
            for b in message.blocks
            if b["type"] == "actions"
            for e in b["elements"]
            if e["type"] == "button"
        ]
        (text,) = [t for t in texts if t.endswith(wanted)]
        status, _ = await h.click(message, h.alice, text=text)
        assert status == 200
        answer = await asyncio.wait_for(task, 5)
        assert answer.answers[0].selected == [labels[intended]]


async def test_a_person_picks_the_menu_option_that_reads_like_theirs() -> None:
    labels = tails(8)
    async with SlackHarness() as h:
        task = h.ask(ask(labels))
        message = await h.posted()
        (menu,) = [
            e
            for b in message.blocks
            if b["type"] == "actions"
            for e in b["elements"]
            if e["type"] == "static_select"
        ]
        (text,) = [t for t in shown(menu) if t.endswith("all customers at once")]
        status, _ = await h.click(message, h.alice, text=text)
        assert status == 200
        answer = await asyncio.wait_for(task, 5)
        assert answer.answers[0].selected == [labels[1]]


ROLLOUT = [  # the four labels of issue 39 (screen 09): a shared start, cut mid-word
    "Roll out the new payment service to production in every region at once and keep the "
    "old one as fallback",
    "Roll out the new payment service to production in the EU region only and watch the "
    "error budget for a week",
    "Roll out the new payment service to production for internal staff only, behind the "
    "payments-v2 feature flag",
    "Do not roll out yet: the migration of the ledger tables has not been rehearsed on a "
    "copy of production data",
]


@pytest.mark.parametrize("kind", ["buttons", "radio_buttons", "checkboxes"])
def test_every_label_slack_would_cut_carries_its_number_and_is_cut_between_words(
    kind: str,
) -> None:
    texts = shown(render(kind, [*ROLLOUT, "No"])["widget"])
    assert texts[-1] == "No"  # a label that fits reads as typed
    for n, (text, full) in enumerate(zip(texts, ROLLOUT, strict=False), start=1):
        assert text.startswith(f"{n}. ") and len(text) <= LIMIT, text
        head, _, tail = text.removeprefix(f"{n}. ").partition(ELLIPSIS)
        assert full.startswith(head) and full.endswith(tail.strip()), text
        assert full[len(head)] == " " and full[-len(tail.strip()) - 1] == " ", text
    assert len(set(texts)) == len(texts)
