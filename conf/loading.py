"""Entry points: ``parse`` text, ``load`` a file, and the embedded default configuration.

Owns choosing the syntax (a name ending in ``.json`` is the JSON form),
reading the file, and raising one ``ConfError`` with every diagnostic.  It
must not configure logging or start anything.
"""

from __future__ import annotations

import os
from pathlib import Path

from conf.build import build_conf
from conf.confform import read_conf
from conf.diagnostics import ConfError, Diagnostic, DiagnosticSink
from conf.jsonform import read_json
from conf.model import RouterConf
from conf.sections import VhostSection

__all__ = ["DEFAULT_CONF_TEXT", "load", "load_policy_dir", "parse"]

DEFAULT_CONF_TEXT = """\
# hopd's built-in configuration: a standalone router that accepts
# unauthenticated connections on the loopback interface only.

router {
    mode: standalone
    id: Hop
}

listener {
    host: 127.0.0.1
    port: 5672
    saslMechanisms: ANONYMOUS
    authenticatePeer: no
}
"""


def parse(text: str, filename: str) -> RouterConf:
    """Parse and validate a configuration.

    Args:
        text: the file's content.
        filename: used in diagnostics; a name ending in ``.json`` selects the JSON form.

    Returns:
        The validated configuration; a missing ``router`` or ``policy``
        section is replaced by one with default settings, so an empty file
        is a standalone router with no listeners, as for qdrouterd.

    Raises:
        ConfError: listing every problem found, in file order.
    """
    sink = DiagnosticSink(filename)
    raw = read_json(text, sink) if filename.endswith(".json") else read_conf(text, sink)
    conf = build_conf(raw, sink)
    sink.raise_if_any()
    assert conf is not None
    return conf


def load(path: str | os.PathLike[str]) -> RouterConf:
    """Read and parse the configuration file at ``path``.

    Raises:
        ConfError: when the file cannot be read (missing, unreadable, not
            UTF-8), or is invalid.
    """
    filename = os.fspath(path)
    return parse(_read_text(filename, "configuration file"), filename)


def load_policy_dir(path: str | os.PathLike[str]) -> tuple[VhostSection, ...]:
    """The vhosts of every ``*.json`` file in a directory (``policy policyDir``),
    files in name order.  Each file is a JSON-form configuration holding
    ``vhost`` sections only, as qdrouterd's policy files are.

    Raises:
        ConfError: the directory cannot be listed, or a file cannot be read,
            is invalid, or holds a section other than ``vhost``.
    """
    directory = os.fspath(path)
    try:
        names = sorted(entry.name for entry in os.scandir(directory)
                       if entry.name.endswith(".json") and entry.is_file())
    except OSError as error:
        raise _file_error(directory, f"cannot read policyDir: {error.strerror}") from None
    vhosts: list[VhostSection] = []
    for name in names:
        filename = os.path.join(directory, name)
        sink = DiagnosticSink(filename)
        raw = read_json(_read_text(filename, "policy file"), sink)
        for section in raw:
            if section.name != "vhost":
                sink.error(section.pos, f"section {section.name!r} in a policy file: "
                                        "only vhost sections are read from policyDir")
        conf = build_conf([section for section in raw if section.name == "vhost"], sink)
        sink.raise_if_any()
        assert conf is not None
        vhosts.extend(conf.vhosts)
    return tuple(vhosts)


def _read_text(filename: str, what: str) -> str:
    try:
        data = Path(filename).read_bytes()
    except FileNotFoundError:
        raise _file_error(filename, f"{what} not found") from None
    except OSError as error:
        raise _file_error(filename, f"cannot read {what}: {error.strerror}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        column = error.start - (data.rfind(b"\n", 0, error.start) + 1) + 1
        diagnostic = Diagnostic(
            filename=filename, line=line, column=column, message="invalid UTF-8 byte sequence"
        )
        raise ConfError([diagnostic]) from None


def _file_error(filename: str, message: str) -> ConfError:
    return ConfError([Diagnostic(filename=filename, line=0, column=0, message=message)])
