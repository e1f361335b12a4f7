"""An authentication service for the delegated-authentication system tests,
run as a process of its own: ``python -m tests.system.authservice``.

A proton server that authenticates clients with Cyrus SASL against a
sasldb (``--sasl-dir`` holds ``proton-server.conf``), and whose OPEN says
who the client is (``authenticated-identity``, a map with ``sub``) and what
it may use (``address-authz``, from ``--permissions``: a JSON map of users
to maps of addresses to ``send``/``recv`` lists), as the services qdrouterd
delegates to do.  With ``--cert``/``--key`` it listens with TLS only.  It
prints ``listening on PORT`` once it listens and ``opened USER`` for each
client it authenticated."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from cproton_ffi import ffi, lib
from proton import UNDESCRIBED, Array, Data, Event, SSLDomain, symbol
from proton.handlers import MessagingHandler
from proton.reactor import Container


class Service(MessagingHandler):  # type: ignore[misc]
    def __init__(self, port: int, permissions: dict[str, dict[str, list[str]]],
                 ssl_domain: SSLDomain | None) -> None:
        super().__init__()
        self.port = port
        self.permissions = permissions
        self.ssl_domain = ssl_domain

    def on_start(self, event: Event) -> None:
        event.container.listen(f"127.0.0.1:{self.port}", ssl_domain=self.ssl_domain)
        print(f"listening on {self.port}", flush=True)

    def on_connection_bound(self, event: Event) -> None:
        # Over plain TCP too: the router decides what its clients are offered.
        event.transport.sasl().allow_insecure_mechs = True

    def on_connection_opening(self, event: Event) -> None:
        user = event.transport.user or ""
        granted = self.permissions.get(user.split("@", 1)[0], {})
        authz: dict[str, Any] = {address: Array(UNDESCRIBED, Data.STRING, *perms)
                                 for address, perms in granted.items()}
        event.connection.properties = {
            symbol("authenticated-identity"): {"sub": user.split("@", 1)[0]},
            symbol("address-authz"): authz,
        }
        print(f"opened {user}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--sasl-dir", required=True)
    parser.add_argument("--permissions", default="{}")
    parser.add_argument("--cert")
    parser.add_argument("--key")
    args = parser.parse_args()
    # For every transport: proton-server.conf there names the sasldb and mechanisms.
    lib.pn_sasl_config_path(ffi.NULL, args.sasl_dir.encode())
    domain = None
    if args.cert:
        domain = SSLDomain(SSLDomain.MODE_SERVER)
        domain.set_credentials(args.cert, args.key, None)
    Container(Service(args.port, json.loads(args.permissions), domain)).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
