"""A JavaScript AMQP client (rhea, from the npm registry) in headless
Chromium, connected to the router over WebSockets
(docs/operations.md#amqp-over-websockets): it sends with an outcome and
receives what a Python client sent, both through the router."""

from __future__ import annotations

import contextlib
import queue
import time
from collections.abc import Callable
from pathlib import Path

from proton import Delivery, Message

from tests.system.browser import headless_chromium, npm_package, serve_pages
from tests.system.clients import connect, pump
from tests.system.harness import Hop, router_conf

StartRouter = Callable[..., Hop]

RHEA_VERSION = "3.0.5"

HTTP_LISTENER = """\
listener {
    host: 127.0.0.1
    port: 0
    http: yes
}
"""

PAGE = b"""<!doctype html>
<html><head><meta charset="utf-8"><title>hop over websockets</title></head>
<body>
<script src="/rhea.js"></script>
<script>
const port = new URLSearchParams(location.search).get("port");
const result = {};
let reported = false;
function report() {
  if (reported) return;
  reported = true;
  fetch("/report", {method: "POST", body: JSON.stringify(result)});
}
function settle(outcome) {
  result.outcome = outcome;
  done();
}
function done() {
  if (result.received !== undefined && result.outcome !== undefined) {
    connection.close();
    report();
  }
}
let connection;
try {
  const container = require("rhea");
  const ws = container.websocket_connect(WebSocket);
  connection = container.connect({
    connection_details: ws("ws://127.0.0.1:" + port + "/", ["amqp"]),
    reconnect: false, container_id: "browser-client"});
  connection.on("connection_open", () => { result.opened = true; });
  connection.on("message", (context) => {
    result.received = context.message.body;
    done();
  });
  connection.on("accepted", () => settle("accepted"));
  connection.on("rejected", () => settle("rejected"));
  connection.on("released", () => settle("released"));
  connection.on("modified", () => settle("modified"));
  connection.on("disconnected", (context) => {
    result.error = String(context.error || "disconnected");
    report();
  });
  connection.open_receiver("browser.in");
  const sender = connection.open_sender("browser.out");
  sender.once("sendable", () => sender.send({body: "from the browser"}));
} catch (error) {
  result.error = String(error);
  report();
}
</script>
</body></html>
"""


def test_a_browser_sends_and_receives_over_websockets(start_router: StartRouter,
                                                      tmp_path: Path) -> None:
    rhea = npm_package("rhea", RHEA_VERSION)
    hop = start_router(router_conf(HTTP_LISTENER), listeners=2)
    files = {"/": (PAGE, "text/html"),
             "/rhea.js": ((rhea / "dist" / "rhea.js").read_bytes(), "text/javascript")}
    plain = connect(hop.url)
    try:
        receiver = plain.create_receiver("browser.out")
        with serve_pages(files) as pages, headless_chromium(
                f"http://127.0.0.1:{pages.server_address[1]}/?port={hop.ports[1]}",
                tmp_path / "profile"):
            # The router gives credit once the browser's receiver is attached;
            # send blocks until the browser's outcome settles the message.
            sender = plain.create_sender("browser.in")
            delivery = sender.send(Message(body="to the browser"), timeout=60)
            assert delivery.remote_state == Delivery.ACCEPTED
            message = receiver.receive(timeout=60)
            receiver.accept()
            assert message.body == "from the browser"
            # Keep this client's connection served (the accept goes out)
            # while the page finishes.
            deadline = time.monotonic() + 60
            result = None
            while result is None:
                assert time.monotonic() < deadline, "the page reported nothing"
                pump(plain, 0.1)
                with contextlib.suppress(queue.Empty):
                    result = pages.reports.get_nowait()
        assert result == {"opened": True, "received": "to the browser",
                          "outcome": "accepted"}, result
    finally:
        plain.close()
    assert "Accepted WebSocket connection" in hop.log_text()
    assert "container_id=browser-client" in hop.log_text()
