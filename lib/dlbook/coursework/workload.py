"""What the exercises ask of students: per chapter, the exercises, their kinds, time and points.

The instructors' page shows this table (the book build puts it in place of
the marker ``<!-- workload -->``), and ``python -m dlbook workload`` prints it.
Everything comes from the registry, so the page can never disagree with the
checks the grader runs.
"""
from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from ..exercises import core
from .notebook import chapter_notebooks, exercise_cells, read_notebook

#: The marker in book/instructors.md that the table replaces.
MARKER = "<!-- workload -->"


class ChapterWorkload(NamedTuple):
    """The exercises of one chapter, as the registry describes them."""

    chapter: int
    title: str
    exercises: tuple[core.Exercise, ...]

    @property
    def minutes(self) -> int:
        return sum(ex.minutes for ex in self.exercises)

    @property
    def points(self) -> float:
        return sum(ex.points for ex in self.exercises)


def chapter_title(notebook: Path) -> str:
    """The chapter's title, from the first heading of its first cell ("16. Failures of ...")."""
    first = read_notebook(notebook).cells[0].source.strip().splitlines()[0]
    return first.lstrip("#").strip()


def workloads(book_dir) -> list[ChapterWorkload]:
    """Every chapter's exercises, in book order, from the notebooks and the registry."""
    rows = []
    for notebook in chapter_notebooks(book_dir):
        ids = [cell.exercise_id for cell in exercise_cells(read_notebook(notebook), notebook.name)]
        exercises = tuple(core.get_exercise(eid) for eid in ids)
        rows.append(ChapterWorkload(int(notebook.name[:2]), chapter_title(notebook), exercises))
    return rows


def _kinds(exercises) -> str:
    counts = {kind: sum(ex.kind == kind for ex in exercises) for kind in core.KINDS}
    return ", ".join(f"{count} {kind}" for kind, count in counts.items() if count)


def workload_table(book_dir) -> str:
    """The Markdown table of the instructors' page: one row per chapter, then the total."""
    rows = workloads(book_dir)
    lines = ["| chapter | exercises | kinds | difficulty | student time | points |",
             "|---|---|---|---|---|---|"]
    for row in rows:
        stars = " ".join(ex.stars for ex in row.exercises)
        lines.append(f"| {row.title} | {len(row.exercises)} | {_kinds(row.exercises)} | {stars} | "
                     f"about {row.minutes} min | {row.points:g} |")
    total_minutes = sum(row.minutes for row in rows)
    lines.append(f"| **all chapters** | {sum(len(row.exercises) for row in rows)} | | | "
                 f"about {total_minutes / 60:.1f} h | {sum(row.points for row in rows):g} |")
    return "\n".join(lines)


def exercise_table(book_dir) -> str:
    """One line per exercise: id, title, kind, stars, minutes, points (for ``dlbook workload``)."""
    lines = []
    for row in workloads(book_dir):
        for ex in row.exercises:
            lines.append(f"{ex.id:>6}  {ex.kind:<10} {ex.stars:<3} {ex.minutes:>3} min  "
                         f"{ex.points:g} pt  {ex.title}")
    return "\n".join(lines)


def with_workload(markdown: str, book_dir) -> str:
    """The instructors' page with the marker replaced by the table."""
    if MARKER not in markdown:
        raise ValueError(f"the instructors' page has no {MARKER} marker for the workload table")
    return markdown.replace(MARKER, workload_table(book_dir))
