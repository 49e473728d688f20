"""The glossary, the notation page and the cross-references tie the chapters into one book.

These tests read the sources (no build): every ``{term}`` resolves to a glossary
entry, every entry is linked from a chapter and says where it is introduced,
each chapter links its own terms, the notation page has a section per chapter,
and no chapter names another chapter in plain text where a cross-reference
belongs. The build, with warnings as errors, checks that each reference resolves.
"""
from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
BOOK = ROOT / "book"
CHAPTERS = sorted(BOOK.glob("[0-9][0-9]_*.ipynb"))
MIN_TERMS_PER_CHAPTER = 10

ROLE = re.compile(r"\{(?:term|ref|doc|numref|eq|cite(?::[a-z]+)?)\}`[^`]*`")
TERM = re.compile(r"\{term\}`([^`]*)`")
PLAIN_CHAPTER = re.compile(r"\b[Cc]hapters? \d+")


def glossary_entries() -> dict[str, str]:
    """Each glossary term (lower-cased, as Sphinx matches it) with its definition."""
    text = (BOOK / "glossary.md").read_text()
    block = re.search(r"```\{glossary\}\n(.*?)\n```", text, re.S)
    assert block, "book/glossary.md must hold one {glossary} block"
    entries: dict[str, str] = {}
    terms: list[str] = []
    for line in block.group(1).splitlines():
        if line and not line[0].isspace():
            if terms and entries.get(terms[-1]):
                terms = []
            terms.append(line.strip().lower())
            entries[terms[-1]] = ""
        elif line.strip():
            for term in terms:
                entries[term] += line.strip() + " "
    return entries


def term_target(role_text: str) -> str:
    """``text <Target>`` links to Target, a bare ``Term`` to itself."""
    match = re.fullmatch(r"(?s).*<([^<>]+)>\s*", role_text)
    return (match.group(1) if match else role_text).strip().lower()


def markdown_sources(path: Path) -> list[str]:
    if path.suffix == ".md":
        return [path.read_text()]
    notebook = nbformat.read(path, as_version=4)
    return [cell.source for cell in notebook.cells if cell.cell_type == "markdown"]


def linked_terms(path: Path) -> list[str]:
    return [term_target(text) for source in markdown_sources(path) for text in TERM.findall(source)]


PAGES = CHAPTERS + sorted(BOOK.glob("*.md"))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_term_link_resolves(page):
    entries = glossary_entries()
    missing = sorted({term for term in linked_terms(page) if term not in entries})
    assert not missing, f"{page.name} links terms the glossary does not define: {missing}"


def test_glossary_is_in_alphabetical_order():
    def key(term: str) -> str:  # accents and hyphens ignored, as a reader looks a term up
        return unicodedata.normalize("NFKD", term).encode("ascii", "ignore").decode().replace("-", " ")

    terms = list(glossary_entries())
    misplaced = [(a, b) for a, b in zip(terms, terms[1:]) if key(a) > key(b)]
    assert not misplaced, f"glossary entries out of alphabetical order: {misplaced}"


def test_every_glossary_entry_is_linked_from_a_chapter():
    linked = {term for chapter in CHAPTERS for term in linked_terms(chapter)}
    orphans = sorted(set(glossary_entries()) - linked)
    assert not orphans, f"glossary entries no chapter links with {{term}}: {orphans}"


def test_every_glossary_entry_says_where_it_is_introduced():
    vague = sorted(term for term, definition in glossary_entries().items()
                   if not re.search(r"\{(?:ref|doc)\}`", definition))
    assert not vague, f"glossary entries without a {{ref}} or {{doc}} link to their chapter: {vague}"


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_links_its_terms_to_the_glossary(chapter):
    terms = linked_terms(chapter)
    assert len(set(terms)) >= MIN_TERMS_PER_CHAPTER, (
        f"{chapter.name} links {len(set(terms))} glossary terms; at least {MIN_TERMS_PER_CHAPTER} expected")
    repeated = sorted({term for term in terms if terms.count(term) > 1})
    assert not repeated, f"{chapter.name} links these terms more than once (link the first use only): {repeated}"


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_chapters_are_named_by_cross_reference_not_in_plain_text(chapter):
    mentions = []
    for source in markdown_sources(chapter):
        prose = ROLE.sub("", re.sub(r"(?s)```.*?```|`[^`]*`|\$\$.*?\$\$|\$[^$]*\$", "", source))
        mentions += [prose[max(0, m.start() - 40):m.end() + 10].replace("\n", " ")
                     for m in PLAIN_CHAPTER.finditer(prose)]
    assert not mentions, (
        f"{chapter.name} names chapters in plain text; use {{doc}}`03_optimization` or {{ref}}`label`: {mentions}")


def test_notation_page_has_a_section_for_every_chapter():
    text = (BOOK / "notation.md").read_text()
    for chapter in CHAPTERS:
        number = int(chapter.name[:2])
        assert re.search(rf"^## Chapter {number}: ", text, re.M), f"notation.md has no section for {chapter.stem}"
        section = re.search(rf"^## Chapter {number}: .*?(?=^## |\Z)", text, re.M | re.S).group(0)
        assert "| symbol | meaning |" in section, f"notation.md lists no symbols for {chapter.stem}"


def _labels() -> set[str]:
    pages = CHAPTERS + sorted(BOOK.glob("*.md"))
    return {label for page in pages for source in markdown_sources(page)
            for label in re.findall(r"^\(([\w-]+)\)=\s*$", source, re.M)}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_cross_reference_names_a_label_or_page_that_exists(page):
    labels, missing = _labels(), []
    for source in markdown_sources(page):
        for role, text in re.findall(r"\{(ref|doc|numref)\}`([^`]*)`", source):
            target = term_target(text) if "<" in text else text.strip()
            if role == "doc":
                found = (BOOK / f"{target}.ipynb").exists() or (BOOK / f"{target}.md").exists()
            else:
                found = target.lower() in {label.lower() for label in labels}
            if not found:
                missing.append(f"{{{role}}}`{text}`")
    assert not missing, f"{page.name} refers to labels or pages that do not exist: {missing}"
