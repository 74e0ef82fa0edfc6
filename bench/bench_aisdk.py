"""The AI SDK UI message stream: encoding a 2,000-chunk chat reply (``streamwire.aisdk``).

One reply as a run's stream holds it (``message_start``, progress, 100 reasoning chunks, 1,890
text chunks, sources, usage, then ``end``). Candidates, every one producing the same bytes
(checked before timing):

* **streamwire**: ``UIMessageStreamEncoder.feed`` over the stream's frames: each chunk's JSON is
  decoded and validated against ``Chat``, mapped to UI chunks, encoded with its event id;
* **f-string (limit)**: a hand-written encoder of the same UI parts with f-strings and
  ``json.dumps``, given the reply already as Python payloads (no decoding, no validation, no
  state machine): what the encoding alone costs at the least;
* **f-string + json.loads**: the same, starting from the same frames as streamwire (each chunk's
  JSON parsed with ``json.loads``, nothing validated).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Final

from bench._harness import interleaved, machine_line, table
from streamwire.aisdk import UIMessageStreamEncoder
from streamwire.chat import Chat
from streamwire.contract import Message
from streamwire.frames import ChunkCodec, EndFrame, StreamFrame

N_CHUNKS: Final = 2000
N_REASONING: Final = 100
TEXT: Final = ("the model streams tokens to a browser while a tool runs and the user waits for "
               "an answer about trains in Lisbon, Porto and Faro, with émoji 😀 now")
WORDS: Final = TEXT.split()


def reply() -> list[Message[Chat, Any]]:
    """The reply's chat events, ``N_CHUNKS`` of them."""
    head: list[Message[Chat, Any]] = [
        Chat.message_start({"userMessageId": "u-1", "assistantMessageId": "a-1",
                            "model": {"id": "m", "displayName": "M", "provider": "p"}}),
        Chat.progress({"steps": [{"id": "s1", "label": "Searching", "status": "active"}]}),
    ]
    reasoning = [Chat.reasoning({"chunk": WORDS[i % len(WORDS)] + " "})
                 for i in range(N_REASONING)]
    tail: list[Message[Chat, Any]] = [
        Chat.sources([{"url": f"https://example.org/{i}", "title": f"Source {i}"}
                      for i in range(3)]),
        Chat.usage({"inputTokens": 10, "outputTokens": 1900, "totalTokens": 1910}),
    ]
    n_text = N_CHUNKS - len(head) - len(reasoning) - 1 - len(tail)
    text = [Chat.chunk({"chunk": WORDS[i % len(WORDS)] + " "}) for i in range(n_text)]
    return [*head, *reasoning, Chat.reasoning({"done": True}), *text, *tail]


def frames_of(messages: list[Message[Chat, Any]]) -> list[StreamFrame]:
    codec = ChunkCodec(Chat)
    return [*(codec.frame(i, m) for i, m in enumerate(messages, 1)), EndFrame("completed")]


def streamwire(frames: list[StreamFrame]) -> bytes:
    encoder = UIMessageStreamEncoder("a-1")
    return b"".join([encoder.feed(frame) for frame in frames])


def _ev(event_id: str, data: str) -> str:
    return f"id: {event_id}\ndata: {data}\n\n"


def fstring(pairs: list[tuple[str, Any]], message_id: str = "a-1") -> bytes:
    """The hand-written encoder: the same UI parts and ids as streamwire, for this reply's kinds."""
    dumps = json.dumps
    out = [_ev("0", f'{{"type":"start","messageId":"{message_id}"}}'),
           _ev("0.1", '{"type":"start-step"}')]
    text = reasoning = None
    seq = 0
    k = 0
    for seq, (name, data) in enumerate(pairs, 1):
        k = 0
        if name == "chunk":
            if text is None:
                if reasoning is not None:
                    out.append(_ev(f"{seq}", f'{{"type":"reasoning-end","id":"{reasoning}"}}'))
                    reasoning, k = None, 1
                text = f"t{seq}"
                out.append(_ev(f"{seq}.{k}" if k else f"{seq}", f'{{"type":"text-start","id":"{text}"}}'))
                k += 1
            delta = dumps(data["chunk"], ensure_ascii=False, separators=(",", ":"))
            out.append(_ev(f"{seq}.{k}" if k else f"{seq}",
                           f'{{"type":"text-delta","id":"{text}","delta":{delta}}}'))
        elif name == "reasoning":
            if "done" in data:
                if reasoning is not None:
                    out.append(_ev(f"{seq}", f'{{"type":"reasoning-end","id":"{reasoning}"}}'))
                    reasoning = None
                continue
            if reasoning is None:
                reasoning = f"r{seq}"
                out.append(_ev(f"{seq}", f'{{"type":"reasoning-start","id":"{reasoning}"}}'))
                k = 1
            delta = dumps(data["chunk"], ensure_ascii=False, separators=(",", ":"))
            out.append(_ev(f"{seq}.{k}" if k else f"{seq}",
                           f'{{"type":"reasoning-delta","id":"{reasoning}","delta":{delta}}}'))
        elif name == "sources":
            for i, link in enumerate(data):
                url = dumps(link["url"], ensure_ascii=False)
                title = dumps(link["title"], ensure_ascii=False)
                out.append(_ev(f"{seq}.{i}" if i else f"{seq}",
                               f'{{"type":"source-url","sourceId":"s{seq}.{i}","url":{url},'
                               f'"title":{title}}}'))
        elif name == "message_start":
            meta = dumps(data, ensure_ascii=False, separators=(",", ":"))
            out.append(_ev(f"{seq}", f'{{"type":"message-metadata","messageMetadata":{meta}}}'))
        elif name in ("progress", "usage"):
            body = dumps(data, ensure_ascii=False, separators=(",", ":"))
            out.append(_ev(f"{seq}", f'{{"type":"data-{name}","id":"{name}","data":{body}}}'))
        k = 1
    tail = []
    if text is not None:
        tail.append(f'{{"type":"text-end","id":"{text}"}}')
    tail += ['{"type":"finish-step"}', '{"type":"finish","finishReason":"stop"}', "[DONE]"]
    out += [_ev(f"{seq}.{k + i}", data) for i, data in enumerate(tail)]
    return "".join(out).encode()


def fstring_from_frames(frames: list[StreamFrame]) -> bytes:
    pairs = []
    for frame in frames:
        chunk = getattr(frame, "chunk", None)
        if chunk is not None:
            envelope = json.loads(bytes(chunk))
            pairs.append((envelope["event"], envelope["data"]))
    return fstring(pairs)


def main(rounds: int) -> str:
    messages = reply()
    frames = frames_of(messages)
    pairs = [(m.name, m.data) for m in messages]
    expected = streamwire(frames)
    candidates: dict[str, Callable[[], bytes]] = {
        "streamwire (frames -> SSE)": lambda: streamwire(frames),
        "f-string (limit: payloads -> SSE)": lambda: fstring(pairs),
        "f-string + json.loads (frames -> SSE)": lambda: fstring_from_frames(frames),
    }
    for name, fn in candidates.items():
        assert fn() == expected, f"{name} does not produce the same bytes"
    times = interleaved(candidates, rounds=rounds)
    events = expected.count(b"\n\n")
    limit = times["f-string (limit: payloads -> SSE)"]
    rows = [(name, t * 1e3, events / t, limit / t) for name, t in times.items()]
    return table(f"AI SDK UI message stream: a {N_CHUNKS}-chunk reply ({events} SSE events, "
                 f"{len(expected):,} bytes); {machine_line(['msgspec'])}",
                 ["encoder", "ms per reply", "events/s", "x the f-string limit"], rows)


if __name__ == "__main__":
    print(main(7))
