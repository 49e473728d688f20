"""The grader on a folder of real submission files, good and broken.

The folder is graded once (module fixture, through the command line) with
small time limits; the tests read the CSV, summary and JSON it wrote.
Submissions are built from the fixture chapter tests/fixtures/grader/90_fixture.ipynb
(see grader_fixtures); the unreadable ones are real files in tests/fixtures/.
Dishonest submissions are in test_grader_attacks.py; the channel and the
submission reader, which need no sandbox, are tested at the end.
"""
from __future__ import annotations

import os
import time
from fractions import Fraction

import nbformat
import numpy as np
import pytest
import torch
from grader_fixtures import (
    CHAPTER,
    FIXTURES,
    ROOT,
    cell,
    edit,
    fixture_checks,
    grade,
    load,
    needs_bwrap,
    score,
    solution,
    write,
)

from dlbook.coursework import channel
from dlbook.coursework.grader import grade_folder
from dlbook.coursework.student import student_notebook
from dlbook.coursework.submission import NotANotebook, NotGradable, parse, read_bytes

CELL_TIMEOUT = 5
NOTEBOOK_TIMEOUT = 40
EXERCISES = ("90.1", "90.2", "90.3")

COVER = solution("exercise-90-1")
FLIP = solution("exercise-90-2")
COVER_WRONG = "def cover_count(num_points, dim):\n    return 2 ** num_points\n"


def _submissions() -> dict:
    """name -> notebook object or raw bytes."""
    subs = {"correct": load(), "stub": student_notebook(load())}
    subs["wrong"] = edit(exercise_90_1=COVER_WRONG,
                         exercise_90_2="def flip_probability(alpha):\n    return 1 / 0\n",
                         exercise_90_3="def row_sums(X):\n    return X.sum(axis=0)\n")
    subs["broken"] = edit(  # a syntax error; an error in a cell whose function is right
        exercise_90_1="def cover_count(num_points, dim):\n    total = 0\n    return total +\n",
        exercise_90_2=FLIP + "\nprint(undefined_name)\n")
    subs["loops"] = edit(exercise_90_1=COVER + "\n\nwhile True:\n    pass\n",
                         exercise_90_2="def flip_probability(alpha):\n    while True:\n        pass\n")
    subs["stuck"] = edit(  # ignores SIGINT: the worker is killed, and grading goes on in a fresh one
        exercise_90_1=COVER + "\n\nimport signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                              "while True:\n    pass\n")
    subs["crash"] = edit(exercise_90_1=COVER + "\n\nimport os\nos._exit(1)\n")
    subs["segfault"] = edit(exercise_90_2="def flip_probability(alpha):\n    import ctypes\n"
                                          "    return ctypes.string_at(0)\n")
    nb = load()  # exercise 90.2 deleted (with its check), 90.1 renamed
    nb.cells = [c for c in nb.cells if c.get("id") not in ("exercise-90-2", "check-90-2")]
    cell(nb, "exercise-90-1").source = COVER.replace("def cover_count(", "def cover_count_v2(")
    subs["deleted"] = nb
    nb = load()  # exercise 90.2's cells first; ids lost (Colab-style), found by metadata / by def
    order = ["exercise-90-2-task", "exercise-90-2", "check-90-2", "exercise-90-1-task", "exercise-90-1",
             "check-90-1"]
    moved = [cell(nb, cid) for cid in order]
    rest = [c for c in nb.cells if c.get("id") not in order]
    nb.cells = rest[:2] + moved + rest[2:]
    moved[1].id = "renamed-a"
    moved[4].id = "renamed-b"
    moved[4].metadata.pop("dlbook")
    moved[4].metadata.pop("tags")
    subs["reordered"] = nb
    subs["fractions"] = edit(  # plain values other than floats: a Fraction, a list, a tuple
        exercise_90_2="from fractions import Fraction\ndef flip_probability(alpha):\n"
                      "    return Fraction(0.5 * math.erfc(1.0 / math.sqrt(2.0 * alpha)))\n",
        exercise_90_3="def row_sums(X):\n    return tuple(float(v) for v in X.sum(axis=1))\n")
    subs["module"] = edit(exercise_90_1="def cover_count(num_points, dim):\n    return math\n",
                          exercise_90_3="def row_sums(X):\n    return lambda: X\n")
    subs["undefined"] = edit(exercise_90_1="x = 1\n", exercise_90_2="flip_probability = 0.5\n")
    subs["invalid_json"] = (FIXTURES / "invalid_json.ipynb").read_bytes()
    subs["empty"] = (FIXTURES / "empty.ipynb").read_bytes()
    subs["not_a_notebook"] = b'{"hello": "world"}'
    subs["not_utf8"] = b'{"cells": [], "nbformat": 4, "x": "\xff\xfe"}'
    subs["nbformat3"] = _nbformat3()
    return subs


def _nbformat3() -> str:
    """The correct solutions in a notebook of format 3 (no cell ids: found by function)."""
    sources = ["import math", COVER, FLIP, solution("exercise-90-3")]
    cells = [{"cell_type": "code", "input": source, "language": "python", "metadata": {}, "outputs": []}
             for source in sources]
    return nbformat.writes(nbformat.from_dict({"metadata": {}, "nbformat": 3, "nbformat_minor": 0,
                                               "worksheets": [{"cells": cells, "metadata": {}}]}), version=3)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("grading")
    folder = tmp / "submissions"
    folder.mkdir()
    for name, content in _submissions().items():
        write(folder, name, content)
    (folder / "notes.txt").write_text("not a submission")
    started = time.monotonic()
    with fixture_checks():
        result = grade(folder, tmp / "out" / "grades.csv", CHAPTER, "--timeout", str(NOTEBOOK_TIMEOUT),
                       "--cell-timeout", str(CELL_TIMEOUT), "--jobs", "2")
    result["seconds"] = time.monotonic() - started
    result["students"] = sorted(_submissions())
    print(result["stdout"], result["stderr"], f"grading took {result['seconds']:.1f} s", sep="\n")
    return result


@needs_bwrap
def test_grading_completes_with_exit_code_zero_in_bounded_time(graded):
    assert graded["code"] == 0, graded["stderr"]
    assert graded["seconds"] < 300


@needs_bwrap
def test_one_row_per_student_and_exercise(graded):
    pairs = [(r["student"], r["exercise"]) for r in graded["rows"]]
    assert pairs == [(s, e) for s in graded["students"] for e in EXERCISES]
    assert list(graded["rows"][0]) == ["student", "exercise", "points", "max_points", "passed", "reason"]
    assert all(r["max_points"] == "1" and r["reason"] for r in graded["rows"])


@needs_bwrap
def test_correct_submission_gets_full_marks(graded):
    assert [score(graded, "correct", e) for e in EXERCISES] == [
        (1, "passed (8/8 cases)"), (1, "passed (4/4 cases)"), (1, "passed (3/3 cases)")]
    assert [score(graded, "reordered", e)[0] for e in EXERCISES] == [1, 1, 1]
    assert [score(graded, "nbformat3", e)[0] for e in EXERCISES] == [1, 1, 1]


@needs_bwrap
def test_stub_and_wrong_answers_score_zero_with_the_case(graded):
    points, reason = score(graded, "stub", "90.1")
    assert points == 0 and reason.startswith("case cover_count(4, 3): raised NotImplementedError: Exercise 90.1")
    assert score(graded, "wrong", "90.1") == (0, "case cover_count(4, 3): expected 14, got 16")
    assert score(graded, "wrong", "90.2") == (
        0, "case flip_probability(0.138): raised ZeroDivisionError: division by zero")
    points, reason = score(graded, "wrong", "90.3")
    assert points == 0 and reason.startswith("case row_sums(X) for X of shape (3, 4): expected an array of shape")


@needs_bwrap
def test_syntax_error_and_exceptions_in_the_cell(graded):
    points, reason = score(graded, "broken", "90.1")
    assert points == 0 and reason.startswith("SyntaxError: ") and reason.endswith("(line 3)")
    # an exercise cell must run cleanly, even if the function itself is right
    assert score(graded, "broken", "90.2") == (0, "NameError: name 'undefined_name' is not defined")
    assert score(graded, "broken", "90.3")[0] == 1


@needs_bwrap
def test_infinite_loops_and_crashes_cost_only_their_exercise(graded):
    assert score(graded, "loops", "90.1") == (
        0, f"time limit exceeded: the exercise cell ran longer than {CELL_TIMEOUT} s")
    points, reason = score(graded, "loops", "90.2")
    assert points == 0 and reason == (f"case flip_probability(0.138): time limit exceeded: flip_probability "
                                      f"gave no answer within the {CELL_TIMEOUT} s a check may take "
                                      f"(an infinite loop?)")
    assert score(graded, "loops", "90.3")[0] == 1  # graded in a fresh worker
    assert score(graded, "stuck", "90.1")[1].startswith("time limit exceeded: the exercise cell ran longer")
    assert [score(graded, "stuck", e)[0] for e in EXERCISES] == [0, 1, 1]
    points, reason = score(graded, "crash", "90.1")
    assert points == 0 and reason.startswith("the worker died while running the exercise cell: it exited with "
                                             "status 1")
    assert [score(graded, "crash", e)[0] for e in EXERCISES] == [0, 1, 1]
    assert score(graded, "segfault", "90.2") == (
        0, "case flip_probability(0.138): the worker died while running flip_probability: it crashed "
           "(segmentation fault)")
    assert [score(graded, "segfault", e)[0] for e in EXERCISES] == [1, 0, 1]


@needs_bwrap
def test_deleted_and_undefined_functions(graded):
    assert score(graded, "deleted", "90.2") == (0, "exercise cell missing (deleted?)")
    assert score(graded, "deleted", "90.1") == (0, "function cover_count not defined")
    assert score(graded, "undefined", "90.1") == (0, "function cover_count not defined")
    assert score(graded, "undefined", "90.2") == (
        0, "flip_probability is not a function (the exercise cell made it a float)")


@needs_bwrap
def test_values_the_channel_carries_and_the_ones_it_does_not(graded):
    assert [score(graded, "fractions", e)[0] for e in EXERCISES] == [1, 1, 1]
    points, reason = score(graded, "module", "90.1")
    assert points == 0 and reason == (
        "case cover_count(4, 3): cover_count returned a value of type module that the grader cannot check "
        "(it takes numbers, strings, lists, tuples, dicts, NumPy arrays and tensors)")
    assert "returned a value of type function that the grader cannot check" in score(graded, "module", "90.3")[1]


@needs_bwrap
def test_unreadable_files(graded):
    for student in ("invalid_json", "empty", "not_a_notebook", "not_utf8"):
        for exercise in EXERCISES:
            points, reason = score(graded, student, exercise)
            assert points == 0 and reason.startswith("not a readable notebook: ")
    assert score(graded, "empty", "90.1")[1] == "not a readable notebook: the file is empty"
    assert score(graded, "invalid_json", "90.1")[1].startswith("not a readable notebook: not valid JSON (")
    assert score(graded, "not_utf8", "90.1")[1] == "not a readable notebook: the file is not UTF-8 text"
    assert score(graded, "not_a_notebook", "90.2")[1] == (
        "not a readable notebook: the JSON is not a notebook (it has no list of cells)")


@needs_bwrap
def test_summary_csv_json_and_printed_table(graded):
    summary = {r["student"]: r for r in graded["summary"]}
    assert summary["correct"] == {"student": "correct", "90.1": "1", "90.2": "1", "90.3": "1", "total": "3",
                                  "max_total": "3"}
    assert summary["stuck"]["total"] == "2" and summary["wrong"]["total"] == "0"
    report = graded["json"]
    assert [e["id"] for e in report["exercises"]] == list(EXERCISES)
    assert report["sandbox"] == "bubblewrap"
    assert report["students"]["reordered"]["total"] == 3
    assert report["students"]["wrong"]["file"] == "wrong.ipynb"
    assert report["students"]["wrong"]["exercises"]["90.1"]["passed"] is False
    printed = graded["stdout"]
    line = next(line for line in printed.splitlines() if line.startswith("correct "))
    assert line.split() == ["correct", "✓", "✓", "✓", "3/3"]
    line = next(line for line in printed.splitlines() if line.startswith("stuck "))
    assert line.split() == ["stuck", "✗", "✓", "✓", "2/3"]
    assert "Reasons:" in printed


@needs_bwrap
def test_notebook_time_limit(tmp_path):
    folder = tmp_path / "subs"
    folder.mkdir()
    write(folder, "sleepy", edit(exercise_90_1=COVER + "\nimport time\ntime.sleep(1000)\n"))
    started = time.monotonic()
    with fixture_checks():
        rows = grade_folder(folder, CHAPTER, tmp_path / "g.csv", timeout_per_notebook=8,
                            timeout_per_cell=600, quiet=True)
    assert time.monotonic() - started < 60
    assert [(r.exercise, r.points) for r in rows] == [("90.1", 0), ("90.2", 0), ("90.3", 0)]
    assert rows[0].reason in ("time limit exceeded: the notebook's limit of 8 s was reached while running "
                              "this exercise cell",  # on a very busy machine the worker may start late:
                              "time limit exceeded: the notebook's limit of 8 s was reached before the "
                              "exercises ran")
    assert rows[1].reason.startswith("time limit exceeded: the notebook's limit of 8 s was reached before")


def test_grade_cli_reports_a_bad_reference(tmp_path):
    folder = tmp_path / "subs"
    folder.mkdir()
    write(folder, "someone", (FIXTURES / "empty.ipynb").read_bytes())
    graded = grade(folder, tmp_path / "g.csv", FIXTURES / "empty.ipynb")
    assert graded["code"] == 2 and "error" in graded["stderr"]


def test_grader_refuses_to_run_without_bubblewrap(tmp_path, monkeypatch):
    monkeypatch.setattr("dlbook.coursework.sandbox.bwrap_path", lambda: None)
    folder = tmp_path / "subs"
    folder.mkdir()
    write(folder, "someone", load())
    with fixture_checks():
        graded = grade(folder, tmp_path / "g.csv", CHAPTER)
    assert graded["code"] == 2 and not (tmp_path / "g.csv").exists()
    assert "bubblewrap (bwrap) is not installed" in graded["stderr"]
    assert "--unsafe-no-sandbox" in graded["stderr"] and "read and change your files" in graded["stderr"]


def test_unsafe_mode_grades_without_bubblewrap_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr("dlbook.coursework.sandbox.bwrap_path", lambda: None)
    folder = tmp_path / "subs"
    folder.mkdir()
    write(folder, "correct", load())
    write(folder, "wrong", edit(exercise_90_1=COVER_WRONG))
    with fixture_checks():
        graded = grade(folder, tmp_path / "g.csv", CHAPTER, "--unsafe-no-sandbox", "--cell-timeout", "20")
    assert graded["code"] == 0, graded["stderr"]
    assert "WITHOUT a sandbox" in graded["stdout"]
    assert graded["json"]["sandbox"] == "none (--unsafe-no-sandbox)"
    assert [score(graded, "correct", e)[0] for e in EXERCISES] == [1, 1, 1]
    assert score(graded, "wrong", "90.1") == (0, "case cover_count(4, 3): expected 14, got 16")


# ---------------------------------------------------------------------------
# The channel and the submission reader (no sandbox needed)
# ---------------------------------------------------------------------------

PLAIN_VALUES = [None, True, 3, -2**70, 0.5, float("inf"), "text", [1, [2.5, "x"]], (1, (2, 3)),
                {"a": 1, "b": [None]}, Fraction(3, 7), np.arange(6.0).reshape(2, 3), np.float32(1.5),
                np.int64(7), np.bool_(True), np.zeros((0, 3), dtype=np.int32), torch.arange(4, dtype=torch.int16),
                torch.ones(2, 2, dtype=torch.bfloat16), torch.tensor(2.5, dtype=torch.float64, requires_grad=True),
                torch.tensor([1 + 2j]), torch.Size([2, 3])]


@pytest.mark.parametrize("value", PLAIN_VALUES, ids=lambda v: type(v).__name__)
def test_plain_values_cross_the_channel_unchanged(value):
    back = channel.through_channel(lambda x: x)(value)
    if isinstance(value, torch.Tensor):
        assert isinstance(back, torch.Tensor) and back.dtype == value.dtype and not back.requires_grad
        assert torch.equal(back, value.detach())
    elif isinstance(value, np.ndarray):
        assert type(back) is np.ndarray and back.dtype == value.dtype and np.array_equal(back, value)
    else:
        assert type(back) is (tuple if isinstance(value, tuple) else type(value)) and back == value


def _nested(depth: int) -> list:
    value = []
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("value", [print, np.array([object()]), {1: 2}, torch.zeros(2).to_sparse(), object(),
                                   _nested(100)],
                         ids=["function", "object array", "int keys", "sparse", "object", "too deep"])
def test_other_values_are_refused_by_name(value):
    with pytest.raises(channel.Unsupported):
        channel.encode(value, [])


@pytest.mark.parametrize("message", [b"[1, 2]", b'{"value": {"$": "pickle", "data": "gASVCAAAAAAAAACMBHRlc3SULg=="}}',
                                     b'{"value": {"$": "ndarray", "dtype": "|O", "shape": [1], "buffer": 0}}',
                                     b'{"value": {"$": "ndarray", "dtype": "<f8", "shape": [4], "buffer": 0}}',
                                     b'{"value": {"$": "tensor", "dtype": "float32", "shape": [1], "buffer": 1}}',
                                     b"[" * 100_000, b"\xff", b'{"value": ' + b"9" * 5000 + b"}"])
def test_malformed_messages_are_refused(message):
    with pytest.raises(channel.ChannelError):
        channel.decode(channel.loads(message).get("value"), [b"\0" * 8])


def test_arrays_travel_as_raw_bytes_beside_the_json():
    frame = channel.dumps({"value": channel.encode(np.arange(3.0), buffers := []), channel.BUFFERS: buffers})
    size = int.from_bytes(frame[:4], "big")
    assert frame[4 + size:] == np.arange(3.0).tobytes()
    assert channel.loads(frame[4:4 + size]) == {
        "value": {"$": "ndarray", "dtype": "<f8", "shape": [3], "buffer": 0}, channel.BUFFERS: [24]}


def test_submission_reader_refuses_links_folders_fifos_and_large_files(tmp_path):
    (tmp_path / "link.ipynb").symlink_to(CHAPTER)
    (tmp_path / "folder.ipynb").mkdir()
    os.mkfifo(tmp_path / "fifo.ipynb")
    (tmp_path / "big.ipynb").write_bytes(b" " * 2000)
    for name, why in [("link", "a symbolic link"), ("folder", "a folder"), ("fifo", "not a regular file"),
                      ("big", "larger than")]:
        with pytest.raises(NotGradable, match=why):
            read_bytes(tmp_path / f"{name}.ipynb", max_bytes=1000)


def test_submission_parser_keeps_ids_sources_and_defined_names():
    nb = load()
    extra = nbformat.v4.new_code_cell("%matplotlib inline\nimport numpy as np\nhelper = 3\ndef extra(): pass")
    nb.cells.append(extra)
    nb.cells.append(nbformat.v4.new_code_cell("def broken(:"))
    cells = parse(nbformat.writes(nb).encode())
    by_id = {c.id: c for c in cells}
    assert by_id["exercise-90-1"].exercise == "90.1" and by_id["exercise-90-1"].defines == ("cover_count",)
    assert by_id["exercise-90-1"].source == solution("exercise-90-1")
    assert by_id[extra.id].defines == ("np", "helper", "extra")
    assert cells[-1].defines == ()
    with pytest.raises(NotANotebook, match="not valid JSON"):
        parse(b"[" * 100_000)
    with pytest.raises(NotANotebook, match="ran out of memory"):
        parse(b'{"cells": [], "x": "' + b"y" * 30_000_000 + b'"}', memory=64 * 2**20)


# ---------------------------------------------------------------------------
# A real chapter, end to end
# ---------------------------------------------------------------------------

@needs_bwrap
def test_chapter_1_reference_passes_and_student_edition_fails(tmp_path):
    """The chapter's own solutions earn full marks through the sandbox; its stubs earn nothing."""
    chapter = ROOT / "book" / "01_neurons.ipynb"
    folder = tmp_path / "subs"
    folder.mkdir()
    write(folder, "reference", load(chapter))
    write(folder, "student_edition", student_notebook(load(chapter)))
    rows = grade_folder(folder, chapter, tmp_path / "grades.csv", timeout_per_notebook=300, timeout_per_cell=60,
                        quiet=True)
    by_student = {s: [r for r in rows if r.student == s] for s in ("reference", "student_edition")}
    assert len(by_student["reference"]) >= 4
    assert all(r.passed for r in by_student["reference"]), [r.reason for r in by_student["reference"]]
    assert not any(r.passed for r in by_student["student_edition"])
    assert all("raised NotImplementedError: Exercise 1." in r.reason for r in by_student["student_edition"])
