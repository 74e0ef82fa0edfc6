"""A real browser: headless Chromium reads a stream with the native ``EventSource``, the connection
is cut mid-frame, and the browser re-attaches by itself with ``Last-Event-ID`` and ends with every
chunk once, in order.

The page is served by the test (one origin); the stream comes from the real stream server through
the chaos proxy (another origin, so CORS is exercised too), which cuts the first SSE connection at
a fixed byte offset. When the page sees ``end`` it closes the ``EventSource`` (else it would
reconnect forever) and POSTs what it received to the page server.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
from typing import Any

import anyio
import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from conftest import require
from helpers.chaos_proxy import ChaosConfig, ChaosProxy, ServerThread

pytestmark = [pytest.mark.anyio, pytest.mark.browser]

CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run")
BACKLOG = 150  # chunks written before the browser attaches (replayed)
LIVE = 100  # chunks written while it reads
CUT_AT = 4000  # bytes of the first SSE response before the proxy cuts it (mid-replay, mid-frame)

PAGE = """<!doctype html>
<meta charset="utf-8">
<title>streamwire EventSource test</title>
<script>
const got = [], errors = [];
let opens = 0;
const es = new EventSource(%(url)s);
es.onopen = () => { opens += 1; };
es.onerror = () => { errors.push(es.readyState); };
es.addEventListener("chunk", (e) => { got.push({id: e.lastEventId, data: e.data}); });
function report(kind, data) {
  es.close();  // a closed EventSource does not reconnect
  fetch("/report", {method: "POST", body: JSON.stringify({kind, data, got, opens, errors})});
}
es.addEventListener("end", (e) => report("end", e.data));
es.addEventListener("fail", (e) => report("fail", e.data));
es.addEventListener("truncated", (e) => report("truncated", e.data));
</script>
"""


class Recorder:
    """ASGI wrapper that records the ``Last-Event-ID`` of each SSE request, then passes it on."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.last_event_ids: list[str | None] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].endswith("/sse"):
            headers = dict(scope["headers"])
            value = headers.get(b"last-event-id")
            self.last_event_ids.append(value.decode() if value is not None else None)
        await self.app(scope, receive, send)


def _page_app(stream_url: str, reports: list[dict[str, Any]], arrived: threading.Event) -> Starlette:
    async def page(request: Request) -> HTMLResponse:
        return HTMLResponse(PAGE % {"url": json.dumps(stream_url)})

    async def report(request: Request) -> Response:
        reports.append(json.loads(await request.body()))
        arrived.set()
        return Response(status_code=204)

    return Starlette(routes=[Route("/", page), Route("/report", report, methods=["POST"])])


async def _write(client: httpx.AsyncClient, url: str, first: int, last: int) -> None:
    chunks = [{"step": 1, "chunk": {"n": i, "text": f"word{i} "}} for i in range(first, last)]
    response = await client.post(f"{url}/streams/b1/chunks", json=chunks)
    assert response.status_code == 200, response.text


async def test_chromium_eventsource_reattaches_after_a_cut_with_last_event_id() -> None:
    chromium = shutil.which("chromium")
    require(chromium is not None, "Chromium is not installed (.ci/run installs it)")
    assert chromium is not None
    from streamwire.log.memory import MemoryLog
    from streamwire.server import create_app

    # retry: 100 ms so the browser re-attaches quickly (Chromium waits 3 s by default).
    recorder = Recorder(create_app(MemoryLog(), cors_origins=["*"], retry=100,
                                   allow_anonymous_writes=True))
    reports: list[dict[str, Any]] = []
    arrived = threading.Event()
    config = ChaosConfig(min_budget=CUT_AT, max_budget=CUT_AT, max_cuts=1, stall_probability=0)
    with ServerThread(recorder) as streams:
        async with (httpx.AsyncClient(timeout=10) as client,
                    ChaosProxy(streams.port, seed=0, config=config) as proxy):
            assert (await client.put(f"{streams.url}/streams/b1")).status_code < 300
            await _write(client, streams.url, 0, BACKLOG)
            stream_url = f"http://127.0.0.1:{proxy.port}/streams/b1/sse"
            with (ServerThread(_page_app(stream_url, reports, arrived)) as pages,
                  tempfile.TemporaryDirectory() as profile):
                browser = await anyio.open_process(
                    [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", pages.url + "/"],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
                try:
                    with anyio.fail_after(60):
                        await proxy.first_cut.wait()  # the first connection was cut: go live
                        for start in range(BACKLOG, BACKLOG + LIVE, 10):
                            await _write(client, streams.url, start, start + 10)
                            await anyio.sleep(0.01)
                        end = await client.post(f"{streams.url}/streams/b1/end",
                                                json={"status": "completed"})
                        assert end.status_code < 300, end.text
                        assert await anyio.to_thread.run_sync(arrived.wait, 50)
                finally:
                    os.killpg(browser.pid, signal.SIGKILL)
                    with anyio.CancelScope(shield=True):
                        await browser.wait()
    [report] = reports
    assert report["kind"] == "end"
    assert json.loads(report["data"]) == {"status": "completed"}
    got = report["got"]
    ids = [int(item["id"]) for item in got]
    total = BACKLOG + LIVE
    assert ids == list(range(1, total + 1)), "each chunk once, in order"
    for item in got:
        frame = json.loads(item["data"])
        assert frame["sequence"] == int(item["id"])
        assert frame["chunk"] == {"n": frame["sequence"] - 1, "text": f"word{frame['sequence'] - 1} "}
    assert proxy.cuts == 1
    assert report["opens"] >= 2, "the browser re-attached by itself"
    assert report["errors"], "the cut reached the page as an error event"
    # The first request had no Last-Event-ID; the re-attach sent the last id the browser saw,
    # somewhere inside the backlog (the cut was mid-replay).
    assert recorder.last_event_ids[0] is None
    resumed = recorder.last_event_ids[1]
    assert resumed is not None
    assert 0 < int(resumed) < BACKLOG
