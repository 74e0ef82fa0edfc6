"""Provider relays: what ``streamwire.providers.*.relay`` adds per provider event to reading the
SDK's stream alone (target: at most 1.3x).

A replay server in its own process (``tests/helpers/provider_replay.py``) serves one recorded
stream per API, each ``N_TEXT`` text deltas and a tool call whose arguments come in
``N_ARGS`` fragments, in the provider's wire format. Candidates, taking turns in every round:

* **SDK alone**: ``async for event in stream: pass`` over the official SDK's stream (HTTP, SSE
  decoding, JSON, the SDK's models);
* **relay**: ``relay(run, stream)`` into a ``RunContext[Chat]`` over a ``MemoryLog``: the same,
  plus every event mapped to its chat event, checked as a reader would, encoded and appended to
  the run's stream.

The end-to-end ratio moves with whatever else the machine runs (the server, the SDK and the
relay share its cores), so the relay's own cost is measured apart too: ``relay`` over the SDK's
events already read (no network, no SDK parsing), and ``(SDK + own) / SDK`` is the ratio that
cost makes.

The figures are per provider event (the stream's time over its events), medians of rounds.
"""

from __future__ import annotations

import asyncio
import gc
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, Final

from bench._harness import machine_line, table

N_TEXT: Final = 1000
N_ARGS: Final = 40
REPLAY: Final = Path(__file__).resolve().parent.parent / "tests" / "helpers" / "provider_replay.py"
PROMPT: Final = [{"role": "user", "content": "hi"}]


def _sse(events: list[tuple[str | None, Any]]) -> str:
    out = []
    for name, data in events:
        text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
        out.append((f"event: {name}\n" if name else "") + f"data: {text}\n\n")
    return "".join(out)


def _words(n: int) -> list[str]:
    return [f"word{i % 97} " for i in range(n)]


def _args(n: int) -> list[str]:
    text = json.dumps({"query": "trains from Lisbon to Porto " * 4, "limit": 10})
    size = -(-len(text) // n)
    return [text[i:i + size] for i in range(0, len(text), size)]


def chat_stream() -> str:
    base = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m"}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> tuple[None, Any]:
        return None, {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    events = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({"content": w}) for w in _words(N_TEXT)]
    events.append(chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                         "function": {"name": "search", "arguments": ""}}]}))
    events += [chunk({"tool_calls": [{"index": 0, "function": {"arguments": a}}]})
               for a in _args(N_ARGS)]
    events.append(chunk({}, "tool_calls"))
    events.append((None, {**base, "choices": [], "usage": {
        "prompt_tokens": 5, "completion_tokens": N_TEXT, "total_tokens": N_TEXT + 5}}))
    return _sse([*events, (None, "[DONE]")])


def responses_stream() -> str:
    seq = iter(range(10**6))

    def ev(name: str, **data: Any) -> tuple[str, Any]:
        return name, {"type": name, "sequence_number": next(seq), **data}

    response = {"id": "r", "object": "response", "created_at": 1, "model": "m", "output": [],
                "status": "completed", "parallel_tool_calls": True, "tool_choice": "auto",
                "tools": [], "usage": {"input_tokens": 5, "output_tokens": N_TEXT,
                                       "total_tokens": N_TEXT + 5,
                                       "input_tokens_details": {"cached_tokens": 0},
                                       "output_tokens_details": {"reasoning_tokens": 0}}}
    call = {"id": "fc_1", "type": "function_call", "call_id": "call_1", "name": "search",
            "arguments": "", "status": "in_progress"}
    events = [ev("response.created", response={**response, "status": "in_progress"})]
    events += [ev("response.output_text.delta", item_id="msg_1", output_index=0, content_index=0,
                  delta=w, logprobs=[]) for w in _words(N_TEXT)]
    events.append(ev("response.output_item.added", output_index=1, item=call))
    events += [ev("response.function_call_arguments.delta", item_id="fc_1", output_index=1,
                  delta=a) for a in _args(N_ARGS)]
    events.append(ev("response.function_call_arguments.done", item_id="fc_1", output_index=1,
                     arguments="".join(_args(N_ARGS))))
    events.append(ev("response.completed", response=response))
    return _sse(events)


def anthropic_stream() -> str:
    def delta(index: int, body: dict[str, Any]) -> tuple[str, Any]:
        return "content_block_delta", {"type": "content_block_delta", "index": index,
                                       "delta": body}

    events: list[tuple[str | None, Any]] = [("message_start", {"type": "message_start", "message": {
        "id": "m", "type": "message", "role": "assistant", "content": [], "model": "m",
        "stop_reason": None, "usage": {"input_tokens": 5, "output_tokens": 1}}})]
    events.append(("content_block_start", {"type": "content_block_start", "index": 0,
                                           "content_block": {"type": "text", "text": ""}}))
    events += [delta(0, {"type": "text_delta", "text": w}) for w in _words(N_TEXT)]
    events.append(("content_block_stop", {"type": "content_block_stop", "index": 0}))
    events.append(("content_block_start", {"type": "content_block_start", "index": 1,
                                           "content_block": {"type": "tool_use", "id": "toolu_1",
                                                             "name": "search", "input": {}}}))
    events += [delta(1, {"type": "input_json_delta", "partial_json": a}) for a in _args(N_ARGS)]
    events.append(("content_block_stop", {"type": "content_block_stop", "index": 1}))
    events.append(("message_delta", {"type": "message_delta", "delta": {
        "stop_reason": "tool_use"}, "usage": {"output_tokens": N_TEXT}}))
    events.append(("message_stop", {"type": "message_stop"}))
    return _sse(events)


class _Replayed:
    """An SDK stream's events already read, iterated again (``relay_only``)."""

    def __init__(self, events: list[Any]) -> None:
        self.events = events

    async def __aiter__(self) -> AsyncIterator[Any]:
        for event in self.events:
            yield event


STREAMS: Final = {"chat": chat_stream, "responses": responses_stream,
                  "anthropic": anthropic_stream}


def _events_in(text: str) -> int:
    return sum(1 for e in text.split("\n\n") if e.strip() and "[DONE]" not in e)


async def _measure(base: str, rounds: int) -> list[list[object]]:
    import anthropic
    import openai

    from streamwire.chat import Chat
    from streamwire.log.memory import MemoryLog
    from streamwire.providers.anthropic import relay as anthropic_relay
    from streamwire.providers.openai import relay as openai_relay
    from streamwire.runs import RunContext

    # one client per stream, made once: what is timed is the request and its stream
    chat = openai.AsyncOpenAI(base_url=f"{base}/chat", api_key="k", max_retries=0)
    resp = openai.AsyncOpenAI(base_url=f"{base}/responses", api_key="k", max_retries=0)
    ant = anthropic.AsyncAnthropic(base_url=f"{base}/anthropic", api_key="k", max_retries=0)
    openers: dict[str, Callable[[], Awaitable[Any]]] = {
        "chat": lambda: chat.chat.completions.create(
            model="m", messages=PROMPT, stream=True),  # type: ignore[arg-type]
        "responses": lambda: resp.responses.create(model="m", input="hi", stream=True),
        "anthropic": lambda: ant.messages.create(
            model="claude-sonnet-4-6", max_tokens=10, messages=PROMPT,  # type: ignore[arg-type]
            stream=True),
    }
    log = MemoryLog()
    counter = iter(range(10**9))

    async def sdk_alone(name: str) -> None:
        stream = await openers[name]()
        async for _ in stream:
            pass

    async def relayed(name: str) -> None:
        run_id = f"r{next(counter)}"
        await log.create_stream(run_id)
        ctx: RunContext[Chat] = RunContext(log, run_id=run_id, agent="a", stream_id=run_id,
                                           input={}, contract=Chat)
        relay = anthropic_relay if name == "anthropic" else openai_relay
        await relay(ctx, await openers[name]())
        await log.delete_stream(run_id)

    async def relay_only(name: str, events: list[Any]) -> float:
        """The relay over the SDK's events already read: its own cost, without the network."""
        run_id = f"r{next(counter)}"
        await log.create_stream(run_id)
        ctx: RunContext[Chat] = RunContext(log, run_id=run_id, agent="a", stream_id=run_id,
                                           input={}, contract=Chat)
        relay = anthropic_relay if name == "anthropic" else openai_relay
        gc.collect()
        gc.disable()
        try:
            start = time.perf_counter()
            await relay(ctx, _Replayed(events))
            took = time.perf_counter() - start
        finally:
            gc.enable()
        await log.delete_stream(run_id)
        return took

    candidates = {"SDK alone": sdk_alone, "relay": relayed}
    rows: list[list[object]] = []
    for name, make in STREAMS.items():
        n = _events_in(make())
        samples: dict[str, list[float]] = {c: [] for c in candidates}
        for fn in candidates.values():
            await fn(name)  # warm-up (and connection set-up)
        for r in range(rounds):
            order = list(candidates)
            order = order[r % 2:] + order[:r % 2]
            for cand in order:
                gc.collect()
                gc.disable()  # as _harness.median_time: a collection lands on neither
                try:
                    start = time.perf_counter()
                    await candidates[cand](name)
                    samples[cand].append(time.perf_counter() - start)
                finally:
                    gc.enable()
        alone, relay_time = (statistics.median(samples[c]) for c in candidates)
        events = [e async for e in await openers[name]()]
        own = statistics.median([await relay_only(name, events) for _ in range(rounds)])
        rows.append([name, n, alone / n * 1e6, relay_time / n * 1e6,
                     (relay_time - alone) / n * 1e6, relay_time / alone, own / n * 1e6,
                     (alone + own) / alone])
    await log.aclose()
    return rows


def main(rounds: int) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        for name, make in STREAMS.items():
            (Path(tmp) / f"{name}.sse").write_text(make())
        server = subprocess.Popen([sys.executable, str(REPLAY), tmp], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        try:
            assert server.stdout is not None
            line = server.stdout.readline()
            if not line.startswith("PORT "):
                raise RuntimeError(f"the replay server did not start: {line!r}")
            base = f"http://127.0.0.1:{int(line.split()[1])}"
            rows = asyncio.run(_measure(base, max(rounds, 5)))
        finally:
            if server.stdin is not None:
                server.stdin.close()
            server.wait(10)
    header = ["stream", "events", "SDK alone µs/event", "relay µs/event", "overhead µs/event",
              "relay / SDK", "relay's own µs/event", "(SDK + own) / SDK"]
    return (table("Provider relay overhead (replay server in its own process)", header, rows)
            + f"\n{machine_line(['openai', 'anthropic', 'msgspec'])}\n")


if __name__ == "__main__":
    print(main(int(sys.argv[1]) if len(sys.argv) > 1 else 7))
