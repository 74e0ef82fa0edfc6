"""The idempotent producer's sans-I/O half: which request to send with which producer sequence,
what an answer means, and whether to retry it, and what both producers share (``ProducerBase``);
the async producer in ``_producer.py`` (and ``_producer_sync.py``, generated from it) moves bytes.

The scheme is Durable Streams' producer headers (``Producer-Id``, ``Producer-Epoch``,
``Producer-Seq``), the one Kafka's idempotent producer also uses: every write request of a
producer carries the next sequence of its epoch; the server checks it atomically with the write,
so a request sent again with the same sequence is stored once and answered with what the original
got. That makes retrying safe whatever happened to the first answer:

- a network error, a 5xx (``503 {"outcome": "not-stored"}`` or ``504 {"outcome": "unknown"}``),
  408/425/429, or an answer that cannot be read: retry the same request with the same sequence,
  after a backoff (the client's ``RetryPolicy`` and ``Backoff``);
- ``409 {"code": "PRODUCER_SEQ_GAP"}``: ``ProducerSequenceError``; ``403 {"code":
  "PRODUCER_FENCED"}``: ``ProducerEpochError`` (a newer epoch of this producer took over). Both
  are final: the producer refuses every later call with the same error;
- any other refusal (a 4xx): ``ResponseStatusError``; the server stored nothing and did not
  count the sequence, so the next request uses it again.

When the retries run out the outcome of the last request is unknown: the producer refuses every
later call (``RetriesExhaustedError``), because reusing that sequence for other content could be
answered as a duplicate of it. Continue with a new producer on ``epoch + 1``.
"""

from __future__ import annotations

import logging
import random
import time
import uuid
from collections.abc import Iterable, Mapping
from typing import Any, Final, Literal, TypeAlias, cast, final
from urllib.parse import quote

import httpx
import msgspec

from ..errors import (
    ProducerEpochError,
    ProducerSequenceError,
    ResponseStatusError,
    StreamwireError,
)
from ._base import LOGGER
from ._core import Backoff, RetryPolicy
from ._http import BODY_QUOTE, RETRY_STATUSES, bearer_headers, parse_retry_after

__all__ = [
    "DEFAULT_KEEPALIVE_INTERVAL",
    "DEFAULT_PRODUCER_RETRY",
    "DEFAULT_REQUEST_TIMEOUT",
    "ProducerBase",
    "ProducerCall",
    "ProducerSession",
]

#: Seconds between keepalives of an idle producer: a third of the server's default writer lease
#: (30 s), so two may be lost before the lease lapses.
DEFAULT_KEEPALIVE_INTERVAL: Final = 10.0
#: Seconds for one request (connect, send, answer) before it counts as lost and is retried.
DEFAULT_REQUEST_TIMEOUT: Final = 30.0
#: A producer retries for up to two minutes of outage (a restart, a Redis failover) and then
#: gives up; attempts are not capped apart from that.
DEFAULT_PRODUCER_RETRY: Final = RetryPolicy(max_attempts=None, max_elapsed=120.0)

Kind: TypeAlias = Literal["chunks", "end", "fail", "keepalive"]
_ENCODE: Final = msgspec.json.Encoder().encode
_ANSWER: Final = msgspec.json.Decoder(dict[str, Any]).decode


@final
class ProducerCall(msgspec.Struct, frozen=True):
    """One write request: its route, JSON body, producer sequence (None for a keepalive) and,
    for a batch of chunks, how many sequences the answer must hold."""

    kind: Kind
    path: str
    body: bytes
    seq: int | None
    count: int = 0


class ProducerSession:
    """One producer's requests on one stream (sans-I/O): numbering, answers, retries."""

    __slots__ = ("_error", "_path", "backoff", "epoch", "producer_id", "seq")

    def __init__(self, stream_id: str, producer_id: str, epoch: int, seq: int,
                 policy: RetryPolicy, rng: random.Random | None = None) -> None:
        if not producer_id or len(producer_id) > 256 or not producer_id.isprintable():
            raise ValueError("producer_id must be 1 to 256 printable characters")
        if not producer_id.isascii():
            raise ValueError("producer_id must be ASCII (it travels in an HTTP header)")
        if epoch < 0 or seq < 0:
            raise ValueError("epoch and seq must be >= 0")
        self._path = f"streams/{quote(stream_id, safe='')}"
        self.producer_id = producer_id
        self.epoch = epoch
        #: The sequence the next request gets.
        self.seq = seq
        self.backoff = Backoff(policy, rng)
        self._error: StreamwireError | None = None

    # -- building requests -------------------------------------------------------------------

    def chunks(self, items: Iterable[tuple[int, Any]]) -> ProducerCall:
        batch = [{"step": step, "chunk": chunk} for step, chunk in items]
        return self._call("chunks", _ENCODE(batch), count=len(batch))

    def end(self, status: str, output: Any, state: Any, usage: Mapping[str, Any] | None
            ) -> ProducerCall:
        fields = {"status": status, "output": output, "state": state, "usage": usage}
        body = {name: value for name, value in fields.items() if value is not None}
        return self._call("end", _ENCODE(body))

    def fail(self, error: str, recoverable: bool, error_detail: Mapping[str, Any] | None
             ) -> ProducerCall:
        body: dict[str, Any] = {"error": error, "recoverable": recoverable}
        if error_detail is not None:
            body["errorDetail"] = error_detail
        return self._call("fail", _ENCODE(body))

    def keepalive(self) -> ProducerCall:
        """A keepalive renews the writer's lease; it is not a numbered request."""
        return ProducerCall("keepalive", f"{self._path}/keepalive", b"", None)

    def _call(self, kind: Kind, body: bytes, *, count: int = 0) -> ProducerCall:
        if self._error is not None:
            raise self._error
        return ProducerCall(kind, f"{self._path}/{kind}", body, self.seq, count)

    def headers(self, call: ProducerCall) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if call.seq is not None:
            headers["Producer-Id"] = self.producer_id
            headers["Producer-Epoch"] = str(self.epoch)
            headers["Producer-Seq"] = str(call.seq)
        return headers

    # -- answers -----------------------------------------------------------------------------

    def answer(self, call: ProducerCall, status: int, body: bytes,
               retry_after: str | None) -> list[int]:
        """The sequences a 2xx answer gives (empty for end, fail and keepalive); else raise
        the typed error (retryable or final, see the module docstring)."""
        fields = _fields(body)
        if 200 <= status < 300:
            sequences = _sequences(fields.get("sequences") if call.kind == "chunks" else [],
                                   call.count)
            if sequences is None:
                raise StreamwireError(
                    f"the answer to {self._name(call)} cannot be read (HTTP {status}: "
                    f"{_quote(body)}); its outcome is unknown", retryable=True)
            self._done(call)
            return sequences
        code = fields.get("code")
        message = str(fields.get("error") or _quote(body))
        if status == 409 and code == "PRODUCER_SEQ_GAP":
            raise self._final(ProducerSequenceError(
                f"{self._name(call)} was refused: the server expects seq "
                f"{fields.get('expectedSeq')} ({message})", producer_id=self.producer_id,
                expected=_int(fields.get("expectedSeq")), received=call.seq or 0))
        if status == 403 and code == "PRODUCER_FENCED":
            raise self._final(ProducerEpochError(
                f"producer {self.producer_id!r} is fenced: epoch {fields.get('currentEpoch')} "
                f"took over from epoch {self.epoch} ({message})", producer_id=self.producer_id,
                current=_int(fields.get("currentEpoch")), received=self.epoch))
        outcome = fields.get("outcome")
        said = f", outcome {outcome}" if isinstance(outcome, str) else ""
        raise ResponseStatusError(f"{self._name(call)}: HTTP {status}{said}: {message}",
                                  status_code=status, retryable=status in RETRY_STATUSES,
                                  retry_after=parse_retry_after(retry_after))

    def lost(self, call: ProducerCall, exc: BaseException) -> StreamwireError:
        """The request or its answer was lost on the network: the outcome is unknown."""
        error = StreamwireError(f"{self._name(call)}: {type(exc).__name__}: {exc}; its outcome "
                                "is unknown", retryable=True)
        error.__cause__ = exc
        return error

    def retry_delay(self, call: ProducerCall, exc: StreamwireError, now: float) -> float:
        """Seconds to wait before sending ``call`` again; raises ``exc`` when it is final and
        ``RetriesExhaustedError`` when the policy's caps are reached (then every later call of
        this producer raises it too: the outcome of ``call`` stays unknown)."""
        try:
            return self.backoff.next_delay(exc, now, None, 0, doing=f"retrying {self._name(call)}")
        except StreamwireError as final:
            if final is not exc and call.seq is not None:
                self._error = final
            raise

    def _done(self, call: ProducerCall) -> None:
        self.backoff.progress()
        if call.seq is not None:
            self.seq = call.seq + 1

    def _final(self, error: StreamwireError) -> StreamwireError:
        self._error = error
        return error

    def _name(self, call: ProducerCall) -> str:
        if call.seq is None:
            return f"POST /{call.path}"
        return f"POST /{call.path} (producer {self.producer_id!r} epoch {self.epoch} seq {call.seq})"


def _fields(body: bytes) -> dict[str, Any]:
    try:
        return _ANSWER(body) if body else {}
    except msgspec.DecodeError:
        return {}


def _sequences(value: object, count: int) -> list[int] | None:
    """``value`` as the ``count`` sequences of an answer, or None when it is not that."""
    if not isinstance(value, list):
        return None
    items = cast(list[object], value)
    out = [v for v in items if type(v) is int]
    return out if len(out) == len(items) == count else None


def _int(value: object) -> int:
    return value if type(value) is int else -1


def _quote(body: bytes) -> str:
    return repr(body[:BODY_QUOTE].decode("utf-8", "replace"))


class ProducerBase:
    """What both producers share: the session, the request headers, the keepalive clock."""

    def __init__(self, base_url: str | httpx.URL, stream_id: str, *, producer_id: str | None,
                 epoch: int, seq: int, retry: RetryPolicy | None, token: str | None,
                 headers: Mapping[str, str] | None, keepalive_interval: float | None,
                 timeout: float) -> None:
        if keepalive_interval is not None and keepalive_interval <= 0:
            raise ValueError("keepalive_interval must be > 0 (or None for no keepalives)")
        self._base = httpx.URL(str(base_url).rstrip("/") + "/")
        self.session = ProducerSession(stream_id, producer_id or uuid.uuid4().hex, epoch, seq,
                                       retry or DEFAULT_PRODUCER_RETRY)
        self._headers = {**(headers or {}), **bearer_headers(token)}
        self._keepalive_interval = keepalive_interval
        self._timeout = timeout
        self._last_request = time.monotonic()

    @property
    def producer_id(self) -> str:
        """This producer's id (``Producer-Id``)."""
        return self.session.producer_id

    @property
    def epoch(self) -> int:
        return self.session.epoch

    @property
    def seq(self) -> int:
        """The sequence the next write request gets."""
        return self.session.seq

    def _request(self, client: httpx.Client | httpx.AsyncClient, call: ProducerCall
                 ) -> httpx.Request:
        self._last_request = time.monotonic()
        return client.build_request("POST", self._base.join(call.path), content=call.body,
                                    headers={**self._headers, **self.session.headers(call)},
                                    timeout=self._timeout)

    def _idle_for(self) -> float:
        """Seconds until a keepalive is due (<= 0: now)."""
        assert self._keepalive_interval is not None
        return self._last_request + self._keepalive_interval - time.monotonic()

    def _answer(self, call: ProducerCall, response: httpx.Response) -> list[int]:
        return self.session.answer(call, response.status_code, response.content,
                                   response.headers.get("retry-after"))

    def _failed(self, call: ProducerCall, error: StreamwireError) -> float:
        """Seconds to wait before sending ``call`` again (said on the log), or raise: ``error``
        when it is final or ``call`` is a keepalive (the next one is due soon anyway),
        ``RetriesExhaustedError`` when the retries ran out."""
        if call.seq is None:
            raise error
        delay = self.session.retry_delay(call, error, time.monotonic())
        attempt = self.session.backoff.attempt
        LOGGER.log(logging.INFO if attempt == 1 else logging.WARNING,
                   "%s; sending it again in %.1fs (attempt %d)", error, delay, attempt)
        return delay

    def _keepalive_failed(self, exc: BaseException) -> bool:
        """Log a failed keepalive; False when keepalives should stop: the server has no such
        route (404/405; its writes renew the lease, or it keeps none), so asking again is noise."""
        self._last_request = time.monotonic()
        if isinstance(exc, ResponseStatusError) and exc.status_code in (404, 405):
            LOGGER.info("producer %r: the server does not serve keepalives (%s); not sending "
                        "more", self.producer_id, exc)
            return False
        LOGGER.warning("producer %r: keepalive failed: %s", self.producer_id, exc)
        return True
