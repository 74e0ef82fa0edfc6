"""One Chromium tab (``helpers.devtools``) on a page streamwire serves itself (``/docs``, ``/ui``),
which records what failed to load: resource errors, Content-Security-Policy violations, and every
resource it fetched with its HTTP status (``Tab.requests``)."""

from __future__ import annotations

import base64
import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from conftest import require
from helpers.devtools import DevTools

#: Run before any script of the page: collects its failures in ``window.__failures``.
WATCH = """
window.__failures = [];
window.addEventListener("error", (e) => {
  const t = e.target;
  window.__failures.push(t && t !== window ? "load " + (t.src || t.href || t.tagName)
                                           : "script " + e.message);
}, true);
window.addEventListener("unhandledrejection", (e) => window.__failures.push("promise " + e.reason));
document.addEventListener("securitypolicyviolation",
                          (e) => window.__failures.push("csp " + e.blockedURI));
"""


class Tab:
    """A tab of ``browser`` that watches its page's loads."""

    def __init__(self, browser: DevTools) -> None:
        self.browser = browser
        target = browser.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        browser.session = browser.call("Target.attachToTarget", {
            "targetId": target, "flatten": True})["sessionId"]
        browser.call("Page.enable")
        browser.call("Page.addScriptToEvaluateOnNewDocument", {"source": WATCH})

    def open(self, url: str) -> None:
        self.browser.call("Page.navigate", {"url": url})
        self.wait("document.readyState === 'complete'", "its load")

    def eval(self, expression: str) -> Any:
        return self.browser.evaluate(expression)

    def wait(self, expression: str, what: str, timeout: float = 30) -> Any:
        return self.browser.wait_for(expression, what, timeout)

    def failures(self) -> list[str]:
        failures: list[str] = self.eval("window.__failures")
        return failures

    def requests(self) -> list[dict[str, Any]]:
        """Every resource the page fetched (the document too): ``{"url", "status"}``."""
        found: list[dict[str, Any]] = self.eval(
            "performance.getEntries().filter((e) => e.entryType === 'navigation' || "
            "e.entryType === 'resource').map((e) => ({url: e.name, status: e.responseStatus}))")
        return found

    def screenshot(self, path: Path) -> Path:
        data = self.browser.call("Page.captureScreenshot", {"format": "png"})["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        print(f"screenshot: {path}")
        return path


@contextlib.contextmanager
def chromium_tab() -> Iterator[Tab]:
    """A fresh headless Chromium (skipped where none is installed) and one tab of it."""
    chromium = shutil.which("chromium")
    require(chromium is not None, "Chromium is not installed (.ci/run installs it)")
    assert chromium is not None
    with tempfile.TemporaryDirectory() as profile:
        browser = DevTools(chromium, profile)
        try:
            yield Tab(browser)
        finally:
            browser.close()
