"""Configuration diagnostics: positions, one diagnostic, the ``ConfError`` that carries them.

Owns how a configuration problem is located and printed
(``file:line:col: message``) and the collector that gathers every problem
of a file before one ``ConfError`` is raised.  It must not decide what is
wrong with a configuration; the parser and the schema do that.
"""

from __future__ import annotations

import attrs


@attrs.frozen(kw_only=True, order=True)
class Position:
    """A 1-based line and column in a configuration file (0, 0: the whole file)."""

    line: int
    column: int

    def __str__(self) -> str:
        return f"{self.line}:{self.column}"


FILE_POSITION = Position(line=0, column=0)


@attrs.frozen(kw_only=True)
class Diagnostic:
    """One problem found in a configuration file."""

    filename: str
    line: int
    column: int
    message: str

    def __str__(self) -> str:
        if self.line == 0:
            return f"{self.filename}: {self.message}"
        return f"{self.filename}:{self.line}:{self.column}: {self.message}"


class ConfError(Exception):
    """A configuration file is invalid; ``diagnostics`` lists every problem found."""

    def __init__(self, diagnostics: list[Diagnostic]) -> None:
        super().__init__("\n".join(str(d) for d in diagnostics))
        self.diagnostics = diagnostics


class DiagnosticSink:
    """Collects the diagnostics of one file, so all of them are reported together."""

    def __init__(self, filename: str) -> None:
        self.filename = filename
        self._diagnostics: list[Diagnostic] = []

    def error(self, pos: Position, message: str) -> None:
        """Record a problem at ``pos``."""
        self._diagnostics.append(
            Diagnostic(filename=self.filename, line=pos.line, column=pos.column, message=message)
        )

    def __len__(self) -> int:
        return len(self._diagnostics)

    def raise_if_any(self) -> None:
        """Raise one ``ConfError`` with every recorded diagnostic, sorted by position.

        Raises:
            ConfError: when at least one problem was recorded.
        """
        if self._diagnostics:
            ordered = sorted(self._diagnostics, key=lambda d: (d.line, d.column))
            raise ConfError(ordered)
