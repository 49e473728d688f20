"""Every figure a chapter shows is in its executed copy, and so in the book.

A kernel whose matplotlib backend is not the inline one runs ``plt.show()``
without a word and without a picture; the book would then silently lose its
static figures. These tests read the executed chapters of this test run.
"""
from __future__ import annotations

import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import executed  # noqa: E402

pytestmark = pytest.mark.built


def showing_cells(notebook) -> list:
    """Code cells that show a matplotlib figure."""
    return [cell for cell in notebook.cells if cell.cell_type == "code" and "plt.show()" in cell.source]


def has_picture(cell) -> bool:
    return any("image/png" in output.get("data", {}) for output in cell.get("outputs", []))


def test_the_kernels_draw_figures_inline():
    assert executed.ENVIRONMENT["MPLBACKEND"] == "module://matplotlib_inline.backend_inline"


@pytest.mark.parametrize("chapter", executed.chapters(), ids=lambda p: p.stem)
def test_every_cell_that_shows_a_figure_has_its_picture(chapter):
    assert executed.is_fresh(chapter), f"{chapter.name}: no up-to-date executed copy (run the notebooks first)"
    notebook = nbformat.read(executed.executed_path(chapter), as_version=4)
    missing = [cell.id for cell in showing_cells(notebook) if not has_picture(cell)]
    assert not missing, f"{chapter.name}: cells that call plt.show() but have no picture: {missing}"
