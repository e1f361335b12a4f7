"""Quick single-hop throughput check with proton Container clients.

Starts ``hopd`` on a free port, runs one receiver process (accepting every
message) and one sender process (N unsettled 100-byte messages), and
prints messages per second from the sender's first send to its last
settlement.  The clients are Python and are likely the bottleneck: this is
a starting point, not the benchmark harness.

    python bench/quick_throughput.py [N]
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RECEIVER = r"""
import sys
from proton.handlers import MessagingHandler
from proton.reactor import Container
class R(MessagingHandler):
    def __init__(self):
        super().__init__(prefetch=250)
        self.n = 0
    def on_start(self, e):
        c = e.container.connect(sys.argv[1])
        e.container.create_receiver(c, "bench")
    def on_link_opened(self, e):
        print("ready", flush=True)
    def on_message(self, e):
        self.n += 1
        if self.n == int(sys.argv[2]):
            e.connection.close()
Container(R()).run()
"""

SENDER = r"""
import sys, time
from proton import Message
from proton.handlers import MessagingHandler
from proton.reactor import Container
class S(MessagingHandler):
    def __init__(self):
        super().__init__()
        self.total = int(sys.argv[2]); self.sent = 0; self.settled = 0
        self.msg = Message(body=b"x" * 100)
    def on_start(self, e):
        c = e.container.connect(sys.argv[1])
        e.container.create_sender(c, "bench")
    def on_sendable(self, e):
        if self.sent == 0:
            self.t0 = time.perf_counter()
        while e.sender.credit and self.sent < self.total:
            e.sender.send(self.msg); self.sent += 1
    def on_accepted(self, e):
        self.settled += 1
        if self.settled == self.total:
            dt = time.perf_counter() - self.t0
            print(f"{self.total / dt:.0f}", flush=True)
            e.connection.close()
Container(S()).run()
"""


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    total = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    workdir = Path(tempfile.mkdtemp(prefix="hop-bench-"))
    conf = workdir / "hopd.conf"
    conf.write_text("router {\n    id: Bench\n}\nlistener {\n    host: 127.0.0.1\n"
                    "    port: 0\n}\nlog {\n    module: DEFAULT\n    enable: notice+\n}\n")
    log = (workdir / "hopd.log").open("w+")
    router = subprocess.Popen([sys.executable, "-m", "router", "-c", str(conf)], stderr=log)
    try:
        port = None
        for _ in range(200):
            log.seek(0)
            found = re.search(r"Listening on 127\.0\.0\.1:(\d+)", log.read())
            if found:
                port = found.group(1)
                break
            time.sleep(0.05)
        assert port is not None, "router did not start"
        url = f"amqp://127.0.0.1:{port}"
        receiver = subprocess.Popen([sys.executable, "-c", RECEIVER, url, str(total)],
                                    stdout=subprocess.PIPE, text=True)
        assert receiver.stdout is not None and receiver.stdout.readline().strip() == "ready"
        cpu0 = _cpu_seconds(router.pid)
        rate = subprocess.run([sys.executable, "-c", SENDER, url, str(total)],
                              capture_output=True, text=True, check=True).stdout.strip()
        receiver.wait(60)
        cpu = _cpu_seconds(router.pid) - cpu0
        print(f"{total} x 100-byte unsettled messages, 1 sender, 1 receiver, 1 router: "
              f"{rate} msg/s; router CPU {cpu * 1e6 / total:.1f} us/msg")
    finally:
        router.send_signal(signal.SIGTERM)
        router.wait(10)


if __name__ == "__main__":
    main()
