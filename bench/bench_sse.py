"""SSE codec: ``streamwire.sse`` against the decoders and encoders a user would pick instead.

Decoders, on four workloads generated from one seed (issue 2, item 5):

(a) an LLM reply: 2,000 ``chunk`` events ``{"chunk": "<1-12 words>"}`` with ids, a few metadata
    events (one of them multi-line) and ``: ping`` comments, cut into random 1-1400-byte pieces;
(b) five ~2 MB data-URL events in 16 KiB pieces;
(c) (a) with CRLF line ends;
(d) (a) in random 1-7-byte pieces.

How each peer is driven (the same way on every workload):

- httpx-sse: its own ``EventSource.iter_sse`` (and so its ``SSELineDecoder`` and ``SSEDecoder``)
  over the text that ``httpx.Response.iter_text`` would give: the pieces through the incremental
  UTF-8 decoder httpx uses (``codecs``, errors="replace", empty strings skipped). A real
  ``httpx.Response`` would add httpx's own per-piece plumbing to the peer, so it is left out.
- "httpx-sse, loop inlined": the same two decoders driven by a hand-written loop, without
  iter_sse's generator layers: a stricter baseline than the library's own code, shown so that no
  ratio depends on the choice.
- sseclient-py: ``SSEClient(iter(pieces)).events()``.
- anthropic SDK: ``anthropic._streaming.SSEDecoder().iter_bytes(iter(pieces))``.
- streamwire: ``SSEDecoder.feed`` per piece, then ``flush()``.

Every candidate's output is first compared with the events the generator meant to send (type,
data and lastEventId); a peer that gets it wrong is still timed, but flagged, with what it got
wrong. Encoders format the events of workload (a) and the data URLs of (b).
"""

from __future__ import annotations

import base64
import codecs
import json
import random
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from bench._harness import interleaved, machine_line, table
from streamwire.sse import SSEDecoder, encode_frame

SEED = 20261130
Key = tuple[str, str, str]  # (event type, data, lastEventId)

# Mostly English, with some non-ASCII (Latin-1, CJK, an emoji) so that pieces cut characters.
_WORDS = [
    "the", "a", "stream", "of", "tokens", "arrives", "quickly", "over", "one", "connection",
    "and", "every", "chunk", "carries", "its", "sequence", "so", "readers", "resume", "where",
    "they", "left", "off", "without", "loss", "or", "repeats", "café", "naïve", "東京", "データ",
    "🙂", "ok",
]


# -- workloads ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Workload:
    name: str
    pieces: list[bytes]
    expected: list[Key]

    @property
    def size(self) -> int:
        return sum(map(len, self.pieces))


def _frame(event: str | None, data: str, id: str | None) -> str:
    head = (f"event: {event}\n" if event else "") + (f"id: {id}\n" if id is not None else "")
    return head + "".join(f"data: {line}\n" for line in data.split("\n")) + "\n"


def llm_stream(rng: random.Random) -> tuple[str, list[Key]]:
    """Workload (a) as text with LF line ends, and the events a browser would dispatch."""
    parts: list[str] = []
    expected: list[Key] = []
    last_id = ""

    def emit(event: str | None, data: str, id: str | None = None) -> None:
        nonlocal last_id
        parts.append(_frame(event, data, id))
        if id is not None:
            last_id = id
        expected.append((event or "message", data, last_id))

    emit("message_start", json.dumps({"messageId": "m-1", "userMessageId": "u-1"}))
    for seq in range(1, 2001):
        words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(1, 12)))
        emit("chunk", json.dumps({"chunk": words + " "}, ensure_ascii=False), str(seq))
        if seq % 250 == 0:
            parts.append(": ping\n\n")
        if seq == 1000:
            # An indented multi-line event (several data: lines), as some servers send JSON.
            emit("sources", json.dumps({"sources": [{"url": "https://example.com/a",
                                                      "title": "A"}]}, indent=2))
        if seq == 1500:
            emit("usage", json.dumps({"inputTokens": 812, "outputTokens": 2000}))
    emit("message_end", json.dumps({"reason": "complete"}))
    return "".join(parts), expected


def cut(data: bytes, rng: random.Random, lo: int, hi: int) -> list[bytes]:
    """Cut ``data`` into random pieces of ``lo``-``hi`` bytes (multi-byte characters split too)."""
    pieces = []
    i = 0
    while i < len(data):
        n = rng.randint(lo, hi)
        pieces.append(data[i : i + n])
        i += n
    return pieces


def data_url_stream(rng: random.Random) -> tuple[bytes, list[Key]]:
    """Workload (b): five ~2 MB data-URL events."""
    parts: list[str] = []
    expected: list[Key] = []
    for i in range(1, 6):
        url = "data:image/png;base64," + base64.b64encode(rng.randbytes(1_500_000)).decode()
        data = json.dumps({"attachment": {"name": f"image-{i}.png", "url": url}})
        parts.append(_frame("attachment", data, str(i)))
        expected.append(("attachment", data, str(i)))
    return "".join(parts).encode(), expected


def workloads(seed: int = SEED) -> list[Workload]:
    rng = random.Random(seed)
    text, expected = llm_stream(rng)
    lf = text.encode()
    crlf = text.replace("\n", "\r\n").encode()
    big, big_expected = data_url_stream(rng)
    return [
        Workload("(a) llm, 1-1400 B pieces", cut(lf, rng, 1, 1400), expected),
        Workload("(b) 5 x 2 MB data URLs, 16 KiB pieces", cut(big, rng, 16384, 16384),
                 big_expected),
        Workload("(c) llm CRLF, 1-1400 B pieces", cut(crlf, rng, 1, 1400), expected),
        Workload("(d) llm, 1-7 B pieces", cut(lf, rng, 1, 7), expected),
    ]


# -- decoders ----------------------------------------------------------------------------------


def run_streamwire(pieces: Sequence[bytes]) -> list[Any]:
    decoder = SSEDecoder()
    out: list[Any] = []
    for piece in pieces:
        out += decoder.feed(piece)
    out += decoder.flush()
    return out


class _TextBody:
    """What ``EventSource`` reads from an ``httpx.Response``: headers and ``iter_text()``."""

    headers: ClassVar[dict[str, str]] = {"content-type": "text/event-stream"}

    def __init__(self, pieces: Sequence[bytes]) -> None:
        self.pieces = pieces

    def iter_text(self) -> Iterator[str]:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        for piece in self.pieces:
            text = decoder.decode(piece)
            if text:
                yield text
        text = decoder.decode(b"", True)
        if text:
            yield text


def run_httpx_sse(pieces: Sequence[bytes]) -> list[Any]:
    from httpx_sse import EventSource

    return list(EventSource(_TextBody(pieces)).iter_sse())  # type: ignore[arg-type]


def run_httpx_sse_inlined(pieces: Sequence[bytes]) -> list[Any]:
    from httpx_sse._decoders import SSEDecoder as HxDecoder
    from httpx_sse._decoders import SSELineDecoder

    text_decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    lines = SSELineDecoder()
    decoder = HxDecoder()
    out: list[Any] = []

    def text_chunks() -> Iterable[str]:
        for piece in pieces:
            text = text_decoder.decode(piece)
            if text:
                yield text
        text = text_decoder.decode(b"", True)
        if text:
            yield text

    for text in text_chunks():
        for line in lines.decode(text):
            sse = decoder.decode(line.rstrip("\n"))
            if sse is not None:
                out.append(sse)
    for line in lines.flush():
        sse = decoder.decode(line.rstrip("\n"))
        if sse is not None:
            out.append(sse)
    return out


def run_sseclient(pieces: Sequence[bytes]) -> list[Any]:
    import sseclient

    return list(sseclient.SSEClient(iter(pieces)).events())


def run_anthropic(pieces: Sequence[bytes]) -> list[Any]:
    from anthropic._streaming import SSEDecoder as AnthropicDecoder

    return list(AnthropicDecoder().iter_bytes(iter(pieces)))


DECODERS: dict[str, Callable[[Sequence[bytes]], list[Any]]] = {
    "streamwire": run_streamwire,
    "httpx-sse": run_httpx_sse,
    "httpx-sse, loop inlined": run_httpx_sse_inlined,
    "sseclient-py": run_sseclient,
    "anthropic": run_anthropic,
}


def keys(events: Iterable[Any]) -> list[Key]:
    return [(e.event or "message", e.data, e.id or "") for e in events]


def check(expected: list[Key], got: list[Key]) -> str:
    """"ok", or a short description of how ``got`` differs from ``expected``."""
    if got == expected:
        return "ok"
    notes = []
    spurious = [k for k in got if k[1] == "" and k not in expected]
    if spurious:
        notes.append(f"{len(spurious)} spurious empty events")
    rest = [k for k in got if not (k[1] == "" and k not in expected)]
    if len(rest) != len(expected):
        notes.append(f"{len(rest)} events, expected {len(expected)}")
    else:
        wrong_id = sum(g[2] != e[2] for g, e in zip(rest, expected, strict=True))
        wrong_type = sum(g[0] != e[0] for g, e in zip(rest, expected, strict=True))
        wrong_data = sum(g[1] != e[1] for g, e in zip(rest, expected, strict=True))
        if wrong_id:
            notes.append(f"wrong lastEventId on {wrong_id}")
        if wrong_type:
            notes.append(f"wrong type on {wrong_type}")
        if wrong_data:
            notes.append(f"wrong data on {wrong_data}")
    return "WRONG: " + ", ".join(notes or ["differs"])


def _safe_run(fn: Callable[[Sequence[bytes]], list[Any]], pieces: Sequence[bytes]) -> list[Key] | str:
    try:
        return keys(fn(pieces))
    except Exception as exc:  # a peer that crashes is reported, not fatal
        return f"CRASH: {type(exc).__name__}: {str(exc)[:60]}"


def bench_decoders(rounds: int) -> tuple[str, dict[str, dict[str, float]]]:
    rows: list[list[object]] = []
    speedups: dict[str, dict[str, float]] = {}
    for load in workloads():
        verdicts: dict[str, str] = {}
        runnable: dict[str, Callable[[], object]] = {}
        for name, fn in DECODERS.items():
            got = _safe_run(fn, load.pieces)
            verdicts[name] = got if isinstance(got, str) else check(load.expected, got)
            if not verdicts[name].startswith("CRASH"):
                runnable[name] = lambda fn=fn, load=load: fn(load.pieces)
        times = interleaved(runnable, rounds=rounds)
        ours = times["streamwire"]
        speedups[load.name] = {n: t / ours for n, t in times.items() if n != "streamwire"}
        for name, verdict in verdicts.items():
            t = times.get(name)
            rows.append([
                load.name, name, verdict,
                f"{t * 1e3:.2f}" if t else "-",
                f"{len(load.expected) / t:,.0f}" if t else "-",
                f"{load.size / t / 1e6:.1f}" if t else "-",
                f"{t / ours:.2f}x" if t else "-",
            ])
    md = table(
        "Decoders (median of rounds; 'vs streamwire' = peer time / streamwire time)",
        ["workload", "decoder", "output", "ms", "events/s", "MB/s", "vs streamwire"],
        rows,
    )
    return md, speedups


# -- one big event: pieces vs whole --------------------------------------------------------------


def bench_big_event(rounds: int) -> tuple[str, float]:
    payload = b"x" * (16 * 1024 * 1024)
    stream = b"data: " + payload + b"\n\n"
    pieces = [stream[i : i + 16384] for i in range(0, len(stream), 16384)]
    times = interleaved({"whole": lambda: run_streamwire([stream]),
                         "split": lambda: run_streamwire(pieces)}, rounds=rounds, repeat=1)
    whole, split = times["whole"], times["split"]
    ratio = split / whole
    md = table(
        "One 16 MiB event: 16 KiB pieces vs whole (must be <= 2x)",
        ["fed", "ms", "ratio"],
        [["whole", f"{whole * 1e3:.2f}", "1.00x"], ["16 KiB pieces", f"{split * 1e3:.2f}",
                                                    f"{ratio:.2f}x"]],
    )
    return md, ratio


# -- encoders ----------------------------------------------------------------------------------


def encoder_inputs() -> dict[str, list[tuple[str | None, str, str | None]]]:
    _, expected = llm_stream(random.Random(SEED))
    llm = [(e, d, i) for e, d, i in expected]
    big = [("attachment", d, i) for _, d, i in data_url_stream(random.Random(SEED))[1]]
    return {"(a) llm events": llm, "(b) 2 MB data URLs": big}


def enc_streamwire(events: Sequence[tuple[str | None, str, str | None]]) -> list[bytes]:
    return [encode_frame(d, event=e, id=i) for e, d, i in events]


def enc_sse_starlette(events: Sequence[tuple[str | None, str, str | None]]) -> list[bytes]:
    from sse_starlette.event import ServerSentEvent

    return [ServerSentEvent(d, event=e, id=i).encode() for e, d, i in events]


def enc_fastapi(events: Sequence[tuple[str | None, str, str | None]]) -> list[bytes]:
    from fastapi.sse import format_sse_event

    return [format_sse_event(data_str=d, event=e, id=i) for e, d, i in events]


ENCODERS: dict[str, Callable[[Sequence[tuple[str | None, str, str | None]]], list[bytes]]] = {
    "streamwire": enc_streamwire,
    "sse-starlette": enc_sse_starlette,
    "fastapi.sse": enc_fastapi,
}


def bench_encoders(rounds: int) -> str:
    rows: list[list[object]] = []
    for name, events in encoder_inputs().items():
        want = [(e or "message", d, i or "") for e, d, i in events]
        times = interleaved({enc_name: lambda fn=fn, ev=events: fn(ev)
                             for enc_name, fn in ENCODERS.items()}, rounds=rounds)
        for enc_name, fn in ENCODERS.items():
            frames = fn(events)
            # Every encoder's output must decode (by streamwire's WHATWG decoder) to the events.
            decoded = keys(run_streamwire(frames))
            verdict = check(want, decoded)
            t = times[enc_name]
            size = sum(map(len, frames))
            rows.append([name, enc_name, verdict, f"{t * 1e3:.2f}",
                         f"{len(events) / t:,.0f}", f"{size / t / 1e6:.1f}",
                         f"{t / times['streamwire']:.2f}x"])
    return table("Encoders (median of rounds; 'vs streamwire' = peer time / streamwire time)",
                 ["events", "encoder", "decodes back", "ms", "events/s", "MB/s",
                  "vs streamwire"], rows)


def main(rounds: int) -> str:
    decoders, speedups = bench_decoders(rounds)
    big, ratio = bench_big_event(rounds)
    encoders = bench_encoders(rounds)
    verdict = []
    for load, peers in speedups.items():
        need = 1.0 if load.startswith("(b)") else 3.0
        got = peers.get("httpx-sse", 0.0)
        strict = peers.get("httpx-sse, loop inlined", 0.0)
        verdict.append(f"- {load}: {got:.2f}x httpx-sse's iter_sse, {strict:.2f}x its decoders "
                       f"in an inlined loop (target >= {need:g}x): "
                       f"{'met' if got >= need else 'NOT met'}")
    verdict.append(f"- 16 MiB event, 16 KiB pieces vs whole: {ratio:.2f}x (target <= 2x): "
                   f"{'met' if ratio <= 2 else 'NOT met'}")
    return "\n".join([
        "## SSE codec",
        "",
        machine_line(["msgspec", "httpx-sse", "sseclient-py", "anthropic", "sse-starlette",
                      "fastapi"]),
        f"; seed {SEED}, {rounds} rounds",
        "",
        decoders,
        big,
        encoders,
        "### Targets (issue 2)",
        "",
        *verdict,
        "",
    ])
