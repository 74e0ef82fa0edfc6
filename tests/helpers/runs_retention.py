"""Helpers of the retention tests: a backend's log with chosen lifetimes (built by ``streamwire
serve``'s own ``open_log``), a reader of ``/runs/{id}/sse``, and ``streamwire serve`` with
lifetime flags as a subprocess."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import httpx

from helpers.runs_server import LogFactory, backend_flags, serve_cli
from helpers.server import Backend
from streamwire.cli.serve import open_log
from streamwire.frames import StreamFrame, UnknownFrame, decode_stream_frame
from streamwire.sse import SSEDecoder

Frame = StreamFrame | UnknownFrame


def with_lifetimes(backend: Backend, **lifetimes: float) -> LogFactory:
    """``backend``'s log factory with ``finished_ttl=`` / ``paused_ttl=`` as given."""
    return lambda: open_log(backend.spec, redis_prefix=backend.prefix, **lifetimes)


@contextlib.asynccontextmanager
async def run_sse(client: httpx.AsyncClient, run_id: str, cursor: int | None = None
                  ) -> AsyncIterator[tuple[httpx.Response, list[Frame]]]:
    """``GET /runs/{id}/sse`` read to its end: the response and its frames."""
    params = {"cursor": str(cursor)} if cursor is not None else None
    frames: list[Frame] = []
    with anyio.fail_after(10):
        async with client.stream("GET", f"/runs/{run_id}/sse", params=params) as resp:
            if resp.status_code == 200:
                decoder = SSEDecoder()
                async for piece in resp.aiter_raw():
                    frames += [decode_stream_frame(e) for e in decoder.feed(piece)]
                frames += [decode_stream_frame(e) for e in decoder.flush()]
            else:
                await resp.aread()
            yield resp, frames


async def wait_for(client: httpx.AsyncClient, path: str, status: int, limit: float = 10
                   ) -> httpx.Response:
    """GET ``path`` until it answers ``status``."""
    with anyio.fail_after(limit):
        while (answer := await client.get(path)).status_code != status:  # noqa: ASYNC110
            await anyio.sleep(0.1)
    return answer


@contextlib.contextmanager
def serve(backend: Backend, port: int, *flags: str) -> Iterator[subprocess.Popen[bytes]]:
    """``streamwire serve`` on ``port`` with the test agents and ``flags`` (stopped at exit)."""
    with serve_cli(*backend_flags(backend), "--log-level", "warning",
                   "--agent", "helpers.runs_agents:echo", "--agent", "helpers.runs_agents:pauser",
                   *flags, port=port) as proc:
        yield proc


def json_of(answer: httpx.Response) -> Any:
    assert answer.headers["content-type"].startswith("application/json"), answer.text
    return answer.json()
