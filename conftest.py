"""Test-suite set-up shared by the unit tests and nbval.

The environment set here is inherited by the kernels nbval starts, so the
chapters run exactly as in the book build (tools/executed.ENVIRONMENT):
static figures, strict exercise checks, one torch thread.

nbval's run of a chapter is the chapter's one execution per test run: the
hooks below collect each cell's outputs and, when every cell of the chapter
passed, write the executed notebook to _build/executed/, which the book and
the student book are then built from without executing again. Each
chapter's execution time is added up from its cells and must stay within
the budget of DESIGN.md.
"""
from __future__ import annotations

import json
import os
import sys
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT / "tools"))

import executed  # noqa: E402  (tools/executed.py)

#: Seconds a chapter may take end to end on one core of a 2-core CPU.
CHAPTER_BUDGET_S = float(os.environ.get("DLBOOK_CHAPTER_BUDGET_S", "60"))
TIMINGS_FILE = executed.EXECUTED.parent / "notebook-timings.json"

os.environ.update({key: value for key, value in executed.ENVIRONMENT.items()
                   if key != "DLBOOK_NUM_THREADS"})
os.environ.setdefault("DLBOOK_NUM_THREADS", "1")

_notebook_seconds: dict[str, float] = defaultdict(float)


class _Execution:
    """Outputs of one chapter's cells as nbval runs them (in the worker that runs the chapter)."""

    def __init__(self):
        self.outputs: dict[str, list] = {}
        self.counts: dict[str, int] = {}
        self.failed = False
        self.seconds = 0.0


_executions: dict[str, _Execution] = defaultdict(_Execution)


def _is_chapter_cell(item) -> bool:
    path = Path(str(getattr(item, "fspath", "")))
    return path.suffix == ".ipynb" and path.parent == executed.BOOK and hasattr(item, "cell")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Keep each chapter cell's outputs; name the chapter and cell id when a cell times out."""
    outcome = yield
    if not _is_chapter_cell(item) or call.when != "call":
        return
    report = outcome.get_result()
    run = _executions[str(item.fspath)]
    run.seconds += call.duration
    cell_id = item.cell.get("id")
    run.outputs[cell_id] = list(item.test_outputs or [])
    run.counts[cell_id] = len(run.counts) + 1
    if report.failed:
        run.failed = True
        text = str(report.longrepr)
        if "Timeout" in text or "Timed out" in text or "timed out" in text:
            report.longrepr = (f"{Path(str(item.fspath)).name}, cell '{cell_id}': no result within "
                               f"{item.config.option.nbval_cell_timeout} s (the kernel was interrupted; "
                               f"a hung kernel or a cell far slower than it should be)\n\n{text}")


def pytest_runtest_teardown(item, nextitem):
    """After a chapter's last cell, write its executed copy if every cell passed."""
    if not _is_chapter_cell(item):
        return
    if nextitem is not None and getattr(nextitem, "fspath", None) == item.fspath:
        return
    path = Path(str(item.fspath))
    run = _executions.pop(str(item.fspath))
    target = executed.executed_path(path)
    target.unlink(missing_ok=True)  # never leave a stale copy behind
    if not run.failed:
        executed.write(path, run.outputs, run.counts, run.seconds)


def pytest_runtest_logreport(report):
    """Add up the execution time of each notebook's cells (nbval items)."""
    path = report.nodeid.split("::")[0]
    if path.endswith(".ipynb") and report.when == "call":
        _notebook_seconds[path] += report.duration


def pytest_sessionfinish(session, exitstatus):
    """Report each chapter's time and fail the run if one exceeds the budget."""
    if not _notebook_seconds or hasattr(session.config, "workerinput"):
        return
    TIMINGS_FILE.parent.mkdir(exist_ok=True)
    TIMINGS_FILE.write_text(json.dumps(_notebook_seconds, indent=1, sort_keys=True))
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    over = {path: s for path, s in _notebook_seconds.items() if s > CHAPTER_BUDGET_S}
    if reporter is not None:
        reporter.write_sep("-", "chapter execution times (nbval)")
        for path, seconds in sorted(_notebook_seconds.items()):
            mark = "OVER BUDGET" if path in over else "ok"
            reporter.write_line(f"{path}: {seconds:.1f} s (budget {CHAPTER_BUDGET_S:.0f} s) {mark}")
    if over and session.exitstatus == 0:
        session.exitstatus = 1


def pytest_configure(config):
    """Tiny tensors run fastest on one thread (see dlbook.runtime.set_threads)."""
    import torch

    torch.set_num_threads(int(os.environ["DLBOOK_NUM_THREADS"]))
