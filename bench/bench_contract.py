"""Typed contracts on a 2,000-event chat stream: validation cost, encoding, decoding.

Three measurements, every candidate on the same seeded stream in one run:

1. **Validation vs ``json.loads``**: per event, ``BoundEvent.decode`` (parse *and* validate against
   the chat contract, dispatched on the event name) against a plain ``json.loads`` of the same data.
2. **Encoding**: chat payloads (Python dicts and lists) to SSE bytes, JSON serialisation included:
   ``Chat.<event>(payload)`` + ``encode_frame``, and a ``StreamWriter`` over ``MemoryWritable``,
   against sse-starlette's ``JSONServerSentEvent(payload, event=name).encode()``.
3. **Decode + validate**: the stream's bytes, cut into random 1-1400-byte pieces and served by an
   ``httpx.Response``, to typed payloads: ``create_sse_readable`` + ``BoundEvent.decode`` and
   ``StreamReader.consume_sync`` with a handler on every event, against httpx-sse's ``EventSource``
   followed by ``json.loads`` (which validates nothing).

Every candidate's output is checked against the expected events before it is timed.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from typing import Any, Final

import httpx

from bench._harness import interleaved, machine_line, table
from streamwire.chat import Chat, ConversationStep, SourceLink
from streamwire.client import create_sse_readable
from streamwire.contract import BoundEvent, Message
from streamwire.reader import StreamReader
from streamwire.sse import SSEDecoder, encode_frame
from streamwire.transport import MemoryWritable
from streamwire.writer import StreamWriter

SEED: Final = 3
N_EVENTS: Final = 2000
PER_KIND: Final = 2000  # decodes per timing of one payload kind
TEXT: Final = ("the model streams tokens to a browser while a tool runs and the user waits for "
               "an answer about trains in Lisbon, Porto and Faro, with émoji 😀 now")
WORDS: Final = TEXT.split()

Pair = tuple[str, Any]  # (wire name, payload)


def chat_stream(rng: random.Random) -> list[Pair]:
    """A chat reply of exactly ``N_EVENTS`` events: every chat event but ``error`` (a reply ends
    with ``done`` or ``error``, never both)."""
    steps: list[ConversationStep] = [
        {"id": f"s{i}", "label": f"Step {i}", "status": "complete", "toolName": "search"}
        for i in range(3)]
    links: list[SourceLink] = [
        {"url": f"https://example.org/{i}", "title": f"Source {i}", "snippet": "a snippet " * 8}
        for i in range(5)]
    head: list[Pair] = [
        ("message_start", {"userMessageId": "u-1", "assistantMessageId": "a-1",
                           "model": {"id": "claude-x", "displayName": "Claude X",
                                     "provider": "anthropic"}}),
        ("title", {"title": "Trains in Portugal"}),
        ("progress", {"steps": steps}),
        ("compression", {"messageCount": 42}),
        ("compression", {"done": True}),
    ]
    head += [("progress", {"chunk": " ".join(rng.choices(WORDS, k=rng.randint(1, 8)))})
             for _ in range(100)]
    head += [("progress", {"done": True})]
    head += [("reasoning", {"chunk": " ".join(rng.choices(WORDS, k=rng.randint(1, 12)))})
             for _ in range(40)]
    head += [("reasoning", {"done": True}), ("clear", {})]
    tail: list[Pair] = [
        ("sources", links),
        ("attachments", [{"id": "f1", "filename": "map.png", "mimeType": "image/png",
                          "dataUrl": "data:image/png;base64," + "iVBORw0K" * 64, "size": 384}]),
        ("selection_required", {"selectionId": "sel", "prompt": "Which city?",
                                "options": [{"id": "l", "label": "Lisbon"},
                                            {"id": "p", "label": "Porto"}]}),
        ("warnings", ["Timetables may be out of date"]),
        ("suggestions", ["Show fares", "Night trains?", "Faro to Porto"]),
        ("usage", {"inputTokens": 1200, "outputTokens": 1890, "totalTokens": 3090,
                   "cacheReadInputTokens": 800}),
        ("done", {"done": True, "messageId": "a-1", "userMessageId": "u-1",
                  "reason": "complete"}),
    ]
    chunks = [("chunk", {"chunk": " ".join(rng.choices(WORDS, k=rng.randint(1, 12)))})
              for _ in range(N_EVENTS - len(head) - len(tail))]
    return head + chunks + tail


def cut(data: bytes, rng: random.Random) -> list[bytes]:
    pieces, i = [], 0
    while i < len(data):
        n = rng.randint(1, 1400)
        pieces.append(data[i:i + n])
        i += n
    return pieces


def bound(name: str) -> BoundEvent[Any, Any]:
    event = Chat.event_named(name)
    assert event is not None, name
    return event


def run_sync(coro: Coroutine[Any, Any, None]) -> None:
    """Drive a coroutine that never suspends (``MemoryWritable.drain`` returns at once)."""
    try:
        coro.send(None)
    except StopIteration:
        return
    coro.close()
    raise RuntimeError("the coroutine suspended; it needs an event loop")


# --- 1. validation vs json.loads --------------------------------------------------------------


def bench_validation(rounds: int, pairs: Sequence[Pair]) -> str:
    wire = [(name, bound(name).encode(payload).decode()) for name, payload in pairs]
    decoders = {name: event.decode for name, event in Chat.events().items()}
    expected = [payload for _, payload in pairs]

    def streamwire() -> list[Any]:
        return [decoders[name](data) for name, data in wire]

    def plain() -> list[Any]:
        loads = json.loads
        return [loads(data) for _, data in wire]

    assert streamwire() == expected, "streamwire decoded the stream wrongly"
    assert plain() == expected, "json.loads decoded the stream wrongly"
    whole = interleaved({"plain": plain, "ours": streamwire}, rounds=rounds)
    base = whole["plain"] / len(wire) * 1e6
    ours = whole["ours"] / len(wire) * 1e6
    rows: list[list[object]] = [
        [f"{N_EVENTS}-event chat stream", base, ours, ours / base]]
    kinds = {"chunk": None, "progress (steps)": "steps", "progress (chunk)": "chunk",
             "progress (done)": "done", "message_start": None, "sources": None, "usage": None,
             "done": None}
    for label, key in kinds.items():
        name = label.split(" ")[0]
        data = next(d for (n, d), (_, p) in zip(wire, pairs, strict=True)
                    if n == name and (key is None or key in p))
        decode = decoders[name]
        one = interleaved({"plain": lambda d=data: [json.loads(d) for _ in range(PER_KIND)],
                           "ours": lambda d=data, f=decode: [f(d) for _ in range(PER_KIND)]},
                          rounds=rounds)
        rows.append([label, one["plain"] / PER_KIND * 1e6, one["ours"] / PER_KIND * 1e6,
                     one["ours"] / one["plain"]])
    return table("Validation cost: parse + validate vs json.loads (µs per event; lower is better)",
                 ["payload", "json.loads (no validation)", "streamwire decode (validates)",
                  "streamwire / json.loads"], rows)


# --- 2. encoding ------------------------------------------------------------------------------


def enc_streamwire(pairs: Sequence[Pair]) -> bytes:
    out = bytearray()
    for name, payload in pairs:
        msg: Message[Any, Any] = bound(name)(payload)
        out += encode_frame(msg.encode().decode(), event=msg.name)
    return bytes(out)


def enc_writer(pairs: Sequence[Pair]) -> bytes:
    # Message construction inside the loop, as an application writes: Chat.chunk({...}).
    writable = MemoryWritable()
    writer = StreamWriter(writable, Chat)
    events = [(bound(name), payload) for name, payload in pairs[:-1]]
    done = pairs[-1][1]

    async def write_all() -> None:
        for event, payload in events:
            await writer.event(event(payload))
        await writer.end(done["reason"], done["messageId"], done["userMessageId"])

    run_sync(write_all())
    return bytes(writable.body)


def enc_sse_starlette(pairs: Sequence[Pair]) -> bytes:
    from sse_starlette.event import JSONServerSentEvent

    return b"".join(JSONServerSentEvent(payload, event=name).encode() for name, payload in pairs)


def decoded_pairs(body: bytes) -> list[Pair]:
    decoder = SSEDecoder()
    return [(e.event, json.loads(e.data)) for e in [*decoder.feed(body), *decoder.flush()]]


def bench_encoding(rounds: int, pairs: Sequence[Pair]) -> tuple[str, float]:
    candidates: dict[str, Callable[[Sequence[Pair]], bytes]] = {
        "sse-starlette JSONServerSentEvent": enc_sse_starlette,
        "streamwire Chat.<event>(...) + encode_frame": enc_streamwire,
        "streamwire StreamWriter over MemoryWritable": enc_writer,
    }
    expected = list(pairs)
    for label, fn in candidates.items():
        assert decoded_pairs(fn(pairs)) == expected, f"{label} encoded the stream wrongly"
    times = interleaved({label: lambda f=fn: f(pairs) for label, fn in candidates.items()},
                        rounds=rounds)
    base = times["sse-starlette JSONServerSentEvent"]
    rows = [[label, N_EVENTS / t / 1e3, t / N_EVENTS * 1e6, base / t] for label, t in times.items()]
    ratio = base / times["streamwire StreamWriter over MemoryWritable"]
    return table("Encoding chat events, JSON serialisation included (higher events/s is better)",
                 ["encoder", "k events/s", "µs per event", "x sse-starlette"], rows), ratio


# --- 3. decode + validate ---------------------------------------------------------------------


def response(pieces: Sequence[bytes]) -> httpx.Response:
    return httpx.Response(200, headers={"content-type": "text/event-stream"},
                          content=iter(pieces))


def dec_httpx_sse(pieces: Sequence[bytes]) -> list[Pair]:
    from httpx_sse import EventSource

    loads = json.loads
    return [(e.event, loads(e.data)) for e in EventSource(response(pieces)).iter_sse()]


def dec_streamwire(pieces: Sequence[bytes]) -> list[Pair]:
    events = Chat.events()
    return [(e.event, events[e.event].decode(e.data))
            for e in create_sse_readable(response(pieces))]


def dec_reader(pieces: Sequence[bytes]) -> list[Any]:
    # The handler is the cheapest callable there is (a bound ``list.append``): what is timed is
    # the reader, not the handler. The check compares the payloads in order.
    out: list[Any] = []
    reader = StreamReader(create_sse_readable(response(pieces)), Chat)
    for event in Chat.events().values():
        reader.on(event, out.append)
    reader.consume_sync()
    return out


_LOOP: asyncio.AbstractEventLoop | None = None


def dec_reader_async(pieces: Sequence[bytes]) -> list[Any]:
    """``await reader.consume()`` over an async httpx body, on one event loop kept for the run."""
    global _LOOP
    if _LOOP is None:
        _LOOP = asyncio.new_event_loop()

    async def body() -> AsyncIterator[bytes]:
        for piece in pieces:
            yield piece

    async def consume() -> list[Any]:
        out: list[Any] = []
        source = httpx.Response(200, headers={"content-type": "text/event-stream"},
                                content=body())
        reader = StreamReader(create_sse_readable(source), Chat)
        for event in Chat.events().values():
            reader.on(event, out.append)
        await reader.consume()
        return out

    return _LOOP.run_until_complete(consume())


def bench_decoding(rounds: int, pairs: Sequence[Pair], pieces: Sequence[bytes]
                   ) -> tuple[str, tuple[float, float]]:
    candidates: dict[str, Callable[[Sequence[bytes]], list[Any]]] = {
        "httpx-sse EventSource + json.loads (no validation)": dec_httpx_sse,
        "streamwire create_sse_readable + BoundEvent.decode": dec_streamwire,
        "streamwire StreamReader.consume_sync (handlers)": dec_reader,
        "streamwire await StreamReader.consume() (asyncio)": dec_reader_async,
    }
    expected = list(pairs)
    for label, fn in candidates.items():
        got = fn(pieces)
        if fn in (dec_reader, dec_reader_async):
            got = [(name, payload) for (name, _), payload in zip(pairs, got, strict=True)]
        assert got == expected, f"{label} decoded the stream wrongly"
    try:
        times = interleaved({label: lambda f=fn: f(pieces) for label, fn in candidates.items()},
                            rounds=rounds)
    finally:
        global _LOOP
        if _LOOP is not None:
            _LOOP.close()
            _LOOP = None
    base = times["httpx-sse EventSource + json.loads (no validation)"]
    size = sum(map(len, pieces)) / 1e6
    rows = [[label, N_EVENTS / t / 1e3, size / t, base / t] for label, t in times.items()]
    ratios = (base / times["streamwire create_sse_readable + BoundEvent.decode"],
              base / max(times["streamwire StreamReader.consume_sync (handlers)"],
                         times["streamwire await StreamReader.consume() (asyncio)"]))
    return table(f"Decode + validate: {len(pieces)} pieces of 1-1400 bytes from an httpx.Response "
                 "(higher is better)",
                 ["decoder", "k events/s", "MB/s", "x httpx-sse + json.loads"], rows), ratios


def main(rounds: int) -> str:
    rng = random.Random(SEED)
    Chat.resolve()
    pairs = chat_stream(rng)
    assert len(pairs) == N_EVENTS
    assert {n for n, _ in pairs} == set(Chat.events()) - {"error"}
    body = enc_streamwire(pairs)
    pieces = cut(body, rng)
    validation = bench_validation(rounds, pairs)
    encoding, enc_ratio = bench_encoding(rounds, pairs)
    decoding, (dec_ratio, reader_ratio) = bench_decoding(rounds, pairs, pieces)
    lines = [
        "## bench_contract: typed chat contract",
        "",
        machine_line(["msgspec", "httpx", "httpx-sse", "sse-starlette"]),
        f"; medians of {rounds} rounds; {N_EVENTS} events, {len(body):,} bytes, seed {SEED}.",
        "",
        validation,
        encoding,
        decoding,
        f"Targets: encoding with StreamWriter >= 2x sse-starlette: {enc_ratio:.2f}x "
        f"({'met' if enc_ratio >= 2 else 'NOT met'}); decode + validate (readable + "
        f"BoundEvent.decode, no dispatch, like the baseline) >= 2x httpx-sse + json.loads: "
        f"{dec_ratio:.2f}x ({'met' if dec_ratio >= 2 else 'NOT met'}); the same through "
        f"StreamReader's handler dispatch (slower of its two rows): {reader_ratio:.2f}x.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    print(main(3))
