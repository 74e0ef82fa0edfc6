"""How an agent's call settles its run (sans-I/O): whatever it raised or returned becomes one
status and the fields of one terminal, checked before any state moves.

Agents are plug-ins, not trusted code (Celery and Temporal workers: whatever a task raises or
returns, the worker survives and records one outcome). So:

* any exception, of any class, is ``failed`` ``AGENT_ERROR`` with no internal text (its type and
  text only with ``expose_errors``); an ``AgentError`` carries the message, code and detail it
  was raised with, when those are JSON;
* an agent that emitted the chat contract's ``error`` event (``Chat.error``) and returned failed
  its reply: the run is ``failed`` ``AGENT_ERROR`` with the event's ``message`` as its error
  (``reply_error``), so ``/status`` and the stream's terminal say what the reply said (TRD D-4);
* the value returned must be a valid outcome: output and pause state JSON (msgspec's rules, the
  ones the contract encodes payloads with, at most ``MAX_OUTCOME_DEPTH`` deep), usage a mapping
  of numbers; any other is ``failed`` ``INVALID_OUTCOME``, naming the field but not the value.

The fields come back as JSON gives them back (a copy): nothing the agent still holds can change
what is stored, and every store encodes them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from typing import Any, Final, NamedTuple, cast

import msgspec

from ._context import AgentError, Completed, Paused, RunContext
from ._record import RunStatus

__all__ = ["AGENT_ERROR", "INVALID_OUTCOME", "MAX_OUTCOME_DEPTH", "Settlement",
           "agent_error_fields", "reply_error", "settlement"]

#: ``errorDetail.code`` of a run whose agent raised (anything but a well-formed ``AgentError``).
AGENT_ERROR: Final = "AGENT_ERROR"
#: ``errorDetail.code`` of a run whose agent returned something that is no valid outcome.
INVALID_OUTCOME: Final = "INVALID_OUTCOME"
#: How deep an output or pause state may nest: the limit the server puts on request bodies, so
#: that a state a client sends back (or an output it forwards) is accepted again.
MAX_OUTCOME_DEPTH: Final = 256
#: The most of an exception's text ``expose_errors`` puts on the wire.
_MAX_EXPOSED_TEXT: Final = 2000

_ENCODER: Final = msgspec.json.Encoder()

Fields = dict[str, Any]


class Settlement(NamedTuple):
    """How a run settles: its status, its terminal's fields, and (when the agent returned an
    invalid outcome) what is wrong with it, for the server's log: internal text allowed there."""

    status: RunStatus
    fields: Fields
    problem: str | None = None


class _Invalid(Exception):
    """The outcome's ``field`` is not valid: ``reason`` says how (no value in it)."""

    def __init__(self, field: str, reason: str, cause: str = "") -> None:
        super().__init__(reason)
        self.field = field
        self.reason = reason
        self.cause = cause


def settlement(result: Any, error: BaseException | None, *, expose_errors: bool) -> Settlement:
    """How a run settles whose agent raised ``error`` (not None) or returned ``result``.
    Never raises."""
    if error is not None:
        return Settlement("failed", agent_error_fields(error, expose_errors=expose_errors))
    try:
        return _checked(result)
    except _Invalid as invalid:
        text = f"the agent returned an invalid outcome: {invalid.reason}"
        cause = f" ({invalid.cause[:_MAX_EXPOSED_TEXT]})" if invalid.cause else ""
        return Settlement("failed", {
            "error": text + cause if expose_errors else text, "recoverable": False,
            "error_detail": {"code": INVALID_OUTCOME, "field": invalid.field}}, text + cause)


def reply_error(ctx: RunContext[Any]) -> AgentError | None:
    """The failure of an agent that emitted ``Chat.error`` (``{"error", "message"}``) and
    returned: ``AGENT_ERROR`` with the event's ``message`` (its ``error`` in the detail); None
    when it emitted none."""
    data: object = ctx._reply_error  # pyright: ignore[reportPrivateUsage] - the service's
    if not isinstance(data, Mapping):
        return None
    payload = cast("Mapping[str, object]", data)
    message, error = payload.get("message"), payload.get("error")
    text = message if isinstance(message, str) and message else "the reply failed"
    return AgentError(text, code=AGENT_ERROR,
                      detail={"error": error} if isinstance(error, str) else None)


def agent_error_fields(error: BaseException, *, expose_errors: bool) -> Fields:
    """The terminal fields of an agent that raised ``error``: an ``AgentError``'s own when they
    are JSON, else ``AGENT_ERROR`` (with the type and text only when ``expose_errors``)."""
    if isinstance(error, AgentError):
        with contextlib.suppress(Exception):  # fields that are not JSON: as any other error
            return _agent_error(error)
    detail: dict[str, Any] = {"code": AGENT_ERROR}
    text = "the agent failed"
    if expose_errors:
        name = type(error).__name__
        detail["type"] = name
        text = f"{name}: {_text_of(error)}"[:_MAX_EXPOSED_TEXT]
    return {"error": text, "error_detail": detail, "recoverable": False}


def _agent_error(error: AgentError) -> Fields:
    message: object = error.message
    code: object = error.code
    detail = cast(object, error.detail)  # an agent may have set anything
    if type(message) is not str or type(code) is not str or not code:
        raise TypeError("an AgentError's message and code are str")
    if not isinstance(detail, Mapping):
        raise TypeError("an AgentError's detail is a mapping")
    merged = _json({**cast("Mapping[str, Any]", detail), "code": code}, "detail")
    return {"error": message, "recoverable": bool(error.recoverable), "error_detail": merged}


def _text_of(error: BaseException) -> str:
    try:
        return str(error)
    except Exception:  # an exception whose __str__ raises
        return "(its text could not be read)"


def _checked(result: Any) -> Settlement:
    try:
        if isinstance(result, Paused):
            fields: Fields = {"state": _json(result.state, "state")}
            if result.tools:  # the tool calls it waits for (``_approvals``)
                fields["pending_tools"] = _json(result.tools, "state")
            return Settlement("paused", fields)
        done = result if isinstance(result, Completed) else Completed(result)
        return Settlement("completed", {"output": _json(done.output, "output"),
                                        "usage": _usage(done.usage)})
    except _Invalid:
        raise
    except Exception as exc:  # the returned object fought being looked at
        raise _Invalid("output", "the value could not be read", repr(exc)) from None


def _json(value: Any, field: str) -> Any:
    """``value`` through JSON and back; ``_Invalid`` when it is not JSON or nests too deep."""
    if value is None:
        return None
    try:
        encoded = _ENCODER.encode(value)
        copied = msgspec.json.decode(encoded)
    except Exception as exc:  # TypeError, EncodeError, RecursionError (a cycle), ...
        raise _Invalid(field, f"its {field} is not JSON", str(exc)) from None
    if encoded.count(b"[") + encoded.count(b"{") > MAX_OUTCOME_DEPTH and _too_deep(copied):
        raise _Invalid(field, f"its {field} nests deeper than {MAX_OUTCOME_DEPTH} levels")
    return copied


def _too_deep(value: Any) -> bool:
    """Whether JSON ``value`` nests arrays and objects deeper than ``MAX_OUTCOME_DEPTH``
    (a loop over a stack: a deep value must not exhaust the interpreter's)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children: Iterable[Any]
        if isinstance(item, dict):
            children = cast("dict[str, Any]", item).values()
        elif isinstance(item, list):
            children = cast("list[object]", item)
        else:
            continue
        if depth > MAX_OUTCOME_DEPTH:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def _usage(usage: Any) -> dict[str, Any] | None:
    """Usage as stored: a mapping of names to numbers (``{"inputTokens": 12}``), or None."""
    if usage is None:
        return None
    if not isinstance(usage, Mapping):
        raise _Invalid("usage", "its usage is not a mapping of numbers",
                       f"a {type(usage).__name__}")
    copied = _json(dict(cast("Mapping[str, Any]", usage)), "usage")
    for name, number in cast("dict[str, Any]", copied).items():
        if type(number) not in (int, float):  # not bool, not null (a NaN encodes as null)
            raise _Invalid("usage", "its usage is not a mapping of numbers",
                           f"{name!r} is not a number")
    return cast("dict[str, Any]", copied)
