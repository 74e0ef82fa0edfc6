"""The files of the pages streamwire serves itself (``/docs``, ``/ui``): read from the package's
``static/`` folder once, answered with a Content-Security-Policy that lets them load nothing from
another origin (no CDN: the pages work offline and leak no request)."""

from __future__ import annotations

import functools
import html
from importlib import resources
from typing import Final

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

__all__ = ["CSP", "page_route", "static_route"]

#: What a page may load: its own origin's scripts, styles and JSON, nothing else.
CSP: Final = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
              "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
_TYPES: Final = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
                 ".css": "text/css; charset=utf-8"}
#: The placeholder a page's HTML has where the app's mount path (``root_path``) goes.
_BASE: Final = "{{base}}"


@functools.cache
def _read(name: str) -> bytes:
    return (resources.files(__package__ or "streamwire.server") / "static" / name).read_bytes()


def _headers() -> dict[str, str]:
    return {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff",
            "Cache-Control": "no-cache", "Referrer-Policy": "no-referrer"}


def _media_type(name: str) -> str:
    return _TYPES[name[name.rindex("."):]]


def static_route(path: str, name: str) -> Route:
    """``GET path``: the file ``static/name`` as it is."""

    async def endpoint(request: Request) -> Response:
        return Response(_read(name), media_type=_media_type(name), headers=_headers())

    return Route(path, endpoint, methods=["GET"])


def page_route(path: str, name: str) -> Route:
    """``GET path``: the page ``static/name`` with ``{{base}}`` made the app's mount path (its
    scripts read it from a ``data-`` attribute: no inline script, which the policy forbids)."""

    async def endpoint(request: Request) -> Response:
        root: str = request.scope.get("root_path", "")
        body = _read(name).replace(_BASE.encode(), html.escape(root, quote=True).encode())
        return Response(body, media_type=_media_type(name), headers=_headers())

    return Route(path, endpoint, methods=["GET"])
