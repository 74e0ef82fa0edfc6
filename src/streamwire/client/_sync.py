# Generated from _async.py by tools/unasync.py; do not edit: edit _async.py and run
# `python tools/unasync.py` (./dev test fails while this file is stale).
"""``ResumableStream``: the resumable reader over an ``httpx.Client`` (the module
docstring of ``streamwire.client`` describes its behaviour; ``_base`` and ``_core`` hold all it
decides, this module moves bytes)."""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import TypeVar, Unpack, overload

import httpx

from ..errors import StreamTruncatedError
from ..frames import ChunkFrame, RewoundFrame
from ._base import StreamBase, StreamOptions, broke
from ._concurrency import Hook, Link, call, read_head

__all__ = ["ResumableStream"]

T = TypeVar("T")


class ResumableStream(StreamBase[T]):
    """Read a wire v2 stream with ``with ... as stream: for chunk in stream``.

    Args:
        client: the ``httpx.Client`` to use (not closed by the stream).
        url: a URL serving wire v2 (``GET /streams/{id}/sse``).
        decode: turns each chunk into the item yielded (e.g. a contract's message decoder);
            by default the ``ChunkFrame`` itself is yielded.
        on_rewound: called with each ``RewoundFrame``.
        on_truncated: called with the floor on ``truncated``; returns the sequence a refetched
            snapshot covers (reading resumes after it) or None to raise ``StreamTruncatedError``.
        options: ``StreamOptions`` (cursor, retry, idle_timeout, headers, limits).

    The hooks of the async stream may also be async functions (their results are awaited).
    ``close()`` may be called from another task, or thread for the sync stream.
    """

    @overload
    def __init__(
        self: ResumableStream[ChunkFrame], client: httpx.Client, url: str | httpx.URL,
        *, decode: None = None, on_rewound: Hook[RewoundFrame, object] | None = None,
        on_truncated: Hook[int, int | None] | None = None,
        **options: Unpack[StreamOptions],
    ) -> None: ...
    @overload
    def __init__(
        self, client: httpx.Client, url: str | httpx.URL,
        *, decode: Callable[[ChunkFrame], T],
        on_rewound: Hook[RewoundFrame, object] | None = None,
        on_truncated: Hook[int, int | None] | None = None,
        **options: Unpack[StreamOptions],
    ) -> None: ...
    def __init__(
        self, client: httpx.Client, url: str | httpx.URL,
        *, decode: Callable[[ChunkFrame], T] | None = None,
        on_rewound: Hook[RewoundFrame, object] | None = None,
        on_truncated: Hook[int, int | None] | None = None,
        **options: Unpack[StreamOptions],
    ) -> None:
        super().__init__(url, decode, options)
        self._client = client
        self._on_rewound = on_rewound
        self._on_truncated = on_truncated
        self._link = Link()

    def __enter__(self) -> ResumableStream[T]:
        self._enter()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __iter__(self) -> ResumableStream[T]:
        return self

    def close(self) -> None:
        """Abort the read and release the connection (from any task or thread); iteration ends
        quietly."""
        self._abort()
        self._link.release()

    def _abort(self) -> None:
        self._closed = True
        self._link.interrupt()

    def _has_truncated_hook(self) -> bool:
        return self._on_truncated is not None

    def __next__(self) -> T:
        session = self._session
        while not self._closed:
            if session.pending:
                item = session.pending.popleft()
                if isinstance(item, ChunkFrame):
                    return self._item(item)
                if self._on_rewound is not None:
                    call(self._on_rewound, item)
                continue
            if session.finished:
                break
            error = session.take_error()
            if error is not None:
                self._link.release()
                # A close() wins over the failure it may have caused: no re-attach, no raise.
                if not self._closed and self._failed(error):
                    assert isinstance(error, StreamTruncatedError)
                    assert self._on_truncated is not None
                    self._snapshot(error, call(self._on_truncated, error.floor))
                continue
            with self._link.interruptible():
                self._step()
        self._link.release()
        raise StopIteration

    def _step(self) -> None:
        """Open a connection if none is open, else read one piece of its body."""
        session, link = self._session, self._link
        body = link.body
        if body is None:
            if self._delay > 0:
                link.sleep(self._delay)
                self._delay = 0.0
                if self._closed:
                    return
            try:
                response = self._client.send(self._request(self._client), stream=True)
                link.attach(response)
                head = read_head(response) if self._wants_body(response) else b""
            except httpx.TransportError as exc:
                session.transport_failed(exc, "connect failed")
                return
            if self._accept(response, head):
                link.open(response, response.iter_bytes())
            return
        try:
            data = next(body)
        except StopIteration:
            session.end_of_body()
        except httpx.TransportError as exc:
            session.transport_failed(exc, broke(exc))
        except httpx.StreamClosed:
            if not self._closed:  # closed from elsewhere while reading: iteration ends quietly
                raise
        else:
            session.feed(data)
