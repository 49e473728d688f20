"""Grade a folder of submitted notebooks against a chapter's checks; no submitted code runs here.

For each submission (``*.ipynb``; the student's name is the file stem):

1. The path is checked (symbolic links, folders, special files and files
   over the size cap are reported, never opened) and the notebook is parsed
   in a child process with memory and time limits (:mod:`.submission`).
2. Each exercise of the reference chapter is looked up in the submission:
   the code cell with id ``exercise-N-k`` (the last one if the id repeats,
   which is reported), else the cell with ``dlbook.exercise`` metadata, else
   a cell that defines the function. Nothing else of the submission runs.
3. A worker starts in a sandbox (:mod:`.sandbox`): it runs the reference
   chapter's setup cells, then each exercise cell in the book's order.
4. After each exercise cell, that exercise's registered check runs HERE, in
   the grader, on a proxy of the student's function: each call sends the
   arguments to the worker, which calls the student's function and sends the
   result back (:mod:`.channel`: plain values only, never pickle). The check
   compares with expectations it computes itself. The exercise passes when
   every case passed (a check that ran no case fails).

If the worker dies or misses a time limit, the exercise it was on fails with
the reason, and the remaining exercises are graded in a fresh worker (the
exercise cells that ran cleanly before are run again first, so helpers
defined there still exist). Every status has one reason, in :data:`REASONS`;
the notes in brackets after a reason explain common mistakes (a solution
written in another cell, a helper the grader does not run, repeated cell
ids, a blocked library function named in the cell).

Threat model. Defended: a submission cannot see or change what decides its
score or anyone else's. Expected values, the checks and the reference
solutions never enter the worker (its copy of dlbook has no checks and no
grader); the worker sees no repository, no reference notebook, no other
submission and no output folder; it has no network; it can write only its
own scratch folder, with limits on memory, processes, file size, CPU and
time; every process it starts dies with it; what it prints or writes never
reaches the grades; its answers are decoded as plain values, so it cannot
run code in the grader. The library functions an exercise blocks raise
ShortcutError while that exercise's cell and calls run, as in the notebook.

Still out of reach:

- copying a blocked library function's source (or cloning its code object
  in an earlier cell): the block does not see it, the note only catches a
  cell that names the function;
- answers hard-coded for the cases a check sends (the checks' job: cases
  the text never shows), and plagiarism between students;
- the memory limit is per process: a submission may use up to the process
  limit times the memory limit in all, unless the grader itself runs in a
  cgroup (``systemd-run --scope -p MemoryMax=... -p TasksMax=...``);
- a grader run by root gives the worker its own user id but no user
  namespace, so the worker may still create one (kernel attack surface);
  bubblewrap, run by an ordinary user, forbids it where it can;
- attacks on the Linux kernel or on bubblewrap themselves.

Without bubblewrap (``unsafe_no_sandbox``) the expected values still never
reach the student's process, but a submission can read and change
everything the instructor can (other submissions, the repository, the
grades once written), use the network, and leave processes behind that do
so later: use it only for submissions you trust.

Outputs: ``grades.csv`` (student, exercise, points, max_points, passed,
reason: one row per submission and exercise), ``grades_summary.csv``,
``grades.json`` and a table printed to stdout (:mod:`.report`).
"""
from __future__ import annotations

import builtins
import os
import re
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import nbformat

from ..exercises import core
from . import channel
from .notebook import exercise_cells, setup_cells
from .report import Row, fmt, printable, summary_path, summary_table, write_outputs
from .sandbox import UNSAFE_RISK, Limits, Sandbox, SandboxUnavailable, WorkerDied, WorkerTimeout
from .submission import MAX_BYTES, Cell, NotANotebook, NotGradable, read_submission

#: Seconds each setup cell of the reference may take (imports are slow on a busy machine).
SETUP_TIMEOUT = 120

#: The reason for each way an exercise can end; fields in braces are filled in.
REASONS = {
    "passed": "passed ({cases} cases)",
    "failed": "{message}",
    "not-gradable": "not graded: {why}",
    "unreadable": "not a readable notebook: {why}",
    "missing": "exercise cell missing (deleted?)",
    "cell-error": "{error}",
    "cell-timeout": "time limit exceeded: the exercise cell ran longer than {cell_limit} s",
    "cell-died": "the worker died while running the exercise cell: {how}",
    "undefined": "function {function} not defined",
    "not-callable": "{function} is not a function (the exercise cell made it a {kind})",
    "out-of-time": "time limit exceeded: the notebook's limit of {notebook_limit} s was reached {when}",
    "setup-failed": "grading error: the chapter's setup cell failed ({error})",
    "setup-timeout": "grading error: the chapter's setup cell ran longer than {limit} s",
    "no-worker": "grading error: the sandbox did not start ({how})",
    "grading-error": "grading error: {error}",
}

#: How a call of the student's function can fail in the channel (the case fails with this text).
CALL_FAILURES = {
    "timeout": "time limit exceeded: {function} gave no answer within the {limit} s a check may take "
               "(an infinite loop?)",
    "out-of-time": "time limit exceeded: the notebook's limit of {limit} s was reached while checking {function}",
    "died": "the worker died while running {function}: {how}",
    "unsupported": "{function} returned a value of type {type} that the grader cannot check (it takes "
                   "numbers, strings, lists, tuples, dicts, NumPy arrays and tensors)",
    "too-large": "{function} returned a value too large for the grader ({detail})",
    "bad-argument": "grading error: the check passed {function} a value the channel cannot carry "
                    "({type}), which is a bug in the check",
}


# ---------------------------------------------------------------------------
# The reference chapter
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class _RefExercise:
    exercise_id: str
    cell_id: str | None
    function_name: str
    points: float
    blocked: tuple[str, ...]


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
            for dotted in ex.blocked:  # a name the worker could not block would cost students points
                core._resolve(dotted)
            exercises.append(_RefExercise(ex.id, cell.cell_id, ex.function_name, ex.points, ex.blocked))
        setup = [nb.cells[i].source for i in setup_cells(nb)]
        return cls(path, setup, exercises)


# ---------------------------------------------------------------------------
# One exercise of one submission
# ---------------------------------------------------------------------------

@dataclass
class _Item:
    """An exercise to grade in one submission, and what happened to it."""

    ref: _RefExercise
    cell: Cell | None = None
    status: str | None = None   # a key of REASONS; None while pending
    fields: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    ran_cleanly: bool = False   # its cell ran without error (run again in a fresh worker)

    def resolve(self, status: str, **fields) -> None:
        self.status, self.fields = status, fields

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    @property
    def reason(self) -> str:
        text = REASONS[self.status].format(**self.fields)
        return printable(text + "".join(f" [{note}]" for note in self.notes))


def _find_cell(cells: list[Cell], ref: _RefExercise) -> tuple[Cell | None, str | None]:
    """The submission's cell for an exercise, and a note when its id repeats."""
    same_id = [c for c in cells if ref.cell_id and c.id == ref.cell_id]
    if len(same_id) > 1:
        return same_id[-1], (f"the notebook has {len(same_id)} cells with id {ref.cell_id}; "
                             f"the grader used the last one")
    if same_id:
        return same_id[0], None
    by_meta = [c for c in cells if c.exercise == ref.exercise_id]
    if by_meta:
        return by_meta[-1], None
    by_def = [c for c in cells if ref.function_name in c.defines]
    return (by_def[0] if by_def else None), None


def _blocked_mentions(source: str, blocked) -> list[str]:
    """The blocked dotted names a cell refers to (the full name, or module and function)."""
    found = []
    for dotted in blocked:
        module, _, name = dotted.rpartition(".")
        short_module = module.rpartition(".")[2]
        if dotted in source or (re.search(rf"\b{re.escape(name)}\b", source)
                                and re.search(rf"\b{re.escape(short_module)}\b", source)):
            found.append(dotted)
    return found


def _cell_label(cell: Cell) -> str:
    return f"cell {cell.index + 1}" + (f" (id {cell.id})" if cell.id else "")


def _hints(item: _Item, cells: list[Cell], graded: set) -> list[str]:
    """Notes that explain a failure caused by the cells the grader ignores."""
    if item.passed or item.cell is None:
        return []
    reason = REASONS[item.status].format(**item.fields)
    others = [c for c in cells if c.index != item.cell.index]
    notes = []
    if "NotImplementedError" in reason:
        definers = [c for c in others if item.ref.function_name in c.defines]
        if definers:
            notes.append(f"the exercise cell still raises NotImplementedError, but {_cell_label(definers[-1])} "
                         f"defines {item.ref.function_name}: the grader runs only the exercise cell, so "
                         f"write the solution there")
    for name in dict.fromkeys(re.findall(r"NameError: name '(\w+)' is not defined", reason)):
        definers = [c for c in others if name in c.defines and c.index not in graded]
        if definers:
            notes.append(f"{name} is defined in {_cell_label(definers[0])}, which the grader does not run "
                         f"(it runs the chapter's setup and the exercise cells only): define it in the "
                         f"exercise cell")
    return notes


# ---------------------------------------------------------------------------
# The student's function, seen from the check
# ---------------------------------------------------------------------------

@lru_cache(maxsize=None)
def _exception_class(name: str, base: type) -> type:
    """An exception class that prints as the student's (a subclass of the builtin of that name)."""
    return type(name, (base,), {"__module__": "submission", "__init__": lambda self, text: BaseException.__init__(
        self, text), "__str__": lambda self: str(self.args[0])})


def _student_exception(reply: dict) -> Exception:
    """The exception the student's function raised, rebuilt from its name and message.

    Builtin exceptions keep their class (a check may catch ValueError), the
    blocked-shortcut error stays a ShortcutError, anything else becomes an
    Exception with the student's class name.
    """
    name, text = str(reply.get("ename", "Exception")), str(reply.get("evalue", ""))
    if reply.get("shortcut") is True:
        return core.ShortcutError(text)
    base = getattr(builtins, name, None)
    if not (isinstance(base, type) and issubclass(base, Exception)) or issubclass(base, StopIteration):
        base = Exception
    return _exception_class(name if name.isidentifier() else "Exception", base)(text)


class _Answer:
    """What the check calls instead of the student's function: each call goes to the worker.

    A call that cannot be answered (time limit, dead worker, a value the
    channel cannot carry) fails its case with CaseFailure and marks the
    exercise failed, even if the check were to catch the exception.
    """

    def __init__(self, session: "_Session", item: _Item):
        self.session, self.item = session, item
        self.function = item.ref.function_name
        self.spent = 0.0  # seconds waited for answers: a check may take cell_limit
        self.failure: str | None = None

    def __call__(self, *args, **kwargs):
        if self.failure is not None:
            raise core.CaseFailure(self.failure)
        return self._value(self._ask(self._message(args, kwargs)))

    def _fail(self, kind: str, **fields):
        self.failure = CALL_FAILURES[kind].format(function=self.function, **fields)
        raise core.CaseFailure(self.failure)

    def _message(self, args, kwargs) -> dict:
        buffers: list = []
        try:
            return {"op": "call", "exercise": self.item.ref.exercise_id, "args": channel.encode(list(args), buffers),
                    "kwargs": channel.encode(kwargs, buffers), channel.BUFFERS: buffers}
        except channel.Unsupported as err:
            self._fail("bad-argument", type=err.type_name)

    def _ask(self, message: dict) -> dict:
        session = self.session
        check_left = session.cell_limit - self.spent
        started = time.monotonic()
        try:
            return session.request(message, min(check_left, session.left()))
        except WorkerTimeout:
            if check_left <= session.left():
                self._fail("timeout", limit=fmt(session.cell_limit))
            self._fail("out-of-time", limit=fmt(session.notebook_limit))
        except WorkerDied as err:
            self._fail("died", how=err)
        finally:
            self.spent += time.monotonic() - started

    def _value(self, reply: dict):
        status = reply.get("status")
        if status == "raised":
            raise _student_exception(reply)
        if status == "unsupported":
            self._fail("unsupported", type=printable(reply.get("type", "?"), 100))
        if status == "too-large":
            self._fail("too-large", detail=printable(reply.get("evalue", ""), 200))
        try:
            if status == "ok":
                return channel.decode(reply.get("value"), reply.get(channel.BUFFERS, []))
            how = f"it answered with an unknown status {printable(status, 50)!r}"
        except channel.ChannelError as err:
            how = f"it sent a value the grader cannot read ({err})"
        self.session.stop_worker()
        self._fail("died", how=how)


# ---------------------------------------------------------------------------
# Grading one submission
# ---------------------------------------------------------------------------

class _Stop(Exception):
    """Every pending exercise ends with this status (the setup failed, the time is up)."""

    def __init__(self, status: str, **fields):
        super().__init__(status)
        self.status, self.fields = status, fields


class _Session:
    """One submission's grading: its worker, the time left and the order of work."""

    def __init__(self, sandbox: Sandbox, reference: Reference, notebook_limit: float, cell_limit: float):
        self.sandbox, self.reference = sandbox, reference
        self.notebook_limit, self.cell_limit = notebook_limit, cell_limit
        self.deadline = time.monotonic() + notebook_limit
        self.worker = None

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def out_of_time(self, when: str) -> _Stop:
        return _Stop("out-of-time", notebook_limit=fmt(self.notebook_limit), when=when)

    def request(self, message: dict, timeout: float) -> dict:
        """The worker's answer; on WorkerTimeout/WorkerDied the worker is gone."""
        try:
            return self.worker.request(message, timeout)
        except (WorkerTimeout, WorkerDied):
            self.worker = None
            raise

    def stop_worker(self) -> None:
        if self.worker is not None:
            self.worker.stop()
            self.worker = None

    def start_worker(self, replay: list[_Item]) -> None:
        """A fresh worker with the setup cells run and ``replay``'s cells run again."""
        if self.left() < 1:
            raise self.out_of_time("before this exercise ran")
        try:
            self.worker = self.sandbox.start(timeout=min(self.left(), 60))
        except WorkerTimeout:
            raise (self.out_of_time("before the exercises ran") if self.left() < 1 else
                   _Stop("no-worker", how="it did not get ready in time")) from None
        except WorkerDied as err:
            raise _Stop("no-worker", how=str(err)) from None
        for source in self.reference.setup_sources:
            limit = min(self.left(), SETUP_TIMEOUT)
            try:
                reply = self.request({"op": "run", "source": source}, limit)
            except WorkerTimeout:
                raise (self.out_of_time("before the exercises ran") if self.left() < 1 else
                       _Stop("setup-timeout", limit=fmt(SETUP_TIMEOUT))) from None
            except WorkerDied as err:
                raise _Stop("setup-failed", error=f"the worker died: {err}") from None
            if reply.get("status") != "ok":
                raise _Stop("setup-failed", error=_error_text(reply))
        for item in replay:
            try:
                self.request(self._run_message(item), min(self.left(), self.cell_limit))
            except (WorkerTimeout, WorkerDied):  # it ran before; not now: go on without it
                item.ran_cleanly = False
                return self.start_worker([i for i in replay if i.ran_cleanly])

    @staticmethod
    def _run_message(item: _Item) -> dict:
        ref = item.ref
        return {"op": "run", "source": item.cell.source, "exercise": ref.exercise_id,
                "function": ref.function_name, "blocked": list(ref.blocked)}

    def grade(self, items: list[_Item]) -> None:
        """Resolve every pending item, starting fresh workers as needed."""
        pending = [item for item in items if item.status is None]
        try:
            while pending:
                try:
                    self.start_worker([i for i in items if i.ran_cleanly])
                except _Stop as stop:
                    for item in pending:
                        item.resolve(stop.status, **stop.fields)
                    return
                while pending and self.worker is not None:
                    self.grade_item(pending.pop(0))
        finally:
            self.stop_worker()

    def grade_item(self, item: _Item) -> None:
        """Run the item's cell in the worker, then its check here."""
        ref = item.ref
        if self.left() < 1:
            return item.resolve("out-of-time", notebook_limit=fmt(self.notebook_limit), when="before this exercise ran")
        timeout = min(self.cell_limit, self.left())
        try:
            reply = self.request(self._run_message(item), timeout)
        except WorkerTimeout:
            if timeout < self.cell_limit:
                return item.resolve("out-of-time", notebook_limit=fmt(self.notebook_limit),
                                    when="while running this exercise cell")
            return item.resolve("cell-timeout", cell_limit=fmt(self.cell_limit))
        except WorkerDied as err:
            return item.resolve("cell-died", how=err)
        if reply.get("status") != "ok":
            return item.resolve("cell-error", error=_error_text(reply))
        item.ran_cleanly = True
        function = reply.get("function")
        if function == "missing":
            return item.resolve("undefined", function=ref.function_name)
        if function != "defined":
            return item.resolve("not-callable", function=ref.function_name, kind=printable(function, 100))
        answer = _Answer(self, item)
        result = core.run_exercise(core.get_exercise(ref.exercise_id), answer, block_shortcuts=False)
        if result.passed and answer.failure is None and result.cases_passed == result.cases_total > 0:
            return item.resolve("passed", cases=f"{result.cases_passed}/{result.cases_total}")
        item.resolve("failed", message=result.message if not result.passed else answer.failure)


def _error_text(reply: dict) -> str:
    """ "SyntaxError: invalid syntax (line 3)" from a worker's error answer."""
    ename = printable(reply.get("ename") or "Error", 100)
    evalue = str(reply.get("evalue") or "")
    # "invalid syntax (<ipython-input-1-62500c5ef28b>, line 3)" -> "invalid syntax (line 3)"
    evalue = re.sub(r"\((?:[^(),]*), line (\d+)\)", r"(line \1)", evalue)
    evalue = evalue.strip().splitlines()[0] if evalue.strip() else ""
    if len(evalue) > 200:
        evalue = evalue[:197] + "..."
    return f"{ename}: {evalue}" if evalue else ename


def grade_submission(path, reference: Reference, sandbox: Sandbox, *, timeout_per_notebook: float = 120,
                     timeout_per_cell: float = 30, max_bytes: int = MAX_BYTES,
                     student: str | None = None) -> list[Row]:
    """Grade one submitted notebook; never raises because of the submission."""
    path = Path(path)
    student = student if student is not None else printable(path.stem)
    items = [_Item(ref) for ref in reference.exercises]
    try:
        cells = read_submission(path, max_bytes)
    except NotGradable as err:
        status = "unreadable" if isinstance(err, NotANotebook) else "not-gradable"
        for item in items:
            item.resolve(status, why=str(err))
        cells = []
    for item in items:
        if item.status is not None:
            continue
        item.cell, note = _find_cell(cells, item.ref)
        if item.cell is None:
            item.resolve("missing")
            continue
        if note:
            item.notes.append(note)
        item.notes += [f"the cell refers to {name}, which exercise {item.ref.exercise_id} asks you not to use"
                       for name in _blocked_mentions(item.cell.source, item.ref.blocked)]
    _Session(sandbox, reference, timeout_per_notebook, timeout_per_cell).grade(items)
    graded = {item.cell.index for item in items if item.cell is not None}
    rows = []
    for item in items:
        item.notes += _hints(item, cells, graded)
        rows.append(Row(student, item.ref.exercise_id, item.ref.points if item.passed else 0,
                        item.ref.points, item.passed, item.reason))
    return rows


# ---------------------------------------------------------------------------
# A folder of submissions
# ---------------------------------------------------------------------------

def submission_paths(folder: Path) -> list[Path]:
    """Every entry named ``*.ipynb`` in ``folder`` (files, links, folders alike; hidden ones aside)."""
    return sorted(Path(entry.path) for entry in os.scandir(folder)
                  if entry.name.endswith(".ipynb") and not entry.name.startswith("."))


def _student_names(paths: list[Path]) -> dict[Path, str]:
    """A printable, unique name per submission (its file stem)."""
    names, used = {}, set()
    for path in paths:
        name = printable(path.stem, 200) or "(no name)"
        candidate, number = name, 1
        while candidate in used:
            number += 1
            candidate = f"{name} ({number})"
        used.add(candidate)
        names[path] = candidate
    return names


def grade_folder(submissions_dir, reference_notebook, out_csv, *, timeout_per_notebook: float = 120,
                 timeout_per_cell: float = 30, jobs: int = 1, limits: Limits = Limits(),
                 max_bytes: int = MAX_BYTES, unsafe_no_sandbox: bool = False, quiet: bool = False) -> list[Row]:
    """Grade every ``*.ipynb`` in ``submissions_dir``; write CSV, summary CSV and JSON.

    Returns one :class:`Row` per submission and exercise (students sorted by
    file name, exercises in the reference's order). Raises SandboxUnavailable
    when bubblewrap is missing or does not work, unless ``unsafe_no_sandbox``.
    """
    submissions_dir, out_csv = Path(submissions_dir), Path(out_csv)
    if not submissions_dir.is_dir():
        raise ValueError(f"submissions_dir {submissions_dir} is not a folder")
    reference = Reference.load(reference_notebook)
    paths = submission_paths(submissions_dir)
    names = _student_names(paths)
    if not paths and not quiet:
        print(f"no submissions (*.ipynb) in {printable(str(submissions_dir))}")
    hidden = [reference.path.resolve().parent, submissions_dir.resolve(), out_csv.resolve().parent]
    started, timings = time.monotonic(), {}
    with Sandbox(limits, unsafe=unsafe_no_sandbox, hidden=hidden) as sandbox:
        if unsafe_no_sandbox and not quiet:
            print(f"warning: grading WITHOUT a sandbox: {UNSAFE_RISK}", flush=True)
        if paths:
            sandbox.probe()

        def one(path):
            t0 = time.monotonic()
            try:
                rows = grade_submission(path, reference, sandbox, timeout_per_notebook=timeout_per_notebook,
                                        timeout_per_cell=timeout_per_cell, max_bytes=max_bytes,
                                        student=names[path])
            except Exception as err:  # a grader bug must not lose the other students
                rows = [Row(names[path], ex.exercise_id, 0, ex.points, False,
                            printable(f"grading error: {type(err).__name__}: {err}")) for ex in reference.exercises]
            timings[names[path]] = round(time.monotonic() - t0, 2)
            if not quiet:
                total = sum(r.points for r in rows)
                print(f"graded {names[path]}: {fmt(total)}/{fmt(sum(r.max_points for r in rows))} "
                      f"({timings[names[path]]:.1f} s)", flush=True)
            return rows

        with ThreadPoolExecutor(max_workers=max(1, int(jobs))) as pool:
            per_student = list(pool.map(one, paths))
    rows = [row for student_rows in per_student for row in student_rows]
    exercises = [{"id": ex.exercise_id, "function": ex.function_name, "points": ex.points}
                 for ex in reference.exercises]
    settings = {"timeout_per_notebook": timeout_per_notebook, "timeout_per_cell": timeout_per_cell,
                "sandbox": "none (--unsafe-no-sandbox)" if unsafe_no_sandbox else "bubblewrap"}
    write_outputs(rows, exercises, out_csv, chapter=str(reference.path), files={names[p]: p.name for p in paths},
                  timings=timings, settings=settings, seconds=time.monotonic() - started)
    if not quiet:
        print(summary_table(rows, [ex.exercise_id for ex in reference.exercises]))
        print(f"wrote {out_csv}, {summary_path(out_csv)} and {out_csv.with_suffix('.json')}")
    return rows


__all__ = ["Reference", "Row", "SandboxUnavailable", "grade_folder", "grade_submission", "submission_paths"]
