"""A stand-in for the server side of idempotent producers until it is on main: raw ASGI in front of
``create_app`` that answers producer writes (``Producer-Id``/``-Epoch``/``-Seq``) with the real
log's idempotent appends (``producer=``), in the answers the write API specifies (409
PRODUCER_SEQ_GAP, 403 PRODUCER_FENCED, 503 not-stored, 504 unknown), plus ``/keepalive``. Everything
else (PUT, GET /sse, ...) is ``create_app``'s. ``faults`` injects answers: ``"unknown"`` stores
the write and answers 504, ``"not-stored"`` answers 503 without storing."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import unquote

from streamwire.errors import ProducerEpochError, ProducerSequenceError, StreamwireError
from streamwire.log import Producer, StreamLog
from streamwire.server import create_app

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


class ProducerApp:
    def __init__(self, log: StreamLog) -> None:
        self.log = log
        self.inner = create_app(log, allow_anonymous_writes=True)
        self.faults: list[str] = []  # consumed one per producer write
        self.requests: list[tuple[str, dict[str, str]]] = []  # (route, producer headers)
        self.keepalives = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        parts = scope.get("path", "").strip("/").split("/")
        if (scope["type"] != "http" or scope["method"] != "POST" or len(parts) != 3
                or parts[0] != "streams" or parts[2] not in ("chunks", "end", "fail", "keepalive")):
            await self.inner(scope, receive, send)
            return
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        stream_id, route = unquote(parts[1]), parts[2]
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        producer_headers = {k: v for k, v in headers.items() if k.startswith("producer-")}
        self.requests.append((route, producer_headers))
        if route == "keepalive":
            self.keepalives += 1
            await self.log.info(stream_id)
            await _answer(send, 200, {})
            return
        producer = Producer(headers["producer-id"], int(headers["producer-epoch"]),
                            int(headers["producer-seq"]))
        fault = self.faults.pop(0) if self.faults else None
        if fault == "not-stored":
            await _answer(send, 503, {"error": "the stream log failed", "outcome": "not-stored"})
            return
        try:
            answer = await self._write(stream_id, route, json.loads(body), producer)
        except ProducerSequenceError as exc:
            await _answer(send, 409, {"error": str(exc), "code": "PRODUCER_SEQ_GAP",
                                      "expectedSeq": exc.expected, "receivedSeq": exc.received})
            return
        except ProducerEpochError as exc:
            await _answer(send, 403, {"error": str(exc), "code": "PRODUCER_FENCED",
                                      "currentEpoch": exc.current})
            return
        except StreamwireError as exc:
            await _answer(send, exc.status_hint, {"error": str(exc)})
            return
        if fault == "unknown":  # stored, but the log's answer was lost
            await _answer(send, 504, {"error": "the stream log failed", "outcome": "unknown"})
            return
        await _answer(send, 200, answer)

    async def _write(self, stream_id: str, route: str, body: Any,
                     producer: Producer) -> dict[str, Any]:
        if route == "chunks":
            batch = [(item["step"], json.dumps(item["chunk"]).encode()) for item in body]
            return {"sequences": await self.log.append_many(stream_id, batch, producer=producer)}
        if route == "end":
            await self.log.end_stream(stream_id, body["status"], output=body.get("output"),
                                      usage=body.get("usage"), producer=producer)
        else:
            await self.log.fail_stream(stream_id, body["error"], recoverable=body["recoverable"],
                                       error_detail=body.get("errorDetail"), producer=producer)
        return {}


async def _answer(send: Send, status: int, body: dict[str, Any]) -> None:
    data = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(data)).encode())]})
    await send({"type": "http.response.body", "body": data})
