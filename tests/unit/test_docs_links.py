"""The README and docs/ hold together in a clone alone: every relative link names a file of the repository
and, with ``#anchor``, a heading there (GitHub's anchors); and nothing points outside the repository
into the ``shared`` folder that sat beside the development checkout."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = sorted([REPO / "README.md", REPO / "benchmarks" / "README.md", *(REPO / "docs").glob("*.md")])
LINK = re.compile(r"\]\(([^)\s]+)\)")
# a path up into the folder beside the checkout, plain or joined with pathlib; [e]: this file does not match itself
OUTSIDE = re.compile(r"\.\./shar[e]d|/ ?\"shar[e]d\"|\"shar[e]d\" ?/")


def anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens, repeats numbered."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    fenced = False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        m = None if fenced else re.match(r"#+ (.*)", line)
        if m:
            slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            found.add(slug if n == 0 else f"{slug}-{n}")
    return found


def links(page: Path) -> list[str]:
    return [t for t in LINK.findall(page.read_text()) if not re.match(r"[a-z]+:", t)]


def test_the_pages_exist():
    names = {p.relative_to(REPO).as_posix() for p in PAGES}
    assert {"README.md", "docs/design.md", "docs/config.md", "docs/hub.md"} <= names


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_relative_link_and_anchor_resolves(page: Path):
    bad = []
    for target in links(page):
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.is_relative_to(REPO) or not dest.exists():
            bad.append(f"{target}: no such file in the repository")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{target}: no heading with that anchor")
    assert not bad, bad


def test_the_readme_links_every_topic_page():
    linked = {(REPO / t.partition("#")[0]).resolve() for t in links(REPO / "README.md")}
    assert set((REPO / "docs").glob("*.md")) <= linked


def test_nothing_refers_to_the_folder_beside_the_checkout():
    roots = [REPO / "README.md", REPO / "pyproject.toml", REPO / "docs", REPO / "tacc_hub", REPO / "tests",
             REPO / "benchmarks", REPO / "scripts", REPO / "examples"]
    hits = []
    for root in roots:
        for f in [root] if root.is_file() else root.rglob("*"):
            if f.is_file() and f.suffix in {".md", ".py", ".sh", ".toml", ".yaml", ".conf", ".txt"}:
                if OUTSIDE.search(f.read_text(errors="replace")):
                    hits.append(f.relative_to(REPO).as_posix())
    assert not hits, hits
