"""A TCP relay between two routers that a test can cut and heal: the link
between them fails from outside, while both processes live on.

``cut()`` shuts down every relayed socket (both routers see their
connection end) and refuses new ones; ``blackhole()`` keeps the sockets
open but carries nothing (both routers see silence, as behind a dead
switch, until their idle timeout); ``heal()`` carries traffic again: new
connections are relayed, and what was held back is delivered.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading

OPEN, CUT, BLACKHOLE = "open", "cut", "blackhole"


class CuttableProxy:
    """Relays a free loopback port to ``127.0.0.1:target``."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.setblocking(False)
        self.port = self.listener.getsockname()[1]
        self.mode = OPEN
        self.accepted = 0
        self._pairs: dict[socket.socket, socket.socket] = {}
        self._held: dict[socket.socket, bytearray] = {}
        self._lock = threading.Lock()
        self._selector = selectors.DefaultSelector()
        self._selector.register(self.listener, selectors.EVENT_READ)
        self._stop = False
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    # -- control ---------------------------------------------------------------

    def cut(self) -> None:
        with self._lock:
            self.mode = CUT
            for sock in list(self._pairs):
                self._drop(sock)

    def blackhole(self) -> None:
        with self._lock:
            self.mode = BLACKHOLE

    def heal(self) -> None:
        with self._lock:
            self.mode = OPEN
            for sock, held in self._held.items():
                peer = self._pairs.get(sock)
                if peer is not None and held:
                    with contextlib.suppress(OSError):
                        peer.sendall(held)
                held.clear()

    def close(self) -> None:
        self._stop = True
        self._thread.join(5)
        with self._lock:
            for sock in list(self._pairs):
                self._drop(sock)
        self.listener.close()
        self._selector.close()

    # -- relaying --------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop:
            for key, _ in self._selector.select(0.05):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                with self._lock:
                    if sock is self.listener:
                        self._accept()
                    elif sock in self._pairs:
                        self._relay(sock)

    def _accept(self) -> None:
        try:
            client, _ = self.listener.accept()
        except BlockingIOError:
            return
        if self.mode == CUT:
            client.close()
            return
        try:
            upstream = socket.create_connection(("127.0.0.1", self.target), timeout=5)
        except OSError:
            client.close()
            return
        self.accepted += 1
        for sock, peer in ((client, upstream), (upstream, client)):
            sock.setblocking(True)
            sock.settimeout(5)
            self._pairs[sock] = peer
            self._held[sock] = bytearray()
            self._selector.register(sock, selectors.EVENT_READ)

    def _relay(self, sock: socket.socket) -> None:
        try:
            data = sock.recv(65536)
        except OSError:
            data = b""
        if not data:
            self._drop(sock)
            return
        if self.mode == BLACKHOLE:
            self._held[sock] += data
            return
        try:
            self._pairs[sock].sendall(data)
        except OSError:
            self._drop(sock)

    def _drop(self, sock: socket.socket) -> None:
        """Shut down a relayed socket and its peer."""
        peer = self._pairs.pop(sock, None)
        self._held.pop(sock, None)
        for one in (sock, peer):
            if one is None:
                continue
            self._pairs.pop(one, None)
            self._held.pop(one, None)
            with contextlib.suppress(KeyError, ValueError):
                self._selector.unregister(one)
            with contextlib.suppress(OSError):
                one.shutdown(socket.SHUT_RDWR)
            one.close()
