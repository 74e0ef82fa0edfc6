"""The stream id space and who may write where, enforced once for every route.

A stream id names exactly one of three things, and the server keeps them apart:

=========================  ===================================================================
a run's stream             the run's id (``POST /runs``): written only by the runs service, so
                           the stream and ``/runs/{id}/status`` never disagree
a chat's streams           every id beginning ``chat:`` (``CHAT_PREFIX``): a chat's index
                           ``chat:<chat id>`` and its runs ``chat:<chat id>:<key>``, made by the
                           ``/api/chat`` routes only
a plain stream             any other id, written through ``/streams/{id}/...``
=========================  ===================================================================

So a client-chosen id (a ``runId``, an ``Idempotency-Key``) may not begin ``chat:`` (400), and the
stream write routes refuse a ``chat:`` id (400) and the stream of a run (409, naming the run
routes). A run is known by its record in the run store beside the log (``runs._store``), so every
server process on a shared backend refuses alike, with or without agents of its own; a record
whose run never took its stream (``STREAM_EXISTS``: the id named a plain stream first) leaves the
stream to its writer.
"""

from __future__ import annotations

from typing import Final

from ..aisdk._request import CHAT_PREFIX
from ..log import StreamLog, capabilities_of
from ..runs import Runs
from ..runs._store import RunStore, store_for
from ._http import Refusal

__all__ = ["CHAT_PREFIX", "WriteGuard", "check_client_id"]

#: ``errorDetail.code`` of a run record whose run never took its stream.
_NEVER_OWNED: Final = "STREAM_EXISTS"


def check_client_id(ident: str, what: str) -> str:
    """Refuse (400) an id a client chose that is empty or lies in the chat routes' space."""
    if not ident:
        raise Refusal(400, f"{what} is empty; send a non-empty id (or none, and the server "
                           "picks one)")
    if ident.startswith(CHAT_PREFIX):
        raise Refusal(400, f"{what} {ident[:40]!r} begins {CHAT_PREFIX!r}: ids beginning "
                           f"{CHAT_PREFIX!r} are the chat routes' own (/api/chat)")
    return ident


class WriteGuard:
    """Whether a stream write route may touch a stream: not a chat's, not a run's."""

    def __init__(self, log: StreamLog, runs: Runs | None) -> None:
        store: RunStore | None = None
        if runs is not None:
            store = runs.store
        elif capabilities_of(log).records:  # no agents here, but another process may run some
            store = store_for(log)
        self.store = store

    async def check(self, stream_id: str) -> None:
        """Refuse a write to a chat's stream (400) or a run's (409)."""
        if stream_id.startswith(CHAT_PREFIX):
            raise Refusal(400, f"stream {stream_id[:60]!r} is a chat's: ids beginning "
                               f"{CHAT_PREFIX!r} are written by the /api/chat routes only")
        if self.store is None:
            return
        record = await self.store.get(stream_id)
        if record is None or (record.error_detail or {}).get("code") == _NEVER_OWNED:
            return
        base = f"/runs/{stream_id}"
        raise Refusal(409, f"stream {stream_id!r} is run {stream_id!r}'s: only the runs service "
                           f"writes it. Use the run routes: POST {base}/stop, POST "
                           f"{base}/resume, GET {base}/status, GET {base}/sse",
                      code="RUN_STREAM", runId=stream_id)
