"""The ``dlbook`` command line: ``python -m dlbook COMMAND ...`` (or ``dlbook COMMAND``).

Commands:
  student   write the student edition of chapters (solutions replaced by stubs)
  grade     grade a folder of submitted notebooks against a chapter's checks
  bench     time each chapter end to end and each interactive figure's update
  workload  list every exercise with its kind, difficulty, time and points

Adding a command: write ``_add_NAME(subparsers)`` that adds a subparser and
sets ``func`` (a function taking the parsed arguments and returning an exit
code), and append it to :data:`COMMANDS`.
"""
from __future__ import annotations

import argparse
import sys


def _add_student(subparsers) -> None:
    parser = subparsers.add_parser(
        "student", help="write the student edition of chapters",
        description="Write the student edition of chapter notebooks: every solution cell's "
                    "body becomes a stub that raises NotImplementedError with a hint; outputs "
                    "are cleared; everything else is kept.")
    parser.add_argument("chapters", nargs="*", metavar="CHAPTER",
                        help="notebook path or slug such as 01_neurons (default: every "
                             "BOOK/[0-9][0-9]_*.ipynb)")
    parser.add_argument("--out", default="student", help="output folder (default: %(default)s)")
    parser.add_argument("--book", default="book",
                        help="folder of the chapter notebooks (default: %(default)s)")
    parser.set_defaults(func=_run_student)


def _run_student(args) -> int:
    from .student import write_student_editions

    try:
        written = write_student_editions(args.book, args.out, args.chapters or None)
    except ValueError as err:
        print(f"dlbook student: error: {err}", file=sys.stderr)
        return 2
    for path in written:
        print(f"wrote {path}")
    return 0


def _add_grade(subparsers) -> None:
    from .sandbox import UNSAFE_RISK, Limits
    from .submission import MAX_BYTES

    parser = subparsers.add_parser(
        "grade", help="grade a folder of submitted notebooks",
        description="Grade every *.ipynb in SUBMISSIONS_DIR: each submission's exercise cells run "
                    "in a sandbox (bubblewrap), after the chapter's setup cells; the chapter's checks "
                    "run in the grader and call the student's functions through a channel that "
                    "carries plain values. Writes a CSV with one row per student and exercise, a "
                    "summary CSV and a JSON file, and prints a table. A broken or dishonest "
                    "submission scores zero on the affected exercises with the reason; it never "
                    "stops the grading.")
    parser.add_argument("submissions", metavar="SUBMISSIONS_DIR")
    parser.add_argument("--chapter", required=True,
                        help="the reference chapter notebook, with solutions (e.g. "
                             "book/01_neurons.ipynb)")
    parser.add_argument("--out", default="grades.csv",
                        help="CSV to write; NAME_summary.csv and NAME.json go beside it "
                             "(default: %(default)s)")
    parser.add_argument("--timeout", type=float, default=120,
                        help="time limit per notebook in seconds (default: %(default)s)")
    parser.add_argument("--cell-timeout", type=float, default=30,
                        help="time limit per exercise cell, and for the calls of one check, in "
                             "seconds (default: %(default)s)")
    parser.add_argument("--jobs", type=int, default=1,
                        help="submissions graded at the same time (default: %(default)s)")
    parser.add_argument("--memory-mb", type=int, default=Limits.memory_mb,
                        help="memory (address space) of each sandboxed process in MB "
                             "(default: %(default)s)")
    parser.add_argument("--max-size-mb", type=float, default=MAX_BYTES / 2**20,
                        help="larger submissions are not read (default: %(default)g)")
    parser.add_argument("--unsafe-no-sandbox", action="store_true",
                        help=f"grade without bubblewrap: {UNSAFE_RISK.removeprefix('--unsafe-no-sandbox ')}")
    parser.set_defaults(func=_run_grade)


def _run_grade(args) -> int:
    from .grader import SandboxUnavailable, grade_folder
    from .sandbox import Limits

    try:
        grade_folder(args.submissions, args.chapter, args.out, timeout_per_notebook=args.timeout,
                     timeout_per_cell=args.cell_timeout, jobs=args.jobs,
                     limits=Limits(memory_mb=args.memory_mb), max_bytes=int(args.max_size_mb * 2**20),
                     unsafe_no_sandbox=args.unsafe_no_sandbox)
    except (ValueError, OSError, SandboxUnavailable) as err:
        print(f"dlbook grade: error: {err}", file=sys.stderr)
        return 2
    return 0


def _add_bench(subparsers) -> None:
    parser = subparsers.add_parser(
        "bench", help="time each chapter and each interactive figure",
        description="Run chapters as the book build does (static figures, strict checks, one "
                    "thread), each in a fresh kernel, and print each chapter's end-to-end time "
                    "and each interactive figure's update time at its defaults.")
    parser.add_argument("chapters", nargs="*", metavar="CHAPTER",
                        help="notebook path or slug such as 01_neurons (default: all chapters)")
    parser.add_argument("--book", default="book",
                        help="folder of the chapter notebooks (default: %(default)s)")
    parser.add_argument("--json", default=None, help="also write the results to this JSON file")
    parser.set_defaults(func=_run_bench)


def _run_bench(args) -> int:
    from .bench import main as bench

    try:
        bench(args.book, args.chapters or None, args.json)
    except ValueError as err:
        print(f"dlbook bench: error: {err}", file=sys.stderr)
        return 2
    return 0


def _add_workload(subparsers) -> None:
    parser = subparsers.add_parser(
        "workload", help="list every exercise with its kind, difficulty, time and points",
        description="Print each chapter's exercises (kind, stars, estimated minutes, points) and "
                    "the per-chapter table of the instructors' page.")
    parser.add_argument("--book", default="book",
                        help="folder of the chapter notebooks (default: %(default)s)")
    parser.set_defaults(func=_run_workload)


def _run_workload(args) -> int:
    from .workload import exercise_table, workload_table

    print(exercise_table(args.book))
    print()
    print(workload_table(args.book))
    return 0


#: Every command's ``_add_...`` function, in the order --help lists them.
COMMANDS = [_add_student, _add_grade, _add_bench, _add_workload]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dlbook",
                                     description="Tools of the book Deep Learning by Experiment.")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for add in COMMANDS:
        add(subparsers)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
