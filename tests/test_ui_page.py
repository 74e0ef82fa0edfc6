"""The operator's page (``serve --ui``, ``create_app(ui=True)``): in real Chromium over a real
``streamwire serve --agent demo --ui --token ...`` subprocess, the page asks for the token, lists a
``/slow`` run as running, shows its reply live, stops it with a click and shows it interrupted;
``/ui`` is 404 unless enabled, and its data needs the token."""

from __future__ import annotations

import json
import os
from pathlib import Path

import httpx
import pytest

from helpers.chaos_proxy import ServerThread
from helpers.runs_server import free_port, serve_cli
from helpers.tab import chromium_tab
from streamwire.log.memory import MemoryLog
from streamwire.runs.demo_agent import demo
from streamwire.server import StreamApp, create_app, jwt_bearer
from streamwire.server._auth import mint_token

TOKEN = "ui-t0ken-for-the-test"
SHOTS = Path(os.environ.get("STREAMWIRE_SCREENSHOTS", "/tmp/ui-shots"))


def _row(run_id: str) -> str:
    return f"document.querySelector('tr[data-run={json.dumps(run_id)}]')"


@pytest.mark.browser
def test_the_page_lists_a_running_run_shows_its_reply_and_stops_it() -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with serve_cli("--agent", "demo", "--ui", "--token", TOKEN, port=port), chromium_tab() as tab:
        assert httpx.put(f"{base}/streams/plain-1", headers=auth).status_code == 200
        started = httpx.post(f"{base}/runs", headers=auth, json={
            "agent": "demo", "runId": "slow-1", "input": {"prompt": "tell me /slow"}})
        assert started.status_code == 201
        tab.open(f"{base}/ui")
        tab.wait("document.body.dataset.state === 'sign-in'", "its token form")
        assert tab.eval("document.getElementById('sign-in').hidden") is False
        tab.eval("document.getElementById('token').focus()")
        tab.browser.call("Input.insertText", {"text": TOKEN})
        tab.eval("document.querySelector('#sign-in button[type=submit]').click()")
        tab.wait(f"{_row('slow-1')}?.dataset.status === 'running'", "the run as running")
        assert tab.eval("sessionStorage.getItem('streamwire.token')") == TOKEN
        assert tab.eval("document.querySelector('tr[data-stream=\"plain-1\"]').dataset.status"
                        ) == "active"
        tab.eval(f"[...{_row('slow-1')}.querySelectorAll('button')]"
                 ".find((b) => b.textContent === 'Watch').click()")
        tab.wait("document.getElementById('reply-text').textContent.length > 40", "the reply")
        tab.wait(f"{_row('slow-1')}.cells[4].textContent === '1'", "its reader")
        tab.screenshot(SHOTS / "ui-running.png")
        tab.eval(f"{_row('slow-1')}.querySelector('button.stop').click()")
        tab.wait(f"{_row('slow-1')}?.dataset.status === 'interrupted'", "the run interrupted")
        tab.wait("document.getElementById('reply').dataset.status === 'interrupted'",
                 "the reply's end")
        shot = tab.screenshot(SHOTS / "ui.png")
        text = tab.eval("document.getElementById('reply-text').textContent")
        stop_button = tab.eval(f"{_row('slow-1')}.querySelector('button.stop')")
        failures, requests = tab.failures(), tab.requests()
        status = httpx.get(f"{base}/runs/slow-1/status").json()
    assert status["status"] == "interrupted"
    assert stop_button is None
    assert text.split()[0][0].isupper()  # the reply's words, not its JSON
    assert failures == []
    assert all(r["url"].startswith(base) for r in requests), requests
    assert shot.stat().st_size > 10_000


def test_ui_is_404_unless_enabled_and_its_data_needs_the_token() -> None:
    with ServerThread(create_app(MemoryLog(), token=TOKEN, agents=[demo])) as off, \
            httpx.Client(base_url=off.url) as client:
        for path in ("/ui", "/ui/state", "/ui/ui.js", "/ui/ui.css"):
            assert client.get(path).status_code == 404, path
    with ServerThread(create_app(MemoryLog(), token=TOKEN, agents=[demo], ui=True)) as on, \
            httpx.Client(base_url=on.url) as client:
        page = client.get("/ui")
        assert page.status_code == 200
        assert "script-src 'self'" in page.headers["content-security-policy"]
        refused = client.get("/ui/state")
        wrong = client.get("/ui/state", headers={"Authorization": "Bearer nope"})
        assert client.put("/streams/s", headers={"Authorization": f"Bearer {TOKEN}"}
                          ).status_code == 200
        state = client.get("/ui/state", headers={"Authorization": f"Bearer {TOKEN}"})
        too_many = client.get("/ui/state?limit=100000",
                              headers={"Authorization": f"Bearer {TOKEN}"})
    assert refused.status_code == 401
    assert wrong.status_code in (401, 403)
    assert state.status_code == 200
    assert state.json() == {"streams": [{"streamId": "s", "status": "active", "head": 0,
                                         "floor": 0, "epoch": state.json()["streams"][0]["epoch"],
                                         "readers": 0, "run": None}],
                            "more": False, "connections": 0, "agents": ["demo"]}
    assert too_many.status_code == 400
    assert "limit must be an integer from 1 to" in too_many.json()["error"]


async def _user_run(client: httpx.AsyncClient, token: str, run_id: str) -> None:
    response = await client.post("/runs", headers={"Authorization": f"Bearer {token}"},
                                 json={"agent": "demo", "runId": run_id,
                                       "input": {"prompt": "hi", "pace": 0}})
    assert response.status_code == 201


@pytest.mark.anyio
async def test_with_users_each_sees_their_own_runs_only() -> None:
    pytest.importorskip("jwt")
    secret = "s" * 40
    alice, bob = (mint_token(secret, name) for name in ("alice", "bob"))
    app = create_app(MemoryLog(), authorize=jwt_bearer(secret), agents=[demo], ui=True)
    async with app.lifespan(app), httpx.AsyncClient(transport=httpx.ASGITransport(app),
                                                    base_url="http://ui") as client:
        await _user_run(client, alice, "run-alice")
        await _user_run(client, bob, "run-bob")
        seen = (await client.get("/ui/state", headers={"Authorization": f"Bearer {alice}"})
                ).json()
    assert [s["run"]["runId"] for s in seen["streams"]] == ["run-alice"]


def test_the_openapi_document_lists_the_ui_routes_only_when_enabled() -> None:
    def paths(app: StreamApp) -> set[str]:
        return {p for p in app.openapi_document()["paths"] if p.startswith("/ui")}

    def served(app: StreamApp) -> set[str]:
        return {path for route in app.routes if (path := getattr(route, "path", "")
                                                 ).startswith("/ui") and "." not in path}

    on = create_app(MemoryLog(), token=TOKEN, ui=True)
    off = create_app(MemoryLog(), token=TOKEN)
    assert paths(on) == served(on) == {"/ui", "/ui/state"}
    assert paths(off) == served(off) == set()
