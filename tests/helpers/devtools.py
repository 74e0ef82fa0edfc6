"""Headless Chromium driven over the DevTools protocol (``--remote-debugging-pipe``): what the
browser tests share."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from typing import Any

#: Chromium's command line flags (headless, no background traffic, the pipe).
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run",
         "--window-size=900,1100", "--remote-debugging-pipe")


class DevTools:
    """The DevTools protocol over Chromium's pipe (fd 3: commands in, fd 4: replies out), each
    message a JSON text ended by NUL."""

    def __init__(self, chromium: str, profile: str) -> None:
        cmd_read, self._cmd = os.pipe()
        self._out, out_write = os.pipe()
        self.proc = subprocess.Popen(
            # bash: dash refuses descriptors above 9 in a redirection
            ["bash", "-c", f'exec "$0" "$@" 3<&{cmd_read} 4>&{out_write}', chromium, *FLAGS,
             f"--user-data-dir={profile}", "about:blank"],
            pass_fds=(cmd_read, out_write), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        os.close(cmd_read)
        os.close(out_write)
        self._buffer = b""
        self._next = 0
        self.session = ""

    def call(self, method: str, params: dict[str, Any] | None = None, *, timeout: float = 30
             ) -> dict[str, Any]:
        self._next += 1
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if self.session:
            message["sessionId"] = self.session
        os.write(self._cmd, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            end = self._buffer.find(b"\0")
            while end < 0:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"no answer to {method}")
                piece = os.read(self._out, 1 << 16)
                if not piece:
                    raise RuntimeError("Chromium closed its DevTools pipe")
                self._buffer += piece
                end = self._buffer.find(b"\0")
            reply = json.loads(self._buffer[:end])
            self._buffer = self._buffer[end + 1:]
            if reply.get("id") == self._next:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                result: dict[str, Any] = reply["result"]
                return result

    def new_context(self) -> str:
        """A new browser context (``Target.createBrowserContext``): its own cookies, storage and
        cache, as another browser's would be. Its id, for ``open_tab``."""
        session, self.session = self.session, ""  # a browser-wide command
        try:
            context: str = self.call("Target.createBrowserContext")["browserContextId"]
        finally:
            self.session = session
        return context

    def open_tab(self, context: str | None = None) -> str:
        """A new blank tab in ``context`` (default: the default context), attached: every call
        after this one goes to it. Its session id."""
        self.session = ""
        params: dict[str, Any] = {"url": "about:blank"}
        if context is not None:
            params["browserContextId"] = context
        target = self.call("Target.createTarget", params)["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target,
                                                           "flatten": True})["sessionId"]
        return self.session

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True})
        return result["result"].get("value")

    def wait_for(self, expression: str, what: str, timeout: float = 30) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = self.evaluate(expression)
            if value:
                return value
            time.sleep(0.05)
        raise TimeoutError(f"the page never showed {what}: {self.evaluate('JSON.stringify(window.chatState && chatState())')}")

    def close(self) -> None:
        # the whole session: Chromium's helpers (renderers, crashpad) outlive a killed main
        # process for a moment and keep writing the profile the caller is about to delete
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)
        os.close(self._cmd)
        os.close(self._out)
