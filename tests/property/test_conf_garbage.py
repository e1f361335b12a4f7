"""Property: any text either parses or raises ConfError, never anything else."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from conf import ConfError, RouterConf, parse

# Fragments that make random text look like a configuration often enough.
FRAGMENTS = st.sampled_from(
    [
        "router {", "listener {", "address {", "linkRoute {", "}", "{", "\n", " ", "#",
        "prefix: a", "pattern: a.#", "port: 5672", "mode: interior", "role: inter-router",
        "openProperties: {", '"k": 1,', "[", "]", '"', "\\", ":", "direction: in", "x",
        "maxFrameSize: 1k", "name: n", "enable: info+", "module: DEFAULT", "log {",
        '["router", {}]', ",",
    ]
)  # fmt: skip
CONFISH = st.lists(FRAGMENTS | st.text(max_size=3), max_size=30).map("".join)


def parses_or_refuses(text: str, filename: str) -> None:
    try:
        result = parse(text, filename)
    except ConfError as error:
        assert error.diagnostics
        assert all(d.filename == filename and d.message for d in error.diagnostics)
    else:
        assert isinstance(result, RouterConf)


@settings(max_examples=300, deadline=None)
@given(CONFISH | st.text())
def test_any_conf_text_parses_or_raises_conf_error(text: str) -> None:
    parses_or_refuses(text, "fuzz.conf")


@settings(max_examples=200, deadline=None)
@given(CONFISH | st.text())
def test_any_json_text_parses_or_raises_conf_error(text: str) -> None:
    parses_or_refuses("[" + text, "fuzz.json")
