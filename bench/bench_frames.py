"""Wire v2 frames: bytes -> typed frames for a 10,000-chunk stream, against httpx-sse + ``json.loads``.

The workload (seeded): a replayed run of 10,000 ``chunk`` frames whose payloads are chat messages
(``{"event": "chunk", "data": {"chunk": "<1-12 words>"}}``), a ``caught-up`` marker, a ``rewound``
marker, ``: heartbeat`` comments every 500 chunks and a closing ``end`` frame, cut into random
1-1400-byte pieces (what a socket delivers).

Candidates (all on the same pieces, all in one run):

- ``httpx-sse + json.loads``: what a user writes today. httpx-sse's own ``SSELineDecoder`` and
  ``SSEDecoder`` over the incremental UTF-8 decoder ``httpx.Response.iter_text`` uses (the loop of
  ``EventSource.iter_sse``, minus httpx's own per-piece cost), then ``json.loads(sse.data)`` per
  event with data (httpx-sse dispatches an empty event after each heartbeat comment). It parses the
  payload too, but checks nothing: no envelope, no ``id`` = sequence.
- ``streamwire FrameDecoder``: ``feed`` per piece then ``flush``: typed, validated frames (the
  envelope checked, ``id`` = sequence checked, the chunk payload passed through as ``msgspec.Raw``).
- ``streamwire + typed payload``: the same, then every chunk's payload decoded and validated
  against the ``Chat`` contract (``ChunkCodec(Chat).decode``): strictly more work than the peer.

The other direction, frames -> bytes, for the same 10,000 chunks (the server's hot path):
``encode_stream_frame`` against sse-starlette's ``ServerSentEvent(json.dumps(envelope), event=,
id=).encode()``, what a user of sse-starlette writes for the same frame. Both outputs are decoded
back and compared with the frames.

Each candidate's output is checked first (10,000 chunks in order with the expected payloads, and the
terminal). Ratios are medians of rounds from this one run (issue 4: >= 2x the peer).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from bench._harness import machine_line, median_time, table
from bench.bench_sse import run_httpx_sse as httpx_sse_events
from streamwire.chat import Chat
from streamwire.frames import (
    CaughtUpFrame,
    ChunkCodec,
    ChunkFrame,
    EndFrame,
    FrameDecoder,
    RewoundFrame,
    encode_stream_frame,
)
from streamwire.sse import encode_comment

SEED = 20261130
CHUNKS = 10_000
_WORDS = ["the", "a", "stream", "of", "tokens", "arrives", "quickly", "over", "one", "connection", "and", "every", "chunk", "carries", "its", "sequence", "so", "readers", "resume", "where", "they", "left", "off", "without", "loss", "or", "repeats", "café", "naïve", "東京", "🙂"]


def workload(rng: random.Random) -> tuple[list[bytes], list[str]]:
    """The stream's pieces, and the chunk texts in order."""
    codec = ChunkCodec(Chat)
    texts: list[str] = []
    parts: list[bytes] = [encode_comment("heartbeat")]
    for seq in range(1, CHUNKS + 1):
        text = " ".join(rng.choices(_WORDS, k=rng.randint(1, 12))) + " "
        texts.append(text)
        parts.append(encode_stream_frame(codec.frame(seq, Chat.chunk({"chunk": text}))))
        if seq % 500 == 0:
            parts.append(encode_comment("heartbeat"))
        if seq == CHUNKS // 2:
            parts.append(encode_stream_frame(CaughtUpFrame(seq)))
        if seq == CHUNKS - 10:
            parts.append(encode_stream_frame(RewoundFrame(3, seq)))
    parts.append(encode_stream_frame(EndFrame("completed", output={"messageId": "m1"})))
    data = b"".join(parts)
    pieces: list[bytes] = []
    i = 0
    while i < len(data):
        n = rng.randint(1, 1400)
        pieces.append(data[i : i + n])
        i += n
    return pieces, texts


# -- candidates ----------------------------------------------------------------------------------


def run_httpx_sse(pieces: Sequence[bytes]) -> list[tuple[str, Any]]:
    """httpx-sse's own pipeline (``EventSource.iter_sse``, as ``bench_sse`` drives it), then
    ``json.loads``. It dispatches an empty event at the blank line after a comment once an id was
    seen (WHATWG dispatches nothing): those are skipped, as its users must."""
    return [(sse.event, json.loads(sse.data)) for sse in httpx_sse_events(pieces) if sse.data]


def run_streamwire(pieces: Sequence[bytes]) -> list[Any]:
    decoder = FrameDecoder()
    out: list[Any] = []
    for piece in pieces:
        out += decoder.feed(piece)
    out += decoder.flush()
    return out


def run_streamwire_typed(pieces: Sequence[bytes]) -> list[Any]:
    decode = ChunkCodec(Chat).decode
    return [decode(f) if type(f) is ChunkFrame else f for f in run_streamwire(pieces)]


# -- checks --------------------------------------------------------------------------------------


def check_peer(out: list[tuple[str, Any]], texts: list[str]) -> str:
    chunks = [data for event, data in out if event == "chunk"]
    if [c["sequence"] for c in chunks] != list(range(1, CHUNKS + 1)):
        return "wrong chunk sequences"
    if [c["chunk"]["data"]["chunk"] for c in chunks] != texts:
        return "wrong chunk payloads"
    return "ok" if out[-1][0] == "end" else "no end"


def check_streamwire(out: list[Any], texts: list[str]) -> str:
    chunks = [f for f in out if type(f) is ChunkFrame]
    if [c.sequence for c in chunks] != list(range(1, CHUNKS + 1)):
        return "wrong chunk sequences"
    payloads = [msgspec.json.decode(c.chunk)["data"]["chunk"] for c in chunks]
    if payloads != texts:
        return "wrong chunk payloads"
    return "ok" if out[-1] == EndFrame("completed", output={"messageId": "m1"}) else "no end"


def check_typed(out: list[Any], texts: list[str]) -> str:
    msgs = [m for m in out if m is not None and not isinstance(
        m, EndFrame | CaughtUpFrame | RewoundFrame)]
    if [m.data["chunk"] for m in msgs] != texts:
        return "wrong payloads"
    return "ok" if isinstance(out[-1], EndFrame) else "no end"


def encode_peer(envelopes: Sequence[tuple[int, Any]]) -> list[bytes]:
    from sse_starlette import ServerSentEvent

    return [ServerSentEvent(json.dumps({"sequence": seq, "chunk": chunk}, separators=(",", ":")),
                            event="chunk", id=str(seq)).encode() for seq, chunk in envelopes]


def encode_streamwire(frames: Sequence[ChunkFrame]) -> list[bytes]:
    return [encode_stream_frame(f) for f in frames]


def encode_table(rounds: int, pieces: Sequence[bytes]) -> str:
    frames: list[ChunkFrame] = [f for f in run_streamwire(pieces) if type(f) is ChunkFrame]
    envelopes = [(f.sequence, msgspec.json.decode(f.chunk)) for f in frames]
    results = {"sse-starlette ServerSentEvent + json.dumps": encode_peer(envelopes),
               "streamwire encode_stream_frame": encode_streamwire(frames)}
    def values(out: list[bytes]) -> list[tuple[int, Any]]:
        decoded = run_streamwire([b"".join(out)])
        return [(f.sequence, msgspec.json.decode(f.chunk)) for f in decoded if type(f) is ChunkFrame]

    checks = {name: "ok" if values(out) == envelopes else "wrong" for name, out in results.items()}
    times = {
        "sse-starlette ServerSentEvent + json.dumps": median_time(
            lambda: encode_peer(envelopes), rounds=rounds),
        "streamwire encode_stream_frame": median_time(
            lambda: encode_streamwire(frames), rounds=rounds),
    }
    peer = times["sse-starlette ServerSentEvent + json.dumps"]
    rows = [[name, checks[name], f"{t * 1000:.1f}", f"{CHUNKS / t / 1e6:.2f}", f"{peer / t:.2f}x"]
            for name, t in times.items()]
    return table("bench frames: typed chunk frames -> bytes",
                 ["candidate", "output", "ms", "M frames/s", "vs sse-starlette"], rows)


def main(rounds: int) -> str:
    pieces, texts = workload(random.Random(SEED))
    size = sum(map(len, pieces))
    candidates: list[tuple[str, Callable[[Sequence[bytes]], Any], str]] = [
        ("httpx-sse + json.loads", run_httpx_sse, check_peer(run_httpx_sse(pieces), texts)),
        ("streamwire FrameDecoder", run_streamwire, check_streamwire(run_streamwire(pieces), texts)),
        ("streamwire + typed payload (Chat)", run_streamwire_typed,
         check_typed(run_streamwire_typed(pieces), texts)),
    ]
    times = {name: median_time(lambda fn=fn: fn(pieces), rounds=rounds)  # type: ignore[misc]
             for name, fn, _ in candidates}
    peer = times["httpx-sse + json.loads"]
    rows = [
        [name, ok, f"{t * 1000:.1f}", f"{CHUNKS / t / 1e6:.2f}", f"{size / t / 1e6:.1f}",
         f"{peer / t:.2f}x"]
        for name, _, ok in candidates
        for t in [times[name]]
    ]
    head = (f"{CHUNKS:,} chunk frames, {size / 1e6:.2f} MB in {len(pieces):,} pieces of 1-1400 "
            f"bytes; median of {rounds} rounds. {machine_line(['msgspec', 'httpx-sse'])}\n\n")
    return head + table(
        "bench frames: bytes -> typed wire v2 frames",
        ["candidate", "output", "ms", "M frames/s", "MB/s", "vs httpx-sse + json.loads"], rows,
    ) + "\n" + encode_table(rounds, pieces)
