"""A burst of ``POST /runs`` over real uvicorn on memory, SQLite and Redis: every start is
answered (201, or 200 for a repeat), none refused. The run store shares its log's one connection
set-up (on Redis: the log's pipelined command connection; a pool of its own once refused half of
200 concurrent starts with "Too many connections")."""

from __future__ import annotations

import anyio
import httpx
import pytest

from helpers import runs_agents as agents
from helpers.runs_server import Backend, backend, serving

pytestmark = pytest.mark.anyio
__all__ = ["backend"]  # the fixture, imported

BURST = 200


async def _post_all(base: str, bodies: list[dict[str, object]]) -> list[int]:
    """Every body at once, each on a connection of its own (a fresh client per burst: a kept-alive
    connection the server times out just as a request reuses it would fail that request)."""
    codes: list[int] = []
    limits = httpx.Limits(max_connections=len(bodies), max_keepalive_connections=len(bodies))
    async with httpx.AsyncClient(base_url=base, limits=limits, timeout=60) as client:

        async def post(body: dict[str, object]) -> None:
            answer = await client.post("/runs", json=body)
            codes.append(answer.status_code)

        async with anyio.create_task_group() as group:
            for body in bodies:
                group.start_soon(post, body)
    return codes


async def _statuses(client: httpx.AsyncClient, count: int) -> list[str]:
    found: list[str] = []

    async def status(n: int) -> None:
        found.append((await client.get(f"/runs/burst-{n}/status")).json()["status"])

    async with anyio.create_task_group() as group:  # at once, not one after the other
        for n in range(count):
            group.start_soon(status, n)
    return found


async def test_200_concurrent_starts_are_all_answered(backend: Backend) -> None:
    bodies: list[dict[str, object]] = [
        {"agent": "echo", "input": {"text": f"burst {n}"}, "runId": f"burst-{n}"}
        for n in range(BURST)]
    with serving(backend.factory, [agents.echo]) as srv:
        first = await _post_all(srv.base, bodies)
        assert sorted(first) == [201] * BURST, {c: first.count(c) for c in set(first)}
        again = await _post_all(srv.base, bodies)  # repeats: the stored runs, not new ones
        assert sorted(again) == [200] * BURST, {c: again.count(c) for c in set(again)}
        limits = httpx.Limits(max_connections=BURST, max_keepalive_connections=BURST)
        async with httpx.AsyncClient(base_url=srv.base, limits=limits, timeout=60) as client:
            with anyio.fail_after(60):
                for _ in range(600):  # the echo agent ends at once; its records follow
                    if set(await _statuses(client, BURST)) == {"completed"}:
                        break
                    await anyio.sleep(0.1)
        assert srv.runs.invocations == BURST
