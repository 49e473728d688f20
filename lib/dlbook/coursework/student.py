"""The student edition: each chapter with its reference solutions replaced by stubs.

In each solution cell (tag ``solution``) the lines from ``### BEGIN SOLUTION``
to ``### END SOLUTION`` become one line
``raise NotImplementedError("Exercise 1.2: <hint>")`` at the markers'
indentation; the tags ``solution`` and ``hide-input`` go (the student must see
the cell), the cell id and the ``dlbook`` metadata stay (the grader finds the
cell by them). All outputs and execution counts are cleared; everything else
is unchanged.
"""
from __future__ import annotations

import copy
import json
from pathlib import Path

import nbformat

from ..exercises import core
from .notebook import (
    HIDE_TAG,
    SOLUTION_TAG,
    chapter_notebooks,
    exercise_cells,
    read_notebook,
    replace_solutions,
)

GENERIC_HINT = "replace this line with your code"


def stub_line(exercise_id: str) -> str:
    """The line that replaces a reference solution."""
    try:
        hint = core.get_exercise(exercise_id).hint
    except ValueError:
        hint = GENERIC_HINT
    message = f"Exercise {exercise_id}: {hint}"
    return f"raise NotImplementedError({json.dumps(message, ensure_ascii=False)})"


def student_notebook(nb, name: str = "notebook"):
    """A student-edition copy of a notebook object (the original is not changed)."""
    nb = copy.deepcopy(nb)
    exercises = {ex.index: ex for ex in exercise_cells(nb, name)}
    for index, cell in enumerate(nb.cells):
        if index in exercises:
            ex = exercises[index]
            try:
                cell.source = replace_solutions(cell.source, stub_line(ex.exercise_id))
            except ValueError as err:
                raise ValueError(f"{name}: solution cell {ex.cell_id or f'#{index}'} "
                                 f"(exercise {ex.exercise_id}): {err}") from None
            kept = [t for t in cell.metadata.get("tags", []) if t not in (SOLUTION_TAG, HIDE_TAG)]
            if kept:
                cell.metadata["tags"] = kept
            else:
                cell.metadata.pop("tags", None)
        if cell.get("cell_type") == "code":
            cell.outputs = []
            cell.execution_count = None
    return nb


def make_student_edition(notebook_path, out_path) -> Path:
    """Write the student edition of one chapter notebook; returns the path written."""
    notebook_path, out_path = Path(notebook_path), Path(out_path)
    nb = student_notebook(read_notebook(notebook_path), str(notebook_path))
    out_path.parent.mkdir(parents=True, exist_ok=True)
    with open(out_path, "w", encoding="utf-8") as handle:
        nbformat.write(nb, handle)
    return out_path


def resolve_chapter(book_dir, chapter) -> Path:
    """A chapter given as a notebook path or a slug such as ``01_neurons``."""
    path = Path(chapter)
    if path.suffix == ".ipynb" and path.exists():
        return path
    for candidate in (Path(book_dir) / path, Path(book_dir) / f"{chapter}.ipynb"):
        if candidate.suffix == ".ipynb" and candidate.exists():
            return candidate
    known = ", ".join(p.stem for p in chapter_notebooks(book_dir)) or "none"
    raise ValueError(f"chapter {chapter!r} not found: give a notebook path or a slug "
                     f"(chapters in {book_dir}: {known})")


def write_student_editions(book_dir, out_dir, chapters=None) -> list[Path]:
    """Write the student edition of the named chapters (default: all) into ``out_dir``.

    ``chapters`` holds notebook paths or slugs like ``01_neurons``. Each
    edition keeps its file name. Nothing else is copied.
    """
    if chapters:
        paths = [resolve_chapter(book_dir, chapter) for chapter in chapters]
    else:
        paths = chapter_notebooks(book_dir)
        if not paths:
            raise ValueError(f"no chapter notebooks ([0-9][0-9]_*.ipynb) in {book_dir}")
    return [make_student_edition(path, Path(out_dir) / path.name) for path in paths]
