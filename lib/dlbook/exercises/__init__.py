"""Exercise checks: ``dlbook.exercises.check("16.1", walsh_hadamard)`` in a chapter notebook.

The checks of chapter NN live in ``dlbook.exercises.checks.chNN_slug`` and are
imported the first time one of that chapter's exercises is looked up, so a
chapter pays only for its own checks. Writing a check: see ``core`` and
CONTRIBUTING.md. The instructor's tools (student edition, grader) live in
``dlbook.coursework``.
"""
from __future__ import annotations

from .core import (
                   CHECKS_ENV,
                   EXERCISES,
                   CheckResult,
                   Exercise,
                   Mismatch,
                   ShortcutError,
                   chapter_check_modules,
                   check,
                   exercise,
                   get_exercise,
                   load_all,
                   register,
                   run_check,
                   strict_checks,
)

__all__ = ["CHECKS_ENV", "EXERCISES", "CheckResult", "Exercise", "Mismatch", "ShortcutError",
           "chapter_check_modules", "check", "exercise", "get_exercise", "load_all", "register",
           "run_check", "strict_checks"]
