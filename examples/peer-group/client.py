"""A client that finds the routers of a peer group by their beacons and fails
over from one to the next, sending and receiving at least once.

Start the routers of the group "demo" (each in its own terminal), then run::

    hopd -c examples/peer-group/a.conf
    hopd -c examples/peer-group/b.conf
    python examples/peer-group/client.py --count 20

Stop the router the client is connected to (Ctrl-C in its terminal): the
client reconnects to another router of the list and resends what had no
outcome yet, so every tick is received at least once.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from proton import Message
from proton.handlers import MessagingHandler
from proton.reactor import Container

import router as hop
from router.client_discovery import Discovered

DEFAULT_URL = ("discovery://(multicast://demo?interface=127.0.0.1)"
               "?initialReconnectDelay=100&maxReconnectDelay=2000")
ADDRESS = "examples/ticks"


class Ticker(MessagingHandler):  # type: ignore[misc]
    def __init__(self, found: Discovered, count: int, interval: float) -> None:
        super().__init__()
        self.found = found
        self.count = count
        self.interval = interval
        self.next_tick = 0
        self.pending: dict[Any, int] = {}  # delivery -> tick, until its outcome
        self.received: set[int] = set()
        self.sender: Any = None

    def on_start(self, event: Any) -> None:
        conn = self.found.connect(event.container)
        self.sender = event.container.create_sender(conn, ADDRESS)
        event.container.create_receiver(conn, ADDRESS)
        event.container.schedule(self.interval, self)

    def on_connection_opened(self, event: Any) -> None:
        print(f"connected to router {event.connection.remote_container}", flush=True)
        # Ticks without an outcome when the previous router went away: again.
        lost, self.pending = sorted(self.pending.values()), {}
        for tick in lost:
            self._send(tick)

    def on_transport_error(self, event: Any) -> None:
        print("router lost; reconnecting along the list", flush=True)

    def on_timer_task(self, event: Any) -> None:
        if self.next_tick < self.count:
            if self.sender.credit:
                self._send(self.next_tick)
                self.next_tick += 1
            event.container.schedule(self.interval, self)

    def _send(self, tick: int) -> None:
        self.pending[self.sender.send(Message(body=tick))] = tick

    def on_accepted(self, event: Any) -> None:
        self.pending.pop(event.delivery, None)

    def on_released(self, event: Any) -> None:
        tick = self.pending.pop(event.delivery, None)
        if tick is not None:
            self._send(tick)

    def on_message(self, event: Any) -> None:
        tick = event.message.body
        if tick not in self.received:
            print(f"received tick {tick}", flush=True)
        self.received.add(tick)
        if len(self.received) == self.count:
            event.connection.close()
            event.container.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=DEFAULT_URL, help="discovery URL of the group")
    parser.add_argument("--count", type=int, default=10, help="ticks to send and receive")
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between ticks")
    args = parser.parse_args()
    found = hop.discover(args.url)
    for router_id, urls in found.routers.items():
        print(f"found router {router_id} at {', '.join(urls)}", flush=True)
    Container(Ticker(found, args.count, args.interval)).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
