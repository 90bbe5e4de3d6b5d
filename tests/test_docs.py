"""The README and docs/ send readers only to files in the repository, and those files exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_the_docs_hold_the_design_the_operations_guide_and_the_evaluation_data():
    assert {page.name for page in PAGES} >= {
        "README.md",
        "design.md",
        "operations.md",
        "evaluation.md",
    }


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_link_is_a_file_in_the_repository(page):
    targets = LINK.findall(page.read_text())

    for target in targets:
        path = (page.parent / target.split("#")[0]).resolve()
        assert "://" not in target, f"{page.name} links outside the repository: {target}"
        assert path.is_relative_to(ROOT), f"{page.name} links outside the repository: {target}"
        assert path.exists(), f"{page.name} links to a missing file: {target}"


def test_the_readme_lists_every_page_of_docs():
    readme = (ROOT / "README.md").read_text()

    for page in PAGES[1:]:
        assert f"(docs/{page.name})" in readme
