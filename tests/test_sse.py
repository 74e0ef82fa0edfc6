"""streamwire.sse: the WHATWG event-stream decoder, its limits, and the encoder.

Every decoding test goes through ``decode_all`` (h11's ``tr()`` idea): the same bytes fed whole,
one byte at a time, in 2- and 3-byte pieces and in random pieces must give the same events, the
same ``last_event_id`` and the same ``retry``. A plain reference decoder (``reference``, written
from the spec's prose with no regard for speed) checks the real one on generated streams.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable, Sequence

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers.sse_vectors import RETRY_IGNORED, VECTORS
from streamwire.errors import SSEDecodeError, StreamwireError, UsageError
from streamwire.sse import (
    DEFAULT_MAX_EVENT_SIZE,
    DEFAULT_MAX_LINE_SIZE,
    SSEDecoder,
    SSEEvent,
    encode_comment,
    encode_frame,
)

Result = tuple[list[SSEEvent], str, int | None]  # events, last_event_id, retry


def run(pieces: Iterable[bytes], *, flush: bool = False, **kwargs: object) -> Result:
    decoder = SSEDecoder(**kwargs)  # type: ignore[arg-type]
    events: list[SSEEvent] = []
    for piece in pieces:
        events += decoder.feed(piece)
    if flush:
        events += decoder.flush()
    return events, decoder.last_event_id, decoder.retry


def splits(data: bytes, rng: random.Random) -> list[list[bytes]]:
    """Whole, byte by byte, 2- and 3-byte pieces, and three random cuts of ``data``."""
    ways = [[data], [data[i : i + 1] for i in range(len(data))]]
    ways += [[data[i : i + n] for i in range(0, len(data), n)] for n in (2, 3)]
    for _ in range(3):
        cuts = sorted(rng.sample(range(1, len(data)), min(len(data) - 1, rng.randint(1, 8))))
        ways.append([data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)])
    return [w for w in ways if w]


def decode_all(data: bytes, *, flush: bool = False, seed: int = 0, **kwargs: object) -> Result:
    """Decode ``data`` every way ``splits`` cuts it; all must agree (h11's ``tr()``)."""
    ways = splits(data, random.Random(seed)) if data else [[]]
    first = run(ways[0], flush=flush, **kwargs)
    for pieces in ways[1:]:
        assert run(pieces, flush=flush, **kwargs) == first, pieces
    return first


def feed_each(decoder: SSEDecoder, pieces: Iterable[bytes], into: list[SSEEvent]) -> None:
    for piece in pieces:
        into += decoder.feed(piece)


def keys(events: Sequence[SSEEvent]) -> list[tuple[str, str, str]]:
    return [(e.event, e.data, e.id) for e in events]


# -- a reference decoder: the spec's prose, line by line, over the whole input -------------------


def reference(data: bytes, *, flush: bool = False) -> Result:
    """WHATWG "event stream interpretation" over the whole input, written for clarity only."""
    text = data.decode("utf-8", "replace")
    if text.startswith("\ufeff"):
        text = text[1:]
    lines: list[str] = []
    current = ""
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\r":
            lines.append(current)
            current = ""
            if i + 1 < len(text) and text[i + 1] == "\n":
                i += 1
        elif ch == "\n":
            lines.append(current)
            current = ""
        else:
            current += ch
        i += 1
    if flush:
        if current:
            lines.append(current)
        lines.append("")
    events: list[SSEEvent] = []
    data_buf, type_buf, id_buf, last_id, retry = "", "", "", "", None
    for line in lines:
        if line == "":
            last_id = id_buf
            if data_buf:
                events.append(SSEEvent(type_buf or "message", data_buf[:-1], last_id, retry))
            data_buf, type_buf = "", ""
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "event":
            type_buf = value
        elif field == "data":
            data_buf += value + "\n"
        elif field == "id":
            if "\0" not in value:
                id_buf = value
        elif field == "retry" and 0 < len(value) <= 18 and all("0" <= c <= "9" for c in value):
            retry = int(value)
    return events, last_id, retry


# -- WHATWG vectors and rules ---------------------------------------------------------------------


@pytest.mark.parametrize(("name", "data", "expected"), VECTORS, ids=[v[0] for v in VECTORS])
def test_whatwg_vectors(name: str, data: bytes, expected: list[tuple[str, str, str]]) -> None:
    events, _, _ = decode_all(data)
    assert keys(events) == expected, name
    assert reference(data)[0] == events


@pytest.mark.parametrize("value", RETRY_IGNORED, ids=repr)
def test_retry_must_be_all_ascii_digits(value: bytes) -> None:
    events, _, retry = decode_all(b"retry: 1000\n\nretry: " + value + b"\ndata: a\n\n")
    assert retry == 1000
    assert [e.retry for e in events] == [1000]


def test_retry_in_force_is_carried_by_later_events() -> None:
    events, _, retry = decode_all(b"data: a\n\nretry: 0\n\ndata: b\n\nretry: 2500\ndata: c\n\n")
    assert [(e.data, e.retry) for e in events] == [("a", None), ("b", 0), ("c", 2500)]
    assert retry == 2500


def test_retry_is_seen_as_soon_as_its_line_ends() -> None:
    decoder = SSEDecoder()
    for byte in b"retry: 42":
        decoder.feed(bytes([byte]))
    assert decoder.retry is None
    decoder.feed(b"\n")
    assert decoder.retry == 42


def test_initial_retry_is_in_force_until_the_stream_sets_one() -> None:
    # A reconnecting reader passes the reconnection time its last connection left.
    decoder = SSEDecoder(retry=1500)
    assert decoder.retry == 1500
    events = decoder.feed(b"data: a\n\nretry: 200\ndata: b\n\n")
    assert [(e.data, e.retry) for e in events] == [("a", 1500), ("b", 200)]
    assert decoder.retry == 200
    assert SSEDecoder(retry=0).feed(b"data: x\n\n")[0].retry == 0


@pytest.mark.parametrize("retry", [-1, 1.5, "100", True])
def test_initial_retry_must_be_a_non_negative_int(retry: object) -> None:
    with pytest.raises(ValueError, match="retry must be a non-negative int"):
        SSEDecoder(retry=retry)  # type: ignore[arg-type]


def test_last_event_id_changes_at_blank_lines_only() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"id: 5\n") == []
    assert decoder.last_event_id == ""
    assert decoder.feed(b"\n") == []  # no data: nothing dispatched, but the id is now in force
    assert decoder.last_event_id == "5"
    assert keys(decoder.feed(b"data: x\n\n")) == [("message", "x", "5")]


def test_bom_is_stripped_once_at_stream_start_only() -> None:
    bom = b"\xef\xbb\xbf"
    assert keys(decode_all(bom + b"data: a\n\n")[0]) == [("message", "a", "")]
    # A second BOM is part of the first field name, which is then unknown.
    assert decode_all(bom + bom + b"data: a\n\n")[0] == []
    # A BOM later in the stream is not a BOM: the line's field name is "\ufeffdata".
    assert keys(decode_all(b"data: a\n\n" + bom + b"data: b\n\n")[0]) == [("message", "a", "")]
    decoder = SSEDecoder()
    decoder.feed(b"\n")
    assert decoder.feed(bom + b"data: x\n\n") == []


def test_multibyte_utf8_split_across_feeds() -> None:
    text = "data: é東🙂\n\n"
    events, _, _ = decode_all(text.encode())
    assert [e.data for e in events] == ["é東🙂"]
    # Every cut inside a character, not only the ones decode_all happens to pick.
    raw = text.encode()
    for cut in range(1, len(raw)):
        assert [e.data for e in run([raw[:cut], raw[cut:]])[0]] == ["é東🙂"]


def test_invalid_utf8_is_replaced_in_every_field() -> None:
    events, last_id, _ = decode_all(b"event: a\xffb\nid: \xc3\ndata: \xe2\x82\n\n")
    assert keys(events) == [("a\ufffdb", "\ufffd", "\ufffd")]
    assert last_id == "\ufffd"


def test_cr_ending_one_feed_and_lf_starting_the_next_are_one_line_end() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\r") == []
    assert keys(decoder.feed(b"\n\r\n")) == [("message", "a", "")]
    # CR then CR: two line ends, so the second one is the blank line that dispatches.
    decoder = SSEDecoder()
    assert decoder.feed(b"data: b\r") == []
    assert keys(decoder.feed(b"\r")) == [("message", "b", "")]
    # A CR-terminated blank line dispatches at once: nothing waits for a LF that may never come.
    decoder = SSEDecoder()
    assert keys(decoder.feed(b"data: c\r\r")) == [("message", "c", "")]
    assert decoder.feed(b"\n") == []  # the tail of the CRLF, not another blank line


def test_lf_after_cr_is_dropped_only_if_it_comes_next() -> None:
    decoder = SSEDecoder()
    decoder.feed(b"data: a\r")
    decoder.feed(b"")  # nothing arrived: the LF may still come
    assert keys(decoder.feed(b"\n\n")) == [("message", "a", "")]


def test_field_without_colon_and_unknown_fields() -> None:
    events, last_id, retry = decode_all(b"data\nevent\nid\nretry\nfoo: bar\nDATA: x\n\n")
    assert keys(events) == [("message", "", "")]
    assert (last_id, retry) == ("", None)


def test_event_type_and_id_values_keep_inner_spaces_and_colons() -> None:
    events, _, _ = decode_all(b"event:  two words\nid: a:b c\ndata:x: y\n\n")
    assert keys(events) == [(" two words", "x: y", "a:b c")]


def test_empty_event_type_means_message() -> None:
    assert keys(decode_all(b"event:\ndata: a\n\n")[0]) == [("message", "a", "")]


def test_ping_comments_dispatch_nothing_even_once_ids_are_set() -> None:
    # httpx-sse and the SDK decoders emit an empty "message" here (research/peer-performance.md).
    events, last_id, _ = decode_all(b"id: 1\ndata: a\n\n: ping\n\n: ping\n\nretry: 5\n\n")
    assert keys(events) == [("message", "a", "1")]
    assert last_id == "1"


def test_feed_accepts_bytearray_and_empty_input() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"") == []
    assert decoder.feed(bytearray(b"data: a\n")) == []
    assert keys(decoder.feed(bytearray(b"\n"))) == [("message", "a", "")]


# -- flush -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tail", "expected"),
    [
        (b"data: b", [("message", "b", "")]),
        (b"data: b\n", [("message", "b", "")]),
        (b"data: b\r", [("message", "b", "")]),
        (b"data: b\r\n", [("message", "b", "")]),
        (b"data: b\ndata: c", [("message", "b\nc", "")]),
        (b"id: 3\ndata: b", [("message", "b", "3")]),
        (b"event: x", []),
        (b"", []),
        (b": comment", []),
    ],
)
def test_flush_delivers_the_unterminated_last_event(
    tail: bytes, expected: list[tuple[str, str, str]]
) -> None:
    data = b"data: a\n\n" + tail
    assert keys(decode_all(data)[0]) == [("message", "a", "")]
    events, _, _ = decode_all(data, flush=True)
    assert keys(events) == [("message", "a", ""), *expected]
    assert reference(data, flush=True)[0] == events


def test_flush_applies_a_last_id_without_data() -> None:
    decoder = SSEDecoder()
    decoder.feed(b"data: a\n\nid: 9\n")
    assert decoder.flush() == []
    assert decoder.last_event_id == "9"


def test_flush_twice_and_feed_after_flush() -> None:
    decoder = SSEDecoder()
    assert keys(decoder.feed(b"data: a\n\n")) == [("message", "a", "")]
    assert decoder.flush() == []
    assert decoder.flush() == []
    for data in (b"data: b\n\n", b"x", b""):
        with pytest.raises(UsageError, match="after flush"):
            decoder.feed(data)


# -- comments ----------------------------------------------------------------------------------


def test_comments_go_to_on_comment_in_order_before_the_events() -> None:
    seen: list[object] = []

    def on_comment(text: str) -> None:
        seen.append(text)

    decoder = SSEDecoder(on_comment=on_comment)
    events = decoder.feed(b": ping\n:\n:no space\n:  two spaces\ndata: a\n: after\n\n")
    seen.append(events)
    assert seen == ["ping", "", "no space", " two spaces", "after", events]
    assert keys(events) == [("message", "a", "")]


def test_a_heartbeat_is_seen_when_its_line_ends_even_in_tiny_pieces() -> None:
    seen: list[str] = []
    decoder = SSEDecoder(on_comment=seen.append)
    decoder.feed(b"id: 1\ndata: x\n\n")
    for byte in b": ping":
        decoder.feed(bytes([byte]))
        assert seen == []
    decoder.feed(b"\n")
    assert seen == ["ping"]
    # A comment line with no blank line after it (the WHATWG-suggested ":\n" keep-alive).
    decoder.feed(b":")
    decoder.feed(b"\n")
    assert seen == ["ping", ""]


def test_comments_are_free_without_a_callback() -> None:
    assert decode_all(b": a\n: b\n\n")[0] == []


# -- limits ------------------------------------------------------------------------------------


def test_defaults_admit_multi_megabyte_data_urls() -> None:
    assert DEFAULT_MAX_LINE_SIZE >= 16 * 1024 * 1024
    assert DEFAULT_MAX_EVENT_SIZE >= 16 * 1024 * 1024
    url = "data:image/png;base64," + "A" * (10 * 1024 * 1024)
    stream = b"event: attachment\ndata: " + url.encode() + b"\n\n"
    for piece_size in (16384, len(stream)):
        pieces = [stream[i : i + piece_size] for i in range(0, len(stream), piece_size)]
        events, _, _ = run(pieces)
        assert [(e.event, e.data == url) for e in events] == [("attachment", True)]


@pytest.mark.parametrize("piece_size", [1, 7, 4096])
def test_a_line_over_max_line_size_raises_with_the_earlier_events(piece_size: int) -> None:
    stream = b"data: a\n\n" + b"data: " + b"x" * 200 + b"\n\ndata: c\n\n"
    pieces = [stream[i : i + piece_size] for i in range(0, len(stream), piece_size)]
    decoder = SSEDecoder(max_line_size=100)
    got: list[SSEEvent] = []
    with pytest.raises(SSEDecodeError) as info:
        feed_each(decoder, pieces, got)
    err = info.value
    assert err.limit == "max_line_size"
    assert "max_line_size=100" in str(err)
    assert "pass a larger max_line_size" in str(err)
    assert isinstance(err, StreamwireError)
    assert err.status_hint == 413
    assert not err.retryable
    assert keys([*got, *err.events]) == [("message", "a", "")]
    with pytest.raises(UsageError):
        decoder.feed(b"data: d\n\n")


def test_a_line_exactly_at_max_line_size_passes() -> None:
    line = b"data: " + b"x" * 94  # 100 bytes
    assert [len(e.data) for e in decode_all(line + b"\n\n", max_line_size=100)[0]] == [94]
    with pytest.raises(SSEDecodeError):
        run([line + b"x\n\n"], max_line_size=100)


def test_an_unterminated_line_cannot_grow_past_max_line_size() -> None:
    decoder = SSEDecoder(max_line_size=1000)
    with pytest.raises(SSEDecodeError, match="max_line_size") as info:
        feed_each(decoder, [b"x"] * 2000, [])
    assert info.value.events == []


def test_held_lines_do_not_count_towards_the_next_line() -> None:
    # Small pieces that end data/id/event lines are held back (a speed-up); the line limit must
    # still apply to each line alone.
    decoder = SSEDecoder(max_line_size=40)
    for piece in (b"event: e\n", b"id: 1\n", b"data: 12345678901234567890\n", b"data: "):
        assert decoder.feed(piece) == []
    decoder.feed(b"y" * 34)  # this line is now exactly 40 bytes; the held ones came before it
    assert keys(decoder.feed(b"\n\n")) == [("e", "12345678901234567890\n" + "y" * 34, "1")]
    decoder.feed(b"data: ")
    with pytest.raises(SSEDecodeError, match="max_line_size"):
        decoder.feed(b"z" * 35)


def test_held_lines_stay_bounded() -> None:
    # A peer that sends id lines forever in tiny pieces: what is held back must stay small
    # (white-box: the buffer is the only place held bytes live).
    decoder = SSEDecoder()
    stream = b"event: e\nid: 1\n" * 5000 + b"data: x\n\n"
    largest = 0
    events: list[SSEEvent] = []
    for i in range(0, len(stream), 3):
        events += decoder.feed(stream[i : i + 3])
        largest = max(largest, len(decoder._buf))
    assert largest <= 300
    assert keys(events) == [("e", "x", "1")]


@pytest.mark.parametrize("piece_size", [1, 5, 64, 100_000])
def test_an_event_over_max_event_size_raises_with_the_earlier_events(piece_size: int) -> None:
    stream = b"data: first\n\n" + b"data: 0123456789\n" * 20 + b"\n"
    pieces = [stream[i : i + piece_size] for i in range(0, len(stream), piece_size)]
    decoder = SSEDecoder(max_event_size=100)
    got: list[SSEEvent] = []
    with pytest.raises(SSEDecodeError) as info:
        feed_each(decoder, pieces, got)
    err = info.value
    assert err.limit == "max_event_size"
    assert "max_event_size=100" in str(err)
    assert "pass a larger max_event_size" in str(err)
    assert keys([*got, *err.events]) == [("message", "first", "")]


def test_an_open_event_is_refused_before_its_blank_line_arrives() -> None:
    # Memory stays bounded: the decoder does not wait for the end of an oversized event.
    decoder = SSEDecoder(max_event_size=10_000)
    with pytest.raises(SSEDecodeError, match="max_event_size"):
        feed_each(decoder, [b"data: 0123456789\n"] * 2000, [])


def test_an_event_exactly_at_max_event_size_passes() -> None:
    data = b"data: " + b"x" * 49 + b"\ndata: " + b"y" * 50 + b"\n\n"  # 49 + LF + 50 = 100
    assert [len(e.data) for e in decode_all(data, max_event_size=100)[0]] == [100]
    with pytest.raises(SSEDecodeError):
        run([data.replace(b"y\n", b"yy\n")], max_event_size=100)


def test_the_event_limit_counts_the_first_line_of_a_multi_line_event() -> None:
    decoder = SSEDecoder(max_event_size=100)
    decoder.feed(b"data: " + b"x" * 90 + b"\n")
    with pytest.raises(SSEDecodeError, match="max_event_size"):
        decoder.feed(b"data: " + b"y" * 20 + b"\n\n")


def test_limits_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        SSEDecoder(max_line_size=0)
    with pytest.raises(ValueError, match="positive"):
        SSEDecoder(max_event_size=-1)


# -- long lines (the zero-copy path) ---------------------------------------------------------------


@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"])
@pytest.mark.parametrize("piece_size", [1000, 16384])
def test_long_data_lines_arriving_in_pieces(eol: bytes, piece_size: int) -> None:
    big = "é" * 40_000 + "x" * 30_000  # 110,000 bytes, multi-byte characters cut by the pieces
    stream = (
        b"id: 1" + eol + b"data: " + big.encode() + eol + b"data:" + big.encode() + eol + eol
        + b"data: after" + eol + eol
    )
    pieces = [stream[i : i + piece_size] for i in range(0, len(stream), piece_size)]
    events, last_id, _ = run(pieces)
    assert keys(events) == [("message", big + "\n" + big, "1"), ("message", "after", "1")]
    assert run([stream]) == (events, last_id, None)
    assert reference(stream)[0] == events


def test_long_lines_that_are_not_data() -> None:
    seen: list[str] = []
    long_comment = b": " + b"c" * 100_000
    stream = long_comment + b"\nevent: " + b"e" * 70_000 + b"\nid: " + b"7" * 70_000
    stream += b"\ndata: x\n\n"
    pieces = [stream[i : i + 5000] for i in range(0, len(stream), 5000)]
    decoder = SSEDecoder(on_comment=seen.append)
    events = [e for p in pieces for e in decoder.feed(p)]
    assert seen == ["c" * 100_000]
    assert keys(events) == [("e" * 70_000, "x", "7" * 70_000)]


def test_long_first_line_with_a_bom_and_a_long_flushed_line() -> None:
    stream = b"\xef\xbb\xbfdata: " + b"z" * 100_000
    pieces = [stream[i : i + 4096] for i in range(0, len(stream), 4096)]
    assert [len(e.data) for e in run(pieces, flush=True)[0]] == [100_000]
    assert run(pieces)[0] == []


def test_long_data_line_over_the_event_limit() -> None:
    stream = b"data: a\n" + b"data: " + b"x" * 100_000 + b"\n\n"
    pieces = [stream[i : i + 8192] for i in range(0, len(stream), 8192)]
    with pytest.raises(SSEDecodeError, match="max_event_size"):
        run(pieces, max_event_size=100_000)
    assert [len(e.data) for e in run(pieces, max_event_size=100_002)[0]] == [100_002]


# -- properties ----------------------------------------------------------------------------------

# Streams built from the pieces that matter (field names, separators, every line ending, BOM, NUL,
# split UTF-8) so that random streams hit the interesting paths, plus any bytes at all.
TOKENS = [
    b"data", b"id", b"event", b"retry", b":", b": ", b" ", b"\n", b"\r", b"\r\n", b"\n\n",
    b"x", b"12", b"\x00", b"\xef\xbb\xbf", b"\xe2\x82", b"\xac", b"\xff", b"-", b"data: ",
    b"id: ", b"event: ", b"retry: ", b": ping\n\n", b"data: abc\n", b"event: chunk\n",
    b"id: 7\n", b"event: chunk\nid: 8\ndata: {}\n\n", b"event: other\ndata: y\n\n",
    b"id: 9\ndata: z\n\n", b"data: w\n\n",
]
streams = st.one_of(
    st.lists(st.sampled_from(TOKENS), max_size=60).map(b"".join),
    st.binary(max_size=200),
)
FAST = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(data=streams, cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=12),
       flush=st.booleans())
def test_any_split_gives_the_events_of_one_feed(data: bytes, cuts: list[int], flush: bool) -> None:
    points = sorted({c % (len(data) + 1) for c in cuts})
    pieces = [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]
    assert run(pieces, flush=flush) == run([data], flush=flush)


@FAST
@given(data=streams, flush=st.booleans())
def test_decoder_matches_the_reference_decoder(data: bytes, flush: bool) -> None:
    assert run([data], flush=flush) == reference(data, flush=flush)
    assert run([data[i : i + 1] for i in range(len(data))], flush=flush) == reference(
        data, flush=flush
    )


@FAST
@given(data=streams, size=st.integers(min_value=1, max_value=5), limit=st.integers(1, 40),
       which=st.sampled_from(["max_line_size", "max_event_size"]), flush=st.booleans())
def test_arbitrary_bytes_raise_nothing_but_sse_decode_error(
    data: bytes, size: int, limit: int, which: str, flush: bool
) -> None:
    decoder = SSEDecoder(**{which: limit})  # type: ignore[arg-type]
    error: SSEDecodeError | None = None
    try:
        feed_each(decoder, [data[i : i + size] for i in range(0, len(data), size)], [])
        if flush:
            decoder.flush()
    except SSEDecodeError as err:
        error = err
    assert error is None or error.limit == which
    run([data], flush=flush)  # and with the default limits nothing is raised at all


field_text = st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\r\n"))
frames = st.tuples(
    st.text(st.characters(blacklist_categories=["Cs"])),  # data: anything, line ends included
    st.one_of(st.none(), field_text),  # event
    st.one_of(st.none(), field_text.filter(lambda s: "\0" not in s)),  # id
    st.one_of(st.none(), st.integers(min_value=0, max_value=10**15)),  # retry
)


@FAST
@given(batch=st.lists(frames, min_size=1, max_size=6), seed=st.integers(0, 2**32))
def test_encode_then_decode_round_trips(
    batch: list[tuple[str, str | None, str | None, int | None]], seed: int
) -> None:
    stream = b"".join(encode_frame(d, event=e, id=i, retry=r) for d, e, i, r in batch)
    expected: list[SSEEvent] = []
    last_id, retry = "", None
    for data, event, id_, retry_ in batch:
        last_id = last_id if id_ is None else id_
        retry = retry if retry_ is None else retry_
        data = data.replace("\r\n", "\n").replace("\r", "\n")
        expected.append(SSEEvent(event or "message", data, last_id, retry))
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(len(stream) + 1), min(len(stream) + 1, 6)))
    pieces = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
    assert run(pieces) == (expected, last_id, retry)


# -- linear time (a guard against quadratic blow-ups, not a benchmark) -----------------------------


def _cpu(fn: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(3):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


@pytest.mark.parametrize(
    "stream",
    [
        pytest.param(b"data: " + b"x" * (16 * 1024 * 1024) + b"\n\n", id="one 16 MiB line"),
        pytest.param(b"data: 0123456789abcdef\n" * 100_000 + b"\n", id="one event of 100k lines"),
        pytest.param(b"id: 1\n" * 100_000 + b"data: x\n\n", id="100k lines of one id"),
        pytest.param(b": " + b"c" * (4 * 1024 * 1024) + b"\n\n", id="one 4 MiB comment"),
    ],
)
def test_decoding_in_16_kib_pieces_costs_about_what_whole_costs(stream: bytes) -> None:
    pieces = [stream[i : i + 16384] for i in range(0, len(stream), 16384)]
    whole = _cpu(lambda: run([stream]))
    split = _cpu(lambda: run(pieces))
    # Quadratic work would make the pieces hundreds of times slower; allow noise, not that.
    assert split < 5 * whole + 0.05, (split, whole)


def test_tiny_pieces_cost_linear_time() -> None:
    stream = b"event: chunk\nid: 1\ndata: {}\n\n" * 2000
    small = stream[: len(stream) // 4]
    per_byte = _cpu(lambda: run([stream[i : i + 3] for i in range(0, len(stream), 3)]))
    per_byte_small = _cpu(lambda: run([small[i : i + 3] for i in range(0, len(small), 3)]))
    assert per_byte < 8 * per_byte_small + 0.05, (per_byte, per_byte_small)


# -- SSEEvent ------------------------------------------------------------------------------------


def test_sse_event_defaults_and_immutability() -> None:
    event = SSEEvent()
    assert (event.event, event.data, event.id, event.retry) == ("message", "", "", None)
    with pytest.raises(AttributeError):
        event.data = "x"  # type: ignore[misc]
    assert SSEEvent("a", "b", "c", 1) == SSEEvent(event="a", data="b", id="c", retry=1)
    assert msgspec.json.decode(msgspec.json.encode(event), type=SSEEvent) == event


# -- the encoder ---------------------------------------------------------------------------------


def test_encode_frame_layout() -> None:
    assert encode_frame("hi") == b"data: hi\n\n"
    assert encode_frame("") == b"data: \n\n"
    assert encode_frame("x", event="chunk", id="7", retry=0) == (
        b"event: chunk\nid: 7\nretry: 0\ndata: x\n\n"
    )
    assert encode_frame("é🙂", id="") == "id: \ndata: é🙂\n\n".encode()


@pytest.mark.parametrize("data", ["a\nb", "a\rb", "a\r\nb", "a\n\nb\r\r\n", "\n", "\r\n"])
def test_encode_frame_splits_every_line_ending_into_data_lines(data: str) -> None:
    frame = encode_frame(data)
    assert b"\r" not in frame
    normalised = data.replace("\r\n", "\n").replace("\r", "\n")
    lines = normalised.split("\n")
    assert frame == b"".join(b"data: " + line.encode() + b"\n" for line in lines) + b"\n"
    assert frame.endswith(b"\n\n")
    assert [e.data for e in decode_all(frame + b"")[0]] == [normalised]


@pytest.mark.parametrize("bad", ["a\nb", "a\rb", "\r\n", "x\n"])
@pytest.mark.parametrize("field", ["event", "id"])
def test_encode_frame_refuses_line_ends_in_event_and_id(field: str, bad: str) -> None:
    with pytest.raises(ValueError, match="frame injection"):
        encode_frame("data", **{field: bad})  # type: ignore[arg-type]


def test_encode_frame_refuses_nul_in_id_but_not_in_event() -> None:
    with pytest.raises(ValueError, match="NUL"):
        encode_frame("x", id="1\x002")
    frame = encode_frame("x", event="a\x00b")
    assert keys(decode_all(frame)[0]) == [("a\x00b", "x", "")]


@pytest.mark.parametrize("retry", [-1, True, False, 1.5, "5", None.__class__])
def test_encode_frame_refuses_retry_that_is_not_a_non_negative_int(retry: object) -> None:
    with pytest.raises(ValueError, match="retry"):
        encode_frame("x", retry=retry)  # type: ignore[arg-type]


def test_encode_comment() -> None:
    assert encode_comment("ping") == b": ping\n\n"
    assert encode_comment() == b":\n\n"
    assert encode_comment("a\nb\r\nc\rd") == b": a\n: b\n: c\n: d\n\n"
    seen: list[str] = []
    decoder = SSEDecoder(on_comment=seen.append)
    assert decoder.feed(encode_comment("a\nb") + encode_comment()) == []
    assert seen == ["a", "b", ""]


def test_held_lines_before_a_long_data_line() -> None:
    big = b"y" * 100_000
    pieces = [b"event: e\n", b"data: a\n", b"data: "]
    pieces += [big[i : i + 1000] for i in range(0, len(big), 1000)]
    pieces += [b"\n", b"\n"]
    events, _, _ = run(pieces)
    assert keys(events) == [("e", "a\n" + big.decode(), "")]
    assert reference(b"".join(pieces))[0] == events


@pytest.mark.parametrize("seed", range(6))
def test_long_lines_mixed_with_frames_in_random_pieces(seed: int) -> None:
    rng = random.Random(seed)
    long_lines = [
        b"data: " + b"z" * 70_000 + b"\n",
        b"data:" + b"w" * 66_000,
        b": " + b"c" * 70_000 + b"\n",
        b"id: " + b"7" * 65_600 + b"\n",
        b"data: " + "é".encode() * 40_000 + b"\r\n",
    ]
    short = [b"event: chunk\n", b"id: 5\n", b"data: x\n", b"\n", b"\r\n", b"\r", b": ping\n",
             b"retry: 10\n", b"data: a\ndata: b\n", b"x"]
    items = [rng.choice(short) if rng.random() < 0.8 else rng.choice(long_lines) for _ in range(12)]
    data = b"".join(items)
    pieces: list[bytes] = []
    i = 0
    while i < len(data):
        size = rng.choice([rng.randint(1, 7), rng.randint(1, 5000), rng.randint(1000, 40_000)])
        pieces.append(data[i : i + size])
        i += size
    for flush in (False, True):
        assert run(pieces, flush=flush) == reference(data, flush=flush)
