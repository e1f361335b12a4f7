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


# -- the code the docs name ----------------------------------------------------------

_PACKAGES = ("router", "addressing", "linkroute", "autolink", "conf", "spark")
_PATH = re.compile(r"(?<![\w/.-])((?:router|addressing|linkroute|autolink|conf|spark|bench|tests"
                   r"|examples|man)/[\w./-]*\.(?:py|c|lark|conf|json|md|png|toml|service|[58]))"
                   r"(?![\w*])")
_DOTTED = re.compile(r"`((?:router|addressing|linkroute|autolink|conf|spark)(?:\.\w+)+)`")


def _is_source(dotted: str) -> bool:
    """Whether a dotted name is meant as code: its second part is a module
    or package of its top package (``router.link`` is a management entity
    type, ``router.adapter`` a package)."""
    top, second = dotted.split(".")[:2]
    base = ROOT / top / second
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def unresolved(text: str) -> list[str]:
    """The files and modules ``text`` names that the tree does not have: a
    path with a file's extension, or a backticked dotted name of the code
    (a module, or an attribute of one, as deep as it goes)."""
    import importlib
    import importlib.util
    import subprocess

    missing = []
    for name in sorted(set(_PATH.findall(text))):
        if (ROOT / name).exists():
            continue
        ignored = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "-q", name])
        if ignored.returncode != 0:  # not a generated file
            missing.append(name)
    for dotted in sorted(set(_DOTTED.findall(text))):
        if not _is_source(dotted) or any(part.startswith("_") for part in dotted.split(".")):
            continue  # not code, or a compiled extension of the build
        parts = dotted.split(".")
        for i in range(len(parts), 0, -1):
            module = ".".join(parts[:i])
            try:
                found = importlib.util.find_spec(module) is not None
            except ModuleNotFoundError:
                found = False
            if found:
                obj: object = importlib.import_module(module)
                try:
                    for attr in parts[i:]:
                        obj = getattr(obj, attr)
                except AttributeError:
                    missing.append(dotted)
                break
        else:
            missing.append(dotted)
    return missing


def test_the_checker_finds_a_module_or_file_that_is_not_there() -> None:
    text = ("`router.adapter.forwarding.forwarder.Forwarder`, `router.adapter.managed`, "
            "`router.link` (an entity type), router/adapter/loop/eventloop.py, "
            "router/adapter/loop.py, `router.core.router.Router.no_such_method`")
    assert unresolved(text) == ["router/adapter/loop.py", "router.adapter.managed",
                                "router.core.router.Router.no_such_method"]


@pytest.mark.parametrize("page", ["README.md", *sorted(
    str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))])
def test_every_module_and_file_a_page_names_exists(page: str) -> None:
    """The docs name the code as it is (docs/architecture.md most of all)."""
    missing = unresolved((ROOT / page).read_text())
    assert not missing, f"{page} names what the tree does not have: {missing}"
