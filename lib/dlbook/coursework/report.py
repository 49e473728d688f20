"""The grader's outputs: grades.csv, grades_summary.csv, grades.json and a printed table.

Everything a submission controls (its file name, the messages of its
exceptions) is cleaned before it is written: control characters go (no
terminal escape codes), and a CSV field that a spreadsheet would read as a
formula (starting with ``= + - @``, a tab or a carriage return) gets a
leading apostrophe.
"""
from __future__ import annotations

import csv
import json
import time
import unicodedata
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass
class Row:
    """One student's result on one exercise."""

    student: str
    exercise: str
    points: float
    max_points: float
    passed: bool
    reason: str


def printable(text: str, limit: int = 1000) -> str:
    """``text`` on one line without control or bidirectional-format characters."""
    text = "".join(" " if ch in "\n\r\t" else ch for ch in str(text)[:limit])
    return "".join(ch for ch in text if unicodedata.category(ch) not in ("Cc", "Cf", "Cs", "Co"))


def csv_safe(text: str) -> str:
    """A CSV field no spreadsheet evaluates as a formula."""
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def fmt(points) -> str:
    """Points without a useless ".0"."""
    return str(int(points)) if float(points).is_integer() else f"{points:g}"


def summary_path(out_csv: Path) -> Path:
    return out_csv.with_name(f"{out_csv.stem}_summary.csv")


def write_outputs(rows: list[Row], exercises: list[dict], out_csv: Path, *, chapter: str, files: dict,
                  timings: dict, settings: dict, seconds: float) -> None:
    """Write the CSV, the summary CSV and the JSON file beside each other.

    ``exercises`` holds {"id", "function", "points"} per exercise; ``files`` maps
    each student to the submitted file's name.
    """
    out_csv.parent.mkdir(parents=True, exist_ok=True)
    exercise_ids = [ex["id"] for ex in exercises]
    with open(out_csv, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["student", "exercise", "points", "max_points", "passed", "reason"])
        for row in rows:
            writer.writerow([csv_safe(row.student), csv_safe(row.exercise), fmt(row.points),
                             fmt(row.max_points), row.passed, csv_safe(row.reason)])
    students = list(dict.fromkeys(row.student for row in rows))
    by_student = {s: {r.exercise: r for r in rows if r.student == s} for s in students}
    with open(summary_path(out_csv), "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["student", *exercise_ids, "total", "max_total"])
        for student in students:
            mine = by_student[student]
            writer.writerow([csv_safe(student), *(fmt(mine[e].points) for e in exercise_ids),
                             fmt(sum(r.points for r in mine.values())),
                             fmt(sum(r.max_points for r in mine.values()))])
    report = {
        "chapter": chapter,
        "graded_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        **settings,
        "seconds": round(seconds, 2),
        "exercises": exercises,
        "students": {
            student: {
                "file": files.get(student),
                "total": sum(r.points for r in by_student[student].values()),
                "max_total": sum(r.max_points for r in by_student[student].values()),
                "seconds": timings.get(student),
                "exercises": {e: asdict(by_student[student][e]) for e in exercise_ids},
            } for student in students
        },
    }
    out_csv.with_suffix(".json").write_text(json.dumps(report, indent=1, ensure_ascii=False),
                                             encoding="utf-8")


def summary_table(rows: list[Row], exercise_ids: list[str]) -> str:
    """A readable table: one line per student, ✓/✗ per exercise, total; then the reasons."""
    students = list(dict.fromkeys(row.student for row in rows))
    width = max([len("student")] + [len(s) for s in students])
    cols = [max(len(e), 3) for e in exercise_ids]
    head = "  ".join([f"{'student':<{width}}", *(f"{e:^{c}}" for e, c in zip(exercise_ids, cols)), "total"])
    lines = [head, "-" * len(head)]
    failures = []
    for student in students:
        mine = {r.exercise: r for r in rows if r.student == student}
        marks = [f"{'✓' if mine[e].passed else '✗':^{c}}" for e, c in zip(exercise_ids, cols)]
        total = sum(r.points for r in mine.values())
        max_total = sum(r.max_points for r in mine.values())
        lines.append("  ".join([f"{student:<{width}}", *marks, f"{fmt(total)}/{fmt(max_total)}"]))
        failures += [f"  {student:<{width}}  {e}: {mine[e].reason}" for e in exercise_ids
                     if not mine[e].passed or "[" in mine[e].reason]
    if failures:
        lines += ["", "Reasons:", *failures]
    return "\n".join(lines)
