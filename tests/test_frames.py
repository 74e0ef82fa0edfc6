"""streamwire.frames: the wire v2 codec, the terminal table, transport events, typed chunk payloads.

The reader state machine (``ResumeState``) is in ``test_frames_state.py``.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any, Literal

import anyio
import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamwire.chat import Chat
from streamwire.contract import Contract, Event, is_event
from streamwire.errors import (
    MalformedFrameError,
    PayloadError,
    SSEDecodeError,
    StreamDropError,
    StreamwireError,
)
from streamwire.frames import (
    CaughtUpFrame,
    ChunkCodec,
    ChunkFrame,
    EndFrame,
    FailFrame,
    FrameDecoder,
    RemoteOutcomeKind,
    RewoundFrame,
    SSEFields,
    StreamFrame,
    TerminalAction,
    TerminalFrame,
    TransportDecoder,
    TruncatedFrame,
    UnknownFrame,
    classify_stream_terminal,
    decode_message_chunk,
    decode_stream_frame,
    decode_transport_events,
    encode_message_chunk,
    encode_stream_frame,
    iter_transport_events,
    remote_terminal_outcome,
    stream_frame_to_sse,
    transport_drop_frame,
)
from streamwire.sse import SSEDecoder, SSEEvent, encode_comment, encode_frame


def raw(text: str) -> msgspec.Raw:
    return msgspec.Raw(text.encode())


def splits(data: bytes, seed: int = 0) -> Iterator[list[bytes]]:
    """The same bytes whole, byte by byte, and in random pieces (h11's ``tr()``)."""
    yield [data]
    yield [data[i : i + 1] for i in range(len(data))]
    rng = random.Random(seed)
    for _ in range(3):
        pieces, i = [], 0
        while i < len(data):
            n = rng.randint(1, 9)
            pieces.append(data[i : i + n])
            i += n
        yield pieces


def decode_all(pieces: list[bytes]) -> list[StreamFrame | UnknownFrame]:
    decoder = FrameDecoder()
    out: list[StreamFrame | UnknownFrame] = []
    for piece in pieces:
        out += decoder.feed(piece)
    return out + decoder.flush()


def decode_bytes(data: bytes) -> list[StreamFrame | UnknownFrame]:
    """Decode ``data`` under every chunking of ``splits``; all must agree."""
    results = [decode_all(pieces) for pieces in splits(data)]
    for other in results[1:]:
        assert other == results[0]
    return results[0]


def sse(event: str, data: str, id: str = "") -> SSEEvent:
    return SSEEvent(event=event, data=data, id=id)


# -- the seed's table: exact wire bytes, and back --------------------------------------------------

WIRE: list[tuple[StreamFrame, bytes]] = [
    (ChunkFrame(7, raw('{"text":"hi"}')),
     b'event: chunk\nid: 7\ndata: {"sequence":7,"chunk":{"text":"hi"}}\n\n'),
    (ChunkFrame(1, raw('"plain"')), b'event: chunk\nid: 1\ndata: {"sequence":1,"chunk":"plain"}\n\n'),
    (EndFrame("completed"), b'event: end\ndata: {"status":"completed"}\n\n'),
    (EndFrame("paused", state={"step": 3}), b'event: end\ndata: {"status":"paused","state":{"step":3}}\n\n'),
    (EndFrame("interrupted", output="x", state=[1], usage={"inputTokens": 5}),
     b'event: end\ndata: {"status":"interrupted","output":"x","state":[1],"usage":{"inputTokens":5}}\n\n'),
    (FailFrame("boom", False), b'event: fail\ndata: {"error":"boom","recoverable":false}\n\n'),
    (FailFrame("net", True, {"code": "UPSTREAM", "status": 502}),
     b'event: fail\ndata: {"error":"net","recoverable":true,"errorDetail":{"code":"UPSTREAM","status":502}}\n\n'),
    (TruncatedFrame(12), b'event: truncated\ndata: {"floor":12,"errorDetail":{"code":"TRUNCATED"}}\n\n'),
    (RewoundFrame(2), b'event: rewound\ndata: {"atStep":2}\n\n'),
    (RewoundFrame(2, 9, 5), b'event: rewound\ndata: {"atStep":2,"atSequence":9,"minSequence":5}\n\n'),
    (CaughtUpFrame(9), b'event: caught-up\ndata: {"head":9}\n\n'),
    (CaughtUpFrame(0), b'event: caught-up\ndata: {"head":0}\n\n'),
]


@pytest.mark.parametrize(("frame", "wire"), WIRE, ids=lambda v: type(v).__name__)
def test_wire_bytes_round_trip(frame: StreamFrame, wire: bytes) -> None:
    assert encode_stream_frame(frame) == wire
    assert decode_bytes(wire) == [frame]
    # stream_frame_to_sse gives the same frame through encode_frame
    fields = stream_frame_to_sse(frame)
    assert encode_frame(fields.data, event=fields.event, id=fields.id) == wire


def test_stream_frame_to_sse_fields() -> None:
    assert stream_frame_to_sse(ChunkFrame(3, raw("{}"))) == SSEFields(
        "chunk", '{"sequence":3,"chunk":{}}', "3")
    assert stream_frame_to_sse(CaughtUpFrame(4)) == SSEFields("caught-up", '{"head":4}', None)


def test_multiline_chunk_payload_cannot_break_the_frame() -> None:
    pretty = '{\n  "a": [1,\r\n 2],\r  "b": "x"\n}'
    wire = encode_stream_frame(ChunkFrame(1, raw(pretty)))
    assert wire.count(b"\n\n") == 1
    assert wire.endswith(b"\n\n")
    (frame,) = decode_bytes(wire + encode_stream_frame(EndFrame("completed")))[:1]
    assert isinstance(frame, ChunkFrame)
    assert msgspec.json.decode(frame.chunk) == {"a": [1, 2], "b": "x"}


@pytest.mark.parametrize(
    "frame",
    [ChunkFrame(0, raw("{}")), ChunkFrame(-1, raw("{}")), EndFrame("done"),  # type: ignore[arg-type]
     TruncatedFrame(3, {"code": "OTHER"}), TruncatedFrame(-1)],
)
def test_encoder_refuses_what_the_decoder_would_reject(frame: StreamFrame) -> None:
    with pytest.raises(ValueError, match=r"sequence|status|TRUNCATED"):
        encode_stream_frame(frame)


def test_unknown_frame_encodes_as_plain_event() -> None:
    assert encode_stream_frame(UnknownFrame("future", "x")) == b"event: future\ndata: x\n\n"


# -- no back-compat ------------------------------------------------------------------------------


def test_v1_error_event_is_unknown() -> None:
    assert decode_stream_frame(sse("error", '{"message":"boom"}')) == UnknownFrame(
        "error", '{"message":"boom"}')


def test_fail_with_truncated_code_is_a_failure() -> None:
    frame = decode_stream_frame(
        sse("fail", '{"error":"gone","recoverable":false,"errorDetail":{"code":"TRUNCATED"}}'))
    assert frame == FailFrame("gone", False, {"code": "TRUNCATED"})
    assert classify_stream_terminal(frame) is TerminalAction.FAIL


@pytest.mark.parametrize(
    "data",
    [
        '{"atStep":3}',  # the v1 non-terminal cleanup marker shape: that is rewound now
        '{"floor":3}',  # errorDetail is required
        '{"floor":3,"errorDetail":{"code":"CLEANUP"}}',
        '{"floor":3,"errorDetail":{}}',
        '{"floor":3,"errorDetail":"TRUNCATED"}',
    ],
)
def test_truncated_is_never_the_v1_cleanup_marker(data: str) -> None:
    with pytest.raises(MalformedFrameError) as info:
        decode_stream_frame(sse("truncated", data))
    assert info.value.retryable
    assert info.value.event == "truncated"
    assert info.value.data == data


def test_connected_comment_is_not_a_frame() -> None:
    comments: list[str] = []
    decoder = FrameDecoder(on_comment=comments.append)
    data = encode_comment("connected") + encode_comment("heartbeat") + b": waiting\n\n"
    assert decoder.feed(data) == []
    assert decoder.flush() == []
    assert comments == ["connected", "heartbeat", "waiting"]


# -- unknown versus malformed --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("event", "data"),
    [("message", '{"sequence":1,"chunk":1}'), ("future", "not json at all"), ("Chunk", "{}"),
     ("error", ""), ("caught_up", '{"head":1}')],
)
def test_unknown_events_whatever_their_data(event: str, data: str) -> None:
    assert decode_stream_frame(sse(event, data, "1")) == UnknownFrame(event, data)


MALFORMED = [
    ("chunk", "not json", "1"),
    ("chunk", '{"sequence":1}', "1"),  # no chunk
    ("chunk", '{"chunk":{}}', ""),  # no sequence
    ("chunk", '{"sequence":"1","chunk":{}}', "1"),
    ("chunk", '{"sequence":0,"chunk":{}}', "0"),
    ("chunk", '{"sequence":1.5,"chunk":{}}', "1.5"),
    ("chunk", '{"sequence":2,"chunk":{}}', "1"),  # id is not the sequence
    ("chunk", '{"sequence":2,"chunk":{}}', ""),  # no id
    ("chunk", '{"sequence":2,"chunk":{}}', "02"),
    ("chunk", "[2, {}]", "2"),
    ("end", "{}", ""),
    ("end", '{"status":"done"}', ""),
    ("end", '{"status":"completed","usage":[1]}', ""),
    ("end", '{"status":"completed"', ""),
    ("fail", '{"error":"x"}', ""),  # recoverable is required
    ("fail", '{"error":1,"recoverable":true}', ""),
    ("fail", '{"error":"x","recoverable":"yes"}', ""),
    ("fail", '{"error":"x","recoverable":true,"errorDetail":"boom"}', ""),
    ("truncated", '{"floor":-1,"errorDetail":{"code":"TRUNCATED"}}', ""),
    ("rewound", "{}", ""),
    ("rewound", '{"atStep":-1}', ""),
    ("rewound", '{"atStep":1,"atSequence":"9"}', ""),
    ("caught-up", "{}", ""),
    ("caught-up", '{"head":-3}', ""),
    ("caught-up", "", ""),
]


@pytest.mark.parametrize(("event", "data", "id"), MALFORMED)
def test_malformed_known_events_raise_retryable(event: str, data: str, id: str) -> None:
    with pytest.raises(MalformedFrameError) as info:
        decode_stream_frame(sse(event, data, id))
    error = info.value
    assert isinstance(error, StreamwireError)
    assert error.retryable
    assert error.event == event
    assert error.data == data
    assert f"malformed {event!r} frame" in str(error)


def test_unknown_fields_in_known_frames_are_ignored() -> None:
    assert decode_stream_frame(sse("end", '{"status":"completed","runId":"r1"}')) == EndFrame(
        "completed")
    assert decode_stream_frame(sse("chunk", '{"sequence":4,"chunk":[],"step":2}', "4")) == (
        ChunkFrame(4, raw("[]")))


def test_frame_decoder_delivers_what_precedes_an_error_then_sticks() -> None:
    decoder = FrameDecoder()
    good = encode_stream_frame(ChunkFrame(1, raw("{}")))
    later = encode_stream_frame(ChunkFrame(2, raw("{}")))
    # The frames before the malformed one are delivered; the error waits for the next call.
    assert decoder.feed(good + b"event: end\ndata: {}\n\n" + later) == [ChunkFrame(1, raw("{}"))]
    with pytest.raises(MalformedFrameError) as first:
        decoder.feed(later)
    with pytest.raises(MalformedFrameError) as again:
        decoder.flush()
    assert again.value is first.value
    assert first.value.event == "end"


def test_frame_decoder_raises_at_once_when_nothing_precedes_the_error() -> None:
    decoder = FrameDecoder()
    with pytest.raises(MalformedFrameError):
        decoder.feed(b"event: chunk\nid: 1\ndata: {}\n\n")
    unterminated = FrameDecoder()
    unterminated.feed(b"event: rewound\ndata: {")
    with pytest.raises(MalformedFrameError):
        unterminated.flush()


def test_frame_decoder_delivers_what_precedes_a_limit() -> None:
    decoder = FrameDecoder(max_line_size=100)
    good = encode_stream_frame(ChunkFrame(1, raw("{}")))
    assert decoder.feed(good + b"data: " + b"x" * 200) == [ChunkFrame(1, raw("{}"))]
    with pytest.raises(SSEDecodeError) as info:
        decoder.feed(b"\n\n")
    assert info.value.limit == "max_line_size"


def test_frame_decoder_limits_are_typed_and_named() -> None:
    decoder = FrameDecoder(max_line_size=64)
    with pytest.raises(SSEDecodeError, match="max_line_size") as info:
        decoder.feed(encode_stream_frame(ChunkFrame(1, raw('"' + "x" * 100 + '"'))))
    assert info.value.limit == "max_line_size"
    with pytest.raises(SSEDecodeError):
        decoder.feed(b"\n")


def test_frame_decoder_exposes_last_event_id_and_retry() -> None:
    decoder = FrameDecoder()
    assert decoder.last_event_id == ""
    assert decoder.retry is None
    decoder.feed(b"retry: 1500\n\n" + encode_stream_frame(ChunkFrame(5, raw("1"))))
    assert decoder.last_event_id == "5"
    assert decoder.retry == 1500


def test_frame_decoder_takes_the_initial_retry() -> None:
    decoder = FrameDecoder(retry=2500)
    assert decoder.retry == 2500
    decoder.feed(b"retry: 300\n\n")
    assert decoder.retry == 300


def test_frame_decoder_error_is_visible_before_the_next_call() -> None:
    decoder = FrameDecoder()
    assert decoder.error is None
    good = encode_stream_frame(ChunkFrame(1, raw("{}")))
    assert decoder.feed(good + b"event: end\ndata: {}\n\n") == [ChunkFrame(1, raw("{}"))]
    assert isinstance(decoder.error, MalformedFrameError)
    with pytest.raises(MalformedFrameError) as info:
        decoder.flush()
    assert info.value is decoder.error


def test_frame_decoder_keeps_unknown_ids_only_when_asked() -> None:
    body = b"event: greeting\nid: a1\ndata: hi\n\ndata: x\n\n" + encode_stream_frame(
        ChunkFrame(3, raw("1"))) + b"event: future\ndata: {}\n\n"
    assert FrameDecoder().feed(body) == [UnknownFrame("greeting", "hi"),
                                         UnknownFrame("message", "x"), ChunkFrame(3, raw("1")),
                                         UnknownFrame("future", "{}")]
    assert FrameDecoder(unknown_ids=True).feed(body) == [
        UnknownFrame("greeting", "hi", "a1"), UnknownFrame("message", "x", "a1"),
        ChunkFrame(3, raw("1")), UnknownFrame("future", "{}", "3")]
    assert encode_stream_frame(UnknownFrame("greeting", "hi", "a1")) == (
        b"event: greeting\nid: a1\ndata: hi\n\n")


# -- line ends and flush -------------------------------------------------------------------------

STREAM: list[StreamFrame] = [
    ChunkFrame(1, raw('{"chunk":"a"}')),
    CaughtUpFrame(1),
    ChunkFrame(2, raw('{"chunk":"b c"}')),
    RewoundFrame(0, 2, 1),
    ChunkFrame(3, raw("[1,2]")),
    EndFrame("completed", output={"text": "abc"}),
]


def test_crlf_input_decodes_like_lf() -> None:
    lf = b"".join(map(encode_stream_frame, STREAM))
    assert decode_bytes(lf) == STREAM
    assert decode_bytes(lf.replace(b"\n", b"\r\n")) == STREAM
    assert decode_bytes(lf.replace(b"\n", b"\r")) == STREAM


def test_flush_delivers_an_unterminated_last_frame() -> None:
    wire = b"".join(map(encode_stream_frame, STREAM)).removesuffix(b"\n\n")
    for pieces in splits(wire):
        decoder = FrameDecoder()
        fed = [f for p in pieces for f in decoder.feed(p)]
        assert fed == STREAM[:-1]  # the end frame waits for its blank line...
        assert decoder.flush() == STREAM[-1:]  # ...which flush() supplies (wire v2)
    crlf = wire.replace(b"\n", b"\r\n") + b"\r\n"  # one line end, no blank line
    assert decode_bytes(crlf) == STREAM


def test_decoder_handles_comments_and_retry_between_frames() -> None:
    wire = b"".join(
        [b"\xef\xbb\xbf", encode_comment("hb"), b"retry: 3000\n\n"]
        + [encode_stream_frame(f) + encode_comment("hb") for f in STREAM])
    assert decode_bytes(wire) == STREAM


# -- the terminal table --------------------------------------------------------------------------

TERMINALS: list[tuple[TerminalFrame | Literal["eof"], TerminalAction]] = [
    (EndFrame("completed"), TerminalAction.DONE),
    (EndFrame("paused"), TerminalAction.DONE),
    (EndFrame("interrupted"), TerminalAction.DONE),
    (FailFrame("x", True), TerminalAction.FAIL),
    (FailFrame("x", False, {"code": "TRUNCATED"}), TerminalAction.FAIL),
    (TruncatedFrame(4), TerminalAction.TRUNCATED),
    ("eof", TerminalAction.DROP),
]


@pytest.mark.parametrize(("last", "action"), TERMINALS)
def test_classify_stream_terminal(last: TerminalFrame | Literal["eof"],
                                  action: TerminalAction) -> None:
    assert classify_stream_terminal(last) is action
    assert action.value in {"done", "fail", "truncated", "drop"}


def test_transport_drop_frame_is_recoverable() -> None:
    frame = transport_drop_frame("source closed")
    assert frame.recoverable
    assert frame.error == "transport_stream_drop"
    assert frame.error_detail == {"code": "TRANSPORT_STREAM_DROP", "message": "source closed"}
    assert decode_bytes(encode_stream_frame(frame)) == [frame]


# -- transport events ----------------------------------------------------------------------------


def body_pieces(frames: Sequence[StreamFrame | UnknownFrame], *, extra: bytes = b"", seed: int = 1) -> list[bytes]:
    data = b"".join(encode_stream_frame(f) + encode_comment("hb") for f in frames) + extra
    return list(splits(data, seed))[-1]


async def agen(pieces: list[bytes]) -> AsyncIterator[bytes]:
    for piece in pieces:
        await anyio.lowlevel.checkpoint()
        yield piece


async def collect(pieces: list[bytes]) -> list[Any]:
    return [e async for e in decode_transport_events(agen(pieces))]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["async", "sync"])
async def test_transport_events_skip_markers_and_stop_at_the_terminal(mode: str) -> None:
    frames: list[StreamFrame | UnknownFrame] = [*STREAM[:-1], UnknownFrame("future", "{}")]
    pieces = body_pieces(frames, extra=encode_stream_frame(EndFrame("paused"))
                         + encode_stream_frame(ChunkFrame(99, raw("{}"))))  # after the terminal
    events = await collect(pieces) if mode == "async" else list(iter_transport_events(pieces))
    assert events == [STREAM[0], STREAM[2], STREAM[4], EndFrame("paused")]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["async", "sync"])
async def test_transport_events_drop_when_the_body_ends_without_terminal(mode: str) -> None:
    pieces = body_pieces(STREAM[:3])
    got: list[Any] = []

    async def read() -> None:
        if mode == "async":
            async for event in decode_transport_events(agen(pieces)):
                got.append(event)  # noqa: PERF401 (the events before the drop are the point)
        else:
            got.extend(iter_transport_events(pieces))

    with pytest.raises(StreamDropError) as info:
        await read()
    assert got == [STREAM[0], STREAM[2]]
    assert info.value.retryable
    assert info.value.cursor == 2


@pytest.mark.anyio
async def test_transport_events_empty_body_is_a_drop() -> None:
    with pytest.raises(StreamDropError) as info:
        await collect([])
    assert info.value.cursor == 0
    with pytest.raises(StreamDropError):
        list(iter_transport_events([b": just a heartbeat\n\n"]))


@pytest.mark.anyio
async def test_transport_events_unterminated_terminal_is_delivered() -> None:
    wire = encode_stream_frame(ChunkFrame(1, raw("{}"))) + encode_stream_frame(
        FailFrame("boom", False, {"code": "X"})).removesuffix(b"\n")
    assert await collect([wire]) == [ChunkFrame(1, raw("{}")), FailFrame("boom", False, {"code": "X"})]
    assert list(iter_transport_events([wire]))[-1] == FailFrame("boom", False, {"code": "X"})


@pytest.mark.anyio
async def test_transport_events_malformed_frame_raises_after_the_good_ones() -> None:
    with pytest.raises(MalformedFrameError):
        await collect([b"event: end\ndata: {}\n\n"])
    body = [encode_stream_frame(STREAM[0]) + b"event: end\ndata: {}\n\n"]
    got: list[Any] = []
    with pytest.raises(MalformedFrameError):
        got.extend(iter_transport_events(body))
    assert got == [STREAM[0]]


def test_transport_decoder_close_is_idempotent_after_terminal() -> None:
    decoder = TransportDecoder()
    assert decoder.feed(encode_stream_frame(TruncatedFrame(3))) == [TruncatedFrame(3)]
    assert decoder.terminal == TruncatedFrame(3)
    assert decoder.feed(b"anything") == []
    assert decoder.close() == []


OUTCOMES: list[tuple[TerminalFrame, RemoteOutcomeKind]] = [
    (EndFrame("completed", output=1), RemoteOutcomeKind.COMPLETED),
    (EndFrame("paused"), RemoteOutcomeKind.STOPPED),
    (EndFrame("interrupted"), RemoteOutcomeKind.STOPPED),
    (FailFrame("net", True, {"code": "NET"}), RemoteOutcomeKind.RETRY),
    (FailFrame("bug", False, {"code": "BUG", "trace": "t"}), RemoteOutcomeKind.FAILED),
    (TruncatedFrame(8), RemoteOutcomeKind.RETRY),
]


@pytest.mark.parametrize(("terminal", "kind"), OUTCOMES)
def test_remote_terminal_outcome(terminal: TerminalFrame, kind: RemoteOutcomeKind) -> None:
    outcome = remote_terminal_outcome(terminal)
    assert outcome.kind is kind
    assert outcome.terminal is terminal
    if isinstance(terminal, FailFrame):
        assert outcome.error == terminal.error
        assert outcome.error_detail == terminal.error_detail
    elif isinstance(terminal, TruncatedFrame):
        assert outcome.error_detail == {"code": "TRUNCATED"}
    else:
        assert outcome.status == terminal.status
        assert outcome.error_detail is None


# -- typed payloads inside chunks ------------------------------------------------------------------


class Extra(Contract):
    note: Event[list[str]] = Event("note")


def test_chat_messages_ride_inside_chunks() -> None:
    codec = ChunkCodec(Chat)
    frame = codec.frame(3, Chat.chunk({"chunk": "hi"}))
    assert encode_stream_frame(frame) == (
        b'event: chunk\nid: 3\ndata: {"sequence":3,"chunk":{"event":"chunk","data":{"chunk":"hi"}}}\n\n')
    (decoded,) = decode_bytes(encode_stream_frame(frame))
    assert isinstance(decoded, ChunkFrame)
    msg = codec.decode(decoded)
    assert msg is not None
    assert is_event(msg, Chat.chunk)
    assert msg.data == {"chunk": "hi"}
    assert msg.name == "chunk"
    sugg = decode_message_chunk(encode_message_chunk(Chat.suggestions(["a", "b"])), Chat)
    assert sugg is not None
    assert is_event(sugg, Chat.suggestions)
    assert sugg.data == ["a", "b"]


def test_message_chunk_errors_and_unknown_events() -> None:
    codec = ChunkCodec(Chat)
    assert codec.decode(b'{"event":"newer","data":{}}') is None
    with pytest.raises(PayloadError, match="not declared by Chat"):
        ChunkCodec(Chat, strict=True).decode(raw('{"event":"newer","data":{}}'))
    with pytest.raises(PayloadError) as info:
        codec.decode('{"event":"chunk","data":{"chunk":1}}')
    assert info.value.event == "chunk"
    for bad in (b"[]", b'{"data":{}}', b"nope", b'{"event":1,"data":{}}'):
        with pytest.raises(PayloadError):
            codec.decode(ChunkFrame(1, msgspec.Raw(bad)))
    assert ChunkCodec(Extra).encode(Extra.note(["x"])) == b'{"event":"note","data":["x"]}'


# -- hypothesis: any frames, any chunking ----------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)


@st.composite
def raw_json(draw: st.DrawFn) -> msgspec.Raw:
    body = msgspec.json.encode(draw(json_values))
    if draw(st.booleans()):
        body = msgspec.json.format(body, indent=draw(st.integers(0, 2)))
    return msgspec.Raw(body)


details = st.none() | st.dictionaries(st.text(max_size=5), json_values, max_size=3)
counts = st.integers(0, 2**40)
frames_st: st.SearchStrategy[StreamFrame] = st.one_of(
    st.builds(ChunkFrame, st.integers(1, 2**40), raw_json()),
    st.builds(EndFrame, st.sampled_from(["completed", "paused", "interrupted"]),
              json_values.filter(lambda v: v is not None), st.none() | json_values.filter(
                  lambda v: v is not None), st.none() | st.dictionaries(st.text(max_size=5), json_values,
                                                                       max_size=2)),
    st.builds(FailFrame, st.text(max_size=20), st.booleans(), details),
    st.builds(TruncatedFrame, counts, st.dictionaries(st.text(max_size=4), json_values, max_size=2)
              .map(lambda d: {**d, "code": "TRUNCATED"})),
    st.builds(RewoundFrame, counts, st.none() | counts, st.none() | counts),
    st.builds(CaughtUpFrame, counts),
)


def canonical(frame: StreamFrame) -> Any:
    """Compare chunks by their JSON value: a CR inside a pretty-printed payload comes back as LF."""
    if isinstance(frame, ChunkFrame):
        return ("chunk", frame.sequence, msgspec.json.decode(frame.chunk))
    return frame


@settings(max_examples=150, deadline=None)
@given(frames=st.lists(frames_st, max_size=8), cuts=st.lists(st.integers(0, 10**6), max_size=12),
       crlf=st.booleans())
def test_any_frames_round_trip_under_any_chunking(frames: list[StreamFrame], cuts: list[int],
                                                  crlf: bool) -> None:
    wire = b"".join(map(encode_stream_frame, frames))
    if crlf:
        wire = wire.replace(b"\n", b"\r\n")
    points = sorted({c % (len(wire) + 1) for c in cuts})
    pieces = [wire[a:b] for a, b in zip([0, *points], [*points, len(wire)], strict=True)]
    decoded = decode_all(pieces)
    assert [canonical(f) for f in decoded] == [canonical(f) for f in frames]  # type: ignore[arg-type]
    assert decode_all([wire]) == decoded


@settings(max_examples=150, deadline=None)
@given(data=st.binary(max_size=300), event=st.sampled_from(
    ["chunk", "end", "fail", "truncated", "rewound", "caught-up", "error", "x"]))
def test_arbitrary_bytes_give_frames_or_typed_errors(data: bytes, event: str) -> None:
    decoder = FrameDecoder()
    try:
        decoder.feed(b"event: " + event.encode() + b"\ndata: " + data)
        decoder.flush()
    except (MalformedFrameError, SSEDecodeError):
        pass


def test_decoder_matches_plain_sse_decoder_for_known_frames() -> None:
    wire = b"".join(map(encode_stream_frame, STREAM))
    events = SSEDecoder().feed(wire)
    assert [decode_stream_frame(e) for e in events] == STREAM


@pytest.mark.anyio
async def test_an_abort_by_the_caller_is_not_a_drop() -> None:
    # The caller stops reading mid-body (its own abort): the reader ends quietly, no drop raised.
    pieces = body_pieces(STREAM[:3])  # no terminal: a drop if read to the end
    events = decode_transport_events(agen(pieces))
    async for first in events:
        assert first == STREAM[0]
        break
    await events.aclose()  # type: ignore[attr-defined]
    sync = iter_transport_events(pieces)
    assert next(sync) == STREAM[0]
    sync.close()  # type: ignore[attr-defined]
