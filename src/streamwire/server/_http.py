"""The JSON side of ``streamwire.server``: request bodies, limits, error answers and their mapping.

Every error answer is ``{"error": "<what is wrong>", "status": N}``. ``refusal_for`` maps an
exception to it in one place (httpx's ``map_httpcore_exceptions`` way): the app's own
``Refusal``, a hook's ``HTTPException``, msgspec's decode (400) and validation (422) errors,
streamwire errors by their ``status_hint``; anything else is a 500 whose text stays off the wire
unless the app exposes errors.

Hostile input is refused here, before any log call, so every backend answers it the same way and
nothing is half-applied: a body that is not UTF-8 or nests deeper than ``MAX_JSON_DEPTH``, a step
or cursor above ``MAX_SAFE_INTEGER``, a stream id that is not printable text or whose
percent-decoding is not UTF-8 (all 400). ``read_json`` is the one reader of every JSON route's
body (the stream, runs and chat routes): ``Content-Type: application/json`` or 415 (a browser
posts ``text/plain``, a bare ``Blob`` or a form cross-site without asking: no such body is ever
read), then the size (413), UTF-8 and depth (400) checks.
"""

from __future__ import annotations

import logging
import urllib.parse
from typing import Annotated, Any, Final, Literal, TypeAlias

import msgspec
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from ..errors import (
    ProducerEpochError,
    ProducerSequenceError,
    RunError,
    StreamwireError,
    UnknownAgentError,
)
from ..frames import EndStatus
from ..log import Producer, StreamInfo, StreamLog
from ..log._common import MAX_SAFE_INTEGER
from ..log._producers import MAX_PRODUCER_ID
from ._asgi import Scope, Send, header_of, query_param
from ._jsonscan import json_depth, top_level_commas

__all__ = [
    "MAX_JSON_DEPTH",
    "MAX_SAFE_INTEGER",
    "Refusal",
    "WriteAPI",
    "check_json",
    "check_stream_id",
    "chunks_decoder",
    "cleanup_decoder",
    "encode_json",
    "end_decoder",
    "fail_decoder",
    "info_json",
    "json_response",
    "parse_cursor",
    "producer_of",
    "read_body",
    "read_json",
    "refusal_for",
    "send_error",
]

logger = logging.getLogger("streamwire.server")

#: Nesting of arrays and objects in a request body. Far deeper than any real payload, and far
#: under the ~1,000 levels at which Python's recursion limit stops msgspec (and every backend's
#: re-encoding of an end or fail payload) with a ``RecursionError``.
MAX_JSON_DEPTH: Final = 256
#: Digits of ``MAX_SAFE_INTEGER``: a longer cursor is refused before ``int()`` reads it.
_MAX_CURSOR_DIGITS: Final = 16
_Step = Annotated[int, msgspec.Meta(ge=0)]


class ChunkIn(msgspec.Struct, forbid_unknown_fields=True):
    """One item of ``POST /chunks``; ``chunk`` is kept as its JSON text."""

    step: _Step
    chunk: msgspec.Raw


class EndIn(msgspec.Struct, forbid_unknown_fields=True, rename="camel"):
    """``POST /end``."""

    status: EndStatus
    output: Any = None
    state: Any = None
    usage: dict[str, Any] | None = None


class FailIn(msgspec.Struct, forbid_unknown_fields=True, rename="camel"):
    """``POST /fail``."""

    error: str
    recoverable: bool
    error_detail: dict[str, Any] | None = None


class CleanupIn(msgspec.Struct, forbid_unknown_fields=True):
    """``POST /cleanup``."""

    step: _Step


chunks_decoder: Final = msgspec.json.Decoder(list[ChunkIn])
end_decoder: Final = msgspec.json.Decoder(EndIn)
fail_decoder: Final = msgspec.json.Decoder(FailIn)
cleanup_decoder: Final = msgspec.json.Decoder(CleanupIn)
encode_json: Final = msgspec.json.Encoder().encode


class Refusal(Exception):
    """An HTTP error answer: the status, the message sent, extra headers and extra JSON fields."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None,
                 **fields: object) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}
        self.fields = fields

    def body(self) -> bytes:
        return encode_json({"error": self.message, "status": self.status, **self.fields})

    def response(self) -> Response:
        return Response(self.body(), self.status, self.headers, media_type="application/json")


#: What a failed write did: ``unknown`` (the log's answer was lost after the write was sent: it
#: may or may not be stored) or ``not-stored`` (nothing changed: retrying is safe).
Outcome: TypeAlias = Literal["unknown", "not-stored"]


def write_outcome(exc: StreamwireError) -> Outcome:
    """Whether a failed write may have been applied. The log says so with ``outcome``, or with
    ``retryable`` (a backend error is retryable only when nothing was changed); an error that says
    neither may have been applied."""
    said = getattr(exc, "outcome", None)
    if said == "unknown" or not (said == "not-stored" or exc.retryable):
        return "unknown"
    return "not-stored"


def refusal_for(exc: Exception, *, expose_errors: bool, retry_after: str,
                write: bool = False) -> Refusal:
    """The answer an exception gets; unexpected text stays off the wire. A backend failure of a
    ``write`` request says its outcome: 504 ``outcome: unknown`` or 503 ``outcome: not-stored``.
    Every 503 carries ``Retry-After`` (``retry_after`` seconds unless it names its own)."""
    refusal = _refusal(exc, expose_errors=expose_errors, write=write)
    if refusal.status == 503 and not any(k.lower() == "retry-after" for k in refusal.headers):
        refusal.headers["Retry-After"] = retry_after
    return refusal


def _refusal(exc: Exception, *, expose_errors: bool, write: bool) -> Refusal:
    if isinstance(exc, Refusal):
        return exc
    if isinstance(exc, HTTPException):
        return Refusal(exc.status_code, exc.detail, dict(exc.headers or {}))
    if isinstance(exc, msgspec.ValidationError):
        return Refusal(422, f"the body does not have the expected shape: {exc}")
    if isinstance(exc, msgspec.DecodeError):
        return Refusal(400, f"the body is not valid JSON: {exc}")
    if isinstance(exc, RecursionError):  # read_json's depth check should have caught it
        return Refusal(400, "the body nests arrays and objects too deeply")
    if isinstance(exc, ProducerSequenceError):
        return Refusal(409, str(exc), {"Producer-Expected-Seq": str(exc.expected),
                                       "Producer-Received-Seq": str(exc.received)},
                       code="PRODUCER_SEQ_GAP", expectedSeq=exc.expected, receivedSeq=exc.received)
    if isinstance(exc, ProducerEpochError):
        return Refusal(403, str(exc), {"Producer-Epoch": str(exc.current)},
                       code="PRODUCER_FENCED", currentEpoch=exc.current)
    if isinstance(exc, RunError):  # typed for clients: the class name is the code
        if isinstance(exc, UnknownAgentError):
            return Refusal(exc.status_hint, str(exc), code=type(exc).__name__, agent=exc.agent,
                           agents=exc.agents)
        return Refusal(exc.status_hint, str(exc), code=type(exc).__name__)
    if isinstance(exc, StreamwireError):
        status = exc.status_hint
        if status < 500:
            return Refusal(status, str(exc))
        logger.warning("stream log error: %r", exc)
        message = str(exc) if expose_errors else "the stream log failed"
        if not write:
            return Refusal(status, message)
        if write_outcome(exc) == "unknown":
            return Refusal(504, message, outcome="unknown")
        return Refusal(503, message, outcome="not-stored")
    logger.exception("unexpected error", exc_info=exc)
    return Refusal(500, repr(exc) if expose_errors else "internal server error")


async def send_error(send: Send, refusal: Refusal, extra: list[tuple[bytes, bytes]]) -> None:
    """Answer with ``refusal`` over raw ASGI (the SSE route has no Starlette response)."""
    body = refusal.body()
    headers = [(b"content-type", b"application/json"),
               (b"content-length", str(len(body)).encode()), *extra]
    headers += [(k.lower().encode("latin-1"), v.encode("latin-1"))
                for k, v in refusal.headers.items()]
    await send({"type": "http.response.start", "status": refusal.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def json_response(content: object) -> Response:
    """A 200 answer with ``content`` as JSON."""
    return Response(encode_json(content), 200, media_type="application/json")


def info_json(info: StreamInfo) -> dict[str, Any]:
    """``GET /info``'s body: ``StreamInfo`` in camelCase, with the floor and marker always present."""
    body: dict[str, Any] = msgspec.to_builtins(info)
    body.setdefault("oldestRetainedSequence", None)
    body.setdefault("truncatedAtStep", None)
    return body


def parse_cursor(text: str, source: str) -> int:
    """A cursor is all ASCII digits (``+1``, ``-1``, ``1_0`` and ``1.5`` are refused), at most
    ``MAX_SAFE_INTEGER``."""
    if not text.isascii() or not text.isdigit() or len(text) > _MAX_CURSOR_DIGITS:
        raise Refusal(400, f"{source} must be a non-negative integer sequence up to 2^53 - 1, "
                           f"got {text[:40]!r}")
    cursor = int(text)
    check_safe_integer(cursor, source)
    return cursor


def reader_cursor(scope: Scope) -> int:
    """Where a reader (re-)attaches: ``Last-Event-ID`` (what a browser's ``EventSource`` sends
    back), else ``?cursor=``, else 0; refused (400) when not a cursor."""
    header = header_of(scope, b"last-event-id")
    if header:
        return parse_cursor(header.strip(), "Last-Event-ID")
    query = query_param(scope, "cursor")
    return parse_cursor(query, "cursor") if query is not None else 0


def check_safe_integer(value: int, what: str) -> None:
    """Refuse (400) an integer a JavaScript reader could not hold exactly."""
    if value > MAX_SAFE_INTEGER:
        raise Refusal(400, f"{what} is {value}, above 2^53 - 1 ({MAX_SAFE_INTEGER}), the largest "
                           "integer every reader holds exactly")


def check_stream_id(stream_id: str, max_length: int, raw_path: bytes | None) -> None:
    """Refuse (400) a stream id that is too long, holds a control or invisible character (it
    would reach log lines and keys raw), or whose percent-decoding is not UTF-8 (servers decode it
    with replacement, so ``alias%FF`` and ``alias%FE`` would both name ``alias\ufffd``)."""
    if len(stream_id) > max_length:
        raise Refusal(400, f"the stream id has {len(stream_id)} characters, over the limit "
                           f"of {max_length} (create_app(max_stream_id_length=...))")
    if not stream_id.isprintable():
        bad = next(c for c in stream_id if not c.isprintable())
        raise Refusal(400, f"the stream id contains the control or invisible character "
                           f"U+{ord(bad):04X}; ids are printable text")
    if "\ufffd" in stream_id:
        try:
            urllib.parse.unquote_to_bytes(raw_path if raw_path is not None else b"%FF").decode()
        except UnicodeDecodeError:
            raise Refusal(400, "the stream id is not UTF-8 once percent-decoded") from None


def check_json(body: bytes) -> bytes:
    """``body`` if it is UTF-8 (JSON text must be; a chunk is re-sent as it came) and nests at most
    ``MAX_JSON_DEPTH`` deep; else 400."""
    if not body.isascii():
        try:
            body.decode()
        except UnicodeDecodeError as exc:
            raise Refusal(400, f"the body is not valid UTF-8 (byte {exc.start}); JSON text "
                               "must be") from None
    if body.count(b"[") + body.count(b"{") > MAX_JSON_DEPTH:
        depth = json_depth(body)
        if depth > MAX_JSON_DEPTH:
            raise Refusal(400, f"the body nests arrays and objects {depth} deep, over the limit "
                               f"of {MAX_JSON_DEPTH}")
    return body


_PRODUCER_HEADERS: Final = ("producer-id", "producer-epoch", "producer-seq")


def producer_of(request: Request) -> Producer | None:
    """The write's producer identity: the ``Producer-Id``, ``Producer-Epoch`` and ``Producer-Seq``
    headers, all three or none (400)."""
    pid, epoch, seq = (request.headers.get(name) for name in _PRODUCER_HEADERS)
    if pid is None and epoch is None and seq is None:
        return None
    if pid is None or epoch is None or seq is None:
        raise Refusal(400, "Producer-Id, Producer-Epoch and Producer-Seq go together: send all "
                           "three or none")
    if not pid or len(pid) > MAX_PRODUCER_ID or not (pid.isascii() and pid.isprintable()):
        raise Refusal(400, f"Producer-Id must be 1 to {MAX_PRODUCER_ID} visible ASCII characters")
    return Producer(pid, parse_cursor(epoch, "Producer-Epoch"), parse_cursor(seq, "Producer-Seq"))


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refused (413) as soon as it passes ``limit`` bytes."""
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > limit:
        raise Refusal(413, f"the body has {length} bytes, over the limit of {limit} "
                           "(create_app(max_body_size=...))")
    body = bytearray()
    async for piece in request.stream():
        body += piece
        if len(body) > limit:
            raise Refusal(413, f"the body is over the limit of {limit} bytes "
                               "(create_app(max_body_size=...))")
    return bytes(body)


def is_json_type(content_type: str | None) -> bool:
    """``application/json`` or an ``application/*+json`` type, with any parameters."""
    if content_type is None:
        return False
    media = content_type.partition(";")[0].strip().lower()
    return media == "application/json" or (media.startswith("application/")
                                           and media.endswith("+json"))


async def read_json(request: Request, limit: int, *, optional: bool = False) -> bytes:
    """The body of a JSON route, the one reader every such route uses: 415 unless its
    ``Content-Type`` is JSON (no cross-site ``text/plain`` or form post is ever read), 413 past
    ``limit`` bytes, 400 unless UTF-8 and at most ``MAX_JSON_DEPTH`` deep. An ``optional`` body
    may be absent (``b""``, whatever the content type)."""
    content_type = request.headers.get("content-type")
    if not is_json_type(content_type):
        if optional and not await read_body(request, limit):
            return b""
        said = f"Content-Type {content_type[:60]!r}" if content_type else "no Content-Type"
        raise Refusal(415, f"the body must be JSON sent as Content-Type: application/json, "
                           f"not {said}")
    return check_json(await read_body(request, limit))


class WriteAPI:
    """The JSON routes' handlers over one log: each takes the request and the stream id."""

    def __init__(self, log: StreamLog, *, max_body: int, max_batch: int) -> None:
        self.log = log
        self.max_body = max_body
        self.max_batch = max_batch
        self.appended = 0  # chunks appended through POST /chunks (served by GET /metrics)

    async def create(self, request: Request, stream_id: str) -> Response:
        return json_response(info_json(await self.log.create_stream(stream_id)))

    async def info(self, request: Request, stream_id: str) -> Response:
        return json_response(info_json(await self.log.info(stream_id)))

    async def chunks(self, request: Request, stream_id: str) -> Response:
        producer = producer_of(request)
        body = await read_json(request, self.max_body)
        # the cap before the decode: each item costs ~100 bytes decoded, several times its text
        if (body.count(b"{") > self.max_batch  # no more items than objects: nothing to count
                and top_level_commas(body, self.max_batch) >= self.max_batch):
            raise Refusal(413, f"the batch has more than {self.max_batch} chunks, the limit "
                               "(create_app(max_batch_chunks=...), streamwire serve "
                               "--max-batch-chunks)")
        items = chunks_decoder.decode(body)
        for item in items:
            check_safe_integer(item.step, "a step")
        batch = [(item.step, bytes(item.chunk)) for item in items]
        if batch or producer is not None:  # a producer's empty batch still takes its seq
            sequences = await self.log.append_many(stream_id, batch, producer=producer)
            self.appended += len(sequences)
        else:
            sequences = []
            await self.log.info(stream_id)  # an unknown stream is 404 even for an empty batch
        return json_response({"sequences": sequences})

    async def end(self, request: Request, stream_id: str) -> Response:
        producer = producer_of(request)
        body = end_decoder.decode(await read_json(request, self.max_body))
        await self.log.end_stream(stream_id, body.status, output=body.output, state=body.state,
                                  usage=body.usage, producer=producer)
        return json_response(info_json(await self.log.info(stream_id)))

    async def fail(self, request: Request, stream_id: str) -> Response:
        producer = producer_of(request)
        body = fail_decoder.decode(await read_json(request, self.max_body))
        await self.log.fail_stream(stream_id, body.error, error_detail=body.error_detail,
                                   recoverable=body.recoverable, producer=producer)
        return json_response(info_json(await self.log.info(stream_id)))

    async def cleanup(self, request: Request, stream_id: str) -> Response:
        body = cleanup_decoder.decode(await read_json(request, self.max_body))
        check_safe_integer(body.step, "the step")
        rewound = await self.log.cleanup_to_step(stream_id, body.step)
        return json_response(msgspec.to_builtins(rewound))

    async def reset(self, request: Request, stream_id: str) -> Response:
        await self.log.reset_stream(stream_id)
        return json_response(info_json(await self.log.info(stream_id)))

    async def keepalive(self, request: Request, stream_id: str) -> Response:
        await self.log.keepalive(stream_id)
        return json_response(info_json(await self.log.info(stream_id)))

    async def reactivate(self, request: Request, stream_id: str) -> Response:
        await self.log.reactivate_stream(stream_id)
        return json_response(info_json(await self.log.info(stream_id)))
