"""ids.py: what travels in block_id / action_id / value / callback_id / private_metadata.

Round trips, Slack's length limits, and "not ours" for everything another app (or a
later format, or a tampered payload) could send: unpacking returns ``None``, never raises.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapters.slack.blockkit import (
    MAX_ACTION_ID,
    MAX_BLOCK_ID,
    MAX_EXTERNAL_ID,
    MAX_PRIVATE_METADATA,
)
from adapters.slack.model import ids
from adapters.slack.sandbox.blockcheck.table import MAX_CALLBACK_ID, MAX_OPTION_VALUE

RID = "0123456789abcdef0123"

request_ids = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=8, max_size=40)
questions = st.integers(min_value=0, max_value=99_999)
parts = st.builds(
    lambda letters, digits: letters + digits,
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=3),
    st.text(alphabet="0123456789", max_size=6),
)
kinds = st.sampled_from(["pick", "draft", "text", "submit", "dismiss"])


# --- round trips and limits ------------------------------------------------------------


@pytest.mark.slow
@given(request_ids, st.one_of(st.none(), questions), parts)
def test_block_id_round_trips_within_slack_limit(rid: str, question: int | None, part: str) -> None:
    packed = ids.block_id(rid, question, part)
    assert len(packed) <= MAX_BLOCK_ID
    assert ids.parse_block_id(packed) == ids.BlockRef(rid, question, part)


@pytest.mark.slow
@given(kinds, st.one_of(st.none(), st.integers(min_value=0, max_value=999)))
def test_action_id_round_trips_and_matches_the_listener_pattern(kind: str, n: int | None) -> None:
    packed = ids.action_id(kind, n)  # type: ignore[arg-type]
    assert len(packed) <= MAX_ACTION_ID
    assert ids.parse_action_id(packed) == kind
    assert ids.ACTION_PATTERN.search(packed) is not None


@given(st.integers(min_value=0, max_value=10_000))
def test_option_value_round_trips_within_slack_limit(index: int) -> None:
    value = ids.option_value(index)
    assert len(value) <= MAX_OPTION_VALUE
    assert ids.parse_index(value) == index


@pytest.mark.slow
@given(request_ids, questions)
def test_private_metadata_round_trips_within_slack_limit(rid: str, question: int) -> None:
    packed = ids.private_metadata(rid, question)
    assert len(packed) <= MAX_PRIVATE_METADATA
    assert ids.parse_private_metadata(packed) == ids.ModalRef(rid, question)


def test_callback_id_round_trips() -> None:
    packed = ids.callback_id("text")
    assert len(packed) <= MAX_CALLBACK_ID
    assert ids.parse_callback_id(packed) == "text"
    assert ids.CALLBACK_PATTERN.search(packed) is not None


def test_longest_ids_stay_far_below_the_limits() -> None:
    rid = "z" * 40
    assert len(ids.block_id(rid, 99_999, "abc999999")) <= MAX_BLOCK_ID
    assert len(ids.private_metadata(rid, 99_999)) <= MAX_PRIVATE_METADATA
    assert len(ids.action_id("dismiss", 999)) <= MAX_ACTION_ID


def test_ids_carry_the_version_prefix() -> None:
    assert ids.block_id(RID, 2, "c0") == f"aq1:{RID}:2:c0"
    assert ids.block_id(RID, None, "s3") == f"aq1:{RID}:-:s3"
    assert ids.action_id("pick", 4) == "aq1.pick.4"
    assert ids.action_id("submit") == "aq1.submit"
    assert ids.callback_id("text") == "aq1.text"
    assert ids.private_metadata(RID, 1) == f"aq1:{RID}:1"


# --- a modal's external_id: the response_url of the click that opened it ---------------

HOOK = "https://hooks.slack.com/actions/T0TEAM/1234567890123/abcDEF0123456789"


def test_external_id_carries_the_reply_url_back() -> None:
    packed = ids.external_id(HOOK)
    assert packed is not None and len(packed) <= MAX_EXTERNAL_ID
    assert re.fullmatch(r"aq1r\.[0-9a-f]{16}\.", packed[: -len(HOOK)])
    assert ids.parse_external_id(packed) == HOOK


def test_external_ids_are_unique_even_for_the_same_url() -> None:
    """Slack refuses a second view with an ``external_id`` already used in the team
    (``duplicate_external_id``): each modal gets its own, whatever it carries."""
    minted = {ids.external_id(HOOK) for _ in range(500)}
    assert len(minted) == 500 and None not in minted


def test_an_external_id_that_would_not_fit_is_left_out() -> None:
    fits = "https://hooks.slack.com/" + "x" * (MAX_EXTERNAL_ID - len("aq1r.0123456789abcdef.") - 24)
    packed = ids.external_id(fits)
    assert packed is not None and len(packed) == MAX_EXTERNAL_ID
    assert ids.parse_external_id(packed) == fits
    assert ids.external_id(fits + "x") is None
    assert ids.external_id(None) is None and ids.external_id("") is None


@pytest.mark.parametrize(
    "value",
    [
        f"aq1r.0123456789abcdef.{HOOK}".replace("aq1r", "aq2r"),
        f"aq1r.0123456789ABCDEF.{HOOK}",
        f"aq1r.0123456789abcde.{HOOK}",
        f"aq1r.0123456789abcdef{HOOK}",
        "aq1r.0123456789abcdef.",
        f"aq1r.0123456789abcdef.{HOOK}" + "x" * 255,
        "ext-1",
        "",
        None,
        7,
    ],
)
def test_foreign_external_ids_are_not_ours(value: object) -> None:
    assert ids.parse_external_id(value) is None


def test_private_metadata_keeps_the_three_field_form_every_release_parses() -> None:
    """``aq1:<request id>:<question>``: a release before this one refuses any other."""
    assert ids.private_metadata(RID, 1).split(":") == ["aq1", RID, "1"]


# --- request ids ---------------------------------------------------------------------


def test_new_request_ids_are_fresh_and_packable() -> None:
    minted = {ids.new_request_id() for _ in range(200)}
    assert len(minted) == 200
    for rid in minted:
        assert re.fullmatch(r"[a-z0-9]{8,40}", rid)
        assert ids.parse_block_id(ids.block_id(rid, 0, "c0")) is not None


def test_key_request_id_is_deterministic_and_packable() -> None:
    first = ids.key_request_id("deploy-42")
    assert first == ids.key_request_id("deploy-42")
    assert first != ids.key_request_id("deploy-43")
    assert first != ids.key_request_id("Deploy-42")
    assert re.fullmatch(r"[a-z0-9]{8,40}", first)
    assert ids.parse_private_metadata(ids.private_metadata(first, 0)) == ids.ModalRef(first, 0)


@given(st.text())
def test_key_request_id_accepts_any_key(key: str) -> None:
    rid = ids.key_request_id(key)
    assert ids.parse_block_id(ids.block_id(rid, None, "s0")) == ids.BlockRef(rid, None, "s0")


# --- packing refuses what unpacking would not accept ------------------------------------


@pytest.mark.parametrize(
    "rid",
    [
        "short",
        "UPPERCASE1234",
        "has:colon1",
        "has.dot123",
        "x" * 41,
        "",
        "ünïcode12",
        "abc\n12345",
        "abcdefgh\n",
    ],
)
def test_packing_refuses_a_malformed_request_id(rid: str) -> None:
    with pytest.raises(ValueError):
        ids.block_id(rid, 0, "c0")
    with pytest.raises(ValueError):
        ids.private_metadata(rid, 0)


@pytest.mark.parametrize("part", ["", "abcd1", "c1234567", "C1", "c:1", "1c", "c-1", "c1\n"])
def test_block_id_refuses_a_malformed_part(part: str) -> None:
    with pytest.raises(ValueError):
        ids.block_id(RID, 0, part)


@pytest.mark.parametrize("question", [-1, 100_000])
def test_packing_refuses_a_question_index_that_would_not_unpack(question: int) -> None:
    with pytest.raises(ValueError):
        ids.block_id(RID, question, "c0")
    with pytest.raises(ValueError):
        ids.private_metadata(RID, question)


@pytest.mark.parametrize("n", [-1, 1000])
def test_action_id_refuses_a_suffix_that_would_not_unpack(n: int) -> None:
    with pytest.raises(ValueError):
        ids.action_id("pick", n)


@pytest.mark.parametrize("index", [-1, 100_000])
def test_option_value_refuses_an_index_that_would_not_unpack(index: int) -> None:
    with pytest.raises(ValueError):
        ids.option_value(index)


def test_unknown_kinds_are_refused() -> None:
    with pytest.raises(ValueError):
        ids.action_id("approve")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        ids.callback_id("form")  # type: ignore[arg-type]


# --- foreign and malformed ids are "not ours" ------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        "XTkTR",  # a block_id Slack generates
        "request_timeoff",  # another app's block
        f"aq2:{RID}:0:c0",  # a later (or other) format
        f"aq:{RID}:0:c0",
        f"AQ1:{RID}:0:c0",
        f"aq1:{RID}:0",  # too few fields
        f"aq1:{RID}:0:c0:x",  # too many fields
        f"aq1:{RID}::c0",
        f"aq1:{RID}:x:c0",
        f"aq1:{RID}:-1:c0",
        f"aq1:{RID}:123456:c0",
        f"aq1:{RID}:0:",
        f"aq1:{RID}:0:C0",
        f"aq1:{RID.upper()}:0:c0",
        f"aq1:{RID}:0:c0\n",  # a trailing newline is not ours either
        f"aq1:{RID}\n:0:c0",
        f"aq1:{RID}:0\n:c0",
        f"aq1:{RID}:١:c0",  # a non-ASCII digit
        f"aq1:{RID}:0:c١",
        f" aq1:{RID}:0:c0",
        "aq1:" + "a" * 300 + ":0:c0",
        "",
        None,
        0,
        ["aq1", RID, "0", "c0"],
        {"block_id": f"aq1:{RID}:0:c0"},
    ],
)
def test_foreign_or_malformed_block_ids_are_not_ours(value: object) -> None:
    assert ids.parse_block_id(value) is None


@pytest.mark.parametrize(
    "value",
    [
        "a",  # another app's action
        "approve_button",
        "aq1.approve",
        "aq1.pick.",
        "aq1.pick.1x",
        "aq1.pick.1234",
        "aq1.pick.-1",
        "aq1.pick.١",
        "xaq1.pick",
        "aq1.pickx",
        "aq1_pick",
        "aq1.pick\n",
        "aq1.pick.1\n",
        "aq2.pick",
        " aq1.pick",
        "AQ1.PICK",
        "aq1.pick.1.2",
        None,
        1,
    ],
)
def test_foreign_or_malformed_action_ids_are_not_ours(value: object) -> None:
    assert ids.parse_action_id(value) is None
    if isinstance(value, str):
        assert ids.ACTION_PATTERN.search(value) is None  # bolt matches with search()


@pytest.mark.parametrize(
    "value", ["aq1.textx", "xaq1.text", "aq1.text\n", "aq1.pick", "view-id", "", None, 3]
)
def test_foreign_callback_ids_are_not_ours(value: object) -> None:
    assert ids.parse_callback_id(value) is None
    if isinstance(value, str):
        assert ids.CALLBACK_PATTERN.search(value) is None


@pytest.mark.parametrize(
    "value",
    [
        "This is for you!",
        '{"channel_id": "D01ACC2E8S3"}',
        f"aq2:{RID}:0",
        f"aq1:{RID}",
        f"aq1:{RID}:0:c0",
        f"aq1:{RID}:-",
        f"aq1:{RID}:x",
        f"aq1:{RID}:0\n",
        f"aq1:{RID}:١",
        "aq1:BAD:0",
        f"aq1:{RID}:0" + " " * 3000,
        "",
        None,
        7,
    ],
)
def test_foreign_private_metadata_is_not_ours(value: object) -> None:
    assert ids.parse_private_metadata(value) is None


@pytest.mark.parametrize(
    "value", ["", "-1", "1.5", "x", "1e3", " 1", "1 ", "1\n", "١", "123456", None, 3, 3.0]
)
def test_values_that_are_not_indices(value: object) -> None:
    assert ids.parse_index(value) is None


@given(st.text(max_size=300))
def test_parsing_arbitrary_text_never_raises(value: str) -> None:
    ids.parse_block_id(value)
    ids.parse_action_id(value)
    ids.parse_callback_id(value)
    ids.parse_private_metadata(value)
    ids.parse_external_id(value)
    ids.parse_index(value)


@pytest.mark.slow
@given(request_ids, st.sampled_from([":", "\n", "::", ":0:c0:"]))
def test_separator_injection_in_a_request_id_is_refused(rid: str, injected: str) -> None:
    with pytest.raises(ValueError):
        ids.block_id(rid + injected + "abcdefgh", 0, "c0")
    forged = f"aq1:{rid}{injected}abcdefgh:0:c0"
    parsed = ids.parse_block_id(forged)
    assert parsed is None
