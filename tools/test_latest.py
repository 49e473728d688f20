"""`make test-latest`: every chapter against the newest dependencies the package's ranges allow.

The book's own environment (.venv) is pinned by requirements.txt. A reader in
Colab or in their own environment gets whatever pip resolves from the ranges
in pyproject.toml instead, and those move. This command builds a throwaway
environment in _build/latest/.venv, installs dlbook there non-editable from
the repository (as the chapters' Colab set-up cell does, with the extras the
chapters and nbval need) so that pip picks the newest release inside every
range, records the versions it resolved, and runs every chapter under nbval.
Its executed chapters go to _build/latest/executed and never feed the book.
The report lands in _build/latest/report.txt.

Runs with any Python 3 (standard library only).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LATEST = ROOT / "_build" / "latest"
VENV = LATEST / ".venv"
PYTHON = VENV / "bin" / "python"
#: The packages whose versions the report names first.
WATCHED = ("torch", "numpy", "scipy", "matplotlib", "scikit-learn", "scikit-image", "networkx", "gymnasium",
           "ipywidgets", "nbval", "pytest", "ipykernel", "nbclient")


def run(command: list[str], **options) -> subprocess.CompletedProcess:
    print("+", " ".join(map(str, command)), flush=True)
    return subprocess.run(command, cwd=ROOT, **options)


def package_copy() -> Path:
    """A copy of the package's sources: building the wheel leaves nothing in the checkout."""
    source = LATEST / "source"
    if source.exists():
        shutil.rmtree(source)
    shutil.copytree(ROOT / "lib", source / "lib", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    return source


def reinstall_package() -> dict[str, str]:
    """The current dlbook into the existing environment, its dependencies left as resolved before."""
    run([str(PYTHON), "-m", "pip", "install", "--quiet", "--no-deps", "--force-reinstall",
         f"dlbook @ {package_copy().as_uri()}"], check=True)
    return _installed()


def install() -> dict[str, str]:
    """A fresh environment with dlbook from the repository and the newest dependencies; their versions."""
    if VENV.exists():
        shutil.rmtree(VENV)
    LATEST.mkdir(parents=True, exist_ok=True)
    run([sys.executable, "-m", "venv", str(VENV)], check=True)
    run([str(PYTHON), "-m", "pip", "install", "--quiet", "--upgrade", "pip"], check=True)
    source = package_copy()
    report = LATEST / "pip-report.json"
    run([str(PYTHON), "-m", "pip", "install", "--quiet", "--report", str(report),
         f"dlbook[coursework,test] @ {source.as_uri()}"], check=True)
    return _installed()


def _installed() -> dict[str, str]:
    listed = run([str(PYTHON), "-m", "pip", "list", "--format", "json"], check=True, capture_output=True, text=True)
    return {entry["name"].lower(): entry["version"] for entry in json.loads(listed.stdout)}


def main(argv: list[str]) -> int:
    """Usage: python tools/test_latest.py [--reuse] [chapter notebooks ...] (default: every chapter).

    ``--reuse`` keeps the environment's dependencies and reinstalls only dlbook, for a quick rerun.
    """
    reuse = "--reuse" in argv and PYTHON.exists()
    chapters = [arg for arg in argv if arg != "--reuse"] or ["book"]
    start = time.perf_counter()
    versions = reinstall_package() if reuse else install()
    installed_at = time.perf_counter() - start
    # Compatibility is the question here; the 60 s budget per chapter is the test command's to enforce.
    env = dict(os.environ, DLBOOK_EXECUTED_DIR=str(LATEST / "executed"), DLBOOK_CHAPTER_BUDGET_S="600")
    result = run([str(PYTHON), "-m", "pytest", "-p", "no:cacheprovider", *chapters, "-n", "2", "--dist",
                  "loadscope", "-q"], env=env)
    timings_file = LATEST / "notebook-timings.json"
    timings = json.loads(timings_file.read_text()) if timings_file.exists() else {}
    lines = ["make test-latest: every chapter against the newest dependencies allowed by pyproject.toml", "",
             "resolved versions:"]
    lines += [f"  {name:<14} {versions.get(name, 'not installed')}" for name in WATCHED]
    verdict = "all passed" if result.returncode == 0 else "FAILED"
    lines += ["", f"install: {installed_at:.0f} s; chapters ({' '.join(chapters)}): {verdict}"]
    lines += [f"  {Path(path).stem:<20} {seconds:6.1f} s" for path, seconds in sorted(timings.items())]
    lines += [f"total: {time.perf_counter() - start:.0f} s", "", "every installed package:"]
    lines += [f"  {name}=={version}" for name, version in sorted(versions.items())]
    text = "\n".join(lines) + "\n"
    (LATEST / "report.txt").write_text(text)
    print(text)
    return result.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
