"""home/tab.py's render_home: App Home's "Waiting for you" (pure rendering)."""

from __future__ import annotations

from typing import Any

from adapters.slack.home.tab import MAX_HOME_ENTRIES, message_link, render_home
from adapters.slack.model import ids
from adapters.slack.model.audience import ANYONE, Audience, Audiences
from adapters.slack.model.record import PendingRecord
from adapters.slack.sandbox.blockcheck import check_view
from bot.questions.models import AskUserQuestionItem


def record(rid: str, question: str = "Deploy?", **fields: Any) -> PendingRecord:
    options = fields.pop("options", [{"label": "Yes"}, {"label": "No"}])
    item = AskUserQuestionItem.model_validate({"id": "q", "question": question, "options": options})
    fields.setdefault("owner", "p")
    fields.setdefault("channel", "C0QUESTION")
    return PendingRecord(id=rid, questions=[item], **fields)


def may_answer(rec: PendingRecord, user: str, groups: tuple[str, ...] = ()) -> bool:
    """Whether ``rec``, asked in a public channel, is on ``user``'s Home tab list."""
    audience = Audience.of(rec)
    resolved = audience.resolved(ANYONE) if audience is not None else None
    assert resolved is not None
    return list(Audiences([resolved]).waiting_for(user, groups, 20)[0]) == [rec.id]


def test_who_may_answer() -> None:
    anyone = record("r" * 20)
    assert may_answer(anyone, "U1")
    only = record("s" * 20, allowed_users=["U1"], allowed_usergroups=["S1"])
    assert may_answer(only, "U1") and not may_answer(only, "U2")
    assert may_answer(only, "U2", groups=("S1",))


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


def test_home_offers_no_tap_for_options_it_would_shorten() -> None:
    """Two options that share their first 75 characters would need shortened buttons: the
    entry offers none (the message lists both labels in full before anyone chooses)."""
    head = "Roll out the new payment service to production behind the feature flag and then "
    staff, everyone = (
        head + "enable it for internal staff only",
        head + "enable it for all customers",
    )
    rec = record(
        "0123456789abcdef",
        options=[{"label": staff}, {"label": everyone}],
        message_ts="1700000000.000100",
    )
    view = render_home([rec])
    assert check_view(view) == []
    assert not [b for b in view["blocks"] if b["type"] == "actions"]
    assert "Open the question>" in str(view)


def _taps(view: dict[str, Any]) -> list[str]:
    return [
        e["text"]["text"] for b in view["blocks"] if b["type"] == "actions" for e in b["elements"]
    ]


def test_a_tap_answers_from_home_only_when_the_entry_shows_what_the_message_shows() -> None:
    # The message shows a detail, option descriptions and full labels before anyone chooses;
    # an entry that cannot show them leads to the message instead of answering in one tap.
    plain_question = record("p" * 20)
    assert _taps(render_home([plain_question])) == ["Yes", "No"]

    with_detail = record("d" * 20).model_copy(
        update={
            "questions": [
                AskUserQuestionItem.model_validate(
                    {
                        "id": "q",
                        "question": "Run the migration?",
                        "detail": "This DROPS the legacy table.",
                        "options": [{"label": "Run it"}, {"label": "Wait"}],
                    }
                )
            ]
        }
    )
    described = record(
        "e" * 20,
        options=[{"label": "Run it", "description": "drops the legacy table"}, {"label": "Wait"}],
    )
    long_labels = record(
        "f" * 20,
        options=[
            {"label": "Roll out to every customer in the EU region " + "x" * 40},
            {"label": "Roll out to every customer in the US region " + "x" * 40},
        ],
    )
    long_question = record("g" * 20, question="Context. " * 330 + "So: should I drop it?")
    for entry in (with_detail, described, long_labels, long_question):
        view = render_home([entry])
        assert check_view(view) == []
        assert _taps(view) == [], entry.id


def test_an_entry_of_several_questions_shows_the_first_and_how_many_more() -> None:
    rec = record("m" * 20, "First?")
    second = AskUserQuestionItem(id="q2", question="Second?")
    third = AskUserQuestionItem(id="q3", question="Third?")
    view = render_home([rec.model_copy(update={"questions": [*rec.questions, second, third]})])
    assert check_view(view) == []
    texts = str(view)
    assert "First?" in texts and " (+2 more)" in texts
    assert "Second?" not in texts and "Third?" not in texts
