"""The test command (`make test`): every phase in order, timed, with one report at the end.

Phases: install (the virtual environment and the Debian packages the tests
drive), lint (ruff), notebooks (nbval runs each chapter once, on both cores,
and writes the executed chapters), executed chapters (every checkpoint cell
left a record for the results appendix), unit tests (tests/lib,
tests/checks, the student edition and benchmark tools), grader tests
(tests/coursework/test_grader*), book build and student build (rendered
from the executed chapters, nothing executed again) and browser tests (the
built books and the live figures in JupyterLab). The PDF edition and its
tests run in the background from the end of the notebook phase: their CPU
work fills the gaps the later phases leave on the two cores. The notebooks
run first and alone, so the chapters' times are measured as DESIGN.md
budgets them (two at a time on two cores). A phase whose inputs failed is
skipped; the command fails if any phase failed. The report, with each
phase's wall and CPU seconds and each chapter's seconds, is printed and
written to _build/test-report.txt.

Runs with any Python 3 (standard library only): the phases run in .venv.
"""
from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHON = str(ROOT / ".venv" / "bin" / "python")
REPORT = ROOT / "_build" / "test-report.txt"
TIMINGS = ROOT / "_build" / "notebook-timings.json"
PYTEST = [PYTHON, "-m", "pytest", "-p", "no:cacheprovider"]
GRADER_TESTS = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests" / "coursework").glob("test_grader*.py"))

#: (name, command, phases it needs). Each command runs from the repository root.
PHASES = [
    ("install", ["make", "--no-print-directory", "setup"], ()),
    ("lint", [str(ROOT / ".venv" / "bin" / "ruff"), "check", "lib", "tests", "tools", "conftest.py"],
     ("install",)),
    ("notebooks", PYTEST + ["book", "-n", "2", "--dist", "loadscope", "-q"], ("install",)),
    ("executed chapters", PYTEST + ["tests/book", "-m", "built", "-q"], ("notebooks",)),
    # Work stealing: the contract tests take up to seconds each, the rest milliseconds; a worker that
    # runs out takes tests from the other instead of waiting for its batch of slow ones to end.
    ("unit tests", PYTEST + ["tests", "-m", "not browser and not built and not pdf", "-n", "2",
                             "--dist", "worksteal", "-q"]
     + [f"--ignore={path}" for path in GRADER_TESTS], ("install",)),
    # Each grader test module grades one folder in a module fixture: keep a module on one worker.
    ("grader tests", PYTEST + GRADER_TESTS + ["-n", "2", "--dist", "loadscope", "-q"], ("install",)),
    ("book build", [PYTHON, "tools/build_book.py", "--no-execute"], ("notebooks",)),
    ("student build", [PYTHON, "tools/build_book.py", "--student", "--no-execute"], ("book build",)),
    # Both cores, each worker with its own Chromium.
    ("browser tests", PYTEST + ["tests/book", "-m", "browser", "-n", "2", "-q"], ("book build", "student build")),
]
#: Phases that run in the background from the moment their inputs passed, beside the phases above
#: (the PDF's printing, one core's work for minutes, overlaps the unit tests, the builds and the
#: browser tests); their output is kept in _build/<name>.log and printed when they end.
BACKGROUND = [
    ("pdf", ["sh", "-c", f"{PYTHON} tools/build_pdf.py --no-execute && "
                         f"{' '.join(PYTEST)} tests/book/test_pdf.py -m pdf -q"], ("notebooks",)),
]


def children_cpu() -> float:
    """CPU seconds (user and system) of every finished child process and its descendants so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_phase(name: str, command: list[str], env: dict[str, str] | None = None) -> tuple[bool, float, float]:
    print(f"\n=== {name}: {' '.join(command)}", flush=True)
    start, cpu = time.perf_counter(), children_cpu()
    result = subprocess.run(command, cwd=ROOT, env=None if env is None else dict(os.environ, **env))
    return result.returncode == 0, time.perf_counter() - start, children_cpu() - cpu


def chapter_seconds() -> dict[str, float]:
    if not TIMINGS.exists():
        return {}
    return {Path(path).stem: seconds for path, seconds in json.loads(TIMINGS.read_text()).items()}


def report(results: list[tuple[str, str, float, float]], total: float) -> str:
    """Wall and CPU seconds per phase; the CPU total over the cores shows how busy they were kept."""
    cores = os.cpu_count() or 1
    cpu = sum(row[3] for row in results)
    lines = ["", f"test command: time per phase ({cores}-core machine)", "",
             f"  {'phase':<17} {'status':<8} {'wall':>8} {'cpu':>8}"]
    lines += [f"  {name:<17} {status:<8} {seconds:7.1f}s {used:7.1f}s" for name, status, seconds, used in results]
    lines += [f"  {'total':<17} {'':<8} {total:7.1f}s {cpu:7.1f}s",
              f"  the {cores} cores were busy {100 * cpu / (cores * total):.0f} % of the time; "
              f"the CPU work alone needs at least {cpu / cores:.0f} s on them", ""]
    chapters = chapter_seconds()
    if chapters:
        lines.append("chapter execution under nbval (cell time, two chapters at a time):")
        lines += [f"  {name:<20} {seconds:6.1f} s" for name, seconds in sorted(chapters.items())]
        lines.append(f"  {'sum':<20} {sum(chapters.values()):6.1f} s")
    return "\n".join(lines) + "\n"


def phase_environment(name: str, passed: dict[str, bool]) -> dict[str, str] | None:
    """The browser tests skip their own (no-op) builds when this run has just built both editions."""
    if name == "browser tests" and passed.get("book build") and passed.get("student build"):
        return {"DLBOOK_BOOKS_BUILT": "1"}
    return None


def start_background(name: str, command: list[str]) -> tuple[subprocess.Popen, float, Path]:
    log = ROOT / "_build" / f"{name.replace(' ', '-')}.log"
    log.parent.mkdir(exist_ok=True)
    print(f"\n=== {name} (in the background, output in {log.relative_to(ROOT)}): {' '.join(command)}", flush=True)
    process = subprocess.Popen(command, cwd=ROOT, stdout=log.open("w"), stderr=subprocess.STDOUT)
    return process, time.perf_counter(), log


def finish_background(name: str, process: subprocess.Popen, started: float,
                      log: Path) -> tuple[bool, float, float]:
    cpu = children_cpu()  # a background phase's CPU is counted when it is waited for
    ok = process.wait() == 0
    cpu = children_cpu() - cpu
    seconds = time.perf_counter() - started
    print(f"\n=== {name} (background) {'passed' if ok else 'FAILED'} after {seconds:.0f} s:\n{log.read_text()}",
          flush=True)
    return ok, seconds, cpu


def main(argv: list[str]) -> int:
    only = set(argv)
    unknown = only - {name for name, _, _ in PHASES + BACKGROUND}
    if unknown:
        print(f"run_tests: unknown phase(s) {sorted(unknown)}; phases: {[p[0] for p in PHASES]}")
        return 2
    os.environ.setdefault("MPLBACKEND", "Agg")
    # Bytecode caches (the interpreter's, and pytest's rewritten test modules) are written: the run
    # starts some sixty Python processes, and each would otherwise compile what it imports again.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    passed: dict[str, bool] = {}
    results = []
    start = time.perf_counter()
    running = {}

    def inputs_passed(needs) -> bool:
        return all(passed.get(need, need not in passed and bool(only)) for need in needs)

    def start_ready_background():
        if not passed.get("install"):
            return
        for name, command, needs in BACKGROUND:
            if name in running or (only and name not in only) or any(need not in passed for need in needs
                                                                      if not only):
                continue
            if inputs_passed(needs):
                running[name] = start_background(name, command)

    for name, command, needs in PHASES:
        start_ready_background()
        if only and name not in only and name != "install":
            continue
        if not inputs_passed(needs):
            results.append((name, "skipped", 0.0, 0.0))
            passed[name] = False
            continue
        ok, seconds, cpu = run_phase(name, command, phase_environment(name, passed))
        passed[name] = ok
        results.append((name, "ok" if ok else "FAILED", seconds, cpu))
    start_ready_background()
    for name, command, needs in BACKGROUND:
        if name in running:
            ok, seconds, cpu = finish_background(name, *running[name])
            results.append((f"{name} (bg)", "ok" if ok else "FAILED", seconds, cpu))
        elif not only or name in only:
            results.append((name, "skipped", 0.0, 0.0))
    text = report(results, time.perf_counter() - start)
    print(text)
    REPORT.parent.mkdir(exist_ok=True)
    REPORT.write_text(text)
    return 0 if all(status == "ok" for _, status, _, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
