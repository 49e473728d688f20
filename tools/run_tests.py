"""The test command (`make test`): every phase in order, timed, with one report at the end.

Phases: install (the virtual environment and the Debian packages the tests
drive), lint (ruff), unit tests (tests/lib, tests/checks, the student
edition and benchmark tools), grader tests (tests/coursework/test_grader*),
notebooks (nbval runs each chapter once, on both cores, and writes the
executed chapters), executed chapters (every checkpoint cell left a record
for the results appendix), book build and student build (rendered from the
executed chapters, nothing executed again) and browser tests (the built
books and the live figures in JupyterLab). The PDF edition and its tests run
in the background from the end of the notebook phase, beside the builds and
the browser tests. The unit and grader tests (many exercise checks have time
limits) and the notebooks (whose times DESIGN.md budgets, two chapters at a
time) run with nothing beside them. A
phase whose inputs failed is skipped; the command fails if any phase failed.
The report (each phase's seconds, how busy the cores were meanwhile, and each
chapter's seconds) is printed and written to _build/test-report.txt.

Runs with any Python 3 (standard library only): the phases run in .venv.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
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
    # -j2: the Debian packages download and install beside the virtual environment.
    ("install", ["make", "--no-print-directory", "-j2", "setup"], ()),
    ("lint", [str(ROOT / ".venv" / "bin" / "ruff"), "check", "lib", "tests", "tools", "conftest.py"],
     ("install",)),
    # Work stealing: the contract tests take up to seconds each, the rest milliseconds; a worker that
    # runs out takes tests from the other instead of waiting for its batch of slow ones to end.
    ("unit tests", PYTEST + ["tests", "-m", "not browser and not built and not pdf", "-n", "2",
                             "--dist", "worksteal", "-q"]
     + [f"--ignore={path}" for path in GRADER_TESTS], ("install",)),
    # Each grader test module grades one folder in a module fixture: keep a module on one worker.
    ("grader tests", PYTEST + GRADER_TESTS + ["-n", "2", "--dist", "loadscope", "-q"], ("install",)),
    ("notebooks", PYTEST + ["book", "-n", "2", "--dist", "loadscope", "-q"], ("install",)),
    ("executed chapters", PYTEST + ["tests/book", "-m", "built", "-q"], ("notebooks",)),
    ("book build", [PYTHON, "tools/build_book.py", "--no-execute"], ("notebooks",)),
    ("student build", [PYTHON, "tools/build_book.py", "--student", "--no-execute"], ("book build",)),
    # Both cores, each worker with its own Chromium; one worker while the PDF still prints (below).
    ("browser tests", PYTEST + ["tests/book", "-m", "browser", "-n", "2", "-q"], ("book build", "student build")),
]
#: Phases that run in the background from the moment their inputs passed, beside the phases above
#: (on two cores the PDF's printing overlaps the builds and the browser tests); their output is
#: kept in _build/<name>.log and printed at the end.
BACKGROUND = [
    ("pdf", ["sh", "-c", f"{PYTHON} tools/build_pdf.py --no-execute && "
                         f"{' '.join(PYTEST)} tests/book/test_pdf.py -m pdf -q"], ("notebooks",)),
]


def machine_cpu() -> tuple[int, int] | None:
    """(busy, total) CPU ticks of the whole machine so far (Linux's /proc/stat), or None elsewhere."""
    try:
        # user, nice, system, idle, iowait, irq, softirq, steal (guest time is inside user and nice)
        ticks = [int(value) for value in Path("/proc/stat").read_text().split("\n")[0].split()[1:9]]
    except (OSError, ValueError):
        return None
    idle = ticks[3] + ticks[4]  # idle and waiting for I/O
    return sum(ticks) - idle, sum(ticks)


def busy_share(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float | None:
    """The share of the machine's cores that was busy between two readings of ``machine_cpu``."""
    if before is None or after is None or after[1] == before[1]:
        return None
    return (after[0] - before[0]) / (after[1] - before[1])


def run_phase(name: str, command: list[str], env: dict[str, str] | None = None) -> tuple[bool, float, float | None]:
    print(f"\n=== {name}: {' '.join(command)}", flush=True)
    start, cpu = time.perf_counter(), machine_cpu()
    result = subprocess.run(command, cwd=ROOT, env=None if env is None else dict(os.environ, **env))
    return result.returncode == 0, time.perf_counter() - start, busy_share(cpu, machine_cpu())


def chapter_seconds() -> dict[str, float]:
    if not TIMINGS.exists():
        return {}
    return {Path(path).stem: seconds for path, seconds in json.loads(TIMINGS.read_text()).items()}


def report(results: list[tuple[str, str, float, float | None]], total: float, busy: float | None) -> str:
    """Seconds per phase, and how busy the cores were meanwhile (background phases included)."""
    def share(value):
        return "" if value is None else f"{100 * value:5.0f} %"

    lines = ["", f"test command: time per phase ({os.cpu_count()}-core machine)", "",
             f"  {'phase':<17} {'status':<8} {'seconds':>8}  cores busy"]
    lines += [f"  {name:<17} {status:<8} {seconds:8.1f}  {share(used)}" for name, status, seconds, used in results]
    lines += [f"  {'total':<17} {'':<8} {total:8.1f}  {share(busy)}", ""]
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


def phase_command(name: str, command: list[str], background_running: bool) -> list[str]:
    """The browser tests take one core while the PDF prints beside them: Chromium's printing works on
    about one core, and ends last when it shares both with two test workers (measured on two cores:
    the builds, browser tests and PDF together took 173 s with one worker against 201 s with two)."""
    if name == "browser tests" and background_running:
        at = command.index("-n")
        return command[:at + 1] + ["1"] + command[at + 2:]
    return command


class Background:
    """A phase running beside the others; a thread notes when it ends, so its time is its own."""

    def __init__(self, name: str, command: list[str]):
        self.name = name
        self.log = ROOT / "_build" / f"{name.replace(' ', '-')}.log"
        self.log.parent.mkdir(exist_ok=True)
        print(f"\n=== {name} (in the background, output in {self.log.relative_to(ROOT)}): {' '.join(command)}",
              flush=True)
        self.started, self.cpu = time.perf_counter(), machine_cpu()
        self.process = subprocess.Popen(command, cwd=ROOT, stdout=self.log.open("w"), stderr=subprocess.STDOUT)
        self.ended: tuple[float, tuple[int, int] | None] | None = None
        self.watcher = threading.Thread(target=self._watch, daemon=True)
        self.watcher.start()

    def _watch(self) -> None:
        self.process.wait()
        self.ended = (time.perf_counter(), machine_cpu())

    def finish(self) -> tuple[bool, float, float | None]:
        self.watcher.join()
        ok = self.process.returncode == 0
        seconds = self.ended[0] - self.started
        print(f"\n=== {self.name} (background) {'passed' if ok else 'FAILED'} after {seconds:.0f} s:\n"
              f"{self.log.read_text()}", flush=True)
        return ok, seconds, busy_share(self.cpu, self.ended[1])


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
    start, cpu = time.perf_counter(), machine_cpu()
    running: dict[str, Background] = {}

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
                running[name] = Background(name, command)

    for name, command, needs in PHASES:
        start_ready_background()
        if only and name not in only and name != "install":
            continue
        if not inputs_passed(needs):
            results.append((name, "skipped", 0.0, None))
            passed[name] = False
            continue
        background_running = any(job.ended is None for job in running.values())
        ok, seconds, busy = run_phase(name, phase_command(name, command, background_running),
                                      phase_environment(name, passed))
        passed[name] = ok
        results.append((name, "ok" if ok else "FAILED", seconds, busy))
    start_ready_background()
    for name, command, needs in BACKGROUND:
        if name in running:
            ok, seconds, busy = running[name].finish()
            results.append((f"{name} (bg)", "ok" if ok else "FAILED", seconds, busy))
        elif not only or name in only:
            results.append((name, "skipped", 0.0, None))
    text = report(results, time.perf_counter() - start, busy_share(cpu, machine_cpu()))
    print(text)
    REPORT.parent.mkdir(exist_ok=True)
    REPORT.write_text(text)
    return 0 if all(status == "ok" for _, status, _, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
