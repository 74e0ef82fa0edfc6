"""``/docs`` without a CDN: the page and every asset it references name no other host (read from
the HTML's ``src`` / ``href``, the CSS's ``url(...)`` and the script's text), under a mount path too,
and in real Chromium the page renders every operation of ``/openapi.json`` with no failed
request and no Content-Security-Policy violation."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import Mount

from helpers.chaos_proxy import ServerThread
from helpers.server import serving
from helpers.tab import chromium_tab
from streamwire.log.memory import MemoryLog
from streamwire.runs.demo_agent import demo
from streamwire.server import create_app


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.links += [value for name, value in attrs
                       if name in ("src", "href", "data-openapi") and value is not None
                       and not value.startswith("data:")]


def _same_origin(page_url: str, link: str) -> bool:
    return urlsplit(urljoin(page_url, link))[:2] == urlsplit(page_url)[:2]


def _assets(client: httpx.Client, path: str) -> dict[str, httpx.Response]:
    """The page at ``path`` and everything it references (HTML, then CSS ``url()``), by URL."""
    page = client.get(path)
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    parser = _Links()
    parser.feed(page.text)
    found = {str(page.url): page}
    assert parser.links
    for link in parser.links:
        assert _same_origin(str(page.url), link), link
        target = urljoin(str(page.url), link)
        found[target] = response = client.get(target)
        assert response.status_code == 200, target
        if response.headers["content-type"].startswith("text/css"):
            for url in re.findall(r"url\(\s*['\"]?([^'\")]+)", response.text):
                assert _same_origin(target, url), url
    return found


def test_docs_and_its_assets_reference_no_other_host() -> None:
    app = create_app(MemoryLog(), token="t", agents=[demo], chat_agent="demo")
    with ServerThread(app) as server, httpx.Client(base_url=server.url) as client:
        found = _assets(client, "/docs")
    kinds = sorted(r.headers["content-type"].split(";")[0] for r in found.values())
    assert kinds == ["application/json", "text/css", "text/html", "text/javascript"]
    for url, response in found.items():
        assert "jsdelivr" not in response.text, url
        if not url.endswith(".json"):
            assert not re.search(r"https?://", response.text), url
            policy = response.headers["content-security-policy"]
            assert "script-src 'self'" in policy
            assert "default-src 'none'" in policy


def test_under_a_mount_path_the_page_names_its_own_prefix() -> None:
    inner = create_app(MemoryLog(), token="t")
    host = Starlette(routes=[Mount("/api", app=inner)])
    with ServerThread(host) as server, httpx.Client(base_url=server.url) as client:
        found = _assets(client, "/api/docs")
    assert f"{server.url}/api/openapi.json" in found
    assert f"{server.url}/api/docs/docs.js" in found


@pytest.mark.browser
def test_chromium_renders_every_route_with_no_failed_request() -> None:
    with serving(MemoryLog, token="t", agents=[demo], chat_agent="demo") as running, \
            chromium_tab() as tab:
        document = httpx.get(f"{running.base}/openapi.json").json()
        tab.open(f"{running.base}/docs")
        count = tab.wait("document.body.dataset.rendered", "its routes")
        shown = tab.eval("[...document.querySelectorAll('.op')].map((o) => "
                         "o.dataset.method + ' ' + o.dataset.path)")
        summary = tab.eval("document.querySelector(\"[data-path='/runs'] .summary\").textContent")
        opened = tab.eval("(() => { const op = document.querySelector(\"[data-path='/runs']\");"
                          "op.open = true; return op.querySelector('.body').innerText; })()")
        requests = tab.requests()
        failures = tab.failures()
    expected = [f"{method} {path}" for path, item in document["paths"].items()
                for method in item if method in ("get", "put", "post", "delete")]
    assert shown == expected
    assert count == str(len(expected))
    assert summary == document["paths"]["/runs"]["post"]["summary"]
    assert "Request body (required)" in opened
    assert "agent: string" in opened
    assert "201" in opened
    assert failures == []
    assert {urlsplit(r["url"]).path for r in requests} == {
        "/docs", "/docs/docs.css", "/docs/docs.js", "/openapi.json"}
    assert all(r["url"].startswith(running.base) and r["status"] == 200 for r in requests), requests
