"""h11's undocumented parts streamwire relies on, each checked against the installed version.

One reach-in: **is a connection sending a chunked body** (``chunked_body``). uvicorn's h11
protocol writes each ASGI body message through ``h11.Connection.send(h11.Data(...))``: for a
response without ``Content-Length`` to an HTTP/1.1 client, h11's ``ChunkedWriter`` frames the
data as ``<hex length>\\r\\n<data>\\r\\n`` and changes no state (``h11_chunk`` writes the same bytes).
A stream's hub writes one message to thousands of connections; framing it once and writing the
framed bytes to each transport (``_compat.uvicorn.DirectBody``) skips h11's event and state
machinery per connection, most of the Python in a write. No public API says which writer a
connection uses: ``Connection._writer`` is private. Only on the versions in ``_H11_TESTED``, only
while the connection is in ``SEND_BODY`` with a ``ChunkedWriter``; anywhere else (HTTP/1.0's
close-delimited body, a ``Content-Length`` body, another h11) the answer is False and the hub
writes through ``send``. ``tests/test_server_compat.py`` fails when the installed h11 no longer
has the shape.
"""

from __future__ import annotations

from typing import Final

import h11

from ._versions import VersionGate, installed_version

__all__ = ["chunked_body", "h11_chunk", "h11_version"]

#: h11 versions (major, minor) whose ``Connection`` keeps its body writer in ``_writer`` and whose
#: ``ChunkedWriter`` frames data as ``h11_chunk`` does: from 0.14 up to, not including, 0.17.
_H11_TESTED: Final = ((0, 14), (0, 17))

_GATE: Final = VersionGate("h11", *_H11_TESTED,
                           "writes a stream's shared messages past; each goes through uvicorn's "
                           "send")

_chunked_writer: type | None
try:
    from h11._writers import ChunkedWriter

    _chunked_writer = ChunkedWriter
except ImportError:  # moved: no connection's writer is it, and every body goes through ``send``
    _chunked_writer = None


def h11_version() -> tuple[int, int]:
    """The installed h11's (major, minor); (-1, -1) when it cannot be read."""
    return installed_version("h11")


def chunked_body(conn: object) -> bool:
    """Is ``conn`` (an ``h11.Connection``) sending a response body in chunked framing, on a
    tested h11?"""
    if not (_GATE.ok or _GATE.passes()):
        return False
    return (type(getattr(conn, "_writer", None)) is _chunked_writer
            and getattr(conn, "our_state", None) is h11.SEND_BODY)


def h11_chunk(data: bytes) -> bytes:
    """``data`` (not empty) as h11's ``ChunkedWriter`` writes it: one chunk of the body."""
    return b"%x\r\n%b\r\n" % (len(data), data)
