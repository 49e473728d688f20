"""The grader on a folder of real submission files, good, broken and dishonest.

The folder is graded once (module fixture, through the command line) with
small time limits; the tests then read the CSV, summary and JSON it wrote.
Submissions are generated from tests/fixtures/mini_chapter.ipynb (exercises
1.2 cover_count and 1.3 flip_probability); the unreadable ones are real
files in tests/fixtures/.
"""
from __future__ import annotations

import contextlib
import csv
import io
import json
import shutil
import time
from pathlib import Path

import nbformat
import pytest

from dlbook.coursework.cli import main
from dlbook.coursework.grader import grade_folder
from dlbook.coursework.recorder import make_recorder
from dlbook.coursework.student import student_notebook
from dlbook.exercises import EXERCISES
from dlbook.exercises.core import run_exercise

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
FIXTURE = FIXTURES / "mini_chapter.ipynb"
CELL_TIMEOUT = 5
NOTEBOOK_TIMEOUT = 40

COVER_WRONG = '''def cover_count(num_points, dim):
    """Wrong on purpose."""
    return 2 ** num_points
'''
FLIP_WRONG = '''def flip_probability(alpha):
    """Wrong on purpose: the factor 1/2 is missing."""
    return math.erfc(1.0 / math.sqrt(2.0 * alpha))
'''


def _load():
    return nbformat.read(FIXTURE, as_version=4)


def _cell(nb, cell_id):
    return next(c for c in nb.cells if c.get("id") == cell_id)


def _edit(**sources):
    """The fixture with the given cells' sources replaced (keys: cell ids with _ for -)."""
    nb = _load()
    for key, source in sources.items():
        _cell(nb, key.replace("_", "-")).source = source
    return nb


def _submissions():
    """name -> notebook object or raw bytes."""
    subs = {}
    subs["correct"] = _load()
    subs["stub"] = student_notebook(_load())
    subs["wrong"] = _edit(exercise_1_2=COVER_WRONG,
                          exercise_1_3="def flip_probability(alpha):\n    return 1 / 0\n")
    subs["broken"] = _edit(  # a syntax error; an error in a cell whose function is right
        exercise_1_2="def cover_count(num_points, dim):\n    total = 0\n    return total +\n",
        exercise_1_3=_cell(_load(), "exercise-1-3").source + "\nprint(undefined_name)\n")
    correct_cover = _cell(_load(), "exercise-1-2").source
    subs["loops"] = _edit(
        exercise_1_2=correct_cover + "\n\nwhile True:\n    pass\n",
        exercise_1_3="def flip_probability(alpha):\n    while True:\n        pass\n")
    subs["stuck"] = _edit(  # cannot be interrupted: graded on in a fresh kernel
        exercise_1_2=correct_cover + "\n\nimport signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                                     "while True:\n    pass\n")
    subs["crash"] = _edit(exercise_1_2=correct_cover + "\n\nimport os\nos._exit(1)\n")
    nb = _load()  # exercise 1.3 deleted (with its check), 1.2 renamed
    nb.cells = [c for c in nb.cells if c.get("id") not in ("exercise-1-3", "check-1-3")]
    _cell(nb, "exercise-1-2").source = correct_cover.replace("def cover_count(", "def cover_count_v2(")
    subs["deleted"] = nb
    nb = _load()  # exercise 1.3's cells first; ids lost (Colab-style), found by metadata / by def
    order = ["exercise-1-3-task", "exercise-1-3", "check-1-3", "exercise-1-2-task",
             "exercise-1-2", "check-1-2"]
    moved = [_cell(nb, cid) for cid in order]
    rest = [c for c in nb.cells if c.get("id") not in order]  # title, setup, summary
    nb.cells = rest[:2] + moved + rest[2:]
    moved[1].id = "renamed-a"
    moved[4].id = "renamed-b"
    moved[4].metadata.pop("dlbook")
    moved[4].metadata.pop("tags")
    subs["reordered"] = nb
    subs["cheat_checks"] = _cheat_checks()
    subs["cheat_patch"] = _cheat_patch()
    subs["invalid_json"] = (FIXTURES / "invalid_json.ipynb").read_bytes()
    subs["empty"] = (FIXTURES / "empty.ipynb").read_bytes()
    subs["not_a_notebook"] = b'{"hello": "world"}'
    return subs


FAKE_PASS = 'print("✅ Exercise {eid} passed (240/240 cases)")'


def _cheat_checks():
    """Wrong functions; check() redefined, registry replaced, fake ✅ lines, check cells edited,
    and a right function plus a redefined check in an extra cell (the grader never runs it)."""
    cover = COVER_WRONG + '''
import dataclasses
import dlbook.exercises
from dlbook.exercises import core

def _fake_check(exercise_id, answer):
    print(f"✅ Exercise {exercise_id} passed (240/240 cases)")

dlbook.exercises.check = core.check = _fake_check
dlbook.exercises.run_check = core.run_check = lambda eid, answer: core.CheckResult(eid, True, "ok", 1, 1)
core.run_exercise = lambda ex, answer: core.CheckResult(ex.id, True, "ok", 1, 1)
for _id in list(core.EXERCISES):
    core.EXERCISES[_id] = dataclasses.replace(core.EXERCISES[_id], check_fn=lambda answer, cases: None)
print("✅ Exercise 1.2 passed (240/240 cases)")
'''
    flip = FLIP_WRONG + '''
import dataclasses
from dlbook.exercises import core
from dlbook.exercises.checks import ch01_neurons as neurons

def _passing_check(answer, cases):
    with cases.case("anything"):
        pass

object.__setattr__(core.EXERCISES["1.3"], "check_fn", _passing_check)
neurons.check_flip_probability = _passing_check
core.register = lambda ex: ex
print("✅ Exercise 1.3 passed (8/8 cases)")
'''
    nb = _edit(exercise_1_2=cover, exercise_1_3=flip,
               check_1_2=FAKE_PASS.format(eid="1.2"), check_1_3=FAKE_PASS.format(eid="1.3"))
    nb.cells.insert(2, nbformat.v4.new_code_cell(
        "import dlbook.exercises\n"
        "dlbook.exercises.check = lambda *a: print('✅ passed')\n"
        "def cover_count(num_points, dim):\n"
        "    return 2 * sum(__import__('math').comb(num_points - 1, i) for i in range(dim))\n"))
    return nb


def _cheat_patch():
    """Wrong functions; the checks' code, helpers and the math they use monkeypatched."""
    cover = '''def cover_count(num_points, dim):
    return 0

import math
from contextlib import contextmanager
from dlbook.exercises import core
from dlbook.exercises.checks import ch01_neurons as neurons

math.comb = lambda n, k: 0          # the expected value becomes 0 too
neurons.expect_equal = lambda got, expected: None

@contextmanager
def _swallow(self, label):
    self.total += 1
    self.passed += 1
    try:
        yield
    except Exception:
        pass

core.Cases.case = _swallow
'''
    flip = FLIP_WRONG + '''
from dlbook.exercises import core
from dlbook.exercises.checks import ch01_neurons as neurons

def _passing_check(answer, cases):
    with cases.case("anything"):
        pass

neurons.check_flip_probability.__code__ = _passing_check.__code__
neurons.expect_close = lambda *args, **kwargs: None
'''
    return _edit(exercise_1_2=cover, exercise_1_3=flip)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("grading")
    folder = tmp / "submissions"
    folder.mkdir()
    for name, content in _submissions().items():
        path = folder / f"{name}.ipynb"
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            nbformat.write(content, path)
    (folder / "notes.txt").write_text("not a submission")
    out = tmp / "out" / "grades.csv"
    stdout = io.StringIO()
    started = time.monotonic()
    with contextlib.redirect_stdout(stdout):
        code = main(["grade", str(folder), "--chapter", str(FIXTURE), "--out", str(out),
                     "--timeout", str(NOTEBOOK_TIMEOUT), "--cell-timeout", str(CELL_TIMEOUT),
                     "--jobs", "3"])
    seconds = time.monotonic() - started
    with open(out, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    print(stdout.getvalue())
    print(f"grading took {seconds:.1f} s")
    return {"code": code, "rows": rows, "out": out, "stdout": stdout.getvalue(),
            "seconds": seconds, "students": sorted(_submissions())}


def _row(graded, student, exercise):
    matches = [r for r in graded["rows"] if r["student"] == student and r["exercise"] == exercise]
    assert len(matches) == 1, (student, exercise)
    return matches[0]


def _score(graded, student, exercise):
    row = _row(graded, student, exercise)
    assert row["passed"] in ("True", "False")
    assert row["points"] == ("1" if row["passed"] == "True" else "0")
    return int(row["points"]), row["reason"]


def test_grading_completes_with_exit_code_zero_in_bounded_time(graded):
    assert graded["code"] == 0
    assert graded["seconds"] < 240


def test_one_row_per_student_and_exercise(graded):
    pairs = [(r["student"], r["exercise"]) for r in graded["rows"]]
    assert pairs == [(s, e) for s in graded["students"] for e in ("1.2", "1.3")]
    assert list(graded["rows"][0]) == ["student", "exercise", "points", "max_points", "passed", "reason"]
    assert all(r["max_points"] == "1" and r["reason"] for r in graded["rows"])


def test_correct_submission_gets_full_marks(graded):
    assert _score(graded, "correct", "1.2")[0] == 1
    assert _score(graded, "correct", "1.3")[0] == 1
    assert _row(graded, "correct", "1.2")["reason"] == "passed (240/240 cases)"


def test_stub_and_wrong_answers_score_zero_with_the_case(graded):
    points, reason = _score(graded, "stub", "1.2")
    assert points == 0 and "NotImplementedError: Exercise 1.2" in reason
    points, reason = _score(graded, "wrong", "1.2")
    assert points == 0 and reason == "case cover_count(4, 3): expected 14, got 16"
    points, reason = _score(graded, "cheat_patch", "1.3")  # a wrong value, besides the cheats
    assert points == 0 and reason.startswith("case flip_probability(0.138): expected 0.0035522")


def test_syntax_error_and_exceptions(graded):
    points, reason = _score(graded, "broken", "1.2")
    assert points == 0 and reason.startswith("SyntaxError: ") and reason.endswith("(line 3)")
    points, reason = _score(graded, "wrong", "1.3")
    assert points == 0 and reason == "case flip_probability(0.138): raised ZeroDivisionError: division by zero"
    # an exercise cell must run cleanly, even if the function itself is right
    assert _score(graded, "broken", "1.3") == (0, "NameError: name 'undefined_name' is not defined")


def test_infinite_loops_hit_the_time_limit(graded):
    points, reason = _score(graded, "loops", "1.2")
    assert points == 0 and reason == f"time limit exceeded: the exercise cell ran longer than {CELL_TIMEOUT} s"
    points, reason = _score(graded, "loops", "1.3")
    assert points == 0 and reason.startswith(
        f"time limit exceeded: checking flip_probability took longer than {CELL_TIMEOUT} s")


def test_a_stuck_or_dead_kernel_does_not_cost_the_other_exercises(graded):
    points, reason = _score(graded, "stuck", "1.2")
    assert points == 0 and reason.startswith("time limit exceeded: the exercise cell ran longer")
    assert "could not be interrupted" in reason
    assert _score(graded, "stuck", "1.3")[0] == 1
    points, reason = _score(graded, "crash", "1.2")
    assert points == 0 and reason.startswith("the kernel died while running the exercise cell")
    assert _score(graded, "crash", "1.3")[0] == 1


def test_deleted_and_reordered_cells(graded):
    assert _score(graded, "deleted", "1.3") == (0, "exercise cell missing (deleted?)")
    assert _score(graded, "deleted", "1.2") == (0, "function cover_count not defined")
    assert _score(graded, "reordered", "1.2")[0] == 1
    assert _score(graded, "reordered", "1.3")[0] == 1


def test_unreadable_files(graded):
    for student in ("invalid_json", "empty", "not_a_notebook"):
        for exercise in ("1.2", "1.3"):
            points, reason = _score(graded, student, exercise)
            assert points == 0 and reason.startswith("not a readable notebook: ")
    assert _score(graded, "empty", "1.2")[1] == "not a readable notebook: the file is empty"
    assert _score(graded, "invalid_json", "1.2")[1].startswith("not a readable notebook: not valid JSON (")
    assert _score(graded, "not_a_notebook", "1.3")[1] == (
        "not a readable notebook: the JSON is not a notebook (it has no list of cells)")


@pytest.mark.parametrize("student", ["cheat_checks", "cheat_patch"])
def test_cheats_score_zero(graded, student):
    for exercise in ("1.2", "1.3"):
        points, reason = _score(graded, student, exercise)
        assert points == 0, f"{student} {exercise}: {reason}"
        assert reason.startswith("case "), reason  # the real check ran and said why
        assert "[review: the cell uses" in reason and "'dlbook.exercises'" in reason


def test_summary_csv_json_and_printed_table(graded):
    out = graded["out"]
    with open(out.with_name("grades_summary.csv"), newline="", encoding="utf-8") as handle:
        summary = {r["student"]: r for r in csv.DictReader(handle)}
    assert summary["correct"] == {"student": "correct", "1.2": "1", "1.3": "1", "total": "2", "max_total": "2"}
    assert summary["stuck"]["total"] == "1" and summary["wrong"]["total"] == "0"
    report = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))
    assert [e["id"] for e in report["exercises"]] == ["1.2", "1.3"]
    assert report["students"]["reordered"]["total"] == 2
    assert report["students"]["wrong"]["exercises"]["1.2"]["passed"] is False
    printed = graded["stdout"]
    assert "student" in printed and "total" in printed
    line = next(l for l in printed.splitlines() if l.startswith("correct "))
    assert line.split() == ["correct", "✓", "✓", "2/2"]
    line = next(l for l in printed.splitlines() if l.startswith("stuck "))
    assert line.split() == ["stuck", "✗", "✓", "1/2"]
    assert "Reasons:" in printed


def test_notebook_time_limit_kills_the_kernel(tmp_path):
    folder = tmp_path / "subs"
    folder.mkdir()
    correct_cover = _cell(_load(), "exercise-1-2").source
    nbformat.write(_edit(exercise_1_2=correct_cover + "\nimport time\ntime.sleep(1000)\n"),
                   folder / "sleepy.ipynb")
    started = time.monotonic()
    rows = grade_folder(folder, FIXTURE, tmp_path / "g.csv", timeout_per_notebook=12,
                        timeout_per_cell=600, quiet=True)
    assert time.monotonic() - started < 30
    assert [(r.exercise, r.points) for r in rows] == [("1.2", 0), ("1.3", 0)]
    # normally "... while running this exercise cell"; on a very busy machine the kernel may
    # still have been importing torch when the limit came
    assert rows[0].reason.startswith("time limit exceeded: the notebook's limit of 12 s was reached")
    assert rows[1].reason.startswith("time limit exceeded: the notebook's limit of 12 s was reached")
    assert "before this exercise ran" in rows[1].reason or "before the exercises ran" in rows[1].reason


# ---------------------------------------------------------------------------
# The recorder, in this process: each cheat alone would pass without it
# ---------------------------------------------------------------------------

def _cheat_math_comb(monkeypatch):
    import math
    monkeypatch.setattr(math, "comb", lambda n, k: 0)


def _cheat_helper(monkeypatch):
    from dlbook.exercises.checks import ch01_neurons as neurons
    monkeypatch.setattr(neurons, "expect_equal", lambda got, expected: None)
    monkeypatch.setattr(neurons, "as_int", lambda got, what="": 0)


def _cheat_code(monkeypatch):
    from dlbook.exercises.checks import ch01_neurons as neurons

    def passing(answer, cases):
        with cases.case("anything"):
            pass
    monkeypatch.setattr(neurons.check_cover_count, "__code__", passing.__code__)


def _cheat_cases(monkeypatch):
    from contextlib import contextmanager

    from dlbook.exercises import core

    @contextmanager
    def swallow(self, label):
        self.total += 1
        self.passed += 1
        try:
            yield
        except Exception:
            pass
    monkeypatch.setattr(core.Cases, "case", swallow)


@pytest.mark.parametrize("cheat", [_cheat_math_comb, _cheat_helper, _cheat_code, _cheat_cases])
def test_recorder_restores_what_a_submission_patched(cheat, monkeypatch, tmp_path):
    user_globals = {"cover_count": lambda num_points, dim: 0}
    results = tmp_path / "results.jsonl"
    record = make_recorder(str(results), user_globals, ["1.2"])
    cheat(monkeypatch)
    # without the recorder, the cheat works:
    assert run_exercise(EXERCISES["1.2"], user_globals["cover_count"]).passed
    with contextlib.redirect_stdout(io.StringIO()):
        record("1.2")
    line = json.loads(results.read_text(encoding="utf-8"))
    assert line["passed"] is False and line["points"] == 0
    assert line["reason"].startswith("case cover_count(4, 3): expected 14, got 0")


def test_recorder_reports_a_missing_function(tmp_path):
    results = tmp_path / "results.jsonl"
    record = make_recorder(str(results), {}, ["1.3"])
    with contextlib.redirect_stdout(io.StringIO()):
        record("1.3")
    line = json.loads(results.read_text(encoding="utf-8"))
    assert line == {"exercise": "1.3", "passed": False, "points": 0,
                    "reason": "function flip_probability not defined", "cases": "0/0"}


def test_grade_cli_reports_a_bad_reference(tmp_path):
    folder = tmp_path / "subs"
    folder.mkdir()
    shutil.copy(FIXTURES / "empty.ipynb", folder / "someone.ipynb")
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(["grade", str(folder), "--chapter", str(FIXTURES / "empty.ipynb"),
                     "--out", str(tmp_path / "g.csv")])
    assert code == 2 and "error" in err.getvalue()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["grade", str(folder), "--chapter", str(FIXTURE), "--out", str(tmp_path / "g.csv")]) == 0
    assert (tmp_path / "g.csv").exists() and (tmp_path / "g_summary.csv").exists()
    assert "someone" in out.getvalue()
