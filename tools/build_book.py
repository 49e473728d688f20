"""Build the HTML book (or the student edition of it) with Jupyter Book 1.x.

Usage: python tools/build_book.py [--student]

The notebooks are executed through Jupyter Book's cache, which only notices
changes to a notebook's own code cells. Chapters import dlbook, so the cache
is wiped whenever lib/, requirements.txt or _config.yml change: a change in
the package never leaves stale outputs in the book.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "_build"
CACHE = BUILD / ".jupyter_cache"
STAMP = BUILD / ".inputs-hash"


def inputs_hash() -> str:
    """Hash of everything outside a notebook that can change its outputs."""
    digest = hashlib.sha256()
    files = sorted((ROOT / "lib").rglob("*.py")) + [ROOT / "requirements.txt", ROOT / "_config.yml"]
    for path in files:
        digest.update(str(path.relative_to(ROOT)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def invalidate_stale_cache() -> None:
    """Remove the execution cache if the package or the pins changed."""
    current = inputs_hash()
    if STAMP.exists() and STAMP.read_text() == current:
        return
    if CACHE.exists():
        print("build_book: lib/ or the pins changed, re-executing every chapter")
        shutil.rmtree(CACHE)
    BUILD.mkdir(exist_ok=True)
    STAMP.write_text(current)


def book_environment(strict_checks: bool) -> dict:
    """Environment for the build: static figures, one thread, no display."""
    env = dict(os.environ, DLBOOK_BOOK_BUILD="1", DLBOOK_FIGURES="static",
               MPLBACKEND="Agg", PYTHONHASHSEED="0")
    if strict_checks:
        env["DLBOOK_CHECKS"] = "strict"
    else:
        env.pop("DLBOOK_CHECKS", None)
    return env


def jupyter_book(source: Path, env: dict) -> None:
    """Run `jupyter-book build` with warnings as errors."""
    command = [str(Path(sys.executable).parent / "jupyter-book"), "build", str(source),
               "--warningiserror", "--keep-going"]
    subprocess.run(command, check=True, env=env, cwd=source)


def prepare_student_source() -> Path:
    """Copy the book's sources with every chapter replaced by its student edition."""
    from dlbook.coursework.student import write_student_editions

    source = BUILD / "student_src"
    if source.exists():
        shutil.rmtree(source)
    (source / "book").mkdir(parents=True)
    for name in ("_config.yml", "_toc.yml"):
        shutil.copy(ROOT / name, source / name)
    (source / "tools").mkdir()
    shutil.copy(ROOT / "tools" / "book_extensions.py", source / "tools")
    for path in (ROOT / "book").iterdir():
        if path.suffix in (".md", ".bib") or path.is_dir():
            copy = shutil.copytree if path.is_dir() else shutil.copy
            copy(path, source / "book" / path.name)
    write_student_editions(ROOT / "book", source / "book")
    return source


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--student", action="store_true",
                        help="build the student edition (solutions replaced by stubs)")
    args = parser.parse_args(argv)
    if args.student:
        source = prepare_student_source()
        jupyter_book(source, book_environment(strict_checks=False))
        target = BUILD / "student-html"
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(source / "_build" / "html", target)
        print(f"build_book: student edition in {target.relative_to(ROOT)}/index.html")
    else:
        invalidate_stale_cache()
        jupyter_book(ROOT, book_environment(strict_checks=True))
        print(f"build_book: book in {(BUILD / 'html').relative_to(ROOT)}/index.html")
    return 0


if __name__ == "__main__":
    sys.exit(main())
