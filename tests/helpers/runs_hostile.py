"""Hostile agents for the containment tests (importable as ``helpers.runs_hostile:NAME`` by
``streamwire serve``): each emits one chunk, then misbehaves in one way. Every text they raise
carries ``SECRET``, which must never reach the wire (``expose_errors`` off).

``HOSTILE`` maps each agent's name to the ``errorDetail.code`` its run must fail with."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import anyio

from streamwire.chat import Chat
from streamwire.contract import Contract, Event
from streamwire.runs import AgentError, Completed, Paused, RunContext

SECRET = "secret-internal-text-/etc/passwd"


class HostileBaseError(BaseException):
    """A ``BaseException`` that is no ``Exception``: ``except Exception`` lets it through."""


class Other(Contract):
    """A contract that is not the agents' (``Chat``)."""

    note: Event[str] = Event()


async def _before(run: RunContext[Chat]) -> None:
    await run.emit(Chat.chunk({"chunk": "before "}))


async def raises_exception(run: RunContext[Chat]) -> None:
    await _before(run)
    raise RuntimeError(SECRET)


async def raises_keyboard_interrupt(run: RunContext[Chat]) -> None:
    await _before(run)
    raise KeyboardInterrupt(SECRET)


async def raises_base_exception(run: RunContext[Chat]) -> None:
    await _before(run)
    raise HostileBaseError(SECRET)


async def raises_cancelled(run: RunContext[Chat]) -> None:
    """A ``CancelledError`` raised by the agent itself: nobody cancelled the run."""
    await _before(run)
    raise asyncio.CancelledError(SECRET)


async def calls_sys_exit(run: RunContext[Chat]) -> None:
    await _before(run)
    sys.exit(SECRET)


async def raises_generator_exit(run: RunContext[Chat]) -> None:
    await _before(run)
    raise GeneratorExit(SECRET)


async def returns_object(run: RunContext[Chat]) -> object:
    await _before(run)
    return object()


async def completes_with_object(run: RunContext[Chat]) -> Completed:
    await _before(run)
    return Completed(output={"ok": [1, object()]})


async def pauses_with_object(run: RunContext[Chat]) -> Paused:
    await _before(run)
    return run.pause({"resume_with": object()})


async def usage_not_a_mapping(run: RunContext[Chat]) -> Completed:
    await _before(run)
    bad: Any = ["inputTokens", 3]
    return Completed(output="text", usage=bad)


async def usage_not_numbers(run: RunContext[Chat]) -> Completed:
    await _before(run)
    return Completed(output="text", usage={"inputTokens": "three", "outputTokens": 2})


async def emits_invalid_payload(run: RunContext[Chat]) -> None:
    """``chunk`` takes ``{"chunk": str}``: a reader would drop this payload as a parse error."""
    await _before(run)
    await run.emit(Chat.chunk({"text": SECRET}))  # type: ignore[typeddict-unknown-key]


async def emits_foreign_event(run: RunContext[Chat]) -> None:
    """An event of another contract than the one its annotation names."""
    await _before(run)
    foreign: Any = Other.note(SECRET)
    await run.emit(foreign)


async def emits_a_batch_with_one_bad(run: RunContext[Chat]) -> None:
    """``emit_many`` with one bad payload among good ones: none of them is appended."""
    await _before(run)
    await run.emit_many([Chat.chunk({"chunk": "good "}),
                         Chat.chunk({"chunk": 3}),  # type: ignore[typeddict-item]
                         Chat.chunk({"chunk": "good "})])


async def returns_too_deep(run: RunContext[Chat]) -> Completed:
    await _before(run)
    deep: list[Any] = []
    for _ in range(300):
        deep = [deep]
    return Completed(output=deep)


async def raises_agent_error_not_json(run: RunContext[Chat]) -> None:
    """An ``AgentError`` whose detail is not JSON: reported as any other exception."""
    await _before(run)
    raise AgentError(SECRET, code="MINE", detail={"what": object()})


#: A finished run's context, kept by ``stashes`` for ``emits_after_end``.
STASH: dict[str, RunContext[Chat]] = {}


async def stashes(run: RunContext[Chat]) -> Completed:
    """Keeps its context past its end (as a leaked background task would), then completes."""
    await _before(run)
    STASH["ctx"] = run
    return Completed(output="stashed")


async def emits_after_end(run: RunContext[Chat]) -> None:
    """Emits on the context of ``stashes``' run, which has ended."""
    await _before(run)
    await STASH["ctx"].emit(Chat.chunk({"chunk": "late "}))


#: Each hostile agent and the ``errorDetail`` its run fails with.
HOSTILE: dict[str, dict[str, str]] = {
    "raises_exception": {"code": "AGENT_ERROR"},
    "raises_keyboard_interrupt": {"code": "AGENT_ERROR"},
    "raises_base_exception": {"code": "AGENT_ERROR"},
    "raises_cancelled": {"code": "AGENT_ERROR"},
    "calls_sys_exit": {"code": "AGENT_ERROR"},
    "raises_generator_exit": {"code": "AGENT_ERROR"},
    "returns_object": {"code": "INVALID_OUTCOME", "field": "output"},
    "completes_with_object": {"code": "INVALID_OUTCOME", "field": "output"},
    "pauses_with_object": {"code": "INVALID_OUTCOME", "field": "state"},
    "usage_not_a_mapping": {"code": "INVALID_OUTCOME", "field": "usage"},
    "usage_not_numbers": {"code": "INVALID_OUTCOME", "field": "usage"},
    "emits_invalid_payload": {"code": "AGENT_ERROR"},
    "emits_after_end": {"code": "AGENT_ERROR"},
    "emits_foreign_event": {"code": "AGENT_ERROR"},
    "emits_a_batch_with_one_bad": {"code": "AGENT_ERROR"},
    "returns_too_deep": {"code": "INVALID_OUTCOME", "field": "output"},
    "raises_agent_error_not_json": {"code": "AGENT_ERROR"},
}

AGENTS = [raises_exception, raises_keyboard_interrupt, raises_base_exception, raises_cancelled,
          calls_sys_exit, raises_generator_exit, returns_object, completes_with_object,
          pauses_with_object, usage_not_a_mapping, usage_not_numbers, emits_invalid_payload,
          stashes, emits_after_end, emits_foreign_event, emits_a_batch_with_one_bad,
          returns_too_deep, raises_agent_error_not_json]


async def raises_when_stopped(run: RunContext[Chat]) -> None:
    """Waits to be stopped; when cancelled, raises ``CancelledError`` of its own
    (``input.raise == "cancelled"``) or a ``RuntimeError`` instead of the cancellation."""
    await _before(run)
    try:
        await anyio.sleep_forever()
    except anyio.get_cancelled_exc_class():
        if run.input.get("raise") == "cancelled":
            raise asyncio.CancelledError(SECRET) from None
        raise RuntimeError(SECRET) from None
