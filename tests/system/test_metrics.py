"""HTTP listeners: Prometheus text at /metrics and a health check at /healthz."""

from __future__ import annotations

import http.client
import socket
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from router.adapter.loop.trim import c_heap
from tests.system.clients import KNOWN_PATTERN, connect, known_pattern
from tests.system.conftest import StartRouter
from tests.system.harness import Hop, router_conf

HTTP_LISTENER = """\
listener {
    host: 127.0.0.1
    port: 0
    http: yes
}
"""


def start(start_router: StartRouter, extra: str = HTTP_LISTENER) -> tuple[Hop, int]:
    hop = start_router(router_conf(extra), listeners=2)
    return hop, hop.ports[1]


def scrape(port: int, path: str = "/metrics") -> tuple[int, str, dict[str, float]]:
    client = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        client.request("GET", path)
        response = client.getresponse()
        text = response.read().decode()
    finally:
        client.close()
    samples: dict[str, float] = {}
    if response.status == 200 and path == "/metrics":
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
                samples[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
    return response.status, response.getheader("Content-Type") or "", samples


def test_metrics_count_a_known_traffic_pattern(start_router: StartRouter) -> None:
    hop, port = start(start_router)
    conn = connect(hop.url)
    assert known_pattern(conn, "metered") == KNOWN_PATTERN
    status, content_type, samples = scrape(port)
    assert status == 200 and content_type.startswith("text/plain")
    assert samples["qdr_accepted_deliveries_total"] == 10
    assert samples["qdr_rejected_deliveries_total"] == 3
    assert samples["qdr_released_deliveries_total"] == 2
    assert samples["qdr_deliveries_ingress_total"] == 15
    assert samples["hop_address_deliveries_ingress_total{address=M0metered}"] == 15
    assert samples["hop_address_deliveries_egress_total{address=M0metered}"] == 15
    assert samples["hop_address_consumers{address=M0metered}"] == 1
    assert samples["hop_link_accepted_total{dir=out,type=endpoint}"] == 10
    assert samples["hop_connections{role=normal}"] == 1
    assert samples["qdr_connections_total"] == 1
    assert samples["process_resident_memory_bytes"] > 0
    if c_heap() is not None:  # glibc says what its heap holds
        assert 0 < samples["hop_heap_in_use_bytes"] < samples["process_resident_memory_bytes"]
        assert samples["hop_heap_free_bytes"] >= 0
    conn.close()


def test_healthz_and_unknown_paths(start_router: StartRouter) -> None:
    _, port = start(start_router)
    assert scrape(port, "/healthz")[0] == 200
    assert scrape(port, "/nothing")[0] == 404


def test_metrics_can_be_turned_off(start_router: StartRouter) -> None:
    _, port = start(start_router, HTTP_LISTENER.replace("http: yes", "http: yes\n    metrics: no"))
    assert scrape(port)[0] == 404
    assert scrape(port, "/healthz")[0] == 200


def test_garbage_gets_400_and_the_router_keeps_serving(start_router: StartRouter) -> None:
    hop, port = start(start_router)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"\x00\x01 NOT HTTP AT ALL\r\n\r\n")
        answer = sock.recv(4096)
    assert answer.startswith(b"HTTP/1.1 400")
    assert scrape(port)[0] == 200
    conn = connect(hop.url)
    conn.close()


def _get(port: int, path: str, method: str = "GET") -> tuple[int, str, bytes]:
    client = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        client.request(method, path)
        response = client.getresponse()
        return response.status, response.getheader("Content-Type") or "", response.read()
    finally:
        client.close()


def test_an_http_root_dir_is_served(start_router: StartRouter, tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "js").mkdir(parents=True)
    (site / "index.html").write_text("<h1>console</h1>")
    (site / "js" / "app.js").write_text("console.log(1);")
    (tmp_path / "private.txt").write_text("not for the web")
    # httpRootDir alone makes the listener speak HTTP, as in qdrouterd.
    hop = start_router(router_conf(f"listener {{\n    host: 127.0.0.1\n    port: 0\n"
                                   f"    httpRootDir: {site}\n}}\n"), listeners=2)
    port = hop.ports[1]
    assert _get(port, "/") == (200, "text/html; charset=utf-8", b"<h1>console</h1>")
    status, kind, body = _get(port, "/js/app.js?v=1")
    assert status == 200 and "javascript" in kind and body == b"console.log(1);"
    assert _get(port, "/js/app.js", "HEAD")[:2] == (200, kind)
    assert _get(port, "/nosuch")[0] == 404
    assert _get(port, "/../private.txt")[0] == 404
    assert _get(port, "/%2e%2e/private.txt")[0] == 404
    assert _get(port, "/index.html", "POST")[0] == 405
    # The router's own endpoints come first.
    assert _get(port, "/healthz")[0] == 200
    assert scrape(port)[0] == 200
