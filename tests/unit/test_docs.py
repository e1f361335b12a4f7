"""The documentation a maintainer follows from a clone: every ``docs/`` page a
comment, a docstring, the README or another page points to exists, and so
does the section it names."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_CITED = re.compile(r"\bdocs/([\w-]+\.md)(?:#([\w-]+))?")
_MD_LINK = re.compile(r"\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)
_FENCE = re.compile(r"^```.*?^```", re.M | re.S)
_SOURCES = ("router", "addressing", "linkroute", "autolink", "conf", "spark", "bench", "tests",
            "examples", "man", "docs")


def slug(heading: str) -> str:
    """The anchor a Markdown heading gets (GitHub's rule)."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    for heading in _HEADING.findall(_FENCE.sub("", page.read_text())):
        base = slug(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        found.add(base if n == 0 else f"{base}-{n}")
    return found


def _files() -> list[Path]:
    files = [ROOT / "README.md"]
    for top in _SOURCES:
        for path in sorted((ROOT / top).rglob("*")):
            if path.is_file() and path.suffix in (".py", ".md", ".conf", ".lark", ".5", ".8",
                                                  ".toml", ".json"):
                files.append(path)
    return files


def citations() -> list[tuple[str, str, str | None]]:
    """(citing file, page, anchor) for every ``docs/...`` citation and every
    relative Markdown link into ``docs/``."""
    found = []
    for path in _files():
        text = path.read_text(errors="replace")
        where = str(path.relative_to(ROOT))
        for page, anchor in _CITED.findall(text):
            found.append((where, page, anchor or None))
        if path.suffix == ".md":
            for target in _MD_LINK.findall(text):
                if "://" in target or target.startswith(("mailto:", "#")):
                    if target.startswith("#"):
                        found.append((where, str(path.relative_to(ROOT / "docs"))
                                      if path.parent.name == "docs" else path.name,
                                      target[1:]))
                    continue
                resolved = (path.parent / target.split("#")[0]).resolve()
                anchor = target.split("#", 1)[1] if "#" in target else None
                if resolved.parent == ROOT / "docs" and resolved.suffix == ".md":
                    found.append((where, resolved.name, anchor))
                elif not resolved.exists():
                    found.append((where, f"(missing) {target}", None))
    return found


def test_the_docs_have_the_pages_the_readme_promises() -> None:
    pages = {p.name for p in (ROOT / "docs").glob("*.md")}
    assert {"routing.md", "networks.md", "brokers.md", "operations.md", "security.md",
            "spark.md", "performance.md", "compatibility.md", "architecture.md"} <= pages


def test_the_citation_finder_finds_citations() -> None:
    assert len(citations()) > 100


@pytest.mark.parametrize("page", sorted({c[1] for c in citations()}))
def test_every_cited_section_exists(page: str) -> None:
    assert not page.startswith("(missing)"), f"a link to a file that does not exist: {page}"
    path = ROOT / "docs" / page if (ROOT / "docs" / page).exists() else ROOT / page
    assert path.exists(), f"docs/{page} is cited but does not exist"
    known = anchors(path)
    wrong = sorted({f"{where}: #{anchor}" for where, cited, anchor in citations()
                    if cited == page and anchor is not None and anchor not in known})
    assert not wrong, f"sections of {page} that do not exist:\n" + "\n".join(wrong)


def test_no_citation_of_a_document_outside_the_repository() -> None:
    stale = re.compile(r"\breference (?:section )?\d+\.\d+|reference/[\w-]+\.md", re.I)
    found = [f"{path.relative_to(ROOT)}:{n}" for path in _files()
             for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
             if stale.search(line) and path.name != "test_docs.py"]
    assert not found, "citations a clone cannot follow:\n" + "\n".join(found)
