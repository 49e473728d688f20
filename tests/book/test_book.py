"""The book's configuration and chapters agree with each other and with DESIGN.md."""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted((ROOT / "book").glob("[0-9][0-9]_*.ipynb"))


def _config() -> dict:
    return yaml.safe_load((ROOT / "_config.yml").read_text())


def _toc_files() -> list[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]]
    for part in toc["parts"]:
        files += [chapter["file"] for chapter in part["chapters"]]
    return files


def _setup_cell(path: Path) -> str:
    notebook = nbformat.read(path, as_version=4)
    return next(cell.source for cell in notebook.cells if cell.cell_type == "code")


def test_there_is_at_least_one_chapter():
    assert CHAPTERS, "no chapter notebooks found in book/"


def test_toc_lists_only_existing_pages_and_every_chapter():
    listed = _toc_files()
    for entry in listed:
        assert any((ROOT / f"{entry}{suffix}").exists() for suffix in (".md", ".ipynb")), entry
    for chapter in CHAPTERS:
        assert f"book/{chapter.stem}" in listed, f"{chapter.name} is missing from _toc.yml"


def test_errata_page_includes_the_errata_of_every_chapter_and_no_other():
    included = re.findall(r"\{include\} errata/ch(\d\d)\.md", (ROOT / "book" / "errata.md").read_text())
    assert included == sorted(included), "errata in chapter order"
    assert included == [chapter.name[:2] for chapter in CHAPTERS]


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_colab_setup_cell_installs_from_the_configured_repository(chapter):
    url = _config()["repository"]["url"]
    match = re.search(r"dlbook @ git\+(\S+?)\"", _setup_cell(chapter))
    assert match, "the set-up cell must install dlbook from the repository in Colab"
    assert match.group(1) == url


def test_every_chapter_starts_with_the_same_setup_cell():
    cells = {chapter.stem: _setup_cell(chapter) for chapter in CHAPTERS}
    assert len(set(cells.values())) == 1, "set-up cells differ between chapters"
    source = next(iter(cells.values()))
    assert "dlbook.setup(" in source and "google.colab" in source
    assert "torch" not in source.split("dlbook @")[0], "the Colab cell must not reinstall torch"
    for chapter in CHAPTERS:  # the grader runs the cells tagged setup before the exercise cells
        first = next(c for c in nbformat.read(chapter, as_version=4).cells if c.cell_type == "code")
        assert "setup" in first.metadata.get("tags", []), f"{chapter.name}: the set-up cell is not tagged setup"


def test_requirements_pin_exact_versions():
    lines = [line.strip() for line in (ROOT / "requirements.txt").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    assert all("==" in line for line in lines), [line for line in lines if "==" not in line]
    pins = dict(line.split("==") for line in lines)
    assert pins["torch"] == "2.13.0"
    assert pins["jupyter-book"].startswith("1.")


def test_package_declares_ranges_not_pins():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not [dep for dep in project["dependencies"] if "==" in dep]
    assert any(dep.startswith("torch>=") for dep in project["dependencies"])


def test_config_enables_what_the_book_needs():
    config = _config()
    assert config["execute"]["execute_notebooks"] in ("cache", "force")
    assert config["execute"]["timeout"] >= 300
    assert "dollarmath" in config["parse"]["myst_enable_extensions"]
    assert config["bibtex_bibfiles"] == ["book/references.bib"]
    assert "sphinx-mathjax-offline" in config["sphinx"]["extra_extensions"]
    assert config["launch_buttons"]["colab_url"]


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_citations_exist_in_the_bibliography(chapter):
    bib = (ROOT / "book" / "references.bib").read_text()
    keys = set(re.findall(r"@\w+\{([^,]+),", bib))
    text = "\n".join(cell.source for cell in nbformat.read(chapter, as_version=4).cells)
    cited = {key.strip() for group in re.findall(r"\{cite\}`([^`]+)`", text) for key in group.split(",")}
    assert cited, "a chapter cites its sources"
    assert cited <= keys, cited - keys


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_exercise_task_cells_state_the_registry_metadata(path):
    """Each task cell (the markdown cell before a solution) names the exercise with the stars,
    time and kind of its registered check, as CONTRIBUTING.md shows."""
    from dlbook.coursework.notebook import exercise_cells
    from dlbook.exercises import get_exercise

    notebook = nbformat.read(path, as_version=4)
    for cell in exercise_cells(notebook, path.name):
        ex = get_exercise(cell.exercise_id)
        task = notebook.cells[cell.index - 1]
        expected = f"**Exercise {ex.id}** ({ex.stars}, about {ex.minutes} min, {ex.kind})"
        assert task.cell_type == "markdown" and expected in task.source, (path.name, expected)
        assert task.source.lstrip().startswith("### "), (path.name, ex.id, "the task starts with a ### title")


def test_instructors_page_gets_the_workload_table():
    from dlbook.coursework.workload import MARKER, with_workload

    page = (ROOT / "book" / "instructors.md").read_text()
    assert page.count(MARKER) == 1
    table = with_workload(page, ROOT / "book")
    for path in CHAPTERS:
        number = int(path.name[:2])
        assert f"| {number}. " in table, path.name


def test_course_plans_name_registered_exercises_of_the_kind_they_say():
    from dlbook.exercises import core

    page = (ROOT / "book" / "instructors.md").read_text()
    named = re.findall(r"\b(\d{1,2}\.\d) (extend|predict|derive|transcribe)\b", page)
    assert len(named) >= 30, "the course plans name the exercises to assign"
    wrong = [(eid, kind, core.get_exercise(eid).kind) for eid, kind in named if core.get_exercise(eid).kind != kind]
    assert not wrong, f"exercises named with the wrong kind (id, page, registry): {wrong}"
