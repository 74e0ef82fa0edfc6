"""Users on the React chat page (``examples/react_chat`` with ``STREAMWIRE_JWT_SECRET``: callers
sign in with a JWT) in headless Chromium, one browser context per browser a person would use
(separate cookies and ``localStorage``): user A's thread follows A to a second browser, its
history loaded from the server, and stays invisible to user B. Screenshots (``second-context.png``,
``other-user.png``) go to ``$STREAMWIRE_SCREENSHOTS`` (else the test's tmp dir), their paths
printed."""

from __future__ import annotations

import json
import shutil
import tempfile
import uuid
from pathlib import Path

import pytest

from conftest import require
from helpers.chaos_proxy import ServerThread
from helpers.devtools import DevTools
from streamwire.server import jwt_bearer
from streamwire.server._auth import mint_token
from test_react_page import BUILT, Page, _example, shots

__all__ = ["shots"]  # the fixture, imported

SECRET = "react-users-" + "s" * 32
#: The thread list's entry for chat ``%s``.
ENTRY = "document.querySelector('.sidebar [data-chat=\"%s\"]')"


def _chromium() -> str:
    require(BUILT.is_file(), "the React page is not built: run `npm ci && npm run build:react` "
                             "(`./dev test` does it)")
    chromium = shutil.which("chromium")
    require(chromium is not None, "Chromium is not installed (.ci/run installs it)")
    assert chromium is not None
    return chromium


@pytest.mark.browser
def test_a_users_thread_follows_them_to_another_browser_and_no_one_else(shots: Path) -> None:
    chromium = _chromium()
    module = _example()
    module.USERS = jwt_bearer(SECRET)  # as STREAMWIRE_JWT_SECRET=SECRET would
    alice, bob = mint_token(SECRET, "alice"), mint_token(SECRET, "bob")
    chat = uuid.uuid4().hex
    with ServerThread(module.app) as site, tempfile.TemporaryDirectory() as profile:
        browser = DevTools(chromium, profile)
        try:
            # A's first browser: sign in, ask, let the reply finish
            first = Page(browser, site.url, browser.new_context())
            first.open(f"chat={chat}&pace=0.001")
            first.sign_in(alice)
            first.ask("What happens to my threads in another browser?")
            done = first.state_when("s.status === 'ready' && s.note.finished", "A's reply")
            browser.wait_for("!!" + ENTRY % chat, "the thread in A's list")
            history = json.loads(first.dom("JSON.stringify(chatState().messages)"))

            # A's second browser: nothing of the first's storage; signed in, the list has the
            # thread and opening it shows the history from the server
            second = Page(browser, site.url, browser.new_context())
            second.open("pace=0.001")
            fresh = second.dom(f"[localStorage.getItem('streamwire.token'), "
                               f"localStorage.getItem('streamwire.chat.{chat}'), "
                               f"chatState().chatId]")
            second.sign_in(alice)
            browser.wait_for("!!" + ENTRY % chat, "the thread in A's list, in the second browser")
            title = second.dom(f"{ENTRY % chat}.textContent")
            second.dom(f"{ENTRY % chat}.click()")
            again = second.state_when(f"chatState().chatId === {json.dumps(chat)} && "
                                      "s.assistants === 1 && s.settled", "the thread's history")
            loaded = json.loads(second.dom("JSON.stringify(chatState().messages)"))
            shown = second.dom("[...document.querySelectorAll('.msg')].map((m) => m.dataset.role)")
            shown_text = second.dom("document.querySelector('.msg.assistant .md').textContent")
            second.screenshot("second-context.png", shots)

            # B, in a third browser: no thread listed, A's chat is empty and refuses B's message
            other = Page(browser, site.url, browser.new_context())
            other.open("pace=0.001")
            other.sign_in(bob)
            other.open(f"chat={chat}&pace=0.001")  # the token is saved: the list is B's
            browser.wait_for("!!document.querySelector('.sidebar')", "B's thread list")
            listed = other.dom("[...document.querySelectorAll('.sidebar li')].length")
            empty = other.state_when("s.settled", "B's view of A's chat")
            other.ask("Let me read that")
            refused = other.state_when("s.status === 'error'", "the refusal of B's message")
            other.screenshot("other-user.png", shots)
        finally:
            browser.close()
    assert fresh[:2] == [None, None], "the second browser shares no storage with the first"
    assert fresh[2] != chat
    assert title == "What happens to my threads in another browser?"
    assert again["text"] == done["text"]
    assert loaded == history, "the same messages, from the server"
    assert shown == ["user", "assistant"]
    assert shown_text.split() == done["text"].split()
    assert listed == 0, "B lists no thread"
    assert (empty["users"], empty["assistants"]) == (0, 0), "B sees none of A's messages"
    assert refused["error"] == "This conversation was not found.", refused

