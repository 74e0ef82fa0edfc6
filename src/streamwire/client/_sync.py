"""The sync resumable stream (``ResumableStream``), the twin of ``client.AsyncResumableStream``."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import TypeVar, Unpack, overload

import httpx

from ..errors import StreamTruncatedError
from ..frames import ChunkFrame, RewoundFrame
from ._base import StreamBase, StreamOptions, broke, read_head

__all__ = ["ResumableStream"]

T = TypeVar("T")


class ResumableStream(StreamBase[T]):
    """The sync twin of ``AsyncResumableStream`` over an ``httpx.Client``:
    ``with ResumableStream(client, url) as stream: for chunk in stream``. Same arguments; the
    hooks are plain functions. ``close()`` may be called from another thread."""

    @overload
    def __init__(
        self: ResumableStream[ChunkFrame], client: httpx.Client, url: str | httpx.URL,
        *, decode: None = None, on_rewound: Callable[[RewoundFrame], object] | None = None,
        on_truncated: Callable[[int], int | None] | None = None,
        **options: Unpack[StreamOptions],
    ) -> None: ...
    @overload
    def __init__(
        self, client: httpx.Client, url: str | httpx.URL,
        *, decode: Callable[[ChunkFrame], T],
        on_rewound: Callable[[RewoundFrame], object] | None = None,
        on_truncated: Callable[[int], int | None] | None = None,
        **options: Unpack[StreamOptions],
    ) -> None: ...
    def __init__(
        self, client: httpx.Client, url: str | httpx.URL,
        *, decode: Callable[[ChunkFrame], T] | None = None,
        on_rewound: Callable[[RewoundFrame], object] | None = None,
        on_truncated: Callable[[int], int | None] | None = None,
        **options: Unpack[StreamOptions],
    ) -> None:
        super().__init__(url, decode, options)
        self._client = client
        self._on_rewound = on_rewound
        self._on_truncated = on_truncated
        self._body: Iterator[bytes] | None = None
        self._wake = threading.Event()  # close() interrupts a backoff sleep
        self._lock = threading.Lock()

    def __enter__(self) -> ResumableStream[T]:
        self._enter()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __iter__(self) -> ResumableStream[T]:
        return self

    def close(self) -> None:
        """Abort the read and release the connection (any thread); iteration ends quietly."""
        self._closed = True
        self._wake.set()
        self._drop_connection()

    def _drop_connection(self) -> None:
        with self._lock:
            response, self._response, self._body = self._response, None, None
        if response is not None:
            # A read blocked in another thread does not wake when its socket is closed; a
            # shutdown does wake it (with EOF or an error, which the reading thread ignores).
            stream = response.extensions.get("network_stream")
            sock = stream.get_extra_info("socket") if stream is not None else None
            if isinstance(sock, socket.socket):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
            response.close()

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
                    self._on_rewound(item)
                continue
            if session.finished:
                break
            error = session.take_error()
            if error is not None:
                self._drop_connection()
                if not self._closed and self._failed(error):
                    assert isinstance(error, StreamTruncatedError)
                    assert self._on_truncated is not None
                    self._snapshot(error, self._on_truncated(error.floor))
                continue
            self._step()
        self._drop_connection()
        raise StopIteration

    def _step(self) -> None:
        """Open a connection if none is open, else read one piece of its body."""
        session = self._session
        body = self._body
        if body is None:
            if self._delay > 0:
                self._wake.wait(self._delay)
                self._delay = 0.0
                if self._closed:
                    return
            try:
                response = self._client.send(self._request(self._client), stream=True)
                with self._lock:
                    self._response = response
                content = read_head(response) if self._wants_body(response) else b""
            except httpx.TransportError as exc:
                session.transport_failed(exc, "connect failed")
                return
            if self._accept(response, content):
                with self._lock:
                    if self._response is response:  # not closed meanwhile
                        self._body = response.iter_bytes()
            return
        try:
            data = next(body)
        except StopIteration:
            session.end_of_body()
        except httpx.TransportError as exc:
            session.transport_failed(exc, broke(exc))
        except httpx.StreamClosed:
            if not self._closed:
                raise
        else:
            session.feed(data)

