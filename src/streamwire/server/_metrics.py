"""``GET /metrics``: the stream server's counters in the Prometheus text format (version 0.0.4),
written by hand (no client library).

Nothing here runs per event. The frames a connection writes are already counted on the
connection (``Connection.frames``); the totals add the closed connections' counts (kept at close)
to the open ones' (summed at scrape time). Everything else is counted once per connection or per
request: a few integer additions and, for a histogram, one ``bisect`` over a short tuple.
Readers per stream are reported with bounded label cardinality: how many streams have at most N
readers (fixed N), and the ``TOP_STREAMS`` busiest streams by id. Open streaming responses are
also split by what they stream (``kind``: ``sse`` a stream, ``run`` a run's stream, ``chat`` a
useChat reply, ``direct`` an ``SSEResponse``), and an app with agents adds its runs' series (by
agent: only the agents it serves, ``runs._events``; by status: the run statuses).
"""

from __future__ import annotations

import heapq
from bisect import bisect_left
from collections.abc import Iterable, Mapping
from typing import Final, Literal, NamedTuple, Protocol, TypeAlias

from ._asgi import Scope

__all__ = ["KINDS", "TOP_STREAMS", "ConnectionKind", "Histogram", "RunCounts", "ServerMetrics",
           "connection_kind", "exposition"]

#: What a streaming response streams (``streamwire_connections{kind}``).
ConnectionKind: TypeAlias = Literal["sse", "run", "chat", "direct"]
KINDS: Final[tuple[ConnectionKind, ...]] = ("sse", "run", "chat", "direct")
#: The statuses a run's agent call ends in (``streamwire_runs_finished_total{status}``).
_SETTLED: Final = ("completed", "failed", "interrupted", "paused")

#: The busiest streams reported by id (``streamwire_sse_stream_readers``).
TOP_STREAMS: Final = 10
CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"

#: Seconds: from 0.5 ms (memory) to 2.5 s (a struggling remote backend).
_LATENCY_BUCKETS: Final = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                           1.0, 2.5)
#: Chunks a reader had to catch up on when it attached (head - cursor).
_REPLAY_BUCKETS: Final = (0.0, 1.0, 10.0, 100.0, 1_000.0, 10_000.0, 100_000.0)
#: Readers on one stream.
_READER_BUCKETS: Final = (1, 2, 5, 10, 100, 1_000)


class _Counted(Protocol):
    """An open connection, as the exposition sees it."""

    @property
    def frames(self) -> int: ...

    @property
    def kind(self) -> ConnectionKind: ...


class RunCounts(NamedTuple):
    """The runs series of an app with agents (``runs._events.RunEvents``), by agent."""

    started: Mapping[str, int]
    finished: Mapping[tuple[str, str], int]
    running: Mapping[str, int]


def connection_kind(scope: Scope) -> ConnectionKind:
    """What the streaming response to ``scope`` streams, from its path below the app's root."""
    path: str = scope.get("path", "")
    root: str = scope.get("root_path", "")
    if root and path.startswith(root) and path[len(root):len(root) + 1] == "/":
        path = path[len(root):]
    if path.endswith("/sse"):
        if path.startswith("/streams/"):
            return "sse"
        if path.startswith("/runs/"):
            return "run"
    if path == "/api/chat" or path.startswith("/api/chat/"):
        return "chat"
    return "direct"


class Histogram:
    """A Prometheus histogram with fixed buckets; ``observe`` allocates nothing."""

    __slots__ = ("bounds", "count", "counts", "total")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last one is +Inf
        self.count = 0
        self.total = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.count += 1
        self.total += value

    def lines(self, name: str, labels: str = "") -> Iterable[str]:
        sep = "," if labels else ""
        running = 0
        for bound, n in zip((*map(_number, self.bounds), "+Inf"), self.counts, strict=True):
            running += n
            yield f'{name}_bucket{{{labels}{sep}le="{bound}"}} {running}'
        braces = f"{{{labels}}}" if labels else ""
        yield f"{name}_sum{braces} {_number(self.total)}"
        yield f"{name}_count{braces} {self.count}"


class ServerMetrics:
    """The counters a ``StreamApp`` keeps beside its ``statistics()``."""

    __slots__ = ("appended", "frames_closed", "log_info", "reattaches", "replay", "requests")

    def __init__(self) -> None:
        self.reattaches = 0  # SSE connections that came with a cursor > 0
        self.frames_closed = 0  # frames written by connections that have closed
        self.appended = 0  # chunks appended through POST /chunks
        self.replay = Histogram(_REPLAY_BUCKETS)
        self.log_info = Histogram(_LATENCY_BUCKETS)
        self.requests: dict[str, Histogram] = {}

    def route(self, name: str) -> Histogram:
        """The latency histogram of one JSON route, made when the route is (never per request)."""
        return self.requests.setdefault(name, Histogram(_LATENCY_BUCKETS))


def exposition(metrics: ServerMetrics, *, connections: Iterable[_Counted],
               per_stream: Mapping[str, int], opened: int, evicted: int, refused: int,
               draining: bool, runs: RunCounts | None = None) -> bytes:
    """The ``GET /metrics`` body (``runs``: the runs series, for an app with agents)."""
    conns = list(connections)
    out: list[str] = []

    def metric(name: str, kind: str, help_text: str, *samples: str) -> None:
        out.append(f"# HELP {name} {help_text}")
        out.append(f"# TYPE {name} {kind}")
        out.extend(samples)

    metric("streamwire_sse_connections", "gauge", "Open SSE connections.",
           f"streamwire_sse_connections {len(conns)}")
    by_kind = dict.fromkeys(KINDS, 0)
    for conn in conns:
        by_kind[conn.kind] += 1
    metric("streamwire_connections", "gauge",
           "Open streaming responses by what they stream: sse (GET /streams/{id}/sse), run "
           "(GET /runs/{id}/sse), chat (useChat's POST /api/chat and its resume), direct "
           "(an SSEResponse on this app's engine).",
           *(f'streamwire_connections{{kind="{kind}"}} {n}' for kind, n in by_kind.items()))
    metric("streamwire_sse_connections_opened_total", "counter", "SSE connections opened.",
           f"streamwire_sse_connections_opened_total {opened}")
    metric("streamwire_sse_reattaches_total", "counter",
           "SSE connections opened with a cursor above 0 (a reader re-attaching).",
           f"streamwire_sse_reattaches_total {metrics.reattaches}")
    metric("streamwire_sse_evictions_total", "counter",
           "Readers closed because one write stayed blocked for send_timeout.",
           f"streamwire_sse_evictions_total {evicted}")
    metric("streamwire_sse_refused_total", "counter",
           "SSE connections refused with 429 or 503 (connection caps, draining).",
           f"streamwire_sse_refused_total {refused}")
    frames = metrics.frames_closed + sum(c.frames for c in conns)
    metric("streamwire_sse_frames_delivered_total", "counter",
           "Wire v2 frames (chunks, markers, terminals) written to SSE readers.",
           f"streamwire_sse_frames_delivered_total {frames}")
    metric("streamwire_sse_replay_chunks", "histogram",
           "Chunks between a reader's cursor and the stream's head when it attached.",
           *metrics.replay.lines("streamwire_sse_replay_chunks"))
    metric("streamwire_sse_streams_by_readers", "gauge",
           "Streams with at least one and at most `le` open readers.",
           *_by_readers(per_stream))
    busiest = heapq.nlargest(TOP_STREAMS, per_stream.items(), key=lambda item: item[1])
    metric("streamwire_sse_stream_readers", "gauge",
           f"Open readers of the {TOP_STREAMS} streams with the most.",
           *(f'streamwire_sse_stream_readers{{stream_id="{_label(sid)}"}} {n}'
             for sid, n in busiest))
    metric("streamwire_http_chunks_appended_total", "counter",
           "Chunks appended through POST /streams/{id}/chunks.",
           f"streamwire_http_chunks_appended_total {metrics.appended}")
    metric("streamwire_log_info_seconds", "histogram",
           "Latency of the log's info() call that opens every SSE connection.",
           *metrics.log_info.lines("streamwire_log_info_seconds"))
    metric("streamwire_http_request_seconds", "histogram",
           "Time to answer a JSON route (the log call, reading and decoding the body).",
           *(line for route, hist in sorted(metrics.requests.items())
             for line in hist.lines("streamwire_http_request_seconds", f'route="{route}"')))
    metric("streamwire_draining", "gauge", "1 once the server is shutting down.",
           f"streamwire_draining {int(draining)}")
    if runs is not None:
        out.extend(_run_lines(runs))
    out.append("")
    return "\n".join(out).encode()


def _run_lines(runs: RunCounts) -> Iterable[str]:
    def family(name: str, kind: str, help_text: str) -> Iterable[str]:
        yield f"# HELP {name} {help_text}"
        yield f"# TYPE {name} {kind}"

    yield from family("streamwire_runs_started_total", "counter",
                      "Agent calls begun in this process (a start, a resume, a re-run).")
    for agent, n in sorted(runs.started.items()):
        yield f'streamwire_runs_started_total{{agent="{_label(agent)}"}} {n}'
    yield from family("streamwire_runs_finished_total", "counter",
                      "Runs this process moved out of running (or a paused run to interrupted), "
                      "by agent and the status they took.")
    finished = dict(runs.finished)
    for agent in runs.started:
        for status in _SETTLED:
            finished.setdefault((agent, status), 0)
    for (agent, status), n in sorted(finished.items()):
        yield (f'streamwire_runs_finished_total{{agent="{_label(agent)}",status="{status}"}} '
               f"{n}")
    yield from family("streamwire_runs_running", "gauge",
                      "Runs whose agents run in this process now.")
    for agent, n in sorted(runs.running.items()):
        yield f'streamwire_runs_running{{agent="{_label(agent)}"}} {n}'


def _by_readers(per_stream: Mapping[str, int]) -> Iterable[str]:
    counts = [0] * (len(_READER_BUCKETS) + 1)
    for n in per_stream.values():
        counts[bisect_left(_READER_BUCKETS, n)] += 1
    running = 0
    for bound, n in zip((*map(str, _READER_BUCKETS), "+Inf"), counts, strict=True):
        running += n
        yield f'streamwire_sse_streams_by_readers{{le="{bound}"}} {running}'


def _number(value: float) -> str:
    return repr(float(value)) if value != int(value) else str(int(value))


def _label(value: str) -> str:
    """A label value escaped as the text format asks (backslash, double quote, line feed)."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
