"""Every file and section the code and the docs cite exists: `docs/<name>.md` in comments and
messages, `docs/design.md sN` (its section N), Markdown links of README.md and docs/, and
docs/README.md lists every page of docs/."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SOURCES = [
    *REPO.glob("pipeline/**/*.py"),
    *REPO.glob("scripts/**/*.py"),
    *REPO.glob("scripts/*.sh"),
    *REPO.glob("conf/**/*.yaml"),
    *REPO.glob("tests/**/*.py"),
    REPO / "Makefile",
    REPO / "README.md",
    *REPO.glob("docs/*.md"),
]
DOC_CITED = re.compile(r"\bdocs/([\w.-]+\.md)(?:\s+s(\d+))?")
LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


def test_every_cited_doc_and_design_section_exists():
    sections = {
        m.group(1) for m in re.finditer(r"^## (\d+)[.b ]", _text(REPO / "docs" / "design.md"), re.M)
    }
    missing = []
    for path in SOURCES:
        if path.name == "test_docs_links.py":
            continue
        for match in DOC_CITED.finditer(_text(path)):
            name, section = match.groups()
            if not (REPO / "docs" / name).is_file():
                missing.append(f"{path.relative_to(REPO)}: docs/{name}")
            elif section and name == "design.md" and section not in sections:
                missing.append(f"{path.relative_to(REPO)}: docs/design.md s{section}")
    assert missing == []


def test_no_citation_of_files_outside_the_repository():
    for path in SOURCES:
        if path.name == "test_docs_links.py":
            continue
        text = _text(path)
        assert not re.search(r"(?<![/\w])(DESIGN|NOTES)\.md", text), path


def test_markdown_links_of_the_readme_and_docs_resolve():
    broken = []
    for page in [REPO / "README.md", *REPO.glob("docs/*.md")]:
        for target in LINK.findall(_text(page)):
            if "://" in target or target.startswith("mailto:"):
                continue
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(REPO)} -> {target}")
    assert broken == []


def test_the_docs_index_lists_every_page():
    index = _text(REPO / "docs" / "README.md")
    pages = sorted(p.name for p in (REPO / "docs").glob("*.md") if p.name != "README.md")
    assert [p for p in pages if f"({p})" not in index] == []
