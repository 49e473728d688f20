"""The results appendix is made from the checkpoint records of the executed chapters.

The first tests build the appendix from a small executed notebook; the tests
marked ``built`` read the executed chapters of this test run and fail if any
cell that calls the checkpoint helper left no record.
"""
from __future__ import annotations

import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import results_appendix  # noqa: E402

from dlbook import checkpoint  # noqa: E402

import executed  # noqa: E402


def _output(record: checkpoint.Record) -> dict:
    return nbformat.v4.new_output("display_data", data={"text/html": ""},
                                  metadata={checkpoint.METADATA_KEY: record.__dict__})


@pytest.fixture
def executed_chapter(tmp_path) -> Path:
    records = [checkpoint.Record("capacity | load", 0.149, "close", reference=0.138, atol=0.025),
               checkpoint.Record("error_rate", 0.01, "below", high=0.05),
               checkpoint.Record("ordering", True, "holds", detail="a < b < c")]
    cells = [nbformat.v4.new_markdown_cell("# 7. A chapter"),
             nbformat.v4.new_code_cell("checkpoint.close(...)\ncheckpoint.below(...)",
                                       outputs=[_output(records[0]), _output(records[1])]),
             nbformat.v4.new_code_cell("x = 1"),
             nbformat.v4.new_code_cell("checkpoint.holds(...)", outputs=[_output(records[2])])]
    notebook = nbformat.v4.new_notebook(cells=cells)
    notebook.metadata[executed.META_KEY] = {"seconds": 12.5, "machine": {"device": "CPU", "cpu": "x", "cores": 2,
                                                                         "python": "3", "torch": "2", "numpy": "2"}}
    path = tmp_path / "07_chapter.ipynb"
    nbformat.write(notebook, str(path))
    return path


def test_one_row_per_record_with_reference_tolerance_and_machine(executed_chapter):
    page = results_appendix.results_page("intro\n\n<!-- results -->\n", [executed_chapter])
    assert page.startswith("intro\n\n## 7. A chapter\n")
    assert "3 checkpoints, run by {doc}`07_chapter` in 12.5 s on: CPU; x, 2 cores" in page
    rows = [line for line in page.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert rows == ["| 1 | capacity \\| load | 0.149 | 0.138 | ± 0.025 |",
                    "| 2 | error\\_rate | 0.01 | ≤ 0.05 | bound |",
                    "| 3 | ordering (a \\< b \\< c) | true | true | exact |"]


def test_a_page_without_the_marker_is_refused(executed_chapter):
    with pytest.raises(ValueError, match="marker"):
        results_appendix.results_page("no marker here", [executed_chapter])


def test_a_checkpoint_cell_without_a_record_is_found(executed_chapter):
    notebook = nbformat.read(executed_chapter, as_version=4)
    assert results_appendix.silent_checkpoint_cells(notebook) == []
    notebook.cells[1].outputs = [nbformat.v4.new_output("stream", name="stdout", text="✅ capacity: 0.149\n")]
    assert results_appendix.silent_checkpoint_cells(notebook) == [notebook.cells[1].id]


def test_full_scale_only_checkpoint_cells_are_exempt(executed_chapter):
    notebook = nbformat.read(executed_chapter, as_version=4)
    notebook.cells.append(nbformat.v4.new_code_cell(
        'if runtime.scale() == "full":\n    checkpoint.above("x", run(), 0.9)\nelse:\n    print("full scale only")'))
    assert results_appendix.silent_checkpoint_cells(notebook) == []


def test_an_infinite_bound_from_a_notebook_is_shown(executed_chapter):
    notebook = nbformat.read(executed_chapter, as_version=4)
    record = dict(notebook.cells[1].outputs[1]["metadata"][checkpoint.METADATA_KEY], high="inf")
    notebook.cells[1].outputs[1]["metadata"][checkpoint.METADATA_KEY] = record
    assert "| 2 | error\\_rate | 0.01 | ≤ inf | bound |" in results_appendix.chapter_table(notebook)


def test_chapter_times_table(executed_chapter):
    text = results_appendix.with_chapter_times("before\n<!-- chapter-times -->\nafter", [executed_chapter])
    assert "| {doc}`7. A chapter <07_chapter>` | 3 | 12 s |" in text and "<!--" not in text


def test_the_book_pages_carry_the_markers():
    assert results_appendix.RESULTS_MARKER in (ROOT / "book" / "results.md").read_text()
    assert results_appendix.TIMES_MARKER in (ROOT / "book" / "instructors.md").read_text()


@pytest.mark.built
@pytest.mark.parametrize("chapter", executed.chapters(), ids=lambda p: p.stem)
def test_every_checkpoint_cell_of_the_executed_chapter_left_a_record(chapter):
    assert executed.is_fresh(chapter), f"{chapter.name}: no up-to-date executed copy (run the notebooks first)"
    notebook = nbformat.read(executed.executed_path(chapter), as_version=4)
    silent = results_appendix.silent_checkpoint_cells(notebook)
    assert not silent, f"{chapter.name}: checkpoint cells with no record in their outputs: {silent}"
    assert results_appendix.records(notebook), f"{chapter.name} ran no checkpoint"
    assert all(record.passed for _, record in results_appendix.records(notebook))
