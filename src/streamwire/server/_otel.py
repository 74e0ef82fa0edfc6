"""OpenTelemetry tracing of a ``StreamApp`` (``create_app(otel=True)``, ``streamwire serve --otel``;
``pip install 'streamwire[otel]'``).

Spans:

==================================  ================================================================
``invoke_agent {agent}``            one per agent call of a run (a start, a resume, a re-run), from
                                    its spawn to its settlement (GenAI semantic conventions:
                                    ``gen_ai.operation.name``, ``gen_ai.agent.name``,
                                    ``gen_ai.conversation.id`` for a chat's reply), with
                                    ``streamwire.run.id``, ``streamwire.stream.id``,
                                    ``streamwire.run.status`` (``completed``, ``paused``,
                                    ``interrupted``, ``failed``; ``error.type``: the
                                    ``errorDetail`` code); one still open when the app stops ends
                                    ``unsettled``
``{METHOD} /streams/{stream_id}/…``  one per request of a stream route (``PUT`` create, ``POST``
                                    chunks, end, fail, ...; ``GET`` info): ``streamwire.stream.id``,
                                    ``streamwire.chunks`` (the chunks a ``POST .../chunks``
                                    appended), ``http.response.status_code``
``GET /streams/{stream_id}/sse``    one per SSE connection (``/runs/{run_id}/sse`` too):
                                    ``streamwire.stream.id``, ``streamwire.sse.cursor``,
                                    ``streamwire.sse.frames`` (sent), ``streamwire.sse.outcome``
                                    (``done``, ``disconnect``, ``evicted``, ``shutdown``, ... or
                                    ``refused``)
==================================  ================================================================

The tracer provider: the process's global one when something set it (the host app,
``opentelemetry-instrument``); else an SDK ``TracerProvider``, made global, which reads the standard
variables itself (``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_TRACES_SAMPLER`` /
``_ARG``, ``OTEL_SDK_DISABLED``), exporting as ``OTEL_TRACES_EXPORTER`` says (``otlp``,
``console``, ``none``). Unset: OTLP over HTTP when ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) is set and ``opentelemetry-exporter-otlp-proto-http`` is
installed, else the console (JSON spans on standard output), so ``--otel`` alone shows what it
traces. Its spans are flushed when the app's lifespan ends.

Off (the default) none of this runs and ``opentelemetry`` is never imported: the app checks one
attribute per request and per run.
"""

from __future__ import annotations

import importlib
import logging
import os
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final, cast

import msgspec

from ..errors import UsageError
from ..runs._record import RunRecord
from ._asgi import Receive, Scope, Send
from ._engine import Connection

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Span, Tracer
    from starlette.requests import Request
    from starlette.responses import Response

__all__ = ["OTEL_HINT", "Tracing", "require_otel"]

logger = logging.getLogger("streamwire.server")

#: How to install what ``otel=True`` needs (every error about it says so).
OTEL_HINT: Final = "pip install 'streamwire[otel]'"
_OTLP_HINT: Final = "pip install opentelemetry-exporter-otlp-proto-http"
#: The instrumentation scope of every span.
SCOPE: Final = "streamwire"
_CHAT: Final = "chat:"

_SSEServer = Callable[[Scope, Receive, Send, str, list[Connection]], Awaitable[None]]


def require_otel() -> None:
    """Check that OpenTelemetry's API and SDK import and that ``OTEL_TRACES_EXPORTER`` names an
    exporter streamwire knows (``serve --otel`` asks before it starts).

    Raises:
        UsageError: they do not, or it does not; the message says what to do.
    """
    _exporter_choice()
    try:
        importlib.import_module("opentelemetry.trace")
        importlib.import_module("opentelemetry.sdk.trace")
    except ImportError as exc:
        raise UsageError(f"otel=True (serve --otel) needs OpenTelemetry: {OTEL_HINT} "
                         f"({exc})") from exc


class Tracing:
    """The spans of one ``StreamApp`` (``StreamApp.tracing`` when ``otel=True``).

    Raises:
        UsageError: OpenTelemetry (API and SDK) is not installed; the message says how.
    """

    def __init__(self) -> None:
        require_otel()
        from opentelemetry import trace
        from opentelemetry.trace import SpanKind, Status, StatusCode

        self._kind_server = SpanKind.SERVER
        self._kind_internal = SpanKind.INTERNAL
        self._error = StatusCode.ERROR
        self._status = Status
        #: the provider this made (and flushes at the end), None when it uses the global one
        self.provider: TracerProvider | None = None
        provider = trace.get_tracer_provider()
        if isinstance(provider, trace.ProxyTracerProvider):  # nothing set one: make the SDK's
            self.provider = provider = _sdk_provider()
            trace.set_tracer_provider(provider)
        from .. import __version__

        self.tracer: Tracer = provider.get_tracer(SCOPE, __version__)
        #: the open span of each run whose agent call began here
        self._runs: dict[str, Span] = {}

    # ---- runs (``RunEvents.observer``) ---------------------------------------------------------

    def spawned(self, record: RunRecord) -> None:
        """An agent call of ``record`` begins: its ``invoke_agent`` span starts."""
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": record.agent,
            "streamwire.run.id": record.run_id, "streamwire.stream.id": record.stream_id,
            "streamwire.run.attempt": record.attempt}
        conversation = _conversation_of(record.run_id)
        if conversation is not None:
            attributes["gen_ai.conversation.id"] = conversation
        if record.resumes:
            attributes["streamwire.run.resumed"] = True
        span = self.tracer.start_span(f"invoke_agent {record.agent}", kind=self._kind_internal,
                                      attributes=attributes)
        earlier = self._runs.pop(record.run_id, None)
        if earlier is not None:  # never settled here (let go, or settled by another process)
            _end_unsettled(earlier)
        self._runs[record.run_id] = span

    def settled(self, record: RunRecord) -> None:
        """``record`` left ``running``: its span ends with the status (a run settled here that
        did not begin here has none)."""
        span = self._runs.pop(record.run_id, None)
        if span is None:
            return
        span.set_attribute("streamwire.run.status", record.status)
        span.set_attribute("streamwire.run.head", record.head)
        usage = record.usage or {}
        for key, name in (("inputTokens", "gen_ai.usage.input_tokens"),
                          ("outputTokens", "gen_ai.usage.output_tokens")):
            if isinstance(usage.get(key), int):
                span.set_attribute(name, usage[key])
        if record.status == "failed":
            code = (record.error_detail or {}).get("code")
            span.set_attribute("error.type", code if isinstance(code, str) else "failed")
            span.set_status(self._status(self._error, record.error or None))
        span.end()

    # ---- HTTP --------------------------------------------------------------------------------

    def route(self, endpoint: Callable[[Request], Awaitable[Response]], method: str,
              template: str) -> Callable[[Request], Awaitable[Response]]:
        """``endpoint`` (a stream route's) with a span per request."""
        name = f"{method} {template}"
        tracer, kind, chunks = self.tracer, self._kind_server, template.endswith("/chunks")

        async def traced(request: Request) -> Response:
            stream_id: str = request.path_params["stream_id"]
            with tracer.start_as_current_span(name, kind=kind, attributes={
                    "http.request.method": method, "http.route": template,
                    "streamwire.stream.id": stream_id}) as span:
                response = await endpoint(request)
                span.set_attribute("http.response.status_code", response.status_code)
                if chunks and response.status_code == 200:
                    span.set_attribute("streamwire.chunks", _appended(bytes(response.body)))
                if response.status_code >= 500:
                    span.set_status(self._status(self._error))
                return response

        return traced

    async def sse(self, serve: _SSEServer, scope: Scope, receive: Receive, send: Send,
                  stream_id: str) -> None:
        """Serve one SSE connection (``serve``: the app's own, which puts the connection it
        admits in the list it is given) inside its span."""
        path: str = scope.get("path", "")
        template = ("/runs/{run_id}/sse" if "/runs/" in path and not path.startswith("/streams/")
                    else "/streams/{stream_id}/sse")
        method: str = scope["method"]
        admitted: list[Connection] = []
        with self.tracer.start_as_current_span(f"{method} {template}", kind=self._kind_server,
                                               attributes={"http.request.method": method,
                                                           "http.route": template,
                                                           "streamwire.stream.id": stream_id},
                                               record_exception=False) as span:
            try:
                await serve(scope, receive, send, stream_id, admitted)
            finally:
                conn = admitted[0] if admitted else None
                outcome = "refused" if conn is None else conn.outcome
                span.set_attribute("streamwire.sse.outcome", outcome)
                if conn is not None:
                    span.set_attribute("streamwire.sse.frames", conn.frames)
                    span.set_attribute("streamwire.sse.cursor", conn.cursor)
                    span.set_attribute("streamwire.sse.seconds",
                                       round(time.monotonic() - conn.started, 3))
                if outcome == "error":
                    span.set_status(self._status(self._error))

    # ---- the end ---------------------------------------------------------------------------------

    def close(self) -> None:
        """The app stops: end the spans of runs that never settled here, and flush the spans of
        a provider this made."""
        for span in self._runs.values():
            _end_unsettled(span)
        self._runs.clear()
        if self.provider is not None:
            self.provider.force_flush()


def _end_unsettled(span: Span) -> None:
    span.set_attribute("streamwire.run.status", "unsettled")
    span.end()


def _conversation_of(run_id: str) -> str | None:
    """The chat of a chat's reply (``chat:<chat id>:<key>``), else None."""
    if not run_id.startswith(_CHAT):
        return None
    chat, sep, _key = run_id[len(_CHAT):].rpartition(":")
    return chat if sep and chat else None


def _appended(body: bytes) -> int:
    """The chunks a ``POST .../chunks`` answer says it stored (``{"sequences": [...]}``)."""
    try:
        sequences: object = msgspec.json.decode(body).get("sequences", [])
    except (msgspec.DecodeError, AttributeError):
        return 0
    return len(cast("list[object]", sequences)) if isinstance(sequences, list) else 0


def _exporter_choice() -> str:
    """``OTEL_TRACES_EXPORTER`` ("" when unset)."""
    choice = os.environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if choice not in ("", "otlp", "console", "none"):
        raise UsageError(f"OTEL_TRACES_EXPORTER={choice!r}: streamwire knows otlp, console and "
                         "none (unset: otlp when OTEL_EXPORTER_OTLP_ENDPOINT is set, else console)")
    return choice


def _sdk_provider() -> TracerProvider:
    """An SDK ``TracerProvider`` (it reads ``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``,
    ``OTEL_TRACES_SAMPLER``, ``OTEL_SDK_DISABLED`` itself) with the exporter the module docstring
    describes."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

    provider = TracerProvider()
    choice = _exporter_choice()
    endpoint = (os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
                or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"))
    if choice == "none":
        logger.info("OpenTelemetry: spans are made but not exported (OTEL_TRACES_EXPORTER=none)")
        return provider
    if choice == "otlp" or (not choice and endpoint):
        try:  # an optional package of its own, untyped here when absent
            exporter: Any = importlib.import_module(
                "opentelemetry.exporter.otlp.proto.http.trace_exporter").OTLPSpanExporter
        except ImportError as exc:
            if choice == "otlp":
                raise UsageError(f"OTEL_TRACES_EXPORTER=otlp needs the OTLP exporter: "
                                 f"{_OTLP_HINT} ({exc})") from exc
            logger.warning("OTEL_EXPORTER_OTLP_ENDPOINT is set but the OTLP exporter is not "
                           "installed (%s): spans go to the console instead", _OTLP_HINT)
        else:
            provider.add_span_processor(BatchSpanProcessor(exporter()))
            logger.info("OpenTelemetry: spans go to %s over OTLP/HTTP",
                        endpoint or "the OTLP default endpoint")
            return provider
    provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
    logger.info("OpenTelemetry: spans go to the console (set OTEL_EXPORTER_OTLP_ENDPOINT for a "
                "collector, OTEL_TRACES_EXPORTER=none for none)")
    return provider
