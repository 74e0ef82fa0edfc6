"""WHATWG event-stream conformance vectors (research/peers-python.md, Appendix A).

Each vector is ``(name, input bytes, expected events)`` with events as ``(type, data, lastEventId)``,
per the WHATWG "event stream interpretation" with the end of input reached WITHOUT ``flush()``
(an unterminated last event is dropped).
"""

from __future__ import annotations

Expected = list[tuple[str, str, str]]

VECTORS: list[tuple[str, bytes, Expected]] = [
    ("lf_basic", b"data: a\n\n", [("message", "a", "")]),
    ("crlf", b"data: a\r\n\r\ndata: b\r\n\r\n", [("message", "a", ""), ("message", "b", "")]),
    ("cr_only", b"data: a\r\rdata: b\r\r", [("message", "a", ""), ("message", "b", "")]),
    (
        "mixed_eol",
        b"data: a\n\r\ndata: b\r\n\ndata: c\r\n\r",
        [("message", "a", ""), ("message", "b", ""), ("message", "c", "")],
    ),
    ("bom", b"\xef\xbb\xbfdata: a\n\n", [("message", "a", "")]),
    ("comment", b": hi\ndata: a\n:\n\n", [("message", "a", "")]),
    ("multi_data", b"data: a\ndata: b\n\n", [("message", "a\nb", "")]),
    ("no_colon_field", b"data\n\n", [("message", "", "")]),
    ("empty_data_lines", b"data:\ndata:\n\n", [("message", "\n", "")]),
    ("single_space_strip", b"data:  a\ndata:b\n\n", [("message", " a\nb", "")]),
    ("space_before_colon", b"data : a\n\ndata: b\n\n", [("message", "b", "")]),
    (
        "id_nul_ignored",
        b"id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\n",
        [("message", "a", "1"), ("message", "b", "1")],
    ),
    ("id_persists", b"id: 7\ndata: a\n\ndata: b\n\n", [("message", "a", "7"), ("message", "b", "7")]),
    (
        "id_reset_empty",
        b"id: 1\ndata: a\n\nid\ndata: b\n\n",
        [("message", "a", "1"), ("message", "b", "")],
    ),
    ("id_only_event", b"id: 9\n\ndata: b\n\n", [("message", "b", "9")]),
    ("no_data_not_dispatched", b"event: x\n\ndata: b\n\n", [("message", "b", "")]),
    (
        "event_type_reset",
        b"event: x\ndata: a\n\ndata: b\n\n",
        [("x", "a", ""), ("message", "b", "")],
    ),
    ("eof_incomplete_nolf", b"data: a\n\ndata: b", [("message", "a", "")]),
    ("eof_incomplete_lf", b"data: a\n\ndata: b\n", [("message", "a", "")]),
    ("eof_incomplete_cr", b"data: a\n\ndata: b\r", [("message", "a", "")]),
    ("extra_blank_lines", b"\n\nid: 1\ndata: a\n\n\n\n", [("message", "a", "1")]),
    ("invalid_utf8", b"data: \xff\n\n", [("message", "\ufffd", "")]),
    (
        "u2028_in_data",
        "data: a\u2028b\x0cc\x85d\x0be\x1cf\n\n".encode(),
        [("message", "a\u2028b\x0cc\x85d\x0be\x1cf", "")],
    ),
    ("retry_only_then_data", b"retry: 1000\n\ndata: a\n\n", [("message", "a", "")]),
    ("multi_data_crlf", b"data: a\r\ndata: b\r\n\r\n", [("message", "a\nb", "")]),
    ("multi_data_cr", b"data: a\rdata: b\r\r", [("message", "a\nb", "")]),
]

#: ``retry`` values (what follows ``retry: ``) a compliant client must ignore because they are not
#: all ASCII digits (" 7" makes the line ``retry:  7``; U+0663 is a non-ASCII digit), plus one too
#: long to be a delay (30 digits), which streamwire ignores rather than hand to ``int()``.
RETRY_IGNORED: list[bytes] = [b"-5", b"+5", b" 7", b"1_0", b"5x", b"1" * 30, b"", b"\xd9\xa3"]
