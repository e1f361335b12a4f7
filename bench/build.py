"""Building the C load generator (hop-send, hop-recv, hop-churn) with gcc.

Debian's libqpid-proton11-dev provides the proton-C headers and library;
``ensure_build_deps`` installs it (and gcc) with apt-get when missing.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

LOADGEN = Path(__file__).parent / "loadgen"
BUILD = Path(__file__).parent / "build"
PROGRAMS = {"hop-send": ["send.c", "common.c"], "hop-recv": ["recv.c", "common.c"],
            "hop-churn": ["churn.c", "common.c"]}
APT_PACKAGES = ["gcc", "libqpid-proton11-dev"]


def ensure_build_deps() -> None:
    """Install the C compiler and proton-C development files if absent."""
    if Path("/usr/include/proton/proactor.h").exists() and shutil.which("gcc"):
        return
    subprocess.run(["apt-get", "update", "-qq"], check=True)
    env = {"DEBIAN_FRONTEND": "noninteractive", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    subprocess.run(["apt-get", "install", "-y", "-qq", *APT_PACKAGES], check=True, env=env)


def build() -> dict[str, Path]:
    """Compile the load generator when its sources are newer; return the binaries."""
    ensure_build_deps()
    BUILD.mkdir(exist_ok=True)
    binaries = {}
    for name, sources in PROGRAMS.items():
        target = BUILD / name
        paths = [LOADGEN / s for s in sources]
        headers = list(LOADGEN.glob("*.h"))
        newest = max(p.stat().st_mtime for p in paths + headers)
        if not target.exists() or target.stat().st_mtime < newest:
            subprocess.run(["gcc", "-O2", "-Wall", "-Wextra", "-o", str(target),
                            *map(str, paths), "-lqpid-proton", "-lm"], check=True)
        binaries[name] = target
    return binaries
