"""The console's JSON management endpoint over HTTP
(docs/operations.md#the-json-management-endpoint): this router's agent and
another router's through the network, refusals with reasons, requests in
order behind one another router answers, logins, ``console: no`` and a
folder of the user's at ``/``."""

from __future__ import annotations

import base64
import http.client
import json
import re
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from tests.system.conftest import StartRouter
from tests.system.mgmt import Management
from tests.system.network import Network, start_network
from tests.system.sasl_users import PASSWORD, Users, make_users
from tests.system.test_console import HTTP_LISTENER, http_port


def request(port: int, method: str, target: str, body: Any = None,
            headers: dict[str, str] | None = None) -> tuple[int, Any, http.client.HTTPResponse]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    try:
        data = None if body is None else json.dumps(body).encode()
        headers = dict(headers or {})
        if data is not None:
            headers.setdefault("Content-Type", "application/json")
        conn.request(method, target, body=data, headers=headers)
        response = conn.getresponse()
        raw = response.read()
        kind = response.getheader("Content-Type", "")
        return response.status, json.loads(raw) if "json" in kind else raw, response
    finally:
        conn.close()


@pytest.fixture
def pair(start_router: StartRouter) -> tuple[Network, int]:
    """R1 (with the console) and R2, linked at cost 4."""
    net = start_network(start_router, {"R1": [], "R2": ["R1"]}, costs={("R2", "R1"): 4},
                        extras={"R1": HTTP_LISTENER})
    return net, http_port(net["R1"], 3)


def rows(answer: dict[str, Any]) -> list[dict[str, Any]]:
    return [dict(zip(answer["attributeNames"], r, strict=True)) for r in answer["results"]]


def test_this_router_s_agent_and_another_s_through_the_network(
        pair: tuple[Network, int]) -> None:
    _, port = pair
    status, body, _ = request(port, "GET", "/api/v1/router?attributes=id,mode")
    assert (status, rows(body)) == (200, [{"id": "R1", "mode": "interior"}])
    status, body, _ = request(port, "GET", "/api/v1/router?attributes=id&router=R2")
    assert (status, rows(body)) == (200, [{"id": "R2"}])
    status, body, _ = request(port, "GET", "/api/v1/router.node?attributes=id,linkCosts")
    assert status == 200
    assert {r["id"]: r["linkCosts"] for r in rows(body)} == {"R1": {"R2": 4}, "R2": {"R1": 4}}
    status, body, _ = request(port, "GET", "/api/v1/router.node/router.node%2FR2")
    assert status == 200 and body["id"] == "R2" and body["type"].endswith("router.node")
    status, body, _ = request(port, "GET", "/api/v1/connection?router=R2&attributes=role")
    assert status == 200 and {"role": "inter-router"} in rows(body)
    status, body, _ = request(port, "GET", "/api/v1/log?limit=3&router=R2")
    assert status == 200 and len(body) == 3 and all(len(r) == 6 for r in body)
    status, body, _ = request(port, "GET", "/api/v1/nodes")
    assert status == 200 and sorted(body) == ["amqp:/_topo/0/R1/$management",
                                              "amqp:/_topo/0/R2/$management"]


@pytest.mark.parametrize(("method", "target", "body", "status", "says"), [
    ("GET", "/api/v1/router?router=R9", None, 404, "no router 'R9' in the network"),
    ("GET", "/api/v1/router?attributes=nonsense", None, 404, "Unknown attributes"),
    ("GET", "/api/v1/nonsense", None, 404, "no entity type 'nonsense'"),
    ("GET", "/api/v1/router.config.address/missing?router=R2", None, 404, "missing"),
    ("POST", "/api/v1/router.config.address", {"prefix": "p"}, 403,
     "need an authenticated user"),
    ("DELETE", "/api/v1/router.config.address/x?router=R2", None, 403,
     "need an authenticated user"),
])
def test_refusals_say_why_and_the_router_serves_on(
        pair: tuple[Network, int], method: str, target: str, body: Any, status: int,
        says: str) -> None:
    _, port = pair
    got, answer, _ = request(port, method, target, body)
    assert got == status and says in answer["error"], answer
    assert request(port, "GET", "/api/v1/router?attributes=id")[0] == 200


def test_requests_on_one_connection_are_answered_in_order_behind_a_remote_one(
        pair: tuple[Network, int]) -> None:
    _, port = pair
    with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
        sock.sendall(b"GET /api/v1/router?attributes=id&router=R2 HTTP/1.1\r\nHost: x\r\n\r\n"
                     b"GET /api/v1/router?attributes=id HTTP/1.1\r\nHost: x\r\n\r\n"
                     b"GET /api/v1/router?attributes=id&router=R2 HTTP/1.1\r\nHost: x\r\n"
                     b"Connection: close\r\n\r\n")
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    answers = []
    while data:
        head, _, data = data.partition(b"\r\n\r\n")
        length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))  # type: ignore[union-attr]
        answers.append((head.split(b" ")[1], json.loads(data[:length])["results"]))
        data = data[length:]
    assert answers == [(b"200", [["R2"]]), (b"200", [["R1"]]), (b"200", [["R2"]])]


def test_a_client_gone_before_another_router_answers_costs_nothing(
        pair: tuple[Network, int]) -> None:
    _, port = pair
    for _ in range(5):
        with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
            sock.sendall(b"GET /api/v1/connection?router=R2 HTTP/1.1\r\nHost: x\r\n\r\n")
    time.sleep(0.5)
    status, body, _ = request(port, "GET", "/api/v1/router?attributes=id&router=R2")
    assert (status, body["results"]) == (200, [["R2"]])


def test_console_no_and_a_folder_of_the_user_s_at_the_root(
        start_router: StartRouter, tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text("<p>mine</p>")
    hop = start_router(
        "router {\n    mode: standalone\n    id: S\n}\n"
        "listener {\n    host: 127.0.0.1\n    port: 0\n    http: yes\n    console: no\n}\n"
        f"listener {{\n    host: 127.0.0.1\n    port: 0\n    httpRootDir: {site}\n}}\n",
        listeners=2)
    off, mine = hop.ports
    assert request(off, "GET", "/")[0] == 404
    assert request(off, "GET", "/api/v1/router")[0] == 404
    assert request(off, "GET", "/metrics")[0] == 200, "console: no leaves metrics on"
    status, body, _ = request(mine, "GET", "/")
    assert (status, body) == (200, b"<p>mine</p>")
    status, body, response = request(mine, "GET", "/console/")
    assert status == 200 and b"console.js" in body
    assert response.getheader("Content-Type") == "text/html; charset=utf-8"
    assert request(mine, "GET", "/api/v1/router?attributes=id")[1]["results"] == [["S"]]


@pytest.fixture(scope="module")
def users(tmp_path_factory: pytest.TempPathFactory) -> Users:
    return make_users(tmp_path_factory.mktemp("sasl"), ("alice",))


def basic(user: str, password: str = PASSWORD) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def test_a_listener_that_authenticates_asks_for_a_login_and_lets_the_user_write(
        start_router: StartRouter, users: Users) -> None:
    hop = start_router(
        f"router {{\n    mode: standalone\n    id: S\n    saslConfigDir: {users.config_dir}\n"
        f"    saslConfigName: {users.config_name}\n}}\n"
        "listener {\n    host: 127.0.0.1\n    port: 0\n}\n"
        "listener {\n    host: 127.0.0.1\n    port: 0\n    http: yes\n"
        "    authenticatePeer: yes\n    saslMechanisms: PLAIN\n"
        "    allowInsecureMechanisms: yes\n}\n"
        "listener {\n    host: 127.0.0.1\n    port: 0\n    http: yes\n"
        "    authenticatePeer: yes\n    saslMechanisms: PLAIN\n}\n", listeners=3)
    port, clear = hop.ports[1], hop.ports[2]
    status, body, response = request(port, "GET", "/api/v1/router")
    assert status == 401 and response.getheader("WWW-Authenticate", "").startswith("Basic ")
    assert request(port, "GET", "/", headers=basic("alice@hop", "wrong"))[0] == 401
    status, me, _ = request(port, "GET", "/api/v1/whoami", headers=basic("alice@hop"))
    assert (status, me["user"], me["write"]) == (200, "alice@hop", True)
    status, made, _ = request(port, "POST", "/api/v1/router.config.address",
                              {"name": "made", "prefix": "made", "distribution": "closest"},
                              basic("alice@hop"))
    assert status == 201 and made["prefix"] == "made"
    forged = [request(port, "POST", "/api/v1/router.config.address", {"prefix": "f"},
                      {**basic("alice@hop"), "Content-Type": "text/plain"})[0],
              request(port, "DELETE", "/api/v1/router.config.address/made",
                      headers={**basic("alice@hop"), "Origin": "http://evil.example"})[0]]
    assert forged == [415, 403], "writes another site's page could make are refused"
    mgmt = Management(hop.url)
    try:
        assert {"prefix": "made"} in mgmt.query("router.config.address", "prefix")
    finally:
        mgmt.close()
    status, body, _ = request(clear, "GET", "/api/v1/router", headers=basic("alice@hop"))
    assert status == 403 and "client certificates" in body["error"], \
        "no password in clear text unless the listener allows insecure mechanisms"
