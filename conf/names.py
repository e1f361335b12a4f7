"""Name normalisation and "did you mean" suggestions for section and attribute names.

Owns qdrouterd's camel-casing rule (docs/operations.md#names): ``link-route``,
``link_route`` and ``linkRoute`` name the same thing.  It must not know
which names are valid; callers pass the candidates.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable

_SEPARATORS = re.compile(r"[ _.\-]")

#: Keys whose plain value is one word that may contain ``#`` (docs/operations.md#syntax);
#: ``grammar.lark`` spells the same set as its HASH_KEY terminal.
ONE_WORD_KEYS = frozenset({"pattern", "bindingKey", "hostname"})


def camel_case(name: str) -> str:
    """Normalise a section or attribute name as qdrouterd does.

    The name is split on space, ``_``, ``-`` and ``.``; the first word is kept
    as written and each later word gets an upper-case first letter and a
    lower-cased rest: ``max-frame-size`` and ``max_FRAME_size`` both become
    ``maxFrameSize``, while ``linkRoute`` stays as it is.
    """
    first, *rest = _SEPARATORS.split(name)
    return first + "".join(word[:1].upper() + word[1:].lower() for word in rest)


def snake_case(conf_name: str) -> str:
    """The Python field name for a camelCase conf name: ``maxFrameSize`` -> ``max_frame_size``."""
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", conf_name).lower()


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """A `` (did you mean 'x'?)`` suffix naming the closest candidate, or ``""``."""
    pool = list(candidates)
    matches = difflib.get_close_matches(name, pool, n=1, cutoff=0.6)
    if not matches:
        lowered = {c.lower(): c for c in pool}
        if name.lower() in lowered:
            matches = [lowered[name.lower()]]
    return f" (did you mean {matches[0]!r}?)" if matches else ""
