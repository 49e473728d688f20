"""The student edition: stubs instead of solutions, nothing leaks, it runs.

Runs on the fixture chapter (tests/fixtures/mini_chapter.ipynb) and on every
chapter notebook book/[0-9][0-9]_*.ipynb that exists. That a chapter's
student edition runs top to bottom is proven statically
(student_edition_problems) from the reference's own run under nbval; the
fixture's edition is also executed, to test the argument end to end.
"""
from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import nbformat
import pytest
from grader_fixtures import fixture_checks
from nbclient import NotebookClient

from dlbook.coursework.cli import main
from dlbook.coursework.notebook import chapter_notebooks, exercise_cells, solution_blocks, solution_body
from dlbook.coursework.student import (
    make_student_edition,
    student_book_notebook,
    student_book_page,
    student_edition_problems,
    student_notebook,
    student_wording,
    write_student_editions,
)
from dlbook.exercises import EXERCISES

ROOT = Path(__file__).resolve().parents[2]
#: Its exercises 90.1 and 90.2 are the grader fixture's (tests/fixtures/grader/checks.py).
FIXTURE = ROOT / "tests" / "fixtures" / "mini_chapter.ipynb"
BOOK = ROOT / "book"


@pytest.fixture(scope="module", autouse=True)
def fixture_exercises():
    with fixture_checks():
        yield


def _notebooks():
    params = [pytest.param(FIXTURE, id="fixture")]
    params += [pytest.param(p, id=p.stem) for p in chapter_notebooks(BOOK)]
    return params


def _with_outputs(nb):
    """The notebook with a fake output and execution count on every code cell."""
    nb = nbformat.from_dict(nb)
    for count, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="secret output 42\n")]
            cell.execution_count = count + 1
    return nb


@pytest.fixture(scope="module", params=_notebooks())
def editions(request, tmp_path_factory):
    """(master notebook, student notebook, path of the student edition)."""
    source = request.param
    tmp = tmp_path_factory.mktemp("student")
    master = _with_outputs(nbformat.read(source, as_version=4))
    master_path = tmp / source.name
    nbformat.write(master, master_path)
    out = make_student_edition(master_path, tmp / "out" / source.name)
    return master, nbformat.read(out, as_version=4), out


def test_no_solution_line_survives(editions):
    master, student, _ = editions
    by_id = {cell.id: cell for cell in student.cells}
    solutions = exercise_cells(master)
    assert solutions, "the chapter has no exercises"
    for ex in solutions:
        body = [line.strip() for line in solution_body(ex.source) if line.strip()]
        assert body, f"exercise {ex.exercise_id} has an empty solution"
        stub_lines = {line.strip() for line in by_id[ex.cell_id].source.splitlines()}
        leaked = [line for line in body if line in stub_lines]
        assert not leaked, f"exercise {ex.exercise_id}: solution lines leaked: {leaked}"
        joined = "\n".join(solution_body(ex.source))
        for cell in student.cells:
            assert joined not in cell.source
        assert "BEGIN SOLUTION" not in by_id[ex.cell_id].source
        assert "END SOLUTION" not in by_id[ex.cell_id].source


def test_stubs_raise_not_implemented_with_the_hint(editions):
    master, student, _ = editions
    by_id = {cell.id: cell for cell in student.cells}
    for ex in exercise_cells(master):
        source = by_id[ex.cell_id].source
        assert ex.exercise_id in EXERCISES, (
            f"exercise {ex.exercise_id} has no registered check (in "
            f"dlbook/exercises/checks/chNN_slug.py)")
        hint = EXERCISES[ex.exercise_id].hint
        message = json.dumps(f"Exercise {ex.exercise_id}: {hint}", ensure_ascii=False)
        assert f"raise NotImplementedError({message})" in source
        namespace = {}
        exec("import math, torch\nimport numpy as np\n" + source, namespace)
        function = namespace[EXERCISES[ex.exercise_id].function_name]
        with pytest.raises(NotImplementedError, match=f"^Exercise {ex.exercise_id}: "):
            function(*([1] * function.__code__.co_argcount))


def test_everything_else_is_kept(editions):
    master, student, _ = editions
    assert [c.get("id") for c in student.cells] == [c.get("id") for c in master.cells]
    assert student.metadata == master.metadata
    exercise_ids = {ex.cell_id: ex.exercise_id for ex in exercise_cells(master)}
    solution_ids = set(exercise_ids)
    for old, new in zip(master.cells, student.cells):
        assert new.cell_type == old.cell_type
        if old.id in solution_ids:
            assert new.metadata["dlbook"] == {**old.metadata.get("dlbook", {}), "exercise": exercise_ids[old.id]}
            assert "solution" not in new.metadata.get("tags", [])
            assert "hide-input" not in new.metadata.get("tags", [])
            # the signature and docstring stay
            blocks = solution_blocks(old.source)
            head = old.source.split("\n")[:blocks[0][0]]
            assert new.source.split("\n")[:len(head)] == head
        else:
            assert new.source == old.source
            assert new.metadata == old.metadata


def test_outputs_are_cleared(editions):
    _, student, _ = editions
    for cell in student.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None
    assert "secret output 42" not in nbformat.writes(student)


def test_student_edition_provably_runs_where_the_reference_runs(editions):
    master, _, path = editions
    assert student_edition_problems(master, path.name) == []


def test_the_argument_catches_a_cell_that_calls_a_stub():
    nb = nbformat.read(FIXTURE, as_version=4)
    solution = exercise_cells(nb)[0]
    function = EXERCISES[solution.exercise_id].function_name
    nb.cells.append(nbformat.v4.new_code_cell(f"print({function}(1))", id="uses-the-stub"))
    problems = student_edition_problems(nb, "fixture")
    assert problems == [f"fixture: cell uses-the-stub uses {function}, which the solution of "
                        f"exercise {solution.exercise_id} defines"]
    nb.cells[solution.index].source = nb.cells[solution.index].source.replace("    ### BEGIN", "### BEGIN")
    assert any("not inside the body" in p for p in student_edition_problems(nb, "fixture"))


@pytest.mark.slow
def test_fixture_student_edition_runs_with_errors_only_in_exercise_cells(monkeypatch, tmp_path):
    """Check cells print failures instead of raising (DLBOOK_CHECKS unset)."""
    master = nbformat.read(FIXTURE, as_version=4)
    path = make_student_edition(FIXTURE, tmp_path / FIXTURE.name)
    monkeypatch.delenv("DLBOOK_CHECKS", raising=False)
    nb = nbformat.read(path, as_version=4)
    checks = ROOT / "tests" / "fixtures" / "grader" / "checks.py"
    nb.cells.insert(1, nbformat.v4.new_code_cell(  # the kernel registers the fixture's checks first
        "import importlib.util\n"
        f"spec = importlib.util.spec_from_file_location('fixture_checks', {str(checks)!r})\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(module)\n"
        "module.register()", id="register-fixture-checks"))
    client = NotebookClient(nb, kernel_name="python3", timeout=120, allow_errors=True,
                            resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    errors = [(cell.get("id"), out.get("ename"), out.get("evalue"))
              for cell in nb.cells if cell.cell_type == "code"
              for out in cell.outputs if out.output_type == "error"]
    assert errors == []
    printed = "".join(out.get("text", "") for cell in nb.cells if cell.cell_type == "code"
                      for out in cell.outputs if out.output_type == "stream")
    for ex in exercise_cells(master):
        assert f"❌ Exercise {ex.exercise_id} failed: " in printed
        assert "NotImplementedError" in printed


def test_student_book_notebook_keeps_outputs_except_the_exercises(editions):
    master, _, path = editions
    book = student_book_notebook(master, path.name)
    solution_ids = {ex.cell_id for ex in exercise_cells(master)}
    for old, new in zip(master.cells, book.cells):
        if new.cell_type != "code":
            continue
        if old.id in solution_ids or "dlbook.exercises.check(" in old.source:
            assert new.outputs == [] and new.execution_count is None
        else:
            assert new.outputs == old.outputs and new.source == old.source
    written = nbformat.writes(book)
    for ex in exercise_cells(master):
        assert "\n".join(solution_body(ex.source)) not in written


def test_student_wording_replaces_what_is_false_for_students():
    text = "Run the check\n(the reference solution is folded away in the book: try first), then"
    assert "folded away" not in student_wording(text)
    assert student_wording("nothing to change") == "nothing to change"


def test_student_book_page_has_no_link_to_the_instructors_page():
    intro = (ROOT / "book" / "intro.md").read_text()
    assert "{doc}`instructors`" in intro, "the intro links the instructors' page"
    page = student_book_page(intro + "\nSee {doc}`the grader <instructors>`.\n")
    assert "instructors`" not in page and "instructors>`" not in page
    assert "the instructors' page of the full book" in page


def _fixture_with(source_edit):
    nb = nbformat.read(FIXTURE, as_version=4)
    cell = next(c for c in nb.cells if c.get("id") == "exercise-90-2")
    cell.source = source_edit(cell.source)
    return nb


def test_solution_cell_without_markers_is_an_error(tmp_path):
    nb = _fixture_with(lambda s: s.replace("    ### BEGIN SOLUTION\n", "").replace("\n    ### END SOLUTION", ""))
    path = tmp_path / "no_markers.ipynb"
    nbformat.write(nb, path)
    with pytest.raises(ValueError, match=r"no_markers\.ipynb.*exercise-90-2.*no '### BEGIN SOLUTION'"):
        make_student_edition(path, tmp_path / "out.ipynb")
    assert not (tmp_path / "out.ipynb").exists()


def test_unbalanced_markers_are_an_error():
    nb = _fixture_with(lambda s: s.replace("\n    ### END SOLUTION", ""))
    with pytest.raises(ValueError, match=r"exercise-90-2.*never closed"):
        student_notebook(nb, "chapter")


def test_several_blocks_and_indentation_are_kept():
    nb = _fixture_with(lambda s: s + "\n\n\ndef helper():\n  ### BEGIN SOLUTION\n  return 1\n  ### END SOLUTION\n")
    cell = next(c for c in student_notebook(nb).cells if c.get("id") == "exercise-90-2")
    lines = cell.source.split("\n")
    assert sum("raise NotImplementedError" in line for line in lines) == 2
    assert any(line.startswith("    raise NotImplementedError") for line in lines)
    assert any(line.startswith("  raise NotImplementedError") for line in lines)


def test_cli_writes_editions(tmp_path):
    book = tmp_path / "book"
    book.mkdir()
    shutil.copy(FIXTURE, book / "01_mini.ipynb")
    shutil.copy(FIXTURE, book / "02_other.ipynb")
    (book / "intro.md").write_text("# not a chapter\n")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["student", "--book", str(book), "--out", str(tmp_path / "student")]) == 0
    assert sorted(p.name for p in (tmp_path / "student").iterdir()) == ["01_mini.ipynb", "02_other.ipynb"]
    assert f"wrote {tmp_path / 'student' / '01_mini.ipynb'}" in out.getvalue()
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["student", "--book", str(book), "--out", str(tmp_path / "one"), "02_other"]) == 0
    assert [p.name for p in (tmp_path / "one").iterdir()] == ["02_other.ipynb"]
    written = write_student_editions(book, tmp_path / "two", [str(book / "01_mini.ipynb")])
    assert [p.name for p in written] == ["01_mini.ipynb"]
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert main(["student", "--book", str(book), "--out", str(tmp_path / "x"), "99_nope"]) == 2
    assert "99_nope" in err.getvalue()
