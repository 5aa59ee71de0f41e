"""A tool approval's headline reads as a sentence and says what Allow once does before the
confirm (issue 39, item 6)."""

from __future__ import annotations

import pytest

from adapters.slack.model.record import ApprovalView, PendingRecord
from adapters.slack.render.approval import render_record
from tests.slack_harness import all_text

pytestmark = pytest.mark.timeout(30)


def test_the_headline_is_capitalised_and_wider_rights_are_explained_on_the_message() -> None:
    view = ApprovalView(tool_name="bash", headline="run the release script", command="./r.sh")
    record = PendingRecord(id="0123456789abcdef0123", questions=[], channel="C0Q", approval=view)
    text = all_text(render_record(record).blocks)
    assert "Run the release script" in text and "run the release script" not in text
    assert "*Allow once* runs it this once with wider sandbox rights" in text
