"""A SparkSession set up for the ``amqp`` data source, with the usual traps avoided.

:func:`session` builds (or returns) a SparkSession whose Python workers run
this interpreter and can import this package, and which binds loopback when
it runs locally (or the host name does not resolve); it checks for Java 17
or later first, and registers the data source. :func:`register` does the
last for a session the user built.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from spark.errors import AmqpSparkError

PACKAGE_DIR = Path(__file__).resolve().parent
MIN_JAVA = 17


def java_version() -> int | None:
    """The major version of the ``java`` that Spark will start, or None without one."""
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not java or not Path(java).exists():
        return None
    out = subprocess.run([java, "-version"], capture_output=True, text=True, check=False)
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not match:
        return None
    major = int(match[1])
    return int(match[2] or 0) if major == 1 else major


def check_java() -> None:
    version = java_version()
    if version is None:
        raise AmqpSparkError(
            "Spark needs Java 17 or later and no 'java' was found (JAVA_HOME or PATH); "
            "on Debian: apt-get install openjdk-17-jre-headless")
    if version < MIN_JAVA:
        raise AmqpSparkError(f"Spark 4 needs Java {MIN_JAVA} or later; this java is {version}")


def _hostname_resolves() -> bool:
    try:
        socket.gethostbyname(socket.gethostname())
    except OSError:
        return False
    return True


def prepare_environment(local: bool = True) -> None:
    """Set what the workers need before the JVM starts (it copies the environment).

    A local session binds loopback: otherwise Spark picks the first outside
    interface when the host name resolves to loopback, and fails when it does
    not resolve at all.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if "SPARK_LOCAL_IP" not in os.environ and (local or not _hostname_resolves()):
        os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    root = str(PACKAGE_DIR.parent)
    path = os.environ.get("PYTHONPATH", "")
    if root not in path.split(os.pathsep):
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (root, path) if p)


def _package_zip() -> str:
    """This package as a zip, for workers that cannot import it from a shared path."""
    target = Path(tempfile.gettempdir()) / f"hop-spark-{os.getpid()}.zip"
    with zipfile.ZipFile(target, "w") as zf:
        for path in sorted(PACKAGE_DIR.rglob("*.py")):
            zf.write(path, Path("spark") / path.relative_to(PACKAGE_DIR))
    return str(target)


def register(spark: Any, *, ship_package: bool = False) -> Any:
    """Register the ``amqp`` data source with ``spark``; return the session.

    With ``ship_package``, the package is also sent to the executors (for a
    cluster whose workers do not have it installed).
    """
    from spark.source import AmqpDataSource

    if ship_package:
        spark.sparkContext.addPyFile(_package_zip())
    spark.dataSource.register(AmqpDataSource)
    return spark


def session(app_name: str = "hop", master: str | None = None, **conf: str) -> Any:
    """A SparkSession (local[2,4] unless ``master`` is given) with ``amqp`` registered.

    ``local[2,4]`` runs two tasks at a time and gives each task four tries, as a
    cluster would: in plain ``local[2]`` a failed task fails the whole job.
    """
    check_java()
    master = master or "local[2,4]"
    prepare_environment(local=master.startswith("local"))
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name).master(master)
    builder = builder.config("spark.ui.enabled", "false") \
        .config("spark.sql.shuffle.partitions", "2") \
        .config("spark.executorEnv.PYTHONPATH", os.environ["PYTHONPATH"])
    for key, value in conf.items():
        builder = builder.config(key.replace("__", "."), value)
    return register(builder.getOrCreate())
