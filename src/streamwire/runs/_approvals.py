"""Tool calls that wait for a person (sans-I/O): approvals and client-side tools as pause/resume.

A tool call that needs the user's approval, or whose result the client computes (the AI SDK's
``addToolApprovalResponse`` and ``addToolOutput``), pauses its run: the call's events are on the
stream, the record is ``paused`` with the calls it waits for (``pendingTools`` in ``/status``),
and the reply ends. The answer resumes the same run (``POST /runs/{id}/resume``, or the chat
route when the client sends its answers): its input carries ``toolAnswers``::

    {"toolAnswers": [{"toolCallId": "call_1", "approvalId": "approval_9", "approved": true},
                     {"toolCallId": "call_2", "output": {"temperature": 18}}]}

Each answer must name a call the run waits for, and an approval its ``approvalId``: an answer
is checked against what the run stored when it paused, never against what a client says the
call was (its name and input come from the record). A call the answer leaves out stays pending.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal, TypeAlias, cast, final

import msgspec

from ..errors import ToolAnswerError

__all__ = ["MAX_PENDING_TOOLS", "PauseForTools", "PendingKind", "ToolAnswer", "ToolDenied",
           "pending_entry", "read_answers", "same_input"]

#: The most tool calls one pause may wait for.
MAX_PENDING_TOOLS: Final = 64

#: What a pending call waits for: the user's ``approval`` or the client's ``output``.
PendingKind: TypeAlias = Literal["approval", "output"]

_encode: Final = msgspec.json.Encoder(order="sorted").encode


@final
class ToolAnswer(msgspec.Struct, frozen=True):
    """The answer to a pending tool call: ``approved`` (and ``reason``) for an approval;
    ``output`` or ``error_text`` for a client-side tool."""

    tool_call_id: str
    approved: bool | None = None
    reason: str | None = None
    output: Any = None
    error_text: str | None = None


@final
class ToolDenied(msgspec.Struct, frozen=True):
    """What ``tool_call`` returns when the user denied the call (the tool did not run); an
    agent that talks to a model passes it on as the call's result, e.g. ``"denied: " + reason``."""

    reason: str | None = None


class PauseForTools(BaseException):
    """Raised by ``tool_call`` to pause its run until the pending calls are answered; the
    service turns it into ``Paused(state)``. A ``BaseException``, so that an agent's
    ``except Exception`` does not swallow it."""

    def __init__(self, state: Any = None) -> None:
        super().__init__("the run pauses for its pending tool calls")
        self.state = state


def pending_entry(kind: PendingKind, call_id: str, name: str, input: Any,
                  approval_id: str | None) -> dict[str, Any]:
    """The record's note of one pending call (``pendingTools`` in ``/status``)."""
    entry: dict[str, Any] = {"kind": kind, "toolCallId": call_id, "toolName": name,
                             "input": input}
    if approval_id is not None:
        entry["approvalId"] = approval_id
    return entry


def same_input(a: Any, b: Any) -> bool:
    """Whether two JSON values are equal as JSON (key order aside)."""
    try:
        return _encode(a) == _encode(b)
    except (TypeError, msgspec.EncodeError):
        return False


def read_answers(resume_input: Any, pending: Sequence[Mapping[str, Any]] | None
                 ) -> dict[str, ToolAnswer]:
    """The answers in ``resume_input["toolAnswers"]`` to the ``pending`` calls, by call id.

    Raises:
        ToolAnswerError: an answer names no pending call, an approval's ``approvalId`` or
            ``approved`` is missing or wrong, a client tool's answer has neither ``output`` nor
            ``errorText``; the message says which.
    """
    raw: object = cast("dict[str, Any]", resume_input).get("toolAnswers") \
        if isinstance(resume_input, dict) else None
    if raw is None:
        return {}
    if not isinstance(raw, list):
        raise ToolAnswerError("toolAnswers must be a list of {toolCallId, ...} objects")
    waiting = {str(p.get("toolCallId")): p for p in pending or ()}
    answers: dict[str, ToolAnswer] = {}
    for item in cast("list[object]", raw):
        if not isinstance(item, dict):
            raise ToolAnswerError("each of toolAnswers is an object with a toolCallId")
        answer = cast("dict[str, Any]", item)
        call_id = answer.get("toolCallId")
        entry = waiting.get(call_id) if isinstance(call_id, str) else None
        if entry is None:
            raise ToolAnswerError(f"tool call {call_id!r} is not one this run waits for (its "
                             f"pendingTools: {', '.join(sorted(waiting)) or 'none'})")
        answers[str(call_id)] = _answer(entry, answer)
    return answers


def _answer(entry: Mapping[str, Any], answer: dict[str, Any]) -> ToolAnswer:
    call_id = str(entry["toolCallId"])
    if entry.get("kind") == "approval":
        if answer.get("approvalId") != entry.get("approvalId"):
            raise ToolAnswerError(f"the answer to tool call {call_id!r} names approval "
                             f"{answer.get('approvalId')!r}, not the one asked for")
        approved, reason = answer.get("approved"), answer.get("reason")
        if not isinstance(approved, bool):
            raise ToolAnswerError(f"the answer to tool call {call_id!r} needs approved: true or false")
        return ToolAnswer(call_id, approved=approved,
                          reason=reason if isinstance(reason, str) else None)
    if "errorText" in answer:
        return ToolAnswer(call_id, error_text=str(answer["errorText"]))
    if "output" not in answer:
        raise ToolAnswerError(f"the answer to client tool call {call_id!r} needs output or errorText")
    return ToolAnswer(call_id, output=answer["output"])
