"""The docs point at what exists: every Markdown link in README.md and docs/*.md (and the
READMEs of deploy/ and benchmarks/) to a file of the repository resolves, and so does
every file path they quote (``like/this.py``) under one of the repository's folders; and the
README's documentation list names every page of docs/."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md"),
               ROOT / "deploy" / "README.md", ROOT / "benchmarks" / "README.md"])
FOLDERS = ("vancetope_brain/", "vancetope_gateway/", "workers/", "tests/", "deploy/", "docs/",
           "recipes/", "benchmarks/", "webclient/", ".ci/",
           "shared/")  # the team's shared/ is not part of the repository: never point there
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
QUOTED = re.compile(r"`([\w./-]+)`")


def _exists(doc: Path, target: str) -> bool:
    return any((base / target).exists() for base in (doc.parent, ROOT))


def _repo_paths(doc: Path) -> list[str]:
    text = doc.read_text()
    links = [t.split("#", 1)[0] for t in LINK.findall(text)
             if not re.match(r"[a-z]+:", t) and not t.startswith("#")]
    # A doc below the root may quote paths relative to itself (deploy/: `k8s/`, …).
    local = () if doc.parent == ROOT else tuple(
        f"{d.name}/" for d in doc.parent.iterdir() if d.is_dir())
    quoted = [q for q in QUOTED.findall(text) if q.startswith(FOLDERS + local)]
    return [p for p in links + quoted if p]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_repository_path_in_the_docs_resolves(doc):
    missing = sorted({p for p in _repo_paths(doc) if not _exists(doc, p)})
    assert missing == [], f"{doc.relative_to(ROOT)} points at what is not in the repository"


def test_the_check_sees_links_and_quoted_paths(tmp_path):
    doc = tmp_path / "x.md"
    doc.write_text("[a](docs/nowhere.md) and `workers/nowhere.py`, [b](https://x.org/y.md)")
    assert _repo_paths(doc) == ["docs/nowhere.md", "workers/nowhere.py"]


def _documentation_list(readme: Path) -> list[str]:
    """The pages the README's "Documentation" section lists (``- `docs/x.md` — …``)."""
    section = readme.read_text().split("\n## Documentation\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^- `(docs/[\w.-]+\.md)`", section, flags=re.MULTILINE)


def test_the_readme_lists_every_page_of_the_docs():
    pages = sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md"))
    assert sorted(_documentation_list(ROOT / "README.md")) == pages, \
        "README.md, Documentation: one line per page of docs/"
