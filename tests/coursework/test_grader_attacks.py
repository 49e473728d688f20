"""Dishonest and hostile submissions: none may score, touch the grades or outlive its grading.

Every attack here is a real notebook file graded by the real grader, in its
sandbox. Each one worked against the grader that ran submissions in a
Jupyter kernel with the checks beside them: processes that outlived their
submission and rewrote the grades, edits to the installed package, reading
the reference chapter, reading the expected values from the checker's
frames or patching the checker, forging the runner's records, library
shortcuts, resource exhaustion, hostile file names. The sources of the
attacks are in :func:`attack_sources`, keyed by the function each exercise
cell defines, so that they can be built against any chapter that has
cover_count and flip_probability.
"""
from __future__ import annotations

import os
import sysconfig
import time
from pathlib import Path

import nbformat
import pytest
from grader_fixtures import (
    CHAPTER,
    ROOT,
    SHORTCUT_CHAPTER,
    cell,
    edit,
    fixture_checks,
    grade,
    load,
    needs_bwrap,
    processes_with,
    score,
    solution,
    write,
)

from dlbook.coursework.sandbox import Limits, Sandbox

pytestmark = needs_bwrap

#: Every process an attack starts carries this in its command line, to be found afterwards.
MARKER = "dlbook-attack-marker"
COVER = solution("exercise-90-1")
FLIP = solution("exercise-90-2")
ROWS = solution("exercise-90-3")
COVER_ZERO = "def cover_count(num_points, dim):\n    return 0\n"


def attack_sources(out_csv: str, reference: str, repository: str) -> dict[str, dict[str, str]]:
    """name -> {function name: source of its exercise cell}.

    ``out_csv`` is the grader's output, ``reference`` the reference chapter and
    ``repository`` the checkout: an attacker who can see the grader's command
    line (as a kernel could, in /proc) knows them.
    """
    return {
        # 1. a process that outlives the submission and rewrites the grades once they are written
        "outlive": {"cover_count": COVER + f'''
import subprocess, sys
subprocess.Popen(["sleep", "313"], start_new_session=True)
subprocess.Popen([sys.executable, "-c", """
import os, time
for _ in range(6000):
    if os.path.exists({out_csv!r}):
        time.sleep(1)
        with open({out_csv!r}, "a") as handle:
            handle.write("hacked,90.1,1,1,True,passed")
        break
    time.sleep(0.1)
""", "{MARKER}"], start_new_session=True)
'''},
        # 2. edit the installed package (and the repository) for the next students
        "edit_package": {"cover_count": COVER_ZERO + f'''
import glob, importlib.util, os
package = os.path.dirname(importlib.util.find_spec("dlbook").origin)
for path in glob.glob(package + "/**/*.py", recursive=True) + glob.glob({repository!r} + "/lib/dlbook/**/*.py",
                                                                        recursive=True):
    try:
        with open(path, "a") as handle:
            handle.write("\\n# {MARKER}\\n")
    except OSError:
        pass
'''},
        # 3. read the reference chapter (its known path, the grader's command line, beside the package)
        "read_reference": {"cover_count": f'''
import glob, importlib.util, json, os

def _candidates():
    yield {reference!r}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            yield from (a for a in open(f"/proc/{{pid}}/cmdline").read().split("\\0") if a.endswith(".ipynb"))
        except OSError:
            pass
    package = os.path.dirname(importlib.util.find_spec("dlbook").origin)
    for folder in (package, os.path.dirname(package), os.path.dirname(os.path.dirname(package))):
        yield from glob.glob(folder + "/*.ipynb") + glob.glob(folder + "/*/*.ipynb")

def _solution():
    for path in _candidates():
        try:
            cells = json.load(open(path))["cells"]
        except (OSError, ValueError, KeyError):
            continue
        for c in cells:
            source = "".join(c["source"])
            if "BEGIN SOLUTION" in source and "def cover_count" in source:
                return source

exec(_solution() or "def cover_count(num_points, dim):\\n    raise NotImplementedError('no reference found')")
'''},
        # 4a. read the expected value from the checker's frames
        "frame_peek": {"cover_count": '''
import sys
def cover_count(num_points, dim):
    frame = sys._getframe(1)
    while frame is not None:
        for name in ("expected", "reference", "result"):
            if name in frame.f_locals:
                return frame.f_locals[name]
        frame = frame.f_back
    return -1
'''},
        # 4b. find the checker's own reference function through the garbage collector
        "gc_search": {"cover_count": '''
import gc
_reference = next((obj for obj in gc.get_objects() if callable(obj) and getattr(obj, "__name__", "") == "_cover"),
                  None)
def cover_count(num_points, dim):
    return _reference(num_points, dim) if _reference is not None else -1
'''},
        # 4c. patch the checker: a standard-library method that makes every failing case vanish
        "patch_checker": {"cover_count": COVER_ZERO + '''
import contextlib, math
contextlib._GeneratorContextManager.__exit__ = lambda self, *exc: True
math.comb = lambda n, k: 0
''', "flip_probability": '''
def flip_probability(alpha):
    return 0.0
import math
math.erfc = lambda x: 0.0
'''},
        # 4d. forge the records of a grader that keeps them in files (found through /proc), or the
        # grader's channel (its file descriptors, and the request number found in the worker's frames)
        "forge": {"cover_count": COVER_ZERO + '''
import json, os, re, sys
_files = {}
for _pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        _args = open(f"/proc/{_pid}/cmdline").read().split("\\0")
    except OSError:
        continue
    _files.update({os.path.basename(a): a for a in _args if a.endswith((".jsonl", "grading.ipynb"))})
if "grading.ipynb" in _files and "progress.jsonl" in _files:
    _cells = json.load(open(_files["grading.ipynb"]))["cells"]
    _results = re.search(r"make_recorder\\('([^']+)'", "".join(_cells[0]["source"])).group(1)
    with open(_files["progress.jsonl"], "a") as _progress, open(_results, "a") as _out:
        for _index, _cell in enumerate(_cells):
            _role = _cell["metadata"].get("dlbook_grader", {})
            _progress.write(json.dumps({"event": "cell", "index": _index, "status": "ok"}) + "\\n")
            if _role.get("role") == "record":
                _out.write(json.dumps({"exercise": _role["exercise"], "passed": True, "points": 1,
                                       "reason": "passed", "cases": "1/1"}) + "\\n")
        _progress.write(json.dumps({"event": "done"}) + "\\n")
    os._exit(0)
_frame, _seq = sys._getframe(), None
while _frame is not None and _seq is None:
    _request = _frame.f_locals.get("request")
    _seq = _request.get("seq") if isinstance(_request, dict) else None
    _frame = _frame.f_back
_body = json.dumps({"status": "ok", "function": "defined", "seq": _seq}).encode()
for _fd in range(3, 30):
    try:
        os.write(_fd, len(_body).to_bytes(4, "big") + _body)
    except OSError:
        pass
'''},
        # 6. resources
        "big_array": {"cover_count": COVER + "\nimport numpy as np\n_big = np.ones(800_000_000)\n"},
        "print_flood": {"cover_count": COVER + '''
import os
for _ in range(250):
    print("x" * 1_000_000)
for _ in range(250):
    os.write(1, b"y" * 1_000_000)
'''},
        "fork_many": {"cover_count": COVER + '''
import subprocess
_children = []
try:
    for _ in range(500):
        _children.append(subprocess.Popen(["sleep", "313"], start_new_session=True))
except OSError:
    pass
'''},
        "disk_fill": {"cover_count": COVER + f'''
import os
for _path in ("/tmp/fill", "/dev/shm/fill", "/fill", "/usr/fill", os.path.dirname({out_csv!r}) + "/fill"):
    try:
        with open(_path, "wb") as _handle:
            for _ in range(1024):
                _handle.write(b"z" * 1_000_000)
    except OSError:
        pass
'''},
        "network": {"cover_count": '''
import socket
try:
    socket.create_connection(("1.1.1.1", 53), timeout=3).close()
    _online = True
except OSError:
    _online = False

def cover_count(num_points, dim):
    return 0 if _online else 2 * sum(__import__("math").comb(num_points - 1, i) for i in range(dim))
'''},
    }


def _build(out_csv, reference) -> dict:
    subs = {name: edit(**{f"exercise_90_{k}": sources[fn] for k, fn in
                          enumerate(("cover_count", "flip_probability"), start=1) if fn in sources})
            for name, sources in attack_sources(str(out_csv), str(reference), str(ROOT)).items()}
    # 7. hostile file names, a folder, a named pipe, a file too large, a parser bomb
    subs["=2+5+cmd|' -c calc'!A0"] = load()
    subs["\x1b[2J\x1b[31mred"] = load()
    subs["escapes"] = edit(exercise_90_1='def cover_count(num_points, dim):\n'
                                         '    raise ValueError("\\x1b[2J\\x1b[31mgotcha\\nsecond line")\n')
    nb = load()
    cell(nb, "exercise-90-3").source = ROWS + "\n" + "#" * 3_000_000
    subs["huge"] = nb
    subs["parse_bomb"] = b"[" * 1_000_000
    nb = load()
    nb.cells += [nbformat.v4.new_code_cell(f"x{i} = {i}") for i in range(10_000)]
    subs["ten_thousand_cells"] = nb
    # 8. fairness to honest students
    subs["exit_call"] = edit(exercise_90_1=COVER + "\nexit()\n")
    subs["os_exit"] = edit(exercise_90_1=COVER + "\nimport os\nos._exit(0)\n")
    nb = student_stub()
    nb.cells.insert(4, nbformat.v4.new_code_cell(COVER, id="my-solution"))
    subs["solution_elsewhere"] = nb
    nb = edit(exercise_90_1="def cover_count(num_points, dim):\n    return _table[(num_points, dim)]\n")
    nb.cells.insert(3, nbformat.v4.new_code_cell(
        "import math\n_table = {(s, n): 2 * sum(math.comb(s - 1, i) for i in range(n))\n"
        "          for s in range(1, 30) for n in range(1, 30)}\n", id="helpers"))
    subs["helper_elsewhere"] = nb
    subs["duplicate_ids"] = _duplicated(last_correct=True)
    subs["duplicate_ids_stub_last"] = _duplicated(last_correct=False)
    return subs


def student_stub():
    """The fixture with exercise 90.1 still a stub."""
    return edit(exercise_90_1='def cover_count(num_points, dim):\n    raise NotImplementedError("Exercise 90.1")\n')


def _duplicated(last_correct: bool):
    nb = student_stub()
    copy = nbformat.from_dict(dict(cell(nb, "exercise-90-1")))
    copy.source = COVER
    index = nb.cells.index(cell(nb, "exercise-90-1"))
    nb.cells.insert(index + 1 if last_correct else index, copy)
    return nb


@pytest.fixture(scope="module")
def attacked(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("attacks")
    folder = tmp / "submissions"
    folder.mkdir()
    out = tmp / "out" / "grades.csv"
    for name, content in _build(out, CHAPTER).items():
        write(folder, name, content)
    write(folder, "correct", load())
    (folder / "link.ipynb").symlink_to(CHAPTER)
    (folder / "folder.ipynb").mkdir()
    os.mkfifo(folder / "pipe.ipynb")
    with fixture_checks():
        started = time.monotonic()
        result = grade(folder, out, CHAPTER, "--timeout", "90", "--cell-timeout", "15", "--jobs", "2",
                       "--max-size-mb", "2")
        result["seconds"] = time.monotonic() - started
    result["leftover_now"] = processes_with(MARKER) + processes_with("sleep 313")
    time.sleep(2)  # anything left would write now
    result["csv_after"] = out.read_text(encoding="utf-8")
    result["leftover_later"] = processes_with(MARKER) + processes_with("sleep 313")
    print(result["stdout"], result["stderr"], f"grading took {result['seconds']:.1f} s", sep="\n")
    return result


def test_grading_ends_cleanly(attacked):
    assert attacked["code"] == 0, attacked["stderr"]
    assert attacked["seconds"] < 400


def test_no_process_outlives_its_submission(attacked):
    assert attacked["leftover_now"] == [] and attacked["leftover_later"] == []
    assert "hacked" not in attacked["csv_after"]
    assert score(attacked, "outlive", "90.1")[0] == 1  # the function itself is right


def test_the_package_and_the_repository_stay_untouched(attacked):
    changed = [str(p) for p in (ROOT / "lib" / "dlbook").rglob("*.py") if MARKER in p.read_text(encoding="utf-8")]
    assert changed == []
    assert score(attacked, "edit_package", "90.1") == (0, "case cover_count(4, 3): expected 14, got 0")
    assert [score(attacked, "correct", e)[0] for e in ("90.1", "90.2", "90.3")] == [1, 1, 1]


def test_the_reference_is_out_of_sight(attacked):
    assert score(attacked, "read_reference", "90.1") == (
        0, "case cover_count(4, 3): raised NotImplementedError: no reference found")
    assert score(attacked, "link", "90.1") == (0, "not graded: the submission is a symbolic link, not a notebook file")


def test_expected_values_never_enter_the_students_process(attacked):
    assert score(attacked, "frame_peek", "90.1") == (0, "case cover_count(4, 3): expected 14, got -1")
    assert score(attacked, "gc_search", "90.1") == (0, "case cover_count(4, 3): expected 14, got -1")
    assert score(attacked, "patch_checker", "90.1") == (0, "case cover_count(4, 3): expected 14, got 0")
    points, reason = score(attacked, "patch_checker", "90.2")
    assert points == 0 and reason.startswith("case flip_probability(0.138): expected 0.0035")


def test_forged_records_and_channel_messages_do_not_count(attacked):
    points, reason = score(attacked, "forge", "90.1")
    assert points == 0 and "did the code write to the grader's channel?" in reason, reason
    assert [score(attacked, "forge", e)[0] for e in ("90.2", "90.3")] == [1, 1]


def test_resource_limits(attacked):
    points, reason = score(attacked, "big_array", "90.1")
    assert points == 0 and reason.startswith("MemoryError: Unable to allocate"), reason
    assert score(attacked, "big_array", "90.2")[0] == 1
    for student in ("print_flood", "fork_many", "disk_fill", "network", "ten_thousand_cells"):
        assert [score(attacked, student, e)[0] for e in ("90.1", "90.2", "90.3")] == [1, 1, 1], student
    assert attacked["json"]["students"]["print_flood"]["seconds"] < 60
    assert not (attacked["out"].parent / "fill").exists()
    assert score(attacked, "huge", "90.1") == (0, "not graded: the file is larger than the 2 MB the grader reads")
    assert score(attacked, "parse_bomb", "90.1")[1].startswith("not a readable notebook: not valid JSON")


def test_hostile_names_and_files_are_reported_cleanly(attacked):
    students = [r["student"] for r in attacked["summary"]]
    assert "'=2+5+cmd|' -c calc'!A0" in students  # neutralised for spreadsheets
    assert "[2J[31mred" in students  # escape characters removed
    assert not any("\x1b" in line for line in attacked["stdout"].splitlines())
    assert attacked["json"]["students"]["[2J[31mred"]["file"] == "\x1b[2J\x1b[31mred.ipynb"
    assert score(attacked, "escapes", "90.1") == (0, "case cover_count(4, 3): raised ValueError: [2J[31mgotcha "
                                                    "second line")
    assert score(attacked, "folder", "90.2") == (0, "not graded: the submission is a folder, not a notebook file")
    assert score(attacked, "pipe", "90.3") == (0, "not graded: the submission is not a regular file")


def test_fair_to_honest_students(attacked):
    assert [score(attacked, "exit_call", e)[0] for e in ("90.1", "90.2", "90.3")] == [1, 1, 1]
    points, reason = score(attacked, "os_exit", "90.1")
    assert points == 0 and reason.startswith("the worker died while running the exercise cell: it exited")
    assert [score(attacked, "os_exit", e)[0] for e in ("90.2", "90.3")] == [1, 1]  # in a fresh worker
    points, reason = score(attacked, "solution_elsewhere", "90.1")
    assert points == 0 and reason.endswith(
        "[the exercise cell still raises NotImplementedError, but cell 5 (id my-solution) defines "
        "cover_count: the grader runs only the exercise cell, so write the solution there]"), reason
    points, reason = score(attacked, "helper_elsewhere", "90.1")
    assert points == 0 and reason.startswith("case cover_count(4, 3): raised NameError: name '_table' is not defined")
    assert reason.endswith("[_table is defined in cell 4 (id helpers), which the grader does not run (it runs "
                           "the chapter's setup and the exercise cells only): define it in the exercise cell]"), reason
    assert score(attacked, "duplicate_ids", "90.1") == (
        1, "passed (8/8 cases) [the notebook has 2 cells with id exercise-90-1; the grader used the last one]")
    points, reason = score(attacked, "duplicate_ids_stub_last", "90.1")
    assert points == 0 and reason.endswith(
        "[the notebook has 2 cells with id exercise-90-1; the grader used the last one] [the exercise cell "
        "still raises NotImplementedError, but cell 4 (id exercise-90-1) defines cover_count: the grader runs "
        "only the exercise cell, so write the solution there]"), reason


# ---------------------------------------------------------------------------
# Library shortcuts (chapter 91 blocks dlbook.cover.cover_count)
# ---------------------------------------------------------------------------

SHORTCUTS = {
    "honest": None,
    "shortcut": "from dlbook.cover import cover_count as _library\n\n"
                "def cover_count(num_points, dim):\n    return _library(num_points, dim)\n",
    "shortcut_hidden": "import importlib\n_library = getattr(importlib.import_module('dlbook.' + 'co' + 'ver'), "
                       "'cover_' + 'count')\n\ndef cover_count(num_points, dim):\n"
                       "    return _library(num_points, dim)\n",
    "shortcut_at_definition": "import dlbook.cover\n_table = {(s, n): dlbook.cover.cover_count(s, n) "
                              "for s in range(1, 21) for n in range(1, 13)}\n\n"
                              "def cover_count(num_points, dim):\n    return _table[num_points, dim]\n",
}


@pytest.fixture(scope="module")
def shortcuts(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("shortcuts")
    folder = tmp / "submissions"
    folder.mkdir()
    for name, source in SHORTCUTS.items():
        write(folder, name, load(SHORTCUT_CHAPTER) if source is None else edit(SHORTCUT_CHAPTER, exercise_91_1=source))
    with fixture_checks():
        return grade(folder, tmp / "grades.csv", SHORTCUT_CHAPTER, "--jobs", "2")


def test_library_shortcuts_score_zero_with_the_reason(shortcuts):
    blocked = "Exercise 91.1 asks you to write this yourself; dlbook.cover.cover_count is not available inside it"
    note = "[the cell refers to dlbook.cover.cover_count, which exercise 91.1 asks you not to use]"
    assert score(shortcuts, "honest", "91.1") == (1, "passed (8/8 cases)")
    assert score(shortcuts, "shortcut", "91.1") == (0, f"case cover_count(4, 3): {blocked} {note}")
    assert score(shortcuts, "shortcut_hidden", "91.1") == (0, f"case cover_count(4, 3): {blocked}")
    assert score(shortcuts, "shortcut_at_definition", "91.1") == (0, f"ShortcutError: {blocked} {note}")


# ---------------------------------------------------------------------------
# The sandbox itself
# ---------------------------------------------------------------------------

PROBE = f'''
import os, socket
def writable(path):
    try:
        with open(path, "w") as handle:
            handle.write("x")
        return True
    except OSError:
        return False
def online():
    try:
        socket.create_connection(("1.1.1.1", 53), timeout=2).close()
        return True
    except OSError:
        return False
def observe():
    return {{
        "uid": os.getuid(),
        "processes": sorted(p for p in os.listdir("/proc") if p.isdigit()),
        "repository": os.path.exists({str(ROOT / "lib")!r}),
        "reference": os.path.exists({str(CHAPTER)!r}),
        "checks": sorted(os.listdir("/opt/dlbook/lib/dlbook/exercises/checks")),
        "grader": sorted(os.listdir("/opt/dlbook/lib/dlbook/coursework")),
        "scratch": writable("/tmp/x"),
        "system": writable("/usr/x") or writable("/x") or writable("/opt/dlbook/x"),
        "online": online(),
    }}
'''


def test_the_sandbox_shows_little_and_allows_less():
    site = Path(sysconfig.get_paths()["purelib"])  # a hidden folder and file inside a mounted folder
    hidden_folder = next(p for p in sorted(site.glob("*.dist-info")) if any(p.iterdir()))
    hidden_file = next(p for p in sorted(site.iterdir()) if p.is_file() and p.stat().st_size)
    probe = PROBE + f"""
def hidden():
    return (os.listdir({str(hidden_folder)!r}), os.path.getsize({str(hidden_file)!r}),
            writable({str(hidden_folder / "x")!r}))
"""
    with Sandbox(Limits(), hidden=[ROOT, hidden_folder, hidden_file]) as sandbox:
        worker = sandbox.start()
        try:
            reply = worker.request({"op": "run", "source": probe, "exercise": "0.2", "function": "hidden"}, 30)
            assert reply["status"] == "ok", reply
            covered = worker.request({"op": "call", "exercise": "0.2", "args": [],
                                      "kwargs": {"$": "dict", "items": []}}, 30)
            reply = worker.request({"op": "run", "source": PROBE, "exercise": "0.1", "function": "observe"}, 30)
            assert reply["status"] == "ok" and reply["function"] == "defined", reply
            reply = worker.request({"op": "call", "exercise": "0.1", "args": [],
                                    "kwargs": {"$": "dict", "items": []}}, 30)
        finally:
            worker.stop()
    seen = dict(reply["value"]["items"])
    assert seen["uid"] != 0 and len(seen["processes"]) <= 3
    assert not seen["repository"] and not seen["reference"]
    assert seen["checks"] == ["__init__.py"] and seen["grader"] == ["__init__.py", "channel.py", "worker.py"]
    assert seen["scratch"] and not seen["system"] and not seen["online"]
    assert covered["value"] == {"$": "tuple", "items": [[], 0, False]}


def test_a_python_installed_under_tmp_is_mounted_over_the_scratch_folder(monkeypatch):
    # A checkout (and its .venv) under /tmp: the scratch tmpfs at /tmp must not cover the interpreter.
    monkeypatch.setattr(Sandbox, "_mounted_folders", lambda self: [Path("/tmp/checkout/.venv")])
    with Sandbox(Limits()) as sandbox:
        options = sandbox._options
    scratch = next(i for i in range(len(options) - 1) if options[i:i + 2] == ["--tmpfs", "/tmp"])
    binds = [i for i in range(len(options) - 2)
             if options[i] == "--ro-bind" and options[i + 2] == "/tmp/checkout/.venv"]
    assert binds and all(scratch < i for i in binds), options
