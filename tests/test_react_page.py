"""The React chat page (``examples/react_chat``: the AI SDK's own ``useChat`` from
``@ai-sdk/react``, built with vite) in a real browser: headless Chromium over the DevTools protocol,
the example app under real uvicorn. A ``/tool`` reply shows the ``get_weather`` card, then the
answer in a second step; a reload mid-reply carries on to the uncut text in one assistant message;
Stop mid-reply shows the reply as stopped. Screenshots go to ``$STREAMWIRE_SCREENSHOTS`` (else the
test's tmp dir), their paths printed.

The page must be built (``npm run build:react``; ``./dev test`` does it): without the build or
Chromium these tests skip, and in CI they fail."""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from starlette.testclient import TestClient

from conftest import require
from helpers.chaos_proxy import ServerThread
from helpers.devtools import DevTools
from streamwire.runs.demo_agent import TOOL_ANSWER, demo_reply

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "react_chat"
BUILT = EXAMPLE / "web" / "dist" / "index.html"
PROMPT = "Why does a reply survive a reload of the page?"

#: The last assistant message's text, status, and the page's counts, as a test reads them.
STATE = """(() => {
  if (!window.chatState) return null;
  const s = chatState();
  const assistants = s.messages.filter((m) => m.role === "assistant");
  const last = assistants[assistants.length - 1];
  const text = last ? last.parts.filter((p) => p.type === "text").map((p) => p.text).join("") : "";
  return { id: last ? last.id : null, status: s.status, settled: s.settled, text, users: s.messages.length - assistants.length,
           assistants: assistants.length, note: last ? (s.notes[last.id] || {}) : {}, error: s.error };
})()"""


def _example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("react_chat_example", EXAMPLE / "app.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_without_the_build_the_page_says_how_to_build_it(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    module = _example()
    monkeypatch.setattr(module, "DIST", tmp_path / "dist")
    response = TestClient(module.app).get("/")
    assert response.status_code == 503
    assert "npm run build:react" in response.text


class Page:
    """One browser tab on the example app."""

    def __init__(self, browser: DevTools, base: str, context: str | None = None) -> None:
        """A new tab (in browser context ``context``, else the default one): the browser's
        calls go to it from now on."""
        self.browser = browser
        self.base = base
        browser.open_tab(context)
        browser.call("Page.enable")

    def open(self, query: str) -> None:
        self.browser.call("Page.navigate", {"url": f"{self.base}/?{query}"})
        self.ready()

    def ready(self) -> None:
        self.browser.wait_for("document.readyState === 'complete' && !!window.chatState "
                              "&& !!document.getElementById('prompt')", "itself")

    def ask(self, prompt: str) -> None:
        self.browser.evaluate("document.getElementById('prompt').focus()")
        self.browser.call("Input.insertText", {"text": prompt})
        for kind in ("keyDown", "keyUp"):
            self.browser.call("Input.dispatchKeyEvent", {
                "type": kind, "key": "Enter", "code": "Enter", "windowsVirtualKeyCode": 13,
                **({"text": "\r"} if kind == "keyDown" else {})})

    def sign_in(self, token: str) -> None:
        """Type ``token`` in the page's Sign in field and save it (``localStorage``)."""
        self.dom("document.querySelector('.signin summary').click()")
        self.dom("document.querySelector('.signin input').focus()")
        self.browser.call("Input.insertText", {"text": token})
        self.dom("document.querySelector('.signin button[type=submit]').click()")

    def state_when(self, condition: str, what: str, timeout: float = 30) -> dict[str, Any]:
        state: dict[str, Any] = self.browser.wait_for(
            f"(() => {{ const s = {STATE}; return s && ({condition}) && s; }})()", what, timeout)
        return state

    def dom(self, expression: str) -> Any:
        return self.browser.evaluate(expression)

    def screenshot(self, name: str, shots: Path) -> Path:
        data = self.browser.call("Page.captureScreenshot", {"format": "png"})["data"]
        shots.mkdir(parents=True, exist_ok=True)
        path = shots / name
        path.write_bytes(base64.b64decode(data))
        print(f"screenshot: {path}")
        return path


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    require(BUILT.is_file(), "the React page is not built: run `npm ci && npm run build:react` "
                             "(`./dev test` does it)")
    with ServerThread(_example().app) as server:
        yield server.url


@pytest.fixture
def page(site: str) -> Iterator[Page]:
    chromium = shutil.which("chromium")
    require(chromium is not None, "Chromium is not installed (.ci/run installs it)")
    assert chromium is not None
    with tempfile.TemporaryDirectory() as profile:
        browser = DevTools(chromium, profile)
        try:
            yield Page(browser, site)
        finally:
            browser.close()


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    return Path(os.environ.get("STREAMWIRE_SCREENSHOTS", tmp_path))


def _chat() -> str:
    return uuid.uuid4().hex


@pytest.mark.browser
def test_a_tool_reply_shows_its_card_then_the_answer_in_a_second_step(page: Page,
                                                                       shots: Path) -> None:
    chat = _chat()
    page.open(f"chat={chat}")
    page.ask("What is the weather? /tool")
    final = page.state_when(f"s.status === 'ready' && s.text === {json.dumps(TOOL_ANSWER)}",
                            "the tool reply's answer")
    # the server keeps threads: once the reply ended, the list (GET /api/chats) shows this one
    page.browser.wait_for(f"!!document.querySelector('.sidebar [data-chat=\"{chat}\"]')",
                          "the thread in the thread list")
    layout = page.dom("""(() => {
      const reply = [...document.querySelectorAll('.msg.assistant')].pop();
      return [...reply.children].map((el) => ({
        cls: el.className, step: el.dataset.step || null, tool: el.dataset.tool || null,
        state: el.dataset.state || null, text: el.textContent,
        input: el.querySelector('.tool-input')?.textContent ?? null,
        output: el.querySelector('.tool-output')?.textContent ?? null }));
    })()""")
    page.screenshot("react-tool.png", shots)
    assert final["assistants"] == 1
    kinds = [item["cls"].split()[0] for item in layout]
    assert kinds[:4] == ["step", "tool", "step", "md"], layout
    step1, card, step2, answer = layout[:4]
    assert (step1["step"], step2["step"]) == ("1", "2"), "two step dividers"
    assert card["tool"] == "get_weather"
    assert card["state"] == "output-available"
    assert json.loads(card["input"]) == {"city": "Paris"}
    assert "18" in card["output"]
    assert answer["text"].strip() == TOOL_ANSWER
    assert not page.dom("!!document.querySelector('[data-status=writing]')")


@pytest.mark.browser
def test_a_reload_mid_reply_carries_on_in_one_assistant_message(page: Page, shots: Path) -> None:
    uncut = "".join(demo_reply(PROMPT))
    chat = _chat()
    # the demo agent's pace: 300 words in about 9 s, so the reload lands mid-reply
    page.open(f"chat={chat}&pace=0.03")
    page.ask(PROMPT)
    before = page.state_when("s.text.length > 200", "the reply streaming in")
    assert before["status"] == "streaming"
    page.browser.call("Page.reload")
    page.ready()
    assert page.dom("new URL(location.href).searchParams.get('chat')") == chat, "same thread"
    final = page.state_when("s.status === 'ready' && s.note.finished", "the end of the reply",
                            timeout=60)
    shown = page.dom("document.querySelectorAll('.msg.assistant').length")
    markdown = page.dom("[...document.querySelectorAll('.msg.assistant .md')].pop().textContent")
    page.screenshot("react-reload.png", shots)
    assert len(before["text"]) < len(uncut), "the reload really was mid-reply"
    assert final["text"] == uncut, "the reply after the reload equals an uncut one"
    assert (final["users"], final["assistants"], shown) == (1, 1, 1)
    assert markdown.split() == uncut.split()
    assert page.dom("[...document.querySelectorAll('.msg.assistant details')].map(d => d.open)") \
        == [False], "the reasoning is there, collapsed"


@pytest.mark.browser
def test_stop_mid_reply_shows_the_reply_as_stopped(page: Page, shots: Path) -> None:
    uncut = "".join(demo_reply(PROMPT))
    chat = _chat()
    page.open(f"chat={chat}&pace=0.05")
    page.ask(PROMPT)
    page.state_when("s.text.length > 100", "the reply streaming in")
    page.dom("document.getElementById('stop').click()")
    final = page.state_when("s.status === 'ready' && s.note.stopped", "the reply stopped")
    page.screenshot("react-stopped.png", shots)
    assert len(final["text"]) < len(uncut), "the text so far is kept, no more"
    assert page.dom("!!document.querySelector('.msg.assistant [data-status=stopped]')")
    assert not page.dom("!!document.querySelector('[data-status=writing]')"), "not 'Writing…'"
    assert page.dom("!!document.getElementById('send')"), "ready for the next message"
    running = page.dom(f"fetch('/api/chat/{chat}/stream').then((r) => r.status)")
    assert running == 204, "the stop reached the server: the chat has no running reply"


@pytest.mark.browser
def test_a_failed_reply_says_so_in_users_words_with_retry(page: Page, shots: Path) -> None:
    page.open(f"chat={_chat()}&pace=0.005")
    page.ask("Please fail halfway /fail")
    final = page.state_when("s.status === 'error' && s.note.errorText", "the reply failing")
    shown = page.dom("[...document.querySelectorAll('.msg.assistant .error-text')]"
                     ".map((e) => e.textContent)")
    page.screenshot("react-error.png", shots)
    assert shown == [final["note"]["errorText"]], "the error chunk's words, on the reply"
    assert "asked to fail" not in page.dom("document.body.innerText"), "no internal text"
    page.dom("document.querySelector('.msg.assistant .retry').click()")
    again = page.state_when(f"s.status === 'error' && s.note.errorText && s.id !== '{final['id']}'",
                            "the retried reply (a new run: a new message id)")
    assert (again["users"], again["assistants"]) == (1, 1), "Retry replaced the failed reply"


@pytest.mark.browser
def test_a_server_that_wants_a_token_gets_it_from_the_sign_in_field(shots: Path) -> None:
    require(BUILT.is_file(), "the React page is not built: run `npm ci && npm run build:react` "
                             "(`./dev test` does it)")
    chromium = shutil.which("chromium")
    require(chromium is not None, "Chromium is not installed (.ci/run installs it)")
    assert chromium is not None
    module = _example()
    module.TOKEN = "s3cret-token"  # as STREAMWIRE_TOKEN=s3cret-token would
    with ServerThread(module.app) as site, tempfile.TemporaryDirectory() as profile:
        browser = DevTools(chromium, profile)
        try:
            page = Page(browser, site.url)
            page.open(f"chat={_chat()}&pace=0.001")
            page.ask("Hello /tool")
            refused = page.state_when("s.status === 'error'", "the refusal")
            page.screenshot("react-sign-in-needed.png", shots)
            page.sign_in("s3cret-token")
            page.dom("document.querySelector('.retry').click()")
            final = page.state_when(f"s.status === 'ready' && s.text === {json.dumps(TOOL_ANSWER)}",
                                    "the reply with the token")
        finally:
            browser.close()
    assert "sign in" in refused["error"], refused
    assert final["assistants"] == 1
