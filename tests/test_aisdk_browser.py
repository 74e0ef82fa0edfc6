"""The chat page (``examples/chat``) in a real browser: headless Chromium, driven over the DevTools
protocol (``--remote-debugging-pipe``), types a prompt, reloads the page mid-reply, and the reply
carries on to the end: its final text equals the demo agent's uncut reply, with the reasoning
collapsed and the sources listed. A screenshot of the page is taken at the end."""

from __future__ import annotations

import base64
import importlib.util
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

from conftest import require
from helpers.chaos_proxy import ServerThread
from helpers.devtools import DevTools
from streamwire.runs.demo_agent import demo_reply

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parent.parent
PROMPT = "What makes a chat reply survive a reload?"


class Resumes:
    """ASGI wrapper recording each ``GET /api/chat/{id}/stream``: its ``Last-Event-ID`` and status."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.seen: list[tuple[str | None, int]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not scope["path"].endswith("/stream"):
            await self.app(scope, receive, send)
            return
        header = dict(scope["headers"]).get(b"last-event-id")

        async def record(message: Any) -> None:
            if message["type"] == "http.response.start":
                self.seen.append((header.decode() if header else None, message["status"]))
            await send(message)

        await self.app(scope, receive, record)


def _chat_app() -> Any:
    spec = importlib.util.spec_from_file_location("chat_example", ROOT / "examples/chat/app.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.app


def test_the_chat_page_carries_on_after_a_reload_mid_reply(tmp_path: Path) -> None:
    chromium = shutil.which("chromium")
    require(chromium is not None, "Chromium is not installed (.ci/run installs it)")
    assert chromium is not None
    uncut = "".join(demo_reply(PROMPT))
    shots = Path(os.environ.get("STREAMWIRE_SCREENSHOTS", tmp_path))
    app = Resumes(_chat_app())
    with ServerThread(app) as server, tempfile.TemporaryDirectory() as profile:
        browser = DevTools(chromium, profile)
        try:
            target = browser.call("Target.createTarget", {"url": "about:blank"})["targetId"]
            browser.session = browser.call("Target.attachToTarget", {
                "targetId": target, "flatten": True})["sessionId"]
            browser.call("Page.enable")
            # the demo agent's pace: 300 words in about 9 s, so the reload lands mid-reply
            browser.call("Page.navigate", {"url": server.url + "/?pace=0.03"})
            browser.wait_for("document.readyState === 'complete' && !!window.chatState", "itself")
            browser.evaluate("document.getElementById('prompt').focus()")
            browser.call("Input.insertText", {"text": PROMPT})
            for kind in ("keyDown", "keyUp"):
                browser.call("Input.dispatchKeyEvent", {
                    "type": kind, "key": "Enter", "code": "Enter", "windowsVirtualKeyCode": 13,
                    **({"text": "\r"} if kind == "keyDown" else {})})
            before = browser.wait_for(
                "(() => { const s = chatState(); return s.text.length > 200 && s; })()",
                "the reply streaming in")
            assert before["status"] == "streaming"
            browser.call("Page.reload")  # mid-reply
            browser.wait_for("document.readyState === 'complete' && !!window.chatState",
                             "itself after the reload")
            final = browser.wait_for(
                "(() => { const s = chatState(); return s.status === 'done' && s; })()",
                "the end of the reply", timeout=60)
            details = browser.evaluate(
                "[...document.querySelectorAll('.assistant details')].map(d => d.open)")
            sources = browser.evaluate(
                "[...document.querySelectorAll('.assistant .sources a')].map(a => a.textContent)")
            shot = browser.call("Page.captureScreenshot", {"format": "png"})["data"]
        finally:
            browser.close()
    shots.mkdir(parents=True, exist_ok=True)
    (shots / "chat-page.png").write_bytes(base64.b64decode(shot))
    assert final["text"] == uncut, "the reply after the reload equals an uncut one"
    assert final["messages"] == 2, "the resumed reply replaced its copy: one user, one assistant"
    assert len(before["text"]) < len(uncut), "the reload really was mid-reply"
    assert app.seen[0] == (None, 204), "the first load: no reply yet"
    [(cursor, status)] = app.seen[1:]
    assert cursor is not None, "after the reload the page continues from its last event id"
    assert status == 200
    assert details == [False], "the reasoning is there, collapsed"
    assert sources == ["HTML Standard: Server-sent events", "RFC 9110: HTTP Semantics",
                       "streamwire"]
