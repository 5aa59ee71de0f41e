"""Stub agents shaped like the seam's tests' ``{id, session: {id, header: {delegationDepth}}}``."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class StubHeader:
    """The session header; the seam never reads ``delegation_depth``."""

    delegation_depth: int


@dataclass
class StubSession:
    """A session: its id equals its agent's id."""

    id: str
    header: StubHeader


@dataclass
class StubAgent:
    """A live agent stub; equal by value, as dataclasses are (the seam compares identity)."""

    id: str
    session: StubSession


def stub_agent(agent_id: str, delegation_depth: int = 0) -> StubAgent:
    """A stub agent whose session id equals its id."""
    return StubAgent(agent_id, StubSession(agent_id, StubHeader(delegation_depth)))
