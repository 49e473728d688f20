"""What the grader's tests share: fixture chapters, submissions built from them, grading a folder.

The fixture chapters (tests/fixtures/grader/) have their own checks
(tests/fixtures/grader/checks.py), registered for the length of a test module,
so that the chapters' checks can change without changing these tests.
Chapter 90: 90.1 cover_count (exact integers), 90.2 flip_probability (a
float), 90.3 row_sums (a NumPy array). Chapter 91: 91.1 cover_count, which
blocks dlbook.cover.cover_count.
"""
from __future__ import annotations

import contextlib
import csv
import importlib.util
import io
import json
import os
from pathlib import Path

import nbformat
import pytest

from dlbook.coursework.cli import main
from dlbook.coursework.sandbox import bwrap_path

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
GRADER_FIXTURES = FIXTURES / "grader"
CHAPTER = GRADER_FIXTURES / "90_fixture.ipynb"
SHORTCUT_CHAPTER = GRADER_FIXTURES / "91_shortcut.ipynb"

needs_bwrap = pytest.mark.skipif(
    bwrap_path() is None,
    reason="bubblewrap (bwrap) is not installed, and the grader runs submissions only in its sandbox "
           "(Debian/Ubuntu: apt-get install bubblewrap)")


def _checks_module():
    spec = importlib.util.spec_from_file_location("grader_fixture_checks", GRADER_FIXTURES / "checks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def fixture_checks():
    """The fixture chapters' checks, registered while the block runs."""
    checks = _checks_module()
    checks.register()
    try:
        yield checks
    finally:
        checks.unregister()


def load(chapter: Path = CHAPTER):
    return nbformat.read(chapter, as_version=4)


def cell(nb, cell_id: str):
    return next(c for c in nb.cells if c.get("id") == cell_id)


def solution(cell_id: str, chapter: Path = CHAPTER) -> str:
    """The reference source of a fixture cell (e.g. "exercise-90-1")."""
    return cell(load(chapter), cell_id).source


def edit(chapter: Path = CHAPTER, **sources):
    """The chapter with the given cells' sources replaced (keys: cell ids with _ for -)."""
    nb = load(chapter)
    for key, source in sources.items():
        cell(nb, key.replace("_", "-")).source = source
    return nb


def write(folder: Path, name: str, content) -> Path:
    """Write a submission: a notebook object, bytes or text."""
    path = folder / f"{name}.ipynb"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif isinstance(content, str):
        path.write_text(content, encoding="utf-8")
    else:  # as it is: nbformat.write would repair repeated cell ids
        path.write_text(json.dumps(content, indent=1), encoding="utf-8")
    return path


def grade(folder: Path, out: Path, chapter: Path = CHAPTER, *options: str) -> dict:
    """Grade ``folder`` through the command line; the outputs, read back."""
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = main(["grade", str(folder), "--chapter", str(chapter), "--out", str(out), *options])
    result = {"code": code, "stdout": stdout.getvalue(), "stderr": stderr.getvalue(), "out": out}
    if out.exists():
        with open(out, newline="", encoding="utf-8") as handle:
            result["rows"] = list(csv.DictReader(handle))
        with open(out.with_name(f"{out.stem}_summary.csv"), newline="", encoding="utf-8") as handle:
            result["summary"] = list(csv.DictReader(handle))
        result["json"] = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))
    return result


def row(graded: dict, student: str, exercise: str) -> dict:
    matches = [r for r in graded["rows"] if r["student"] == student and r["exercise"] == exercise]
    assert len(matches) == 1, (student, exercise, [r["student"] for r in graded["rows"]])
    return matches[0]


def score(graded: dict, student: str, exercise: str) -> tuple[int, str]:
    """(points, reason) of a student on an exercise; points are all or nothing."""
    found = row(graded, student, exercise)
    assert found["passed"] in ("True", "False")
    assert found["points"] == ("1" if found["passed"] == "True" else "0")
    return int(found["points"]), found["reason"]


def processes_with(marker: str) -> list[str]:
    """Command lines of the running processes that contain ``marker``."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                command = Path(entry.path, "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if marker in command:
                found.append(f"{entry.name}: {command}")
    return found


def tree_digest(folder: Path) -> dict:
    """Path -> (size, modification time) of every file under ``folder``."""
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(folder.rglob("*")) if p.is_file()}
