"""``GET /metrics`` over real uvicorn: real readers attached, the text parsed as Prometheus does."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

from helpers.chaos_proxy import ServerThread
from streamwire.log.memory import MemoryLog
from streamwire.server import bearer_token, create_app

#: One sample line of the text format: name, optional labels, a number.
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_]\w*="(?:[^"\\\n]|\\.)*",?)*\})? '
                    r"(-?[0-9.e+-]+|\+Inf|NaN)$")


def parse(text: str) -> dict[str, float]:
    """``{'name{labels}': value}``; fails on any line the text format does not allow."""
    samples: dict[str, float] = {}
    types: dict[str, str] = {}
    assert text.endswith("\n")
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            assert kind in ("counter", "gauge", "histogram"), line
            assert name not in types, f"{name} declared twice"
            types[name] = kind
            continue
        if line.startswith("# HELP "):
            continue
        found = SAMPLE.match(line)
        assert found, f"not a sample line: {line!r}"
        name = found.group(1)
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        assert name in types or base in types, f"{name} has no TYPE line"
        samples[name + (found.group(2) or "")] = float(found.group(3))
    return samples


@contextmanager
def reading(client: httpx.Client, stream_id: str, cursor: int) -> Iterator[list[str]]:
    """An SSE reader attached from ``cursor`` until it has seen ``caught-up``."""
    with client.stream("GET", f"/streams/{stream_id}/sse", params={"cursor": cursor}) as resp:
        lines: list[str] = []
        it = resp.iter_lines()  # kept: a dropped iterator would close the response
        for line in it:
            lines.append(line)
            if line == "event: caught-up":
                break
        yield lines


def test_metrics_count_connections_readers_replays_appends_and_latency() -> None:
    app = create_app(MemoryLog(), allow_anonymous_writes=True)
    with ServerThread(app) as server, httpx.Client(base_url=server.url, timeout=10) as client:
        client.put("/streams/m")
        client.put('/streams/q"\\x')  # a label value that needs escaping
        assert client.post("/streams/m/chunks",
                           json=[{"step": 0, "chunk": i} for i in range(3)]).status_code == 200
        with reading(client, "m", 0), reading(client, "m", 2), reading(client, 'q"\\x', 0):
            text = client.get("/metrics")
            assert text.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
            live = parse(text.text)
        client.post("/streams/m/end", json={"status": "completed"})
        with client.stream("GET", "/streams/m/sse") as resp:
            frames = sum(1 for line in resp.iter_lines() if line.startswith("event: "))
        after = parse(client.get("/metrics").text)
    assert live["streamwire_sse_connections"] == 3
    assert live["streamwire_sse_connections_opened_total"] == 3
    assert live["streamwire_sse_reattaches_total"] == 1
    assert live['streamwire_sse_stream_readers{stream_id="m"}'] == 2
    assert live['streamwire_sse_stream_readers{stream_id="q\\"\\\\x"}'] == 1
    assert live['streamwire_sse_streams_by_readers{le="1"}'] == 1
    assert live['streamwire_sse_streams_by_readers{le="2"}'] == 2
    assert live['streamwire_sse_streams_by_readers{le="+Inf"}'] == 2
    # replays: 3 chunks (cursor 0), 1 chunk (cursor 2), 0 chunks (the empty stream)
    assert live['streamwire_sse_replay_chunks_bucket{le="0"}'] == 1
    assert live['streamwire_sse_replay_chunks_bucket{le="1"}'] == 2
    assert live['streamwire_sse_replay_chunks_bucket{le="10"}'] == 3
    assert live["streamwire_sse_replay_chunks_sum"] == 4
    assert live["streamwire_http_chunks_appended_total"] == 3
    # the second reader of "m" joined the first's hub: no look at the stream of its own
    assert live["streamwire_log_info_seconds_count"] == 2
    assert live['streamwire_http_request_seconds_count{route="chunks"}'] == 1
    assert live['streamwire_http_request_seconds_count{route="create"}'] == 2
    assert live["streamwire_draining"] == 0
    # the readers have gone: the frames they were sent stay counted, with the last reader's
    assert after["streamwire_sse_connections"] == 0
    assert after["streamwire_sse_frames_delivered_total"] >= 3 + 1 + 1 + frames
    assert frames == 5  # three chunks, caught-up, end
    assert after["streamwire_sse_evictions_total"] == 0


def test_metrics_are_authorized_like_reads() -> None:
    app = create_app(MemoryLog(), authorize=bearer_token("t", protect_reads=True))
    with ServerThread(app) as server, httpx.Client(base_url=server.url) as client:
        assert client.get("/metrics").status_code == 401
        assert client.get("/metrics", headers={"Authorization": "Bearer no"}).status_code == 403
        ok = client.get("/metrics", headers={"Authorization": "Bearer t"})
        assert ok.status_code == 200
        assert parse(ok.text)["streamwire_sse_connections"] == 0


@pytest.mark.parametrize("text", ["", "no_type 1\n", "# TYPE x gauge\nx{a=b} 1\n"])
def test_the_parser_here_rejects_what_prometheus_would(text: str) -> None:
    with pytest.raises(AssertionError):
        parse(text)
