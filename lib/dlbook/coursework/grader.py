"""Grade a folder of submitted notebooks against a chapter's checks.

For each submission (``*.ipynb``; the student's name is the file stem) the
grader builds a *grading notebook* from trusted parts only:

1. a preamble it writes itself, which captures the checks from the dlbook
   registry (dlbook.coursework.recorder) before any submitted code runs;
2. the setup cell(s) of the REFERENCE chapter (tag ``setup``);
3. for each exercise, in the reference's order: the submission's exercise
   cell (found by cell id, else by ``dlbook.exercise`` metadata, else by the
   cell that defines the function), then a trusted record cell that runs the
   captured check on the student's function and appends a JSON line to a
   results file.

Nothing else of the submission runs: its check cells, prints and other cells
are ignored, so a score never comes from what the submission prints, and
reordered cells do not matter. The notebook runs with nbclient in a fresh
kernel, in a subprocess, with a time limit per cell (the kernel is
interrupted) and per notebook (runner and kernel are killed). An exercise
cell must run without error: a cell that raises or times out scores zero
even if it defined the function. If the kernel dies or cannot be interrupted,
the remaining exercises are graded in a fresh kernel while time is left.

Outputs: ``grades.csv`` (student, exercise, points, max_points, passed,
reason: one row per student and exercise), ``grades_summary.csv`` (one row
per student: points per exercise and total), ``grades.json`` (everything,
machine-readable) and a table printed to stdout.
"""
from __future__ import annotations

import csv
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

import nbformat

from ..exercises import core
from .notebook import exercise_cells, setup_cells
from .runner import ROLE_KEY

#: The runner executes each grading notebook in its own process. It is run by
#: path, so that its start-up does not import torch through the dlbook package.
RUNNER = Path(__file__).with_name("runner.py")
#: Exercise cells that mention these are flagged "review" (not penalised).
SUSPICIOUS = re.compile(r"dlbook\.exercises|from\s+dlbook\s+import\s+exercises|_dlbook|\bgc\b|"
                        r"sys\.modules|builtins|__code__|__closure__|__globals__|globals\(\)|"
                        r"setattr\(|importlib|inspect\.|os\.kill|signal\.")


@dataclass
class Row:
    """One student's result on one exercise."""

    student: str
    exercise: str
    points: float
    max_points: float
    passed: bool
    reason: str


@dataclass
class _RefExercise:
    exercise_id: str
    cell_id: str | None
    function_name: str
    points: float


@dataclass
class Reference:
    """What the grader takes from the reference chapter: setup code and exercises."""

    path: Path
    setup_sources: list[str]
    exercises: list[_RefExercise]

    @classmethod
    def load(cls, path) -> "Reference":
        path = Path(path)
        with open(path, encoding="utf-8") as handle:
            nb = nbformat.read(handle, as_version=4)
        found = exercise_cells(nb, str(path), tagged_only=False)
        if not found:
            raise ValueError(f"{path}: no exercise cells (cells tagged 'solution' with "
                             f"dlbook.exercise metadata) to grade")
        exercises = []
        for cell in found:
            ex = core.get_exercise(cell.exercise_id)  # ValueError if the chapter has no check
            exercises.append(_RefExercise(ex.id, cell.cell_id, ex.function_name, ex.points))
        setup = [nb.cells[i].source for i in setup_cells(nb)]
        return cls(path, setup, exercises)


@dataclass
class _Item:
    """An exercise to grade in one submission, and what happened to it."""

    ref: _RefExercise
    source: str | None = None
    passed: bool = False
    points: float = 0
    reason: str | None = None  # None while unresolved
    cases: str = ""
    flags: list[str] = field(default_factory=list)


# ---------------------------------------------------------------------------
# Reading a submission
# ---------------------------------------------------------------------------

def _read_submission(path: Path):
    """The notebook, or raise ValueError with a short reason."""
    try:
        data = path.read_bytes()
    except OSError as err:
        raise ValueError(f"cannot read the file ({err.strerror})") from None
    if not data.strip():
        raise ValueError("the file is empty")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("the file is not UTF-8 text") from None
    try:
        data = json.loads(text)
    except ValueError as err:
        raise ValueError(f"not valid JSON ({err})") from None
    if not isinstance(data, dict) or not isinstance(data.get("cells", data.get("worksheets")), list):
        raise ValueError("the JSON is not a notebook (it has no list of cells)")
    try:
        nb = nbformat.reads(text, as_version=4)
    except Exception as err:  # validation errors, anything odd
        message = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ValueError(f"{type(err).__name__}: {message[:150]}") from None
    cells = nb.get("cells") if isinstance(nb, dict) else None
    if not isinstance(cells, list) or not all(isinstance(c, dict) for c in cells):
        raise ValueError("the JSON has no list of cells")
    return nb


def _find_cell(cells, ref: _RefExercise):
    """The submission's cell for an exercise: by id, by metadata, by function definition."""
    code = [c for c in cells if c.get("cell_type") == "code" and isinstance(c.get("source"), str)]
    if ref.cell_id:
        for cell in code:
            if cell.get("id") == ref.cell_id:
                return cell
    for cell in code:
        meta = cell.get("metadata", {}).get("dlbook")
        if isinstance(meta, dict) and meta.get("exercise") == ref.exercise_id:
            return cell
    pattern = re.compile(rf"^\s*def\s+{re.escape(ref.function_name)}\s*\(", re.MULTILINE)
    for cell in code:
        if pattern.search(cell["source"]):
            return cell
    return None


# ---------------------------------------------------------------------------
# Building and running the grading notebook
# ---------------------------------------------------------------------------

def _grading_notebook(reference: Reference, items: list[_Item], results_path: Path):
    """The trusted notebook for ``items``; returns it and the role of each cell."""
    recorder = f"_dlbook_record_{secrets.token_hex(8)}"
    ids = [item.ref.exercise_id for item in items]
    preamble = (
        "# dlbook grader preamble (trusted): capture the checks before any submitted code runs\n"
        "from dlbook.coursework.recorder import make_recorder as _dlbook_make_recorder\n"
        f"{recorder} = _dlbook_make_recorder({str(results_path)!r}, globals(), {ids!r})\n"
        "del _dlbook_make_recorder\n"
    )
    cells, roles = [], []

    def add(source, role, exercise_id=None):
        cell = nbformat.v4.new_code_cell(source)
        cell.metadata[ROLE_KEY] = {"role": role, "exercise": exercise_id}
        cells.append(cell)
        roles.append((role, exercise_id))

    add(preamble, "preamble")
    for source in reference.setup_sources:
        add(source, "setup")
    for item in items:
        add(item.source, "student", item.ref.exercise_id)
        add(f"{recorder}({item.ref.exercise_id!r})", "record", item.ref.exercise_id)
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb, roles


def _kill_group(pid: int | None) -> None:
    if not pid:
        return
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        pass


def _read_jsonl(path: Path) -> list[dict]:
    records = []
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return records
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            records.append(record)
    return records


@dataclass
class _Segment:
    statuses: dict          # cell index -> progress record
    started: set            # cell indexes that started
    results: list           # records from the results file
    finished: bool          # the runner executed every cell
    killed: bool            # the notebook deadline was reached
    log: str


def _run_segment(reference, items, budget, timeout_per_cell, keep_path=None) -> tuple[_Segment, list]:
    private = Path(tempfile.mkdtemp(prefix="dlbook-grade-"))
    try:
        work = private / "work"  # the kernel's cwd; the results file lives elsewhere
        work.mkdir()
        results_path = private / f"results-{secrets.token_hex(8)}.jsonl"
        progress_path = private / "progress.jsonl"
        nb, roles = _grading_notebook(reference, items, results_path)
        nb_path, executed_path = private / "grading.ipynb", private / "executed.ipynb"
        nbformat.write(nb, str(nb_path))
        env = {k: v for k, v in os.environ.items() if k != core.CHECKS_ENV}
        env["MPLBACKEND"] = "Agg"
        env.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
        cmd = [sys.executable, "-c",
               "import runpy, sys; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')", str(RUNNER),
               str(nb_path), str(executed_path), str(progress_path), str(int(timeout_per_cell)),
               str(work)]
        killed = False
        with open(private / "runner.log", "wb") as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                                    cwd=str(work), start_new_session=True)
            try:
                proc.wait(timeout=max(budget, 1))
            except subprocess.TimeoutExpired:
                killed = True
            finally:  # also when the grader itself is interrupted
                if proc.poll() is None:
                    _kill_group(proc.pid)
                    proc.wait()
        progress = _read_jsonl(progress_path)
        for record in progress:  # whatever the kernel left running (or spawned) goes
            if record.get("event") == "kernel":
                _kill_group(record.get("pid"))
        statuses, started = {}, set()
        for record in progress:
            if record.get("event") == "cell":
                statuses.setdefault(record.get("index"), record)
            elif record.get("event") == "start":
                started.add(record.get("index"))
        finished = any(r.get("event") == "done" for r in progress)
        log_text = (private / "runner.log").read_text(encoding="utf-8", errors="replace")
        if keep_path is not None and executed_path.exists():
            shutil.copy(executed_path, keep_path)
        segment = _Segment(statuses, started, _read_jsonl(results_path), finished, killed,
                           log_text[-2000:])
        return segment, roles
    finally:
        shutil.rmtree(private, ignore_errors=True)


def _error_text(status: dict) -> str:
    ename = status.get("ename") or "Error"
    evalue = status.get("evalue") or ""
    # "invalid syntax (3209573.py, line 3)" -> "invalid syntax (line 3)"
    evalue = re.sub(r"\((?:[^(),]*), line (\d+)\)", r"(line \1)", evalue)
    evalue = evalue.strip().splitlines()[0] if evalue.strip() else ""
    if len(evalue) > 200:
        evalue = evalue[:197] + "..."
    return f"{ename}: {evalue}" if evalue else ename


def _resolve(items, segment: _Segment, roles, timeout_per_cell, timeout_per_notebook):
    """Set the outcome of every item the segment decided; return those still pending."""
    timeout_per_cell, timeout_per_notebook = _fmt(timeout_per_cell), _fmt(timeout_per_notebook)
    index_of = {}
    for index, (role, exercise_id) in enumerate(roles):
        index_of[(role, exercise_id)] = index
    trusted = [i for i, (role, _) in enumerate(roles) if role in ("preamble", "setup")]
    for index in trusted:
        status = segment.statuses.get(index)
        if status is None or status.get("status") != "ok":
            if status is None and segment.killed:
                why = (f"time limit exceeded: the notebook's limit of {timeout_per_notebook} s "
                       "was reached before the exercises ran")
            elif status is None:
                why = ("grading error: the kernel did not start or the runner failed "
                       f"({segment.log.strip().splitlines()[-1] if segment.log.strip() else 'no log'})")
            elif roles[index][0] == "preamble":
                why = f"grading error: the grader's preamble failed ({_error_text(status)})"
            else:
                why = f"grading error: the chapter's setup cell failed ({_error_text(status)})"
            for item in items:
                item.reason = item.reason or why
            return []

    results = {}
    for record in segment.results:
        results.setdefault(record.get("exercise"), []).append(record)
    pending = []
    stopped = False
    for item in items:
        eid = item.ref.exercise_id
        fn = item.ref.function_name
        if stopped:
            pending.append(item)
            continue
        s_index, r_index = index_of[("student", eid)], index_of[("record", eid)]
        s_status, r_status = segment.statuses.get(s_index), segment.statuses.get(r_index)
        if s_status is None or (s_status.get("status") == "ok" and r_status is None):
            running = s_index if s_status is None else r_index
            if segment.killed and running in segment.started:
                where = "this exercise cell" if running == s_index else f"the check of {fn}"
                item.reason = (f"time limit exceeded: the notebook's limit of "
                               f"{timeout_per_notebook} s was reached while running {where}")
                stopped = True
            elif segment.killed:
                item.reason = (f"time limit exceeded: the notebook's limit of "
                               f"{timeout_per_notebook} s was reached before this exercise ran")
            else:  # the runner stopped (kernel died or was stuck) before this item
                pending.append(item)
                stopped = True
            continue
        state = s_status.get("status")
        if state == "timeout":
            item.reason = (f"time limit exceeded: the exercise cell ran longer than "
                           f"{timeout_per_cell} s")
        elif state == "stuck":
            item.reason = (f"time limit exceeded: the exercise cell ran longer than "
                           f"{timeout_per_cell} s and could not be interrupted")
        elif state == "dead":
            item.reason = "the kernel died while running the exercise cell (exit(), a crash or out of memory?)"
        elif state == "runner-error":
            item.reason = f"grading error while running the exercise cell: {_error_text(s_status)}"
        elif state != "ok":
            item.reason = _error_text(s_status)
        if state in ("stuck", "dead", "runner-error"):
            stopped = True
            continue
        if state != "ok":
            continue
        rstate = r_status.get("status")
        if rstate in ("timeout", "stuck"):
            item.reason = (f"time limit exceeded: checking {fn} took longer than "
                           f"{timeout_per_cell} s (an infinite loop?)")
            stopped = rstate == "stuck"
            continue
        if rstate in ("dead", "runner-error"):
            item.reason = (f"the kernel died while checking {fn}" if rstate == "dead" else
                           f"grading error while checking {fn}: {_error_text(r_status)}")
            stopped = True
            continue
        if rstate != "ok":
            item.reason = f"the check could not run: {_error_text(r_status)}"
            continue
        records = results.get(eid, [])
        if len(records) != 1:
            item.reason = ("no result was recorded" if not records
                           else "results were tampered with (more than one result recorded)")
            continue
        record = records[0]
        item.passed = record.get("passed") is True
        item.points = item.ref.points if item.passed else 0
        item.cases = str(record.get("cases", ""))
        reason = str(record.get("reason", ""))
        item.reason = f"passed ({item.cases} cases)" if item.passed else reason
    return pending


def grade_submission(path, reference: Reference, *, timeout_per_notebook: float = 120,
                     timeout_per_cell: float = 30, keep_dir=None) -> list[Row]:
    """Grade one submitted notebook; never raises because of the submission."""
    path = Path(path)
    student = path.stem
    items = [_Item(ref) for ref in reference.exercises]
    try:
        nb = _read_submission(path)
    except ValueError as err:
        return [Row(student, item.ref.exercise_id, 0, item.ref.points, False,
                    f"not a readable notebook: {err}") for item in items]
    for item in items:
        cell = _find_cell(nb.cells, item.ref)
        if cell is None:
            item.reason = "exercise cell missing (deleted?)"
        else:
            item.source = cell["source"]
            item.flags = sorted(set(SUSPICIOUS.findall(item.source)))
    deadline = time.monotonic() + timeout_per_notebook
    pending = [item for item in items if item.reason is None]
    attempt = 0
    while pending:
        attempt += 1
        budget = deadline - time.monotonic()
        if budget < 1:
            for item in pending:
                item.reason = (f"time limit exceeded: the notebook's limit of "
                               f"{_fmt(timeout_per_notebook)} s was reached before this exercise ran")
            break
        keep_path = None
        if keep_dir is not None:
            Path(keep_dir).mkdir(parents=True, exist_ok=True)
            keep_path = Path(keep_dir) / f"{student}{'' if attempt == 1 else f'.{attempt}'}.ipynb"
        segment, roles = _run_segment(reference, pending, budget, timeout_per_cell, keep_path)
        still = _resolve(pending, segment, roles, timeout_per_cell, timeout_per_notebook)
        if len(still) == len(pending):  # no progress: do not loop
            for item in still:
                item.reason = item.reason or "grading error: the notebook could not be run"
            break
        pending = still
    rows = []
    for item in items:
        reason = item.reason or "no result was recorded"
        if item.flags:
            reason += f" [review: the cell uses {', '.join(repr(f) for f in item.flags)}]"
        rows.append(Row(student, item.ref.exercise_id, item.points if item.passed else 0,
                        item.ref.points, item.passed, reason))
    return rows


# ---------------------------------------------------------------------------
# A folder of submissions
# ---------------------------------------------------------------------------

def _fmt(points) -> str:
    return str(int(points)) if float(points).is_integer() else f"{points:g}"


def grade_folder(submissions_dir, reference_notebook, out_csv, *, timeout_per_notebook: float = 120,
                 timeout_per_cell: float = 30, jobs: int = 1, keep_dir=None,
                 quiet: bool = False) -> list[Row]:
    """Grade every ``*.ipynb`` in ``submissions_dir``; write CSV, summary CSV and JSON.

    Returns one :class:`Row` per student and exercise (students sorted by
    name, exercises in the reference's order). ``keep_dir`` keeps the
    executed grading notebooks for inspection.
    """
    submissions_dir, out_csv = Path(submissions_dir), Path(out_csv)
    if not submissions_dir.is_dir():
        raise ValueError(f"submissions_dir {submissions_dir} is not a folder")
    reference = Reference.load(reference_notebook)
    paths = sorted(p for p in submissions_dir.glob("*.ipynb") if p.is_file())
    if not paths and not quiet:
        print(f"no submissions (*.ipynb) in {submissions_dir}")
    started = time.monotonic()
    timings = {}

    def one(path):
        t0 = time.monotonic()
        try:
            rows = grade_submission(path, reference, timeout_per_notebook=timeout_per_notebook,
                                    timeout_per_cell=timeout_per_cell, keep_dir=keep_dir)
        except Exception as err:  # a grader bug must not lose the other students
            rows = [Row(path.stem, ex.exercise_id, 0, ex.points, False,
                        f"grading error: {type(err).__name__}: {err}") for ex in reference.exercises]
        timings[path.stem] = round(time.monotonic() - t0, 2)
        if not quiet:
            total = sum(r.points for r in rows)
            print(f"graded {path.stem}: {_fmt(total)}/{_fmt(sum(r.max_points for r in rows))} "
                  f"({timings[path.stem]:.1f} s)", flush=True)
        return rows

    with ThreadPoolExecutor(max_workers=max(1, int(jobs))) as pool:
        per_student = list(pool.map(one, paths))
    rows = [row for student_rows in per_student for row in student_rows]
    _write_outputs(rows, reference, out_csv, timings, time.monotonic() - started,
                   timeout_per_notebook, timeout_per_cell)
    if not quiet:
        print(summary_table(rows, [ex.exercise_id for ex in reference.exercises]))
        print(f"wrote {out_csv}, {_summary_path(out_csv)} and {out_csv.with_suffix('.json')}")
    return rows


def _summary_path(out_csv: Path) -> Path:
    return out_csv.with_name(f"{out_csv.stem}_summary.csv")


def _write_outputs(rows, reference, out_csv: Path, timings, seconds, timeout_per_notebook,
                   timeout_per_cell) -> None:
    out_csv.parent.mkdir(parents=True, exist_ok=True)
    exercise_ids = [ex.exercise_id for ex in reference.exercises]
    with open(out_csv, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["student", "exercise", "points", "max_points", "passed", "reason"])
        for row in rows:
            writer.writerow([row.student, row.exercise, _fmt(row.points), _fmt(row.max_points),
                             row.passed, row.reason])
    students = list(dict.fromkeys(row.student for row in rows))
    by_student = {s: {r.exercise: r for r in rows if r.student == s} for s in students}
    with open(_summary_path(out_csv), "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["student", *exercise_ids, "total", "max_total"])
        for student in students:
            mine = by_student[student]
            writer.writerow([student, *(_fmt(mine[e].points) for e in exercise_ids),
                             _fmt(sum(r.points for r in mine.values())),
                             _fmt(sum(r.max_points for r in mine.values()))])
    report = {
        "chapter": str(reference.path),
        "graded_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "timeout_per_notebook": timeout_per_notebook,
        "timeout_per_cell": timeout_per_cell,
        "seconds": round(seconds, 2),
        "exercises": [{"id": ex.exercise_id, "function": ex.function_name, "points": ex.points}
                      for ex in reference.exercises],
        "students": {
            student: {
                "total": sum(r.points for r in by_student[student].values()),
                "max_total": sum(r.max_points for r in by_student[student].values()),
                "seconds": timings.get(student),
                "exercises": {e: asdict(by_student[student][e]) for e in exercise_ids},
            } for student in students
        },
    }
    out_csv.with_suffix(".json").write_text(json.dumps(report, indent=1, ensure_ascii=False),
                                             encoding="utf-8")


def summary_table(rows, exercise_ids) -> str:
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
        lines.append("  ".join([f"{student:<{width}}", *marks, f"{_fmt(total)}/{_fmt(max_total)}"]))
        failures += [f"  {student:<{width}}  {e}: {mine[e].reason}" for e in exercise_ids
                     if not mine[e].passed or "[review" in mine[e].reason]
    if failures:
        lines += ["", "Reasons:", *failures]
    return "\n".join(lines)
