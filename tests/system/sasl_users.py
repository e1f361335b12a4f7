"""A Cyrus SASL configuration for system tests: a sasldb that knows a few
users, all with ``PASSWORD``, in the realm ``hop``."""

from __future__ import annotations

import subprocess
from collections.abc import Iterable
from pathlib import Path

import attrs

PASSWORD = "correct horse"


@attrs.frozen
class Users:
    config_dir: Path
    config_name: str


def make_users(directory: Path, names: Iterable[str] = ("alice", "router")) -> Users:
    """A sasldb in ``directory`` knowing ``name@hop`` for each of ``names``,
    and the SASL configuration (``hop-test``) that reads it."""
    db = directory / "users.sasldb"
    for user in names:
        subprocess.run(["saslpasswd2", "-c", "-p", "-f", str(db), "-u", "hop", user],
                       input=PASSWORD, text=True, check=True, timeout=30)
    (directory / "hop-test.conf").write_text(
        f"pwcheck_method: auxprop\nauxprop_plugin: sasldb\nsasldb_path: {db}\n"
        "mech_list: PLAIN ANONYMOUS EXTERNAL\n")
    return Users(directory, "hop-test")
