"""``GET /healthz`` and ``GET /readyz``: the probes a load balancer or Kubernetes sends (its
``livenessProbe`` and ``readinessProbe``).

* ``/healthz`` answers 200 ``{"status": "ok"}`` while the process serves HTTP at all: it calls
  nothing, so a slow backend never gets a healthy process restarted.
* ``/readyz`` answers 200 ``{"status": "ok"}`` when the app can serve: the log answers a cheap
  call (``probe_log``: ``info`` of an id no stream has, within ``READY_TIMEOUT`` seconds), the
  app's runs service (if it has agents) runs, and the app is not draining. Otherwise 503 with
  ``Retry-After`` and ``{"status": "unavailable", "reason": ...}``, a fixed sentence: no
  exception text and no backend address reaches the wire. The server's log says when readiness
  changes (once per change, not per probe), with the exception's class.

Neither asks for authorization: probes send no token, and neither says anything about a stream.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Final

import anyio
from starlette.requests import Request
from starlette.responses import Response

from ..errors import StreamNotFoundError
from ..log import StreamLog
from ._context import RouteContext
from ._http import encode_json

if TYPE_CHECKING:
    from ._app import StreamApp

__all__ = ["PROBE_ID", "READY_TIMEOUT", "Probes", "probe_log"]

logger = logging.getLogger("streamwire.server")

#: Seconds the log has to answer a readiness probe (Kubernetes' default probe timeout is 1 s).
READY_TIMEOUT: Final = 1.0
#: The stream id the probes ask the log about (no stream should have it; one that does is fine).
PROBE_ID: Final = "streamwire-probe"

_HEADERS: Final = {"Cache-Control": "no-store"}
_OK: Final = encode_json({"status": "ok"})


async def probe_log(log: StreamLog) -> None:
    """Return once ``log`` answered a read (``info`` of ``PROBE_ID``; ``StreamNotFoundError`` is
    an answer); raise what it raised otherwise. ``serve`` runs it before listening, ``/readyz``
    on every probe (within ``READY_TIMEOUT``)."""
    try:
        await log.info(PROBE_ID)
    except StreamNotFoundError:
        return


class Probes:
    """The two probe routes of one ``StreamApp``."""

    def __init__(self, app: StreamApp, ctx: RouteContext, timeout: float = READY_TIMEOUT
                 ) -> None:
        self.app = app
        self.ctx = ctx
        self.timeout = timeout
        self._ready: bool | None = None  # as last reported in the log (None: not yet)

    async def healthz(self, request: Request) -> Response:
        """``GET /healthz``: 200 while the process is up."""
        return Response(_OK, 200, _HEADERS, media_type="application/json")

    async def readyz(self, request: Request) -> Response:
        """``GET /readyz``: 200 when the app can serve, else 503 (see the module)."""
        reason = await self._unready()
        if reason is None:
            self._report(True, "ready")
            return Response(_OK, 200, _HEADERS, media_type="application/json")
        headers = {**_HEADERS, "Retry-After": self.app.engine.retry_after}
        return Response(encode_json({"status": "unavailable", "reason": reason}), 503, headers,
                        media_type="application/json")

    async def _unready(self) -> str | None:
        app = self.app
        if app.engine.draining:
            self._report(False, "not ready: the server is shutting down")
            return "the server is shutting down"
        runs = app.runs
        if runs is not None and runs.draining:
            self._report(False, "not ready: the runs service is draining")
            return "the runs service is draining"
        if runs is not None and not self.ctx.lifespan_active:
            self._report(False, "not ready: the runs service is not running")
            return "the runs service is not running"
        try:
            with anyio.fail_after(self.timeout):
                await probe_log(app.log)
        except TimeoutError:
            self._report(False, f"not ready: the stream log did not answer within "
                                f"{self.timeout:g} s")
            return "the stream log did not answer in time"
        except Exception as exc:
            self._report(False, f"not ready: the stream log failed ({type(exc).__name__})")
            return "the stream log failed"
        return None

    def _report(self, ready: bool, message: str) -> None:
        if ready != self._ready:
            if self._ready is not None or not ready:
                logger.log(logging.INFO if ready else logging.WARNING, "readyz: %s", message)
            self._ready = ready
