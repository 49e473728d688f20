"""Benchmark: each chapter's end-to-end execution time and each figure's update time.

``python -m dlbook bench [CHAPTER ...]`` runs the chapters as the book build
does (static figures, strict checks, one thread) in a fresh kernel each and
prints a table. It is a measurement, not a test: the test suite enforces the
60-second budget separately.
"""
from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from ..interact import TIMING_LOG_ENV

BOOK_ENV = {"DLBOOK_FIGURES": "static", "DLBOOK_CHECKS": "strict", "DLBOOK_NUM_THREADS": "1",
            "MPLBACKEND": "Agg", "PYTHONHASHSEED": "0"}


def chapter_paths(book_dir: Path, chapters=None) -> list[Path]:
    """Chapter notebooks named by path or slug (``01_neurons``); all of them by default."""
    from .notebook import chapter_notebooks
    from .student import resolve_chapter

    if not chapters:
        return chapter_notebooks(book_dir)
    return [resolve_chapter(book_dir, chapter) for chapter in chapters]


def time_chapter(path: Path, timeout: int = 600) -> dict:
    """Execute one chapter in a fresh kernel; return its wall time and figure timings."""
    notebook = nbformat.read(path, as_version=4)
    with tempfile.TemporaryDirectory() as scratch:
        log = Path(scratch) / "figures.jsonl"
        saved = {name: os.environ.get(name) for name in (*BOOK_ENV, TIMING_LOG_ENV)}
        os.environ.update(BOOK_ENV, **{TIMING_LOG_ENV: str(log)})
        try:
            client = NotebookClient(notebook, timeout=timeout, kernel_name="python3",
                                    resources={"metadata": {"path": str(path.parent)}})
            begin = time.perf_counter()
            with client.setup_kernel():
                started = time.perf_counter()
                for index, cell in enumerate(notebook.cells):
                    client.execute_cell(cell, index)
            end = time.perf_counter()
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
        figures = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return {"chapter": path.stem, "total_s": end - begin, "cells_s": end - started, "figures": figures}


def format_report(results: list[dict]) -> str:
    """The benchmark table as text."""
    lines = [f"{'chapter':<20} {'cells':>8} {'with kernel start':>18}"]
    for result in results:
        lines.append(f"{result['chapter']:<20} {result['cells_s']:>7.1f}s {result['total_s']:>17.1f}s")
    lines.append("")
    lines.append(f"{'interactive figure':<40} {'update at defaults':>18} {'frames (unique)':>16} {'precompute':>11}")
    for result in results:
        for figure in result["figures"]:
            frames = f"{figure['grid']} ({figure['unique_frames']})"
            lines.append(f"{result['chapter'] + ':' + figure['figure']:<40} {figure['update_s']:>17.2f}s "
                         f"{frames:>16} {figure['precompute_s']:>10.1f}s")
    return "\n".join(lines)


def main(book_dir: Path, chapters=None, json_path: Path | None = None) -> list[dict]:
    """Time the chapters and print the report (optionally also write JSON)."""
    results = [time_chapter(path) for path in chapter_paths(book_dir, chapters)]
    print(format_report(results))
    if json_path is not None:
        Path(json_path).write_text(json.dumps(results, indent=1))
    return results
