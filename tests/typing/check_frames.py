"""Static checks of streamwire.frames (mypy --strict and pyright strict; not run by pytest).

Contract-typed chunk payloads: a ``ChunkCodec[C]`` only carries messages of ``C`` (or of a
contract ``C`` extends), and what it decodes narrows with ``is_event``. The terminal machine's
``classify_stream_terminal`` takes terminal frames or ``"eof"``, nothing else.
"""

from __future__ import annotations

from typing import Any, assert_type

import msgspec

from streamwire.chat import Chat, ChunkPayload
from streamwire.contract import Contract, Event, Message, is_event
from streamwire.frames import (
    ChunkCodec,
    ChunkFrame,
    EndFrame,
    FailFrame,
    ResumeState,
    RewoundFrame,
    StreamFrame,
    TerminalAction,
    TruncatedFrame,
    UnknownFrame,
    classify_stream_terminal,
    decode_stream_frame,
    encode_stream_frame,
)
from streamwire.sse import SSEEvent


class Billing(Contract):
    paid: Event[list[str]] = Event()


class MyChat(Chat):
    extra: Event[list[int]] = Event()


def positive(event: SSEEvent) -> None:
    codec = ChunkCodec(Chat)
    assert_type(codec, ChunkCodec[Chat])
    assert_type(codec.frame(1, Chat.chunk({"chunk": "hi"})), ChunkFrame)
    assert_type(codec.encode(Chat.suggestions(["a"])), bytes)
    msg = codec.decode(msgspec.Raw(b"{}"))
    assert_type(msg, Message[Chat, Any] | None)
    if msg is not None and is_event(msg, Chat.chunk):
        assert_type(msg.data, ChunkPayload)
    ChunkCodec(MyChat).frame(2, Chat.chunk({"chunk": "inherited events are fine"}))
    ChunkCodec(MyChat).frame(3, MyChat.extra([1]))

    frame = decode_stream_frame(event)
    assert_type(frame, StreamFrame | UnknownFrame)
    assert_type(encode_stream_frame(EndFrame("completed")), bytes)
    assert_type(classify_stream_terminal("eof"), TerminalAction)
    assert_type(classify_stream_terminal(TruncatedFrame(3)), TerminalAction)
    out = ResumeState().receive(frame)
    assert_type(out, list[ChunkFrame | RewoundFrame])


def negative() -> None:
    codec = ChunkCodec(Chat)
    codec.frame(1, Billing.paid(["x"]))  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    codec.encode(MyChat.extra([1]))  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    codec.frame(1, Chat.chunk({"chunk": 1}))  # type: ignore[typeddict-item]  # pyright: ignore[reportArgumentType]
    classify_stream_terminal("end")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    classify_stream_terminal(ChunkFrame(1, msgspec.Raw(b"1")))  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    EndFrame("done")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    FailFrame("x", recoverable="yes")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
