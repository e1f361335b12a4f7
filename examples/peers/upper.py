"""Two applications with embedded Hop routers: a service and its client.

Each process starts a router inside itself (``router.peer``), joined to the
peer group ``upper-demo`` on the loopback interface.  The routers find each
other by their multicast beacons and connect; no router process runs.

Run the service in one terminal and ask it in another::

    python examples/peers/upper.py serve
    python examples/peers/upper.py ask "hello, peers"

The service answers each request on ``examples/upper`` with its body in
capitals, at the request's reply-to address; ``ask`` prints the answer.
"""

from __future__ import annotations

import argparse
import signal
import sys
import uuid

from proton import Message
from proton.utils import BlockingConnection

import router as hop

SERVICE = "examples/upper"


def peer_url(args: argparse.Namespace, name: str) -> str:
    # 127.0.0.1 keeps the beacons and the routers' listeners on loopback.
    return (f"peer://{args.group}/{name}?host=127.0.0.1&port={args.port}"
            f"&announceInterval=250&expiry=2000")


def serve(args: argparse.Namespace) -> int:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    with hop.peer(peer_url(args, args.name or "upper-service")) as p:
        conn = BlockingConnection(p.url)
        requests = conn.create_receiver(SERVICE, credit=10)
        replies = conn.create_sender(None)  # anonymous: each reply names its address
        print(f"{p.router_id}: serving {SERVICE} in group {p.group}", flush=True)
        served = 0
        try:
            while args.count == 0 or served < args.count:
                request = requests.receive(timeout=None)
                # Accept first: the client's send completes on this outcome,
                # and only then does it take the answer.
                requests.accept()
                replies.send(Message(address=request.reply_to, body=str(request.body).upper(),
                                     correlation_id=request.id))
                served += 1
        finally:
            conn.close()
    return 0


def ask(args: argparse.Namespace) -> int:
    with hop.peer(peer_url(args, args.name or f"upper-client-{uuid.uuid4().hex[:6]}")) as p:
        conn = BlockingConnection(p.url, timeout=args.timeout)
        try:
            answers = conn.create_receiver(None, dynamic=True, credit=1)
            reply_to = answers.link.remote_source.address
            requests = conn.create_sender(SERVICE)
            request_id = str(uuid.uuid4())
            # The send completes once a service somewhere in the group accepted it.
            requests.send(Message(body=args.text, reply_to=reply_to, id=request_id))
            answer = answers.receive()
            answers.accept()
            assert answer.correlation_id == request_id
            print(answer.body, flush=True)
        finally:
            conn.close()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--group", default="upper-demo")
    parser.add_argument("--port", type=int, default=6155, help="UDP port of the beacons")
    parser.add_argument("--name", help="this router's id (unique in the group)")
    commands = parser.add_subparsers(dest="command", required=True)
    server = commands.add_parser("serve")
    server.add_argument("--count", type=int, default=0, help="stop after this many (0: never)")
    client = commands.add_parser("ask")
    client.add_argument("text")
    client.add_argument("--timeout", type=float, default=30.0)
    args = parser.parse_args()
    return serve(args) if args.command == "serve" else ask(args)


if __name__ == "__main__":
    sys.exit(main())
