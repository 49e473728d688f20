"""The PDF edition: the whole book in one file, read back with poppler's pdftotext, pdfinfo and pdfimages."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import build_pdf  # noqa: E402
import results_appendix  # noqa: E402

from dlbook.coursework.workload import chapter_title  # noqa: E402

import executed  # noqa: E402

pytestmark = pytest.mark.pdf
APPENDICES = ["For instructors", "Every result in the book", "Notation", "Glossary", "Bibliography"]


@pytest.fixture(scope="module")
def pdf() -> Path:
    if not all(shutil.which(tool) for tool in ("pdftotext", "pdfinfo", "pdfimages")):
        pytest.skip("poppler-utils (pdftotext, pdfinfo, pdfimages) is not installed: make setup installs it")
    return build_pdf.build(allow_execute=False)


@pytest.fixture(scope="module")
def pages(pdf) -> list[str]:
    text = subprocess.run(["pdftotext", "-enc", "UTF-8", str(pdf), "-"], check=True,
                          capture_output=True, text=True).stdout
    return text.split("\f")


def _squeezed(text: str) -> str:
    """Text without whitespace and hyphens: lines that wrap in the PDF still match (pdftotext
    drops the hyphen where a line breaks after one, "1.000e-10" becoming "1.000e10")."""
    return re.sub(r"[\s\-\u00ad\u2010]+", "", text)


def test_page_count_fits_the_number_of_chapters(pdf):
    info = subprocess.run(["pdfinfo", str(pdf)], check=True, capture_output=True, text=True).stdout
    count = int(re.search(r"^Pages:\s+(\d+)", info, re.M).group(1))
    chapters = len(executed.chapters())
    assert 15 * chapters <= count <= 80 * chapters, f"{count} pages for {chapters} chapters"


def test_chapters_and_appendices_appear_in_book_order_each_on_a_new_page(pages):
    titles = [chapter_title(path) for path in executed.chapters()] + APPENDICES
    starts = []
    for title in titles:
        first_lines = [i for i, page in enumerate(pages) if _squeezed(page).startswith(_squeezed(title))]
        assert first_lines, f"no page starts with the title {title!r}"
        starts.append(first_lines[0])
    assert starts == sorted(starts), "chapters out of order"
    contents = _squeezed(" ".join(pages[:3]))
    assert all(_squeezed(title) in contents for title in titles[:-len(APPENDICES)]), "no table of contents"


def test_a_sample_of_checkpoint_lines_is_printed(pages):
    text = _squeezed(" ".join(pages))
    for path in executed.chapters():
        notebook = nbformat.read(executed.executed_path(path), as_version=4)
        records = [record for _, record in results_appendix.records(notebook)]
        for record in (records[0], records[len(records) // 2], records[-1]):
            line = record.line().replace("✅", "✓")
            assert _squeezed(line) in text, f"{path.stem}: checkpoint line not in the PDF: {line}"


def test_math_is_typeset_not_left_as_tex(pages):
    text = " ".join(pages)
    assert "\\frac" not in text and "$$" not in text


def _figures_in_executed_chapters() -> int:
    """Static pictures plus interactive figures (each printed at its default frame)."""
    count = 0
    for chapter in executed.chapters():
        notebook = nbformat.read(executed.executed_path(chapter), as_version=4)
        for cell in notebook.cells:
            for output in cell.get("outputs", []):
                data = output.get("data", {})
                count += "image/png" in data or 'class="dlbook-interact"' in data.get("text/html", "")
    return count


def test_every_figure_is_printed(pdf):
    listing = subprocess.run(["pdfimages", "-list", str(pdf)], check=True, capture_output=True, text=True).stdout
    images = [line for line in listing.splitlines()[2:] if line.split() and line.split()[2] == "image"]
    expected = _figures_in_executed_chapters()
    assert expected > 100
    assert len(images) >= expected, f"{len(images)} pictures in the PDF, {expected} figures in the chapters"
