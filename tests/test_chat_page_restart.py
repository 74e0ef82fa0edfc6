"""The chat page (``examples/chat``) in headless Chromium outlives its server: the example runs under
uvicorn as a subprocess on a SQLite file with ``STREAMWIRE_RUN_RETRIES=1`` and a 1 s run lease; the
page sends a prompt, the server is killed (SIGKILL) mid-reply and a new one started on the same
port and file. The page says it is reconnecting, re-attaches, and ends with the complete reply
(the restarted server re-ran it: ``/status`` says attempt 2) in one assistant message. A
screenshot of the final page is saved (``$STREAMWIRE_SCREENSHOTS`` or the test's tmp dir, and
``/tmp/restart-shots/chat-restart.png``)."""

from __future__ import annotations

import base64
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

import httpx
import pytest

from conftest import require
from helpers.devtools import DevTools
from helpers.processes import Proc, free_port
from streamwire.runs.demo_agent import demo_reply

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parent.parent
PROMPT = "What makes a chat reply survive a server restart?"
COPY = Path("/tmp/restart-shots/chat-restart.png")


def _chat_server(port: int, db: Path) -> Proc:
    """``examples/chat`` under uvicorn on ``port``, durable on ``db``, re-running lost replies."""
    env = {"PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
           "STREAMWIRE_LOG": f"sqlite:{db}", "STREAMWIRE_RUN_RETRIES": "1",
           "STREAMWIRE_WRITER_TIMEOUT": "2"}  # the run lease: half of it, 1 s
    return Proc([sys.executable, "-m", "uvicorn", "app:app", "--app-dir",
                 str(ROOT / "examples" / "chat"), "--host", "127.0.0.1", "--port", str(port)],
                env)


def _wait_up(url: str, server: Proc) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if server.popen.poll() is not None:
            break
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    raise AssertionError("the chat example did not start:\n" + "\n".join(server.lines))


def test_the_chat_page_ends_a_reply_cut_by_a_server_restart(tmp_path: Path) -> None:
    chromium = shutil.which("chromium")
    require(chromium is not None, "Chromium is not installed (.ci/run installs it)")
    assert chromium is not None
    uncut = "".join(demo_reply(PROMPT))
    shots = Path(os.environ.get("STREAMWIRE_SCREENSHOTS", tmp_path))
    port, db = free_port(), tmp_path / "chat.db"
    url = f"http://127.0.0.1:{port}"
    first = _chat_server(port, db)
    second: Proc | None = None
    try:
        _wait_up(url + "/", first)
        with tempfile.TemporaryDirectory() as profile:
            browser = DevTools(chromium, profile)
            try:
                target = browser.call("Target.createTarget", {"url": "about:blank"})["targetId"]
                browser.session = browser.call("Target.attachToTarget", {
                    "targetId": target, "flatten": True})["sessionId"]
                browser.call("Page.enable")
                # the demo agent's pace: 300 words in about 9 s, so the kill lands mid-reply
                browser.call("Page.navigate", {"url": url + "/?pace=0.03"})
                browser.wait_for("document.readyState === 'complete' && !!window.chatState",
                                 "itself")
                browser.evaluate("document.getElementById('prompt').focus()")
                browser.call("Input.insertText", {"text": PROMPT})
                for kind in ("keyDown", "keyUp"):
                    browser.call("Input.dispatchKeyEvent", {
                        "type": kind, "key": "Enter", "code": "Enter", "windowsVirtualKeyCode": 13,
                        **({"text": "\r"} if kind == "keyDown" else {})})
                before = browser.wait_for(
                    "(() => { const s = chatState(); return s.text.length > 200 && s; })()",
                    "the reply streaming in")
                first.popen.send_signal(signal.SIGKILL)  # mid-reply, no drain
                killed = time.monotonic()
                first.stop()
                browser.wait_for("chatState().status === 'reconnecting'", "that it reconnects")
                waiting = browser.call("Page.captureScreenshot", {"format": "png"})["data"]
                second = _chat_server(port, db)
                _wait_up(url + "/", second)
                up = time.monotonic() - killed
                browser.wait_for("chatState().line.includes('starts over')",
                                 "the reply starting over", timeout=30)
                over = time.monotonic() - killed
                final = browser.wait_for(
                    "(() => { const s = chatState(); return s.status === 'done' && s; })()",
                    "the end of the reply", timeout=60)
                elapsed = time.monotonic() - killed
                message_id = browser.evaluate(
                    "document.querySelector('.msg.assistant').dataset.id")
                shot = browser.call("Page.captureScreenshot", {"format": "png"})["data"]
            finally:
                browser.close()
        status = httpx.get(f"{url}/runs/{message_id.removesuffix('-assistant')}/status",
                           timeout=10).json()
    finally:
        first.stop()
        if second is not None:
            second.stop()
    shots.mkdir(parents=True, exist_ok=True)
    saved = shots / "chat-restart.png"
    saved.write_bytes(base64.b64decode(shot))
    midway = shots / "chat-restart-reconnecting.png"  # the page while the server is down
    midway.write_bytes(base64.b64decode(waiting))
    COPY.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(saved, COPY)
    shutil.copyfile(midway, COPY.with_name(midway.name))
    print(f"\nscreenshot: {saved} (copy: {COPY}); after SIGKILL: new server up {up:.1f} s, "
          f"reply starting over {over:.1f} s, complete {elapsed:.1f} s")
    assert before["status"] == "streaming"
    assert len(before["text"]) < len(uncut), "the kill really was mid-reply"
    assert final["text"] == uncut, "the reply after the restart equals an uncut one"
    assert final["messages"] == 2, "the re-run replaced its copy: one user, one assistant"
    assert not final.get("error"), final
    assert final["line"] == "", "the status line is gone once the reply is complete"
    assert any("Reconnecting" in line for line in final["lines"]), final["lines"]
    assert "The reply was interrupted by a server restart; it starts over…" in final["lines"]
    assert status["status"] == "completed"
    assert status["attempt"] == 2, status
