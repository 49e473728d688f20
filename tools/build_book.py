"""Build the HTML book, or the student edition of it, with Jupyter Book 1.x.

Usage: python tools/build_book.py [--student] [--no-execute]

The book is rendered from the executed chapters in _build/executed/
(tools/executed.py), never by executing inside the build: the test run's
nbval pass writes them, and this script executes with nbclient only the
chapters whose executed copy is missing or out of date (the copy records a
hash of the chapter, lib/, the pins and _config.yml). ``--no-execute``
refuses to execute and fails on a missing or stale copy instead (the test
command uses it, so each chapter runs once per test run).

The sources are staged in _build/stage/<edition>/ with the executed chapters
and a configuration that turns execution off; the HTML lands in
_build/html (reference) or _build/student-html (student edition). The
student edition replaces every solution by its stub and drops the outputs of
the exercise cells, removes the launch and repository buttons (they would
open the reference notebooks), and says what a student edition is.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import nbformat
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import results_appendix  # noqa: E402

import executed  # noqa: E402

ROOT = executed.ROOT
BUILD = ROOT / "_build"
STAGE = BUILD / "stage"
TARGETS = {"reference": BUILD / "html", "student": BUILD / "student-html"}
#: Files and folders of book/ that are copied as they are (chapters come from _build/executed).
BOOK_SUFFIXES = (".md", ".bib", ".png", ".svg", ".jpg")


def ensure_executed(allow_execute: bool, jobs: int = 2) -> list[Path]:
    """The executed copy of every chapter, executing the stale ones if allowed."""
    stale = [path for path in executed.chapters() if not executed.is_fresh(path)]
    if stale and not allow_execute:
        names = ", ".join(path.name for path in stale)
        raise SystemExit(f"build_book: no up-to-date executed copy of {names} in "
                         f"{executed.EXECUTED.relative_to(ROOT)} (run the notebooks first, "
                         f"or build without --no-execute)")
    if stale:
        print(f"build_book: executing {len(stale)} chapter(s): {', '.join(p.stem for p in stale)}",
              flush=True)
        with ProcessPoolExecutor(max_workers=min(jobs, len(stale))) as pool:
            for path in pool.map(executed.execute, stale):
                print(f"build_book: executed {path.name}", flush=True)
    return [executed.executed_path(path) for path in executed.chapters()]


def staged_config(edition: str) -> dict:
    """_config.yml for rendering stored outputs; the student and PDF editions have no launch buttons."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    config["execute"]["execute_notebooks"] = "off"
    if edition == "student":
        config["title"] = f"{config['title']} (student edition)"
    if edition in ("student", "pdf"):  # no launch, repository or issue buttons
        config.pop("launch_buttons", None)
        config["html"]["use_repository_button"] = False
        config["html"]["use_issues_button"] = False
        config["html"]["use_edit_page_button"] = False
    return config


def stage(edition: str, chapters: list[Path]) -> Path:
    """Copy the book's sources with the executed (or student) chapters into _build/stage/<edition>."""
    source = STAGE / edition
    if source.exists():
        shutil.rmtree(source)
    (source / "book").mkdir(parents=True)
    (source / "_config.yml").write_text(yaml.safe_dump(staged_config(edition), sort_keys=False))
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    if edition == "student":  # the grading workflow is for instructors, not in the students' book
        for part in toc["parts"]:
            part["chapters"] = [c for c in part["chapters"] if c["file"] != "book/instructors"]
    (source / "_toc.yml").write_text(yaml.safe_dump(toc, sort_keys=False))
    (source / "tools").mkdir()
    shutil.copy(ROOT / "tools" / "book_extensions.py", source / "tools")
    for path in (ROOT / "book").iterdir():
        if path.is_dir():
            shutil.copytree(path, source / "book" / path.name)
        elif path.suffix in BOOK_SUFFIXES:
            shutil.copy(path, source / "book" / path.name)
    for path in chapters:
        nb = nbformat.read(path, as_version=4)
        if edition == "student":
            from dlbook.coursework.student import student_book_notebook

            nb = student_book_notebook(nb, path.name)
        nbformat.write(nb, str(source / "book" / path.name))
    from dlbook.coursework.workload import with_workload

    instructors = source / "book" / "instructors.md"
    text = with_workload(instructors.read_text(), ROOT / "book")
    instructors.write_text(results_appendix.with_chapter_times(text, chapters))
    results = source / "book" / "results.md"
    results.write_text(results_appendix.results_page(results.read_text(), chapters))
    if edition == "student":
        from dlbook.coursework.student import student_book_page

        (source / "book" / "instructors.md").unlink()
        page = source / "book" / "intro.md"
        page.write_text(student_book_page(page.read_text()))
    return source


def sources_hash(source: Path) -> str:
    """Hash of every staged file: an unchanged stage needs no new build."""
    digest = hashlib.sha256()
    for path in sorted(p for p in source.rglob("*") if p.is_file() and "_build" not in p.parts):
        digest.update(str(path.relative_to(source)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def jupyter_book(source: Path) -> None:
    """Run `jupyter-book build` with warnings as errors (nothing is executed)."""
    env = dict(os.environ, **executed.ENVIRONMENT)
    command = [str(Path(sys.executable).parent / "jupyter-book"), "build", str(source),
               "--warningiserror", "--keep-going", "--quiet"]
    subprocess.run(command, check=True, env=env, cwd=source)


def build(edition: str, allow_execute: bool) -> Path:
    """Stage and build one edition; skipped when the staged sources equal the last build's."""
    chapters = ensure_executed(allow_execute)
    source = stage(edition, chapters)
    target = TARGETS[edition]
    stamp = target / ".sources-hash"
    current = sources_hash(source)
    if stamp.exists() and stamp.read_text() == current:
        print(f"build_book: {edition} edition unchanged", flush=True)
        return target
    jupyter_book(source)
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(source / "_build" / "html", target)
    stamp.write_text(current)
    return target


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--student", action="store_true",
                        help="build the student edition (solutions replaced by stubs)")
    parser.add_argument("--no-execute", action="store_true",
                        help="fail instead of executing chapters whose executed copy is stale")
    args = parser.parse_args(argv)
    edition = "student" if args.student else "reference"
    target = build(edition, allow_execute=not args.no_execute)
    print(f"build_book: {edition} edition in {target.relative_to(ROOT)}/index.html")
    return 0


if __name__ == "__main__":
    sys.exit(main())
