"""A real headless browser for system tests: Debian's Chromium opening a
page served by the test, the page's JavaScript reporting back by HTTP.

JavaScript libraries a page needs come from the npm registry at test time
(``npm_package``), into a cache outside the repository; nothing of theirs
is committed. ``.ci/run`` installs ``chromium`` and ``npm``.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import queue
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

CHROMIUM = "chromium"
NPM_CACHE = Path(os.environ.get("HOP_TEST_NPM_DIR",
                                Path.home() / ".cache" / "hop-tests" / "npm"))


def npm_package(name: str, version: str) -> Path:
    """The installed package ``name@version`` (installed from the npm
    registry the first time)."""
    target = NPM_CACHE / f"{name}-{version}"
    installed = target / "node_modules" / name
    if (installed / "package.json").exists():
        return installed
    npm = shutil.which("npm")
    assert npm is not None, "npm is needed for the browser tests (.ci/run installs it)"
    target.mkdir(parents=True, exist_ok=True)
    subprocess.run([npm, "install", "--silent", "--no-audit", "--no-fund", "--prefix",
                    str(target), f"{name}@{version}"], check=True, timeout=300)
    assert (installed / "package.json").exists(), f"npm did not install {name}@{version}"
    return installed


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _PageServer

    def do_GET(self) -> None:
        body = self.server.files.get(self.path.split("?", 1)[0])
        if body is None:
            self.send_error(404)
            return
        content, kind = body
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(content)))
        self.end_headers()
        self.wfile.write(content)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        data = self.rfile.read(length)
        self.server.reports.put(json.loads(data))
        self.send_response(204)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _PageServer(http.server.ThreadingHTTPServer):
    files: dict[str, tuple[bytes, str]]
    reports: queue.Queue[Any]


@contextlib.contextmanager
def serve_pages(files: dict[str, tuple[bytes, str]]) -> Iterator[_PageServer]:
    """An HTTP server on a free loopback port with ``files`` (path ->
    (content, type)); what pages POST arrives in ``reports``."""
    server = _PageServer(("127.0.0.1", 0), _Handler)
    server.files = files
    server.reports = queue.Queue()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def headless_chromium(url: str, profile: Path) -> Iterator[subprocess.Popen[bytes]]:
    """Chromium, headless, opening ``url`` (its profile in ``profile``)."""
    chromium = shutil.which(CHROMIUM)
    assert chromium is not None, "chromium is needed for the browser tests (.ci/run installs it)"
    log = (profile.parent / "chromium.log").open("wb")
    proc = subprocess.Popen(
        [chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--no-first-run", "--no-default-browser-check", f"--user-data-dir={profile}", url],
        stdout=log, stderr=subprocess.STDOUT)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait(10)
        log.close()
