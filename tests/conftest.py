"""Fixtures shared by the tests; the test folders mirror lib/dlbook.

tests/lib         the concept and cross-cutting modules of dlbook
tests/checks      each chapter's exercise checks (dlbook.exercises)
tests/coursework  student edition, grader, benchmark (dlbook.coursework)
tests/book        the book's configuration, built HTML and browser tests
"""
import sys
from pathlib import Path

# Shared helpers (exercise_contract, browser_util) live beside this file.
sys.path.insert(0, str(Path(__file__).resolve().parent))

# Fixture notebooks are inputs of the tooling tests, not chapters to run.
collect_ignore_glob = ["fixtures/*"]

# Tests look exercises up in the registry directly: register every chapter's checks.
import dlbook.exercises  # noqa: E402

dlbook.exercises.load_all()


def pytest_collection_modifyitems(items):
    """Tests marked slow first: on two workers they then run beside the many short ones
    instead of ending the run alone on one worker."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def pytest_terminal_summary(terminalreporter):
    """Print what tests measured (``record_property("measured", text)``), also from xdist workers."""
    for report in terminalreporter.stats.get("passed", []):
        for name, text in getattr(report, "user_properties", []):
            if name == "measured":
                terminalreporter.write_line(text)
