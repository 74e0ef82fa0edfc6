"""The React chat example on a real model's wire: ``examples/react_chat`` with ``OPENAI_BASE_URL``
set runs ``model_agent.py`` (the official ``openai`` SDK, ``streamwire.providers.run_tools``)
against a local OpenAI-compatible server replaying recorded Chat Completions streams. In headless
Chromium: the model asks for ``delete_file``, the page shows Approve and Deny, a click resumes the
run, the tool's result (or its denial) goes back to the model in its second request, and the
model's answer completes the same message in a second step."""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import require
from helpers.chaos_proxy import ServerThread
from helpers.devtools import DevTools
from helpers.provider_replay import ReplayServer
from providers.relayed import FIXTURES
from test_react_page import BUILT, Page, _chat, _example, shots

__all__ = ["shots"]  # the fixture, imported

ANSWER = "Done: notes.txt is gone."


@pytest.fixture
def model_site(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, ReplayServer]]:
    require(BUILT.is_file(), "the React page is not built: run `npm ci && npm run build:react` "
                             "(`./dev test` does it)")
    with ReplayServer(FIXTURES) as replay:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{replay.base}/then/chat_delete/chat_deleted")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("OPENAI_MODEL", "llama3.1")
        example = _example()
        assert example.AGENT.__name__ == "assistant", "OPENAI_BASE_URL picks the model agent"
        # the agent's module keeps one client per process: this test's server is a new one
        sys.modules[example.AGENT.__module__]._client = None
        with ServerThread(example.app) as server:
            yield server.url, replay


@pytest.mark.browser
@pytest.mark.parametrize("answer", ["Approve", "Deny"])
def test_a_models_tool_call_is_approved_on_the_page(answer: str, model_site: tuple[str, ReplayServer],
                                                     shots: Path) -> None:
    site, replay = model_site
    chromium = shutil.which("chromium")
    require(chromium is not None, "Chromium is not installed (.ci/run installs it)")
    assert chromium is not None
    with tempfile.TemporaryDirectory() as profile:
        browser = DevTools(chromium, profile)
        try:
            page = Page(browser, site)
            page.open(f"chat={_chat()}")
            page.ask("Please delete notes.txt")
            page.state_when("s.status === 'ready' && document.querySelector('.tool button')",
                            "the model's approval request")
            card = page.dom("(() => { const c = document.querySelector('.tool'); return {tool: "
                            "c.dataset.tool, state: c.dataset.state, input: "
                            "c.querySelector('.tool-input')?.textContent}; })()")
            page.screenshot(f"react-model-{answer.lower()}-asked.png", shots)
            page.dom(f"[...document.querySelectorAll('.tool button')]"
                     f".find((b) => b.textContent === '{answer}').click()")
            final = page.state_when(f"s.status === 'ready' && s.text === {json.dumps(ANSWER)}",
                                    "the model's answer after the approval")
            state = page.dom("document.querySelector('.tool').dataset.state")
            steps = page.dom("[...document.querySelectorAll('.msg.assistant .step')].length")
            page.screenshot(f"react-model-{answer.lower()}-done.png", shots)
        finally:
            browser.close()
    assert card["tool"] == "delete_file"
    assert card["state"] == "approval-requested"
    assert json.loads(card["input"]) == {"path": "notes.txt"}
    assert final["assistants"] == 1
    assert steps == 2
    assert state == ("output-available" if answer == "Approve" else "output-denied")
    # the model's two requests: the conversation, then the same with the call and its result
    first, second = [r.body for r in replay.requests[-2:]]
    assert first["messages"][0]["role"] == "system"
    assert first["messages"][-1] == {"role": "user", "content": "Please delete notes.txt"}
    assert [t["function"]["name"] for t in first["tools"]] == ["get_weather", "delete_file"]
    [call] = second["messages"][-2]["tool_calls"]
    assert call["function"]["name"] == "delete_file"
    result = second["messages"][-1]
    assert result["role"] == "tool"
    assert result["tool_call_id"] == "call_delete"
    if answer == "Approve":
        assert json.loads(result["content"]) == {"path": "notes.txt", "deleted": True}
    else:
        assert "denied" in result["content"]
