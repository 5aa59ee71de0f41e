"""The 0.1.1-rc.2 host's side of the wire, for the stand-in and the protocol tests.

The frames a host sends (``question/requested``, ``approval/requested`` and their
``*/resolved``) and how it reads a ``client-response`` (its schema), moved here from the
client: the bot itself never builds a host frame nor parses its own responses.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import Discriminator, Tag, ValidationError, model_validator

from adapters.dsh.protocol import (
    APPROVAL_REQUESTED,
    APPROVAL_RESOLVED,
    QUESTION_REQUESTED,
    QUESTION_RESOLVED,
    ApprovalOutcome,
    Outcome,
    ReceiptReason,
    ResolvedOutcome,
)
from adapters.dsh.wire import Lenient as _Lenient
from adapters.dsh.wire import describe_validation_error
from bot.questions.models import AskUserQuestionAnswer, AskUserQuestionItem

Lenient = _Lenient


def question_requested_frame(
    rpc_id: str, session_id: str, questions: Sequence[AskUserQuestionItem]
) -> dict[str, Any]:
    """The ``question/requested`` envelope; questions go verbatim (only the keys set)."""
    return {
        "type": "server-request",
        "rpcId": rpc_id,
        "method": QUESTION_REQUESTED,
        "payload": {
            "type": QUESTION_REQUESTED,
            "sessionId": session_id,
            "questions": [question.to_wire() for question in questions],
        },
    }


def question_resolved_frame(
    rpc_id: str, session_id: str, question_rpc_id: str, outcome: Outcome
) -> dict[str, Any]:
    """The ``question/resolved`` envelope: a fresh ``rpc_id`` pointing at ``question_rpc_id``."""
    return {
        "type": "server-request",
        "rpcId": rpc_id,
        "method": QUESTION_RESOLVED,
        "payload": {
            "type": QUESTION_RESOLVED,
            "sessionId": session_id,
            "questionRpcId": question_rpc_id,
            "outcome": outcome,
        },
    }


class ResponseError(_Lenient):
    """The error of an ok:false response; ``code == "cancelled"`` is a user dismissal."""

    code: str
    message: str
    details: dict[str, Any] | None = None


class OkResult(_Lenient):
    """``{"ok": true, "value": …}``; for a question the value is a ``QuestionResponse``."""

    ok: Literal[True]
    value: Any


class ErrorResult(_Lenient):
    """``{"ok": false, "error": {code, message, details}}``."""

    ok: Literal[False]
    error: ResponseError


def _result_tag(value: Any) -> str | None:
    ok = value.get("ok") if isinstance(value, dict) else getattr(value, "ok", None)
    return "ok" if ok is True else "error" if ok is False else None


class ClientResponse(_Lenient):
    """The body of ``POST /api/respond``, as a host reads it."""

    type: Literal["client-response"]
    rpc_id: str
    result: Annotated[
        Annotated[OkResult, Tag("ok")] | Annotated[ErrorResult, Tag("error")],
        Discriminator(
            _result_tag,
            custom_error_type="invalid_result",
            custom_error_message="result.ok must be true or false",
        ),
    ]


class QuestionResponse(_Lenient):
    """The value of an ok response to a question: ``{sessionId, answer: {answers}}``."""

    session_id: str
    answer: AskUserQuestionAnswer

    @model_validator(mode="after")
    def _custom_is_optional_not_nullable(self) -> QuestionResponse:
        for index, item in enumerate(self.answer.answers):
            if "custom" in item.model_fields_set and item.custom is None:
                raise ValueError(f"answers[{index}].custom is null; leave the key out instead")
        return self


def parse_client_response(body: Any) -> ClientResponse:
    """A ``ClientResponse`` from decoded JSON; ``ValueError`` says what is wrong."""
    try:
        return ClientResponse.model_validate(body)
    except ValidationError as exc:
        raise ValueError(f"bad client-response: {describe_validation_error(exc)}") from None


class ResponseRejectedError(Exception):
    """The host refused a response: ``question response rejected: <reason>`` (§6.2)."""

    def __init__(self, reason: ReceiptReason | None, *, cancellation: bool = False) -> None:
        what = "cancellation" if cancellation else "response"
        super().__init__(f"question {what} rejected: {reason}")
        self.reason = reason
        self.cancellation = cancellation


class ApprovalResponse(Lenient):
    """The value of an ok response to an approval (extra keys are stripped, as the host does)."""

    session_id: str
    approval_id: str
    outcome: ApprovalOutcome


def approval_requested_frame(
    rpc_id: str,
    session_id: str,
    approval_id: str,
    tool_name: str,
    *,
    call_id: str | None = None,
    reason: str | None = None,
) -> dict[str, Any]:
    """The ``approval/requested`` envelope (``callId``/``reason`` only when given)."""
    payload: dict[str, Any] = {
        "type": APPROVAL_REQUESTED,
        "sessionId": session_id,
        "approvalId": approval_id,
        "toolName": tool_name,
    }
    if call_id is not None:
        payload["callId"] = call_id
    if reason is not None:
        payload["reason"] = reason
    return {
        "type": "server-request",
        "rpcId": rpc_id,
        "method": APPROVAL_REQUESTED,
        "payload": payload,
    }


def approval_resolved_frame(
    rpc_id: str, session_id: str, approval_id: str, outcome: ResolvedOutcome
) -> dict[str, Any]:
    """The ``approval/resolved`` envelope, pushed with a fresh ``rpc_id``."""
    return {
        "type": "server-request",
        "rpcId": rpc_id,
        "method": APPROVAL_RESOLVED,
        "payload": {
            "type": APPROVAL_RESOLVED,
            "sessionId": session_id,
            "approvalId": approval_id,
            "outcome": outcome,
        },
    }


def raise_if_rejected(receipt: Any, *, cancellation: bool = False) -> None:
    """Raise ``ResponseRejectedError`` unless the host accepted the response."""
    if not receipt.accepted:
        raise ResponseRejectedError(receipt.reason, cancellation=cancellation)
