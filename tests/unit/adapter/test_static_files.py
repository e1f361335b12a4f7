"""Which file of an ``httpRootDir`` a request names
(router.adapter.http.server.static_file): never one outside the folder."""

from __future__ import annotations

from pathlib import Path

from router.adapter.http.server import static_file


def _tree(tmp_path: Path) -> Path:
    root = tmp_path / "site"
    (root / "css").mkdir(parents=True)
    (root / "index.html").write_text("home")
    (root / "css" / "index.html").write_text("css home")
    (root / "css" / "main.css").write_text("body {}")
    (root / "a b.txt").write_text("spaced")
    (tmp_path / "secret.txt").write_text("outside")
    return root


def test_files_folders_and_escapes(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    assert static_file(str(root), b"/") == root / "index.html"
    assert static_file(str(root), b"/css/main.css?v=3") == root / "css" / "main.css"
    assert static_file(str(root), b"/css/") == root / "css" / "index.html"
    assert static_file(str(root), b"/a%20b.txt") == root / "a b.txt"
    assert static_file(str(root), b"/nosuch") is None


def test_nothing_outside_the_folder(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    for target in (b"/../secret.txt", b"/%2e%2e/secret.txt", b"/css/../../secret.txt",
                   b"//etc/passwd", b"/" + str(tmp_path / "secret.txt").encode()):
        assert static_file(str(root), target) is None, target
    (root / "link.txt").symlink_to(tmp_path / "secret.txt")
    assert static_file(str(root), b"/link.txt") is None
