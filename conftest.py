"""Test-suite set-up shared by the unit tests and nbval.

The environment set here is inherited by the kernels nbval starts, so the
chapters run exactly as in the book build: static figures, strict exercise
checks, one torch thread. Each chapter's execution time is added up from its
cells and must stay within the budget of DESIGN.md.
"""
from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent
#: Seconds a chapter may take end to end on one core of a 2-core CPU.
CHAPTER_BUDGET_S = float(os.environ.get("DLBOOK_CHAPTER_BUDGET_S", "60"))
TIMINGS_FILE = ROOT / "_build" / "notebook-timings.json"

os.environ.update(DLBOOK_FIGURES="static", DLBOOK_CHECKS="strict", MPLBACKEND="Agg",
                  PYTHONHASHSEED="0")
os.environ.setdefault("DLBOOK_NUM_THREADS", "1")

_notebook_seconds: dict[str, float] = defaultdict(float)


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
