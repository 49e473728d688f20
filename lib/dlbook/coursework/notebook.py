"""The exercise cell convention: how the tools find exercises in a chapter notebook.

An exercise is three consecutive cells:

1. markdown: ``### Title``, the line ``**Exercise 1.2** (★★, about 25 min, derive)`` (the
   registered difficulty, time and kind) and the task;
2. the SOLUTION cell: a code cell with id ``exercise-1-2``, tags
   ``["solution", "hide-input"]`` and metadata ``{"dlbook": {"exercise": "1.2"}}``,
   defining one function whose body sits between the marker lines
   ``### BEGIN SOLUTION`` and ``### END SOLUTION``;
3. the CHECK cell: ``dlbook.exercises.check("1.2", cover_count)``.

The chapter's first code cell is the setup cell, tagged ``setup``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import nbformat

SOLUTION_TAG = "solution"
HIDE_TAG = "hide-input"
SETUP_TAG = "setup"
META_KEY = "dlbook"
BEGIN_MARKER = "### BEGIN SOLUTION"
END_MARKER = "### END SOLUTION"

_BEGIN_RE = re.compile(r"^(?P<indent>[ \t]*)#+\s*BEGIN SOLUTION\s*$")
_END_RE = re.compile(r"^[ \t]*#+\s*END SOLUTION\s*$")
_CELL_ID_RE = re.compile(r"^exercise-(\d+)-(\d+)$")


def cell_id_for(exercise_id: str) -> str:
    """The cell id of an exercise's solution cell: "1.2" -> "exercise-1-2"."""
    return "exercise-" + exercise_id.replace(".", "-")


def tags(cell) -> list[str]:
    """The cell's tags (a list, possibly empty)."""
    found = cell.get("metadata", {}).get("tags", [])
    return list(found) if isinstance(found, (list, tuple)) else []


def exercise_meta(cell) -> str | None:
    """The exercise id in the cell's ``dlbook`` metadata, if any."""
    meta = cell.get("metadata", {}).get(META_KEY)
    if isinstance(meta, dict) and isinstance(meta.get("exercise"), str):
        return meta["exercise"]
    return None


@dataclass(frozen=True)
class ExerciseCell:
    """A solution cell found in a notebook."""

    index: int
    cell_id: str | None
    exercise_id: str
    source: str


def read_notebook(path) -> nbformat.NotebookNode:
    """Read a notebook as nbformat 4 (ids kept as written)."""
    with open(path, encoding="utf-8") as handle:
        return nbformat.read(handle, as_version=4)


def exercise_cells(nb, name: str = "notebook", *, tagged_only: bool = True) -> list[ExerciseCell]:
    """The solution cells of a chapter, in notebook order.

    A solution cell is a code cell tagged ``solution`` (with ``tagged_only=False``
    also a code cell with ``dlbook.exercise`` metadata, as in the student
    edition, whose stubs have lost the tag). Its exercise id comes
    from the ``dlbook.exercise`` metadata, else from the cell id
    ``exercise-N-M``; a solution cell with neither is a ValueError that names
    the notebook and the cell.
    """
    found = []
    for index, cell in enumerate(nb.cells):
        if cell.get("cell_type") != "code":
            continue
        if SOLUTION_TAG not in tags(cell) and (tagged_only or exercise_meta(cell) is None):
            continue
        cell_id = cell.get("id")
        exercise_id = exercise_meta(cell)
        if exercise_id is None and cell_id and _CELL_ID_RE.match(cell_id):
            exercise_id = ".".join(_CELL_ID_RE.match(cell_id).groups())
        if exercise_id is None:
            raise ValueError(f"{name}: solution cell {cell_id or f'#{index}'} has no exercise id "
                             f"(set metadata {{'dlbook': {{'exercise': '1.2'}}}} and cell id "
                             f"'exercise-1-2')")
        found.append(ExerciseCell(index, cell_id, exercise_id, cell.get("source", "")))
    ids = [ex.exercise_id for ex in found]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise ValueError(f"{name}: more than one solution cell for exercise(s) {duplicates}")
    return found


def setup_cells(nb) -> list[int]:
    """Indexes of the setup cell(s): tagged ``setup``, else the first code cell."""
    tagged = [i for i, cell in enumerate(nb.cells)
              if cell.get("cell_type") == "code" and SETUP_TAG in tags(cell)]
    if tagged:
        return tagged
    first = next((i for i, cell in enumerate(nb.cells) if cell.get("cell_type") == "code"), None)
    return [] if first is None else [first]


def solution_blocks(source: str) -> list[tuple[int, int, str]]:
    """(begin line, end line, indentation) of every marker pair in a cell's source.

    Raises ValueError (without a location; callers add it) when the markers
    are missing or unbalanced.
    """
    lines = source.split("\n")
    blocks, begin = [], None
    for number, line in enumerate(lines):
        match = _BEGIN_RE.match(line)
        if match:
            if begin is not None:
                raise ValueError(f"'{BEGIN_MARKER}' on line {number + 1} before the "
                                 f"'{END_MARKER}' of the block opened on line {begin[0] + 1}")
            begin = (number, match.group("indent"))
        elif _END_RE.match(line):
            if begin is None:
                raise ValueError(f"'{END_MARKER}' on line {number + 1} without a "
                                 f"'{BEGIN_MARKER}' before it")
            blocks.append((begin[0], number, begin[1]))
            begin = None
    if begin is not None:
        raise ValueError(f"'{BEGIN_MARKER}' on line {begin[0] + 1} is never closed by "
                         f"'{END_MARKER}'")
    if not blocks:
        raise ValueError(f"no '{BEGIN_MARKER}' / '{END_MARKER}' markers")
    return blocks


def replace_solutions(source: str, stub_line: str) -> str:
    """The source with every marked block (markers included) replaced by ``stub_line``.

    The stub keeps the indentation of the BEGIN marker.
    """
    lines = source.split("\n")
    for begin, end, indent in reversed(solution_blocks(source)):
        lines[begin:end + 1] = [indent + stub_line]
    return "\n".join(lines)


def solution_body(source: str) -> list[str]:
    """The lines strictly between the markers (what the student edition removes)."""
    lines = source.split("\n")
    body = []
    for begin, end, _ in solution_blocks(source):
        body.extend(lines[begin + 1:end])
    return body


def chapter_notebooks(book_dir) -> list[Path]:
    """Every chapter notebook: book/[0-9][0-9]_*.ipynb, sorted."""
    return sorted(Path(book_dir).glob("[0-9][0-9]_*.ipynb"))
