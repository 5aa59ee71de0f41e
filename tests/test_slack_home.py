"""home.py: App Home's "Waiting for you" (pure rendering)."""

from __future__ import annotations

from typing import Any

from adapters.slack import ids
from adapters.slack.blockkit import check_view
from adapters.slack.home import MAX_HOME_ENTRIES, may_answer, message_link, render_home
from adapters.slack.record import PendingRecord
from bot.questions.models import AskUserQuestionItem


def record(rid: str, question: str = "Deploy?", **fields: Any) -> PendingRecord:
    options = fields.pop("options", [{"label": "Yes"}, {"label": "No"}])
    item = AskUserQuestionItem.model_validate({"id": "q", "question": question, "options": options})
    fields.setdefault("owner", "p")
    fields.setdefault("channel", "C0QUESTION")
    return PendingRecord(id=rid, questions=[item], **fields)


def test_who_may_answer() -> None:
    anyone = record("r" * 20)
    assert may_answer(anyone, "U1")
    only = record("s" * 20, allowed_users=["U1"], allowed_usergroups=["S1"])
    assert may_answer(only, "U1") and not may_answer(only, "U2")
    assert may_answer(only, "U2", groups=["S1"])


def test_home_lists_open_questions_with_where_who_age_deadline_link_and_taps() -> None:
    rec = record(
        "a" * 20,
        "Ship **v2.4**?",
        label="release-agent",
        created_at=1_700_000_000.0,
        deadline=1_700_003_600.0,
        message_channel="C0QUESTION",
        message_ts="1700000000.000100",
        version=3,
    )
    view = render_home([rec, rec.next(state="answered")])
    assert check_view(view) == []
    assert view["type"] == "home"
    texts = str(view)
    assert "Ship **v2.4**?" in texts  # as typed, in rich text
    (context,) = [b for b in view["blocks"] if b["type"] == "context"]
    line = context["elements"][0]["text"]
    assert line.startswith("<#C0QUESTION> · Asked by release-agent · <!date^1700000000^asked {ago}")
    assert "Answer by <!date^1700003600^" in line
    assert "<https://slack.com/archives/C0QUESTION/p1700000000000100|Open the question>" in line
    (actions,) = [b for b in view["blocks"] if b["type"] == "actions"]
    assert ids.parse_block_id(actions["block_id"]) == ids.BlockRef("a" * 20, 0, "c3")
    assert [e["text"]["text"] for e in actions["elements"]] == ["Yes", "No"]
    assert [ids.parse_action_id(e["action_id"]) for e in actions["elements"]] == ["pick"] * 2
    assert message_link(rec.model_copy(update={"message_ts": None})) is None


def test_an_empty_home_says_so_and_a_long_one_is_capped() -> None:
    assert "Nothing is waiting" in str(render_home([]))
    many = [record(f"{i:020d}", created_at=float(i)) for i in range(MAX_HOME_ENTRIES + 5)]
    view = render_home(many)
    assert check_view(view) == []
    assert "…and 5 more" in str(view)


def test_menus_and_forms_link_to_the_message_without_buttons() -> None:
    rec = record("b" * 20, options=[{"label": f"o{i}"} for i in range(12)])
    view = render_home([rec])
    assert not [b for b in view["blocks"] if b["type"] == "actions"]


def test_home_buttons_of_long_options_never_read_alike() -> None:
    """The Home tab's one-tap buttons shorten labels as the message does: two options that
    share their first 75 characters keep their distinguishing ends."""
    head = "Roll out the new payment service to production behind the feature flag and then "
    staff, everyone = (
        head + "enable it for internal staff only",
        head + "enable it for all customers",
    )
    rec = record(
        "0123456789abcdef",
        options=[{"label": staff}, {"label": everyone}],
    )
    view = render_home([rec])
    assert check_view(view) == []
    buttons = [
        e
        for b in view["blocks"]
        if b["type"] == "actions"
        for e in b["elements"]
        if e["type"] == "button"
    ]
    texts = [b["text"]["text"] for b in buttons]
    assert len(texts) == 2 and texts[0] != texts[1], texts
    assert texts[0].endswith("internal staff only") and texts[1].endswith("all customers")
    assert all(len(t) <= 75 for t in texts)
    assert [b["value"] for b in buttons] == [ids.option_value(0), ids.option_value(1)]
