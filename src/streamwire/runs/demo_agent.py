"""``demo``: a scripted chat agent that needs no model (``streamwire serve --agent demo``).

It answers ``input.prompt`` with a deterministic reply (same prompt, same reply) of a few hundred
words, streamed as ``Chat`` events: ``message_start``, ``progress`` steps, ``reasoning``, the text
word by word in ``chunk``, ``sources``, ``usage`` and ``done``. ``input.pace`` is the seconds
between words (default 0.02). A prompt containing ``/fail`` raises halfway, ``/pause`` pauses
halfway (``POST /runs/{id}/resume`` continues it where it stopped; the resume input's ``prompt``,
if any, is acknowledged first) and ``/slow`` streams for about 20 seconds.

A prompt containing ``/tool`` answers in two steps: step 1 calls the tool ``get_weather`` with
``{"city": "Paris"}`` (``run.tool_call``: the input streamed in deltas, then the output), step 2
(``run.next_step()``: ``step_finish``, ``step_start`` on the wire) streams the answer's text.

A prompt containing ``/approve`` calls ``delete_file`` with ``{"path": "notes.txt"}``, a tool
that needs the user's approval: the run pauses with the request (``tool_approval_request``);
the answer resumes it (the chat route, when useChat sends ``addToolApprovalResponse``'s answer;
``POST /runs/{id}/resume`` with ``toolAnswers``): approved, the tool's output then a sentence
saying so; denied, ``tool_output_denied`` then a sentence saying the file was left alone.
Nothing is deleted: the tool only says it would have.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from typing import Any, Final, cast

import anyio

from ..chat import Chat, SourceLink
from ._approvals import ToolDenied
from ._context import Completed, Paused, RunContext

__all__ = ["APPROVED_ANSWER", "DEFAULT_PACE", "DENIED_ANSWER", "TOOL_ANSWER", "delete_file",
           "demo", "demo_reply", "get_weather"]

#: Seconds between two words of the reply.
DEFAULT_PACE: Final = 0.02
_SLOW_SECONDS: Final = 20.0
#: The text of the ``/tool`` reply's second step.
TOOL_ANSWER: Final = "It is 18 °C in Paris."
#: The text of the ``/approve`` reply's second step, approved and denied.
APPROVED_ANSWER: Final = "Done: notes.txt is deleted."
DENIED_ANSWER: Final = "All right, I left notes.txt alone."

_SENTENCES: Final = (
    "A run is an agent call whose reply is written, chunk by chunk, into a durable stream.",
    "Every chunk gets a sequence number, so a reader that loses its connection comes back with "
    "its cursor and misses nothing.",
    "The run record lives in the same backend as the stream, which is why any server process "
    "can answer for any run.",
    "A start carries an id the client chose, so a retry after a lost answer finds the run "
    "instead of starting a second one.",
    "Stopping a run cancels its agent, and the stream ends with the status interrupted.",
    "A paused run keeps its state until a resume continues it on the same stream.",
    "When the worker running an agent dies, its lease expires and the run ends with a "
    "recoverable failure instead of hanging.",
    "The dispatcher follows the stream, re-attaches after a drop and asks for the status when "
    "re-attaching cannot settle the outcome.",
    "Exactly one terminal frame ends every stream, whatever the exit of the agent.",
    "Heartbeats keep proxies from cutting a quiet stream, and a reader treats a bare close as a "
    "drop, never as an end.",
    "Typed events keep the writer and the reader honest about what a chunk may contain.",
    "Nothing here needs a model: the words are picked from a fixed list by a hash of the prompt.",
)
_SOURCES: Final[tuple[SourceLink, ...]] = (
    {"url": "https://html.spec.whatwg.org/multipage/server-sent-events.html",
     "title": "HTML Standard: Server-sent events"},
    {"url": "https://www.rfc-editor.org/rfc/rfc9110", "title": "RFC 9110: HTTP Semantics"},
    {"url": "https://github.com/streamwire/streamwire", "title": "streamwire"},
)


def demo_reply(prompt: str, words: int = 300) -> list[str]:
    """The reply's words for ``prompt`` (deterministic; each word but the last ends in a space)."""
    rng = random.Random(hashlib.sha256(prompt.encode()).digest())
    out: list[str] = []
    while len(out) < words:
        out.extend(rng.choice(_SENTENCES).split(" "))
    out = out[:words]
    return [w + " " for w in out[:-1]] + [out[-1]]


async def demo(run: RunContext[Chat]) -> Completed | Paused:
    """The scripted chat agent (see the module docstring)."""
    data = _object(run.input)
    prompt = str(data.get("prompt", ""))
    words = demo_reply(prompt)
    pace = float(data.get("pace", DEFAULT_PACE))
    if "/slow" in prompt:
        pace = _SLOW_SECONDS / len(words)
    if "/approve" in prompt:
        return await _approve_reply(run, prompt, pace)
    if "/tool" in prompt and not run.resumed:
        return await _tool_reply(run, prompt, pace)
    half = len(words) // 2
    start = 0
    if run.resumed:
        state = _object(run.state)
        start = int(state.get("word", half))
        resume = _object(run.resume_input)
        if resume.get("prompt"):
            await run.emit(Chat.progress({"chunk": f"resumed with: {resume['prompt']}"}))
    else:
        await _opening(run, prompt)
    for i in range(start, len(words)):
        if i == half and not run.resumed:
            if "/fail" in prompt:
                raise RuntimeError("the demo agent was asked to fail (/fail)")
            if "/pause" in prompt:
                return run.pause({"word": i})
        await run.emit(Chat.chunk({"chunk": words[i]}))
        await anyio.sleep(pace)
    await run.emit(Chat.sources(list(_SOURCES)))
    return await _finish(run, prompt, words, "".join(words))


async def get_weather(args: Any) -> Any:
    """The ``/tool`` reply's tool: a fixed forecast for ``args["city"]``."""
    return {"city": _object(args).get("city", "Paris"), "temperature": 18, "unit": "C"}


async def delete_file(args: Any) -> Any:
    """The ``/approve`` reply's tool: says it deleted ``args["path"]`` (it deletes nothing)."""
    return {"path": _object(args).get("path", "notes.txt"), "deleted": True}


async def _tool_reply(run: RunContext[Chat], prompt: str, pace: float) -> Completed:
    """``/tool``: the ``get_weather`` call (step 1), then the answer's text (step 2)."""
    await _model_start(run)
    await run.tool_call("get_weather", {"city": "Paris"}, execute=get_weather,
                        call_id=f"{run.run_id}-get_weather")
    return await _second_step(run, prompt, pace, TOOL_ANSWER)


async def _approve_reply(run: RunContext[Chat], prompt: str, pace: float) -> Completed:
    """``/approve``: ``delete_file`` waits for the user's approval (the run pauses), then the
    answer's text (step 2)."""
    if not run.resumed:
        await _model_start(run)
    result = await run.tool_call("delete_file", {"path": "notes.txt"}, execute=delete_file,
                                 call_id=f"{run.run_id}-delete_file", needs_approval=True)
    denied = isinstance(result, ToolDenied)
    return await _second_step(run, prompt, pace, DENIED_ANSWER if denied else APPROVED_ANSWER)


async def _model_start(run: RunContext[Chat]) -> None:
    await run.emit(Chat.message_start({
        "userMessageId": f"{run.run_id}-user", "assistantMessageId": f"{run.run_id}-assistant",
        "model": {"id": "demo", "displayName": "streamwire demo agent", "provider": "streamwire"}}))


async def _second_step(run: RunContext[Chat], prompt: str, pace: float, text: str) -> Completed:
    """A tool reply's step 2: ``text`` word by word, then the closing."""
    await anyio.sleep(pace)
    run.next_step()
    words = text.split(" ")
    for i, word in enumerate(words):
        await run.emit(Chat.chunk({"chunk": word if i == len(words) - 1 else word + " "}))
        await anyio.sleep(pace)
    return await _finish(run, prompt, words, text)


def _object(value: object) -> dict[str, Any]:
    return cast("dict[str, Any]", value) if isinstance(value, dict) else {}


async def _opening(run: RunContext[Chat], prompt: str) -> None:
    await _model_start(run)
    await run.emit(Chat.progress({"steps": [
        {"id": "think", "label": "Thinking", "status": "active"}]}))
    for piece in ("The user asked: ", repr(prompt[:80]), ". ", "I will answer from the script."):
        await run.emit(Chat.reasoning({"chunk": piece}))
    await run.emit(Chat.reasoning({"done": True}))
    await run.emit(Chat.progress({"steps": [
        {"id": "think", "label": "Thinking", "status": "complete"},
        {"id": "write", "label": "Writing", "status": "active"}]}))
    await run.emit(Chat.progress({"done": True}))


async def _finish(run: RunContext[Chat], prompt: str, words: Sequence[str], text: str) -> Completed:
    """A reply's closing: its usage, ``done``, and the outcome the run records."""
    usage = {"inputTokens": len(prompt.split()), "outputTokens": len(words),
             "totalTokens": len(prompt.split()) + len(words)}
    await run.emit(Chat.usage({"inputTokens": usage["inputTokens"],
                               "outputTokens": usage["outputTokens"],
                               "totalTokens": usage["totalTokens"]}))
    await run.emit(Chat.done({"done": True, "messageId": f"{run.run_id}-assistant",
                              "userMessageId": f"{run.run_id}-user", "reason": "complete"}))
    return Completed(output={"text": text}, usage=usage)
