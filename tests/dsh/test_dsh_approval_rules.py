"""An approval Slack cannot show is rejected in the host, never left waiting (issue 41)."""

from __future__ import annotations

import asyncio

import pytest

from adapters.slack.render.blocks import parts as render_parts
from tests.dsh import test_dsh_client as _rig_module
from tests.dsh.test_dsh_approvals import BASH, decided
from tests.dsh.test_dsh_client import TIMEOUT, Rig, eventually
from tests.dsh_mux_host import new_session_id

make_rig = _rig_module.make_rig
rig = _rig_module.rig
pytestmark = pytest.mark.timeout(60)


async def test_an_approval_slack_cannot_show_is_rejected_in_the_host(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Slack's limits refuse the message (the renderer's own referee says so).
    monkeypatch.setattr(render_parts, "check_message", lambda *_: ["blocks: too many"])
    async with asyncio.timeout(TIMEOUT):
        sid = new_session_id()
        rpc_id, _, outcome = rig.host.request_approval(sid, "bash", BASH)
        assert await asyncio.wait_for(outcome, 10) == "rejected"
        assert rig.host.responses == [decided(rpc_id, "rejected")]
        notices = await eventually(
            lambda: [
                m.text or ""
                for m in rig.slack.workspace.history(rig.channel)
                if not m.blocks and "SLACK_LIMIT" in (m.text or "")
            ],
            "a notice in the channel",
        )
        assert "rejected it in the harness" in notices[0]
        await eventually(lambda: rig.client.in_flight == 0, "the ask to finish")
