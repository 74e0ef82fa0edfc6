"""The batch cap of ``POST /streams/{id}/chunks`` is enforced before the body is decoded (issue
25): a body of ~800,000 tiny items within the 16 MiB body limit is refused 413 while the server
allocates a small multiple of the body (it used to decode every item first, and its depth check
split the body into a bytes object per string: ~300 MiB). The scans that make it so (depth, items)
agree with a plain reading of the JSON, strings and escapes across their windows included."""

from __future__ import annotations

import json
import random
import socket
import tracemalloc
from typing import Any

import httpx
import pytest

from helpers.server import serving
from streamwire.log.memory import MemoryLog
from streamwire.server import _jsonscan
from streamwire.server._create import DEFAULT_MAX_BATCH_CHUNKS, DEFAULT_MAX_BODY_SIZE
from streamwire.server._jsonscan import json_depth, top_level_commas

TINY = b'{"step":0,"chunk":1}'


def _post_raw(base: str, path: str, body: bytes) -> tuple[int, dict[str, Any]]:
    """POST ``body`` over a plain socket (no client library copying it), the status and JSON."""
    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=60) as sock:
        sock.sendall(f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode())
        sock.sendall(body)
        answer = b""
        while piece := sock.recv(65536):
            answer += piece
    head, _, payload = answer.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(payload)


def test_a_body_of_800000_tiny_items_is_refused_within_a_small_multiple_of_its_size() -> None:
    count = (DEFAULT_MAX_BODY_SIZE - 2) // (len(TINY) + 1)  # as many as the body limit lets in
    body = b"[" + b",".join([TINY] * count) + b"]"
    assert count > 790_000
    assert len(body) <= DEFAULT_MAX_BODY_SIZE
    with serving(MemoryLog) as srv:
        httpx.put(f"{srv.base}/streams/s")
        tracemalloc.start()
        try:
            status, answer = _post_raw(srv.base, "/streams/s/chunks", body)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert httpx.get(f"{srv.base}/streams/s/info").json()["head"] == 0  # nothing appended
    assert status == 413, answer
    assert answer["error"] == (
        f"the batch has more than {DEFAULT_MAX_BATCH_CHUNKS} chunks, the limit "
        "(create_app(max_batch_chunks=...), streamwire serve --max-batch-chunks)")
    # the body as read (its bytearray, then its bytes) and the scans' windows: about 2x the body
    assert peak < 3 * len(body), f"{peak / 2**20:.1f} MiB for a {len(body) / 2**20:.1f} MiB body"


def test_the_cap_counts_items_not_the_commas_and_brackets_inside_them() -> None:
    # every chunk holds commas, brackets and an escaped quote, in strings and in nested values
    item = {"step": 0, "chunk": {"event": "chunk", "data": {"chunk": 'a, [b] {c} \\" d',
                                                            "list": [1, 2, {"x": [3, 4]}]}}}
    with serving(MemoryLog) as srv:
        httpx.put(f"{srv.base}/streams/s")
        at_cap = json.dumps([item] * DEFAULT_MAX_BATCH_CHUNKS).encode()
        status, answer = _post_raw(srv.base, "/streams/s/chunks", at_cap)
        assert status == 200, answer
        assert len(answer["sequences"]) == DEFAULT_MAX_BATCH_CHUNKS
        over = json.dumps([item] * (DEFAULT_MAX_BATCH_CHUNKS + 1)).encode()
        status, answer = _post_raw(srv.base, "/streams/s/chunks", over)
        assert status == 413, answer
        assert "max_batch_chunks" in answer["error"]


def _depth(text: str) -> int:
    """The depth by reading ``text`` character by character (the reference)."""
    depth = deepest = 0
    inside = escaped = False
    for ch in text:
        if inside:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                inside = False
        elif ch == '"':
            inside = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def _value(rnd: random.Random, depth: int = 0) -> Any:
    roll = rnd.random()
    if depth > 5 or roll < 0.3:
        return rnd.choice([1, None, "a,b", 'q"[{', "\\", "x\\\\", "\\\"]", "é,]}"])
    if roll < 0.65:
        return [_value(rnd, depth + 1) for _ in range(rnd.randint(0, 4))]
    return {f"k{i},[": _value(rnd, depth + 1) for i in range(rnd.randint(0, 4))}


@pytest.mark.parametrize("window", [1, 2, 3, 7, 1 << 16])
def test_the_scans_agree_with_a_plain_reading_whatever_the_window(
        window: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_jsonscan, "_WINDOW", window)
    rnd = random.Random(window)
    for _ in range(300):
        items = [{"step": 0, "chunk": _value(rnd)} for _ in range(rnd.randint(0, 6))]
        text = json.dumps(items, ensure_ascii=rnd.random() < 0.5,
                          separators=rnd.choice([(",", ":"), (", ", ": ")]))
        body = text.encode()
        assert json_depth(body) == _depth(text), text
        assert top_level_commas(body, 1_000) == max(0, len(items) - 1), text
        assert top_level_commas(body, 2) == min(2, max(0, len(items) - 1)) or len(items) > 3
    assert top_level_commas(b'{"a": [1, 2, 3]}', 10) == 0  # not an array: no items
