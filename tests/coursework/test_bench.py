"""The benchmark command times chapters and figures (run here on a tiny notebook)."""
from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from dlbook.coursework import bench
from dlbook.coursework.cli import main


def _tiny_chapter(path):
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_code_cell("import matplotlib.pyplot as plt\n"
                                  "from dlbook.interact import interactive_figure"),
        nbformat.v4.new_code_cell("def line_figure(slope=1):\n"
                                  "    fig, ax = plt.subplots(figsize=(2, 2))\n"
                                  "    ax.plot([0, slope])\n"
                                  "    return fig\n"
                                  "interactive_figure(line_figure, params={'slope': [1, 2, 3]})"),
    ]
    nbformat.write(notebook, path)


@pytest.mark.slow
def test_bench_times_a_chapter_and_its_figures(tmp_path, capsys):
    _tiny_chapter(tmp_path / "01_tiny.ipynb")
    assert main(["bench", "--book", str(tmp_path), "--json", str(tmp_path / "bench.json")]) == 0
    report = capsys.readouterr().out
    assert "01_tiny" in report and "line_figure" in report
    assert bench.chapter_paths(tmp_path) == [tmp_path / "01_tiny.ipynb"]
    results = json.loads((tmp_path / "bench.json").read_text())
    assert results[0]["total_s"] >= results[0]["cells_s"] > 0
    assert results[0]["figures"][0]["grid"] == 3 and results[0]["figures"][0]["update_s"] > 0


def test_bench_rejects_an_unknown_chapter(tmp_path, capsys):
    _tiny_chapter(tmp_path / "01_tiny.ipynb")
    assert main(["bench", "--book", str(tmp_path), "99_missing"]) == 2
    assert "99_missing" in capsys.readouterr().err


def test_workload_command_lists_every_exercise_and_the_table(tmp_path, capsys):
    import shutil

    from grader_fixtures import fixture_checks

    book = tmp_path / "book"
    book.mkdir()
    shutil.copy(Path(__file__).resolve().parents[1] / "fixtures" / "mini_chapter.ipynb", book / "90_mini.ipynb")
    with fixture_checks():
        assert main(["workload", "--book", str(book)]) == 0
    out = capsys.readouterr().out
    assert "90.1  derive     ★    15 min  1 pt  Cover's count" in out
    assert "| A miniature chapter | 2 | 2 derive | ★ ★ | about 30 min | 2 |" in out
    assert "| **all chapters** | 2 | | | about 0.5 h | 2 |" in out
