"""Headless Chromium driven over its DevTools protocol, for tests of pages
the router serves (the web console): open a URL, evaluate JavaScript in the
page, send request headers, take a screenshot.

Chromium is Debian's (``.ci/run`` installs it); the protocol's WebSocket
is spoken by the ``websocket-client`` package.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import websocket

from tests.system.browser import CHROMIUM

STARTUP_S = 30.0


class Page:
    """One browser tab."""

    def __init__(self, url: str) -> None:
        self.ws = websocket.create_connection(url, timeout=30, suppress_origin=True)
        self._ids = itertools.count(1)

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        """A protocol command and its result (events before it are skipped)."""
        ident = next(self._ids)
        self.ws.send(json.dumps({"id": ident, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("id") == ident:
                if "error" in message:
                    raise AssertionError(f"{method}: {message['error']}")
                return dict(message.get("result", {}))

    def open(self, url: str, headers: dict[str, str] | None = None) -> None:
        if headers:
            self.call("Network.enable")
            self.call("Network.setExtraHTTPHeaders", headers=headers)
        self.call("Page.navigate", url=url)

    def evaluate(self, expression: str) -> Any:
        """The value of ``expression`` in the page (JSON-able values only)."""
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True,
                           awaitPromise=True)
        if "exceptionDetails" in result:
            raise AssertionError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 30.0, what: str = "") -> Any:
        """The first truthy value of ``expression``, polled until ``timeout``."""
        deadline = time.monotonic() + timeout
        value: Any = None
        while time.monotonic() < deadline:
            try:
                value = self.evaluate(expression)
            except AssertionError:
                value = None
            if value:
                return value
            time.sleep(0.25)
        raise AssertionError(f"timed out waiting for {what or expression} (last: {value!r})")

    def screenshot(self, path: Path, width: int, height: int) -> None:
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height,
                  deviceScaleFactor=1, mobile=False)
        shot = self.call("Page.captureScreenshot", format="png")
        path.write_bytes(base64.b64decode(shot["data"]))

    def close(self) -> None:
        self.ws.close()


@contextlib.contextmanager
def chromium_page(profile: Path) -> Iterator[Page]:
    """Headless Chromium with one blank tab, its profile in ``profile``."""
    chromium = shutil.which(CHROMIUM)
    assert chromium is not None, "chromium is needed for the browser tests (.ci/run installs it)"
    profile.mkdir(parents=True, exist_ok=True)
    log = (profile.parent / "chromium-cdp.log").open("wb")
    proc = subprocess.Popen(
        [chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--no-first-run", "--no-default-browser-check", "--remote-debugging-port=0",
         "--remote-debugging-address=127.0.0.1", f"--user-data-dir={profile}",
         "--window-size=1400,1000", "about:blank"],
        stdout=log, stderr=subprocess.STDOUT)
    page = None
    try:
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + STARTUP_S
        while not port_file.exists() or not port_file.read_text().strip():
            assert proc.poll() is None, "chromium exited"
            assert time.monotonic() < deadline, "chromium did not open its DevTools port"
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as reply:
            targets = json.load(reply)
        target = next(t for t in targets if t.get("type") == "page")
        page = Page(target["webSocketDebuggerUrl"])
        yield page
    finally:
        if page is not None:
            with contextlib.suppress(Exception):
                page.close()
        proc.kill()
        proc.wait(10)
        log.close()
