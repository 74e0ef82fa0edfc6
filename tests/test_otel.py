"""OpenTelemetry tracing (``create_app(otel=True)``, ``serve --otel``): the spans of a known sequence
over real uvicorn -- an append, an SSE read to the end, a demo run, a failing run, a chat reply --
read back from the SDK's ``InMemorySpanExporter``; ``serve --otel`` honouring the ``OTEL_*``
variables (console exporter, ``OTEL_SERVICE_NAME``, ``OTEL_SDK_DISABLED``); the clear error
without the extra; and no import of OpenTelemetry when it is off."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from helpers.runs_server import SRC, TESTS, free_port
from helpers.server import serving
from streamwire.log.memory import MemoryLog
from streamwire.runs.demo_agent import demo
from streamwire.sse import SSEDecoder

EXPORTER = InMemorySpanExporter()


@pytest.fixture(scope="module")
def exporter() -> InMemorySpanExporter:
    """The process's tracer provider (set once: OpenTelemetry allows no second one), exporting
    every span to ``EXPORTER`` as it ends."""
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    provider.add_span_processor(SimpleSpanProcessor(EXPORTER))
    return EXPORTER


@pytest.fixture
def spans(exporter: InMemorySpanExporter) -> Iterator[InMemorySpanExporter]:
    exporter.clear()
    yield exporter
    exporter.clear()


def _events(client: httpx.Client, path: str) -> list[tuple[str, str]]:
    """Read an SSE route to its end: (event, data) of every event."""
    with client.stream("GET", path) as response:
        assert response.status_code == 200
        decoder = SSEDecoder()
        got = [e for chunk in response.iter_bytes() for e in decoder.feed(chunk)]
    return [(e.event, e.data) for e in got + decoder.flush()]


def _wait_for(exporter: InMemorySpanExporter, name: str, count: int = 1) -> list[ReadableSpan]:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        found = [s for s in exporter.get_finished_spans() if s.name == name]
        if len(found) >= count:
            return found
        time.sleep(0.02)
    raise AssertionError(f"no {count} span(s) {name!r}: "
                         f"{[s.name for s in exporter.get_finished_spans()]}")


def _attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def test_an_append_an_sse_read_a_demo_run_and_a_failing_run_make_their_spans(
        spans: InMemorySpanExporter) -> None:
    with serving(MemoryLog, otel=True, agents=[demo]) as running, \
            httpx.Client(base_url=running.base, timeout=30) as client:
        assert client.put("/streams/s1").status_code == 200
        appended = client.post("/streams/s1/chunks", json=[
            {"step": 0, "chunk": "a"}, {"step": 0, "chunk": "b"}, {"step": 1, "chunk": "c"}])
        assert appended.json() == {"sequences": [1, 2, 3]}
        assert client.post("/streams/s1/end", json={"status": "completed"}).status_code == 200
        read = _events(client, "/streams/s1/sse")
        assert [e for e, _ in read] == ["chunk", "chunk", "chunk", "caught-up", "end"]

        ok = client.post("/runs", json={"agent": "demo", "runId": "run-ok",
                                         "input": {"prompt": "hello", "pace": 0}})
        assert ok.status_code == 201
        read_ok = _events(client, "/runs/run-ok/sse")
        assert read_ok[-1][0] == "end"
        bad = client.post("/runs", json={"agent": "demo", "runId": "run-bad",
                                          "input": {"prompt": "please /fail", "pace": 0}})
        assert bad.status_code == 201
        assert _events(client, "/runs/run-bad/sse")[-1][0] == "fail"
        assert client.get("/streams/missing/sse").status_code == 404

        runs = {_attrs(s)["streamwire.run.id"]: s for s in _wait_for(spans, "invoke_agent demo", 2)}
        head_ok = client.get("/runs/run-ok/status").json()["head"]

    put, = _wait_for(spans, "PUT /streams/{stream_id}")
    assert put.kind is SpanKind.SERVER
    assert _attrs(put) == {"http.request.method": "PUT", "http.route": "/streams/{stream_id}",
                           "streamwire.stream.id": "s1", "http.response.status_code": 200}
    chunks, = _wait_for(spans, "POST /streams/{stream_id}/chunks")
    assert _attrs(chunks)["streamwire.chunks"] == 3
    assert _attrs(chunks)["streamwire.stream.id"] == "s1"
    end, = _wait_for(spans, "POST /streams/{stream_id}/end")
    assert "streamwire.chunks" not in _attrs(end)

    sse = {_attrs(s)["streamwire.stream.id"]: s
           for s in _wait_for(spans, "GET /streams/{stream_id}/sse", 2)}
    assert {k: v for k, v in _attrs(sse["s1"]).items() if k != "streamwire.sse.seconds"} == {
        "http.request.method": "GET", "http.route": "/streams/{stream_id}/sse",
        "streamwire.stream.id": "s1", "streamwire.sse.outcome": "done",
        "streamwire.sse.frames": 5, "streamwire.sse.cursor": 0}
    assert _attrs(sse["missing"])["streamwire.sse.outcome"] == "refused"
    run_reads = {_attrs(s)["streamwire.stream.id"]: s
                 for s in _wait_for(spans, "GET /runs/{run_id}/sse", 2)}
    assert _attrs(run_reads["run-ok"])["streamwire.sse.frames"] == len(read_ok)
    assert sum(e == "chunk" for e, _ in read_ok) == head_ok
    assert _attrs(run_reads["run-bad"])["streamwire.sse.outcome"] == "done"

    completed, failed = runs["run-ok"], runs["run-bad"]
    assert completed.kind is SpanKind.INTERNAL
    assert _attrs(completed) == {
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "demo",
        "streamwire.run.id": "run-ok", "streamwire.stream.id": "run-ok",
        "streamwire.run.attempt": 1, "streamwire.run.status": "completed",
        "streamwire.run.head": head_ok, "gen_ai.usage.input_tokens": 1,
        "gen_ai.usage.output_tokens": _attrs(completed)["gen_ai.usage.output_tokens"]}
    assert completed.status.status_code is StatusCode.UNSET
    assert _attrs(failed)["streamwire.run.status"] == "failed"
    assert _attrs(failed)["error.type"] == "AGENT_ERROR"
    assert failed.status.status_code is StatusCode.ERROR
    assert completed.end_time is not None
    assert completed.start_time is not None
    assert completed.end_time > completed.start_time


def test_a_stopped_run_and_a_chat_reply_carry_their_status_and_conversation(
        spans: InMemorySpanExporter) -> None:
    message = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi /slow"}]}
    with serving(MemoryLog, otel=True, agents=[demo], chat_agent="demo") as running, \
            httpx.Client(base_url=running.base, timeout=30) as client:
        assert client.post("/runs", json={"agent": "demo", "runId": "slow",
                                           "input": {"prompt": "/slow"}}).status_code == 201
        assert client.post("/runs/slow/stop").json()["status"] == "interrupted"
        with client.stream("POST", "/api/chat", json={
                "id": "thread-7", "trigger": "submit-message", "messages": [message]}) as reply:
            assert reply.status_code == 200
            first = next(reply.iter_bytes())
            assert first
        chat_span = None
        deadline = time.monotonic() + 10
        while chat_span is None and time.monotonic() < deadline:
            chat_span = next((s for s in spans.get_finished_spans()
                              if _attrs(s).get("gen_ai.conversation.id") == "thread-7"), None)
            if chat_span is None:  # the /slow reply runs on: stop it through its chat
                client.post("/api/chat/thread-7/stop")
                time.sleep(0.05)
    stopped = next(s for s in _wait_for(spans, "invoke_agent demo", 2)
                   if _attrs(s)["streamwire.run.id"] == "slow")
    assert _attrs(stopped)["streamwire.run.status"] == "interrupted"
    assert chat_span is not None, [_attrs(s) for s in spans.get_finished_spans()]
    assert _attrs(chat_span)["streamwire.run.id"].startswith("chat:thread-7:")


def _env(shadow: Path | None = None, /, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    path = [str(SRC), str(TESTS)]
    if shadow is not None:
        path.insert(0, str(shadow))
    return {**env, "PYTHONPATH": os.pathsep.join(path), **extra}


def _serve(port: int, env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "streamwire.cli", "serve", "--port", str(port),
                             "--token", "t0ken", *args], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _up(base: str, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        try:
            if httpx.get(f"{base}/healthz").status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.05)
    raise AssertionError("serve did not come up")


def _serve_and_write(env: dict[str, str], stream_id: str, chunks: int = 0) -> tuple[str, str]:
    """``serve --otel`` under ``env``: create ``stream_id`` (and append ``chunks`` chunks), then
    SIGTERM; its standard output and error once it exited 0."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    auth = {"Authorization": "Bearer t0ken"}
    proc = _serve(port, env, "--otel")
    try:
        _up(base, proc)
        assert httpx.put(f"{base}/streams/{stream_id}", headers=auth).status_code == 200
        if chunks:
            assert httpx.post(f"{base}/streams/{stream_id}/chunks", headers=auth, json=[
                {"step": 0, "chunk": i} for i in range(chunks)]).status_code == 200
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    return out, err


@pytest.mark.parametrize("disabled", [False, True])
def test_serve_otel_exports_to_the_console_as_the_otel_variables_say(disabled: bool) -> None:
    env = _env(OTEL_SERVICE_NAME="sw-otel-test", OTEL_RESOURCE_ATTRIBUTES="deployment.env=ci",
               OTEL_TRACES_EXPORTER="console",
               **({"OTEL_SDK_DISABLED": "true"} if disabled else {}))
    out, _ = _serve_and_write(env, "c1", chunks=2)
    if disabled:
        assert "POST /streams/{stream_id}/chunks" not in out
        return
    decoder = json.JSONDecoder()
    exported, at = [], out.find("{")
    while at >= 0:
        span, end = decoder.raw_decode(out, at)
        exported.append(span)
        at = out.find("{", end)
    chunks = next(s for s in exported if s["name"] == "POST /streams/{stream_id}/chunks")
    assert chunks["attributes"]["streamwire.chunks"] == 2
    assert chunks["resource"]["attributes"]["service.name"] == "sw-otel-test"
    assert chunks["resource"]["attributes"]["deployment.env"] == "ci"


def test_without_the_extra_otel_fails_at_start_naming_the_install(tmp_path: Path) -> None:
    shadow = tmp_path / "site"
    (shadow / "opentelemetry").mkdir(parents=True)
    (shadow / "opentelemetry" / "__init__.py").write_text(
        "raise ImportError('No module named opentelemetry (hidden by the test)')\n")
    env = _env(shadow)
    proc = _serve(free_port(), env, "--otel")
    _, err = proc.communicate(timeout=30)
    assert proc.returncode != 0
    assert "pip install 'streamwire[otel]'" in err
    assert "Traceback" not in err
    made = subprocess.run(
        [sys.executable, "-c", "from streamwire.log.memory import MemoryLog\n"
         "from streamwire.server import create_app\n"
         "from streamwire.errors import UsageError\n"
         "try:\n    create_app(MemoryLog(), token='t', otel=True)\n"
         "except UsageError as exc:\n    print(exc)\n"],
        env=env, capture_output=True, text=True, timeout=60, check=True)
    assert "otel=True (serve --otel) needs OpenTelemetry: pip install 'streamwire[otel]'" in made.stdout


def test_off_opentelemetry_is_never_imported() -> None:
    code = """
import sys, anyio, httpx
from streamwire.log.memory import MemoryLog
from streamwire.runs.demo_agent import demo
from streamwire.server import create_app

async def main():
    app = create_app(MemoryLog(), token="t", agents=[demo])
    async with app.lifespan(app), httpx.AsyncClient(
            transport=httpx.ASGITransport(app), base_url="http://x",
            headers={"Authorization": "Bearer t"}) as client:
        assert (await client.put("/streams/a")).status_code == 200
        assert (await client.post("/runs", json={"agent": "demo", "input": {"pace": 0}})
                ).status_code == 201
anyio.run(main)
print(sorted(m for m in sys.modules if m.startswith("opentelemetry")))
"""
    done = subprocess.run([sys.executable, "-c", code], env=_env(), capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_with_an_otlp_endpoint_and_the_exporter_spans_go_to_the_collector() -> None:
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http",
                        reason="pip install opentelemetry-exporter-otlp-proto-http")
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    from helpers.chaos_proxy import ServerThread

    received: list[bytes] = []

    async def traces(request: Request) -> Response:
        received.append(await request.body())
        return Response(ExportTraceServiceRequest().SerializeToString(),
                        media_type="application/x-protobuf")

    collector = Starlette(routes=[Route("/v1/traces", traces, methods=["POST"])])
    with ServerThread(collector) as receiver:
        out, err = _serve_and_write(_env(OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url,
                                         OTEL_SERVICE_NAME="sw-otlp-test"), "o1")
    assert "spans go to" in err
    assert "PUT /streams" not in out  # not the console
    names, services = set(), set()
    for body in received:
        request = ExportTraceServiceRequest.FromString(body)
        for resource_spans in request.resource_spans:
            services |= {a.value.string_value for a in resource_spans.resource.attributes
                         if a.key == "service.name"}
            names |= {s.name for scope in resource_spans.scope_spans for s in scope.spans}
    assert "PUT /streams/{stream_id}" in names
    assert services == {"sw-otlp-test"}


def test_an_otlp_endpoint_without_the_exporter_says_so_and_falls_back_to_the_console(
        tmp_path: Path) -> None:
    hidden = tmp_path / "site" / "opentelemetry" / "exporter"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text("raise ImportError('hidden by the test')\n")
    out, err = _serve_and_write(
        _env(tmp_path / "site", OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9"), "f1")
    assert ("OTEL_EXPORTER_OTLP_ENDPOINT is set but the OTLP exporter is not installed "
            "(pip install opentelemetry-exporter-otlp-proto-http)") in err
    assert '"name": "PUT /streams/{stream_id}"' in out
