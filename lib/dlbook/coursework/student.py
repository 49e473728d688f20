"""The student edition: each chapter with its reference solutions replaced by stubs.

In each solution cell (tag ``solution``) the lines from ``### BEGIN SOLUTION``
to ``### END SOLUTION`` become one line
``raise NotImplementedError("Exercise 1.2: <hint>")`` at the markers'
indentation; the tags ``solution`` and ``hide-input`` go (the student must see
the cell), the cell id and the ``dlbook`` metadata stay (the grader finds the
cell by them). All outputs and execution counts are cleared; everything else
is unchanged.

The student HTML book is made from the executed reference chapters by
:func:`student_book_notebook` (stubs in place of solutions, the outputs of
exercise and check cells dropped, the rest of the outputs kept), so nothing
is executed twice. :func:`student_edition_problems` proves, without running
it, that a student edition runs from top to bottom whenever its reference
does.
"""
from __future__ import annotations

import ast
import copy
import json
import re
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
    solution_blocks,
)

GENERIC_HINT = "replace this line with your code"

#: Sentences that are true of the reference book and false of the student edition, with
#: their student-edition wording (matched with any whitespace between the words).
STUDENT_WORDING = {
    "The reference solutions are in the book, folded away under each exercise; try first.":
        "This is the student edition: each exercise cell holds a stub for you to fill in, and "
        "your instructor has the reference solutions.",
    "(the reference solution is folded away in the book: try first)":
        "(write your solution in the exercise cell, in place of the stub)",
}


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
            cell.metadata.setdefault("dlbook", {})["exercise"] = ex.exercise_id  # how the grader finds the stub
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


# ---------------------------------------------------------------------------
# The student HTML book, from the executed reference chapters
# ---------------------------------------------------------------------------

def student_wording(markdown: str) -> str:
    """Markdown with the reference edition's sentences about solutions reworded for students."""
    for reference, student in STUDENT_WORDING.items():
        pattern = r"\s+".join(re.escape(word) for word in reference.split())
        markdown = re.sub(pattern, student.replace("\\", "\\\\"), markdown)
    return markdown


def is_check_cell(cell) -> bool:
    """A code cell whose code is a call of dlbook.exercises.check."""
    return cell.get("cell_type") == "code" and "dlbook.exercises.check(" in cell.get("source", "")


def student_book_notebook(nb, name: str = "notebook"):
    """An executed reference chapter as the student HTML book shows it.

    Solutions become stubs (as in the student edition) and lose their
    outputs, check cells lose theirs (they reported on the reference), markdown
    is reworded where it speaks of folded solutions; every other output stays.
    """
    stubbed = student_notebook(nb, name)
    for original, cell in zip(nb.cells, stubbed.cells):
        if cell.get("cell_type") == "markdown":
            cell.source = student_wording(cell.source)
        elif cell.get("cell_type") == "code" and not is_check_cell(cell) and cell.source == original.source:
            cell.outputs = copy.deepcopy(original.outputs)
            cell.execution_count = original.get("execution_count")
    stubbed.metadata.pop("dlbook_executed", None)
    return stubbed


#: A cross-reference to the instructors' page, which the student book leaves out.
_INSTRUCTORS_LINK = re.compile(r"\{doc\}`(?:[^`<]*<)?instructors>?`")


def student_book_page(markdown: str) -> str:
    """A markdown page of the book (intro) as the student book shows it: reworded, and with links to
    the instructors' page (not part of the student book) turned into plain text."""
    return _INSTRUCTORS_LINK.sub("the instructors' page of the full book", student_wording(markdown))


# ---------------------------------------------------------------------------
# A student edition runs whenever its reference does: the argument, checked
# ---------------------------------------------------------------------------

def _top_level_names(tree: ast.Module) -> set[str]:
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        else:
            names.update(n.id for n in ast.walk(node) if isinstance(n, ast.Name)
                         and isinstance(n.ctx, ast.Store))
    return names


def _loaded_names(source: str) -> set[str]:
    try:
        tree = ast.parse(source)
    except SyntaxError:  # IPython magics: fall back to a word scan
        return set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", source))
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def student_edition_problems(nb, name: str = "notebook") -> list[str]:
    """Why the student edition of ``nb`` might not run top to bottom; empty if it provably does.

    The student edition differs from the reference only inside the marked
    blocks. If (1) every marked block lies inside the body of a function
    defined at the top level of its solution cell, the edition's cells bind
    the same names as the reference's and have the same side effects until a
    stubbed function is called; if (2) the only cells that use the names a
    solution cell binds, after it, are check cells (which report a failure instead of
    raising outside strict mode), no later cell calls a stub. So, given that
    the reference runs top to bottom, so does the student edition, and only
    its check cells report failures.
    """
    problems = []
    solution_indexes = set()
    solution_names: dict[str, tuple[str, int]] = {}  # name -> (exercise id, index of its cell)
    for ex in exercise_cells(nb, name):
        solution_indexes.add(ex.index)
        label = f"{name}: exercise {ex.exercise_id}"
        try:
            tree = ast.parse(ex.source)
        except SyntaxError as err:
            problems.append(f"{label}: the solution cell does not parse ({err.msg})")
            continue
        # (def line, first line of the next top-level statement, indentation of the def)
        spans = [(node.lineno, tree.body[k + 1].lineno if k + 1 < len(tree.body) else float("inf"),
                  node.col_offset) for k, node in enumerate(tree.body) if isinstance(node, ast.FunctionDef)]
        for begin, end, indent in solution_blocks(ex.source):
            # Markers are comments (not in the AST): lines begin + 1 .. end + 1, 1-based.
            inside = any(first < begin + 1 and end + 1 < following and len(indent) > column
                         for first, following, column in spans)
            if not inside:
                problems.append(f"{label}: the block on lines {begin + 1}-{end + 1} is not inside "
                                f"the body of a top-level function")
        for bound in _top_level_names(tree):
            solution_names.setdefault(bound, (ex.exercise_id, ex.index))
    for index, cell in enumerate(nb.cells):
        if cell.get("cell_type") != "code" or index in solution_indexes or is_check_cell(cell):
            continue
        for bound in sorted(_loaded_names(cell.get("source", ""))):
            exercise_id, defined_at = solution_names.get(bound, (None, len(nb.cells)))
            if defined_at < index:  # a later cell that would call a stub
                problems.append(f"{name}: cell {cell.get('id') or f'#{index}'} uses {bound}, which "
                                f"the solution of exercise {exercise_id} defines")
    return problems
