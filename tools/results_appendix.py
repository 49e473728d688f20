"""The results appendix and the chapter-time table, made from the executed chapters.

Every checkpoint a chapter runs prints its line and leaves its record in the
metadata of an empty output (dlbook.checkpoint.METADATA_KEY). The book
build replaces the marker ``<!-- results -->`` of book/results.md with one
table per chapter built from those records: what was measured, the value, what
it was compared with, the tolerance, and the machine the chapter ran on. The
marker ``<!-- chapter-times -->`` of book/instructors.md becomes a table of each
chapter's execution time, from the executed copies' metadata. Nothing is read
from the prose.
"""
from __future__ import annotations

import re
from pathlib import Path

import nbformat

from dlbook.checkpoint import METADATA_KEY, Record, format_value, tolerance_text
from dlbook.coursework.workload import chapter_title

import executed

RESULTS_MARKER = "<!-- results -->"
TIMES_MARKER = "<!-- chapter-times -->"
#: A code cell that calls the checkpoint helper; it must leave at least one record.
CHECKPOINT_CALL = re.compile(r"\bcheckpoint\.(?:close|below|above|between|holds)\(")
#: A cell whose checks run only at full scale (DLBOOK_SCALE=full), which the book never runs.
FULL_SCALE_ONLY = re.compile(r"""\bscale\(\)\s*==\s*["']full["']""")


def cell_records(cell) -> list[Record]:
    """The checkpoint records among a code cell's outputs, in order."""
    return [Record(**output["metadata"][METADATA_KEY]) for output in cell.get("outputs", [])
            if output.get("output_type") == "display_data" and METADATA_KEY in output.get("metadata", {})]


def records(notebook) -> list[tuple[str, Record]]:
    """(cell id, record) for every checkpoint an executed chapter ran."""
    return [(cell.get("id", ""), record) for cell in notebook.cells if cell.cell_type == "code"
            for record in cell_records(cell)]


def silent_checkpoint_cells(notebook) -> list[str]:
    """Ids of code cells that call the checkpoint helper but carry no record in their outputs.

    A cell whose checks are guarded by ``runtime.scale() == "full"`` is exempt: at the book's
    default scale it runs none of them.
    """
    return [cell.get("id", "?") for cell in notebook.cells
            if cell.cell_type == "code" and CHECKPOINT_CALL.search(cell.source)
            and not FULL_SCALE_ONLY.search(cell.source) and not cell_records(cell)]


def _markdown_text(text: str) -> str:
    """Plain text safe inside a Markdown table cell (every punctuation that Markdown reads is escaped)."""
    text = " ".join(str(text).split())
    return re.sub(r"([\\`*_{}\[\]<>|$~#!])", r"\\\1", text)


def compared_with(record: Record) -> tuple[str, str]:
    """(reference or bound, tolerance) as the table shows them."""
    if record.relation == "close":
        return format_value(record.reference), tolerance_text(record.reference, record.rtol, record.atol)
    if record.relation == "below":
        return f"≤ {format_value(record.high)}", "bound"
    if record.relation == "above":
        return f"≥ {format_value(record.low)}", "bound"
    if record.relation == "between":
        return f"[{format_value(record.low)}, {format_value(record.high)}]", "interval"
    return "true", "exact"


def machine_text(meta: dict) -> str:
    machine = meta.get("machine") or {}
    if not machine:
        return "machine not recorded"
    return (f"{machine.get('device', '?')}; {machine.get('cpu', '?')}, {machine.get('cores', '?')} cores; "
            f"Python {machine.get('python', '?')}, torch {machine.get('torch', '?')}, "
            f"NumPy {machine.get('numpy', '?')}")


def chapter_table(notebook) -> str:
    lines = ["| # | checkpoint | measured | compared with | tolerance |", "|---:|---|---:|---:|---|"]
    for number, (_, record) in enumerate(records(notebook), start=1):
        label = record.label + (f" ({record.detail})" if record.detail else "")
        measured = str(record.measured).lower() if record.relation == "holds" else format_value(record.measured)
        reference, tolerance = compared_with(record)
        lines.append(f"| {number} | {_markdown_text(label)} | {measured} | {reference} | {tolerance} |")
    return "\n".join(lines)


def results_section(path: Path) -> str:
    """The appendix section of one executed chapter."""
    notebook = nbformat.read(path, as_version=4)
    meta = notebook.metadata.get(executed.META_KEY, {})
    count = len(records(notebook))
    return (f"## {chapter_title(path)}\n\n"
            f"{count} checkpoints, run by {{doc}}`{path.stem}` in {meta.get('seconds', '?')} s on: "
            f"{machine_text(meta)}.\n\n{chapter_table(notebook)}\n")


def results_page(text: str, executed_chapters: list[Path]) -> str:
    """book/results.md with its marker replaced by every chapter's table."""
    if RESULTS_MARKER not in text:
        raise ValueError(f"the results page has no {RESULTS_MARKER} marker")
    sections = "\n".join(results_section(path) for path in executed_chapters)
    return text.replace(RESULTS_MARKER, sections)


def times_table(executed_chapters: list[Path]) -> str:
    lines = ["| chapter | checkpoints | execution time |", "|---|---:|---:|"]
    total = 0.0
    for path in executed_chapters:
        notebook = nbformat.read(path, as_version=4)
        seconds = float(notebook.metadata.get(executed.META_KEY, {}).get("seconds", float("nan")))
        total += seconds
        lines.append(f"| {{doc}}`{chapter_title(path)} <{path.stem}>` | {len(records(notebook))} | {seconds:.0f} s |")
    lines.append(f"| all chapters | | {total / 60:.1f} min |")
    return "\n".join(lines)


def with_chapter_times(text: str, executed_chapters: list[Path]) -> str:
    """book/instructors.md with its chapter-times marker replaced (unchanged without the marker)."""
    return text.replace(TIMES_MARKER, times_table(executed_chapters)) if TIMES_MARKER in text else text
