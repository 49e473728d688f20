"""The benchmark command times chapters and figures (run here on a tiny notebook)."""
from __future__ import annotations

import json

import nbformat

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
