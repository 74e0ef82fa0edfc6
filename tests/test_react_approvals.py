"""Approvals on the React chat page (``examples/react_chat``, the AI SDK's own ``useChat``) against
the real server in headless Chromium: the demo's ``/approve`` shows the ``delete_file`` card with
Approve and Deny; a click answers through ``addToolApprovalResponse``, the SDK's automatic resend
resumes the paused run, and the reply completes in the same assistant message (approved: the
tool's output then the text; denied: denied then the text). The thread the server keeps has the
answered call. Screenshots go to ``$STREAMWIRE_SCREENSHOTS`` (else the test's tmp dir)."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.request import Request, urlopen

import pytest

from streamwire.runs.demo_agent import APPROVED_ANSWER, DENIED_ANSWER
from test_react_page import Page, _chat, page, shots, site

__all__ = ["page", "shots", "site"]  # the fixtures, imported

CARD = ("(() => { const c = document.querySelector('.tool'); return c && {tool: c.dataset.tool, "
        "state: c.dataset.state, buttons: [...c.querySelectorAll('button')]"
        ".map((b) => b.textContent)}; })()")


@pytest.mark.browser
@pytest.mark.parametrize("answer", ["Approve", "Deny"])
def test_approve_and_deny_complete_the_reply_on_the_server(answer: str, page: Page, site: str,
                                                            shots: Path) -> None:
    chat = _chat()
    page.open(f"chat={chat}")
    page.ask("/approve please delete notes.txt")
    asked = page.state_when("s.status === 'ready' && document.querySelector('.tool button')",
                            "the approval request")
    card = page.dom(CARD)
    page.screenshot(f"react-approve-{answer.lower()}-asked.png", shots)
    page.dom(f"[...document.querySelectorAll('.tool button')]"
             f".find((b) => b.textContent === '{answer}').click()")
    text = APPROVED_ANSWER if answer == "Approve" else DENIED_ANSWER
    final = page.state_when(f"s.status === 'ready' && s.text === {json.dumps(text)}",
                            "the reply after the answer")
    done = page.dom(CARD)
    steps = page.dom("[...document.querySelectorAll('.msg.assistant .step')].length")
    page.screenshot(f"react-approve-{answer.lower()}-done.png", shots)
    assert card == {"tool": "delete_file", "state": "approval-requested",
                    "buttons": ["Approve", "Deny"]}
    assert asked["assistants"] == final["assistants"] == 1, "the same assistant message"
    assert final["id"] == asked["id"]
    assert done["state"] == ("output-available" if answer == "Approve" else "output-denied")
    assert done["buttons"] == []
    assert steps == 2, "the tool's step, then the answer's"
    with urlopen(Request(f"{site}/api/chat/{chat}/messages")) as response:
        stored = json.loads(response.read())
    [part] = [p for p in stored[-1]["parts"] if p["type"] == "tool-delete_file"]
    assert part["state"] == done["state"]
    assert part["approval"]["approved"] is (answer == "Approve")
    assert len(stored) == 2
