"""The exercise contract, for every chapter: tests/checks/test_chNN_slug.py.

Each chapter's test module declares REFERENCES (exercise id -> a reference
solution or a list of them), WRONG (id -> {name: plausible wrong answer}),
IDS and BAD_TYPES, and may set MIN_CASES (default 4). Every reference must
pass, every wrong answer must fail naming the case (or with the shortcut
reason), and every badly typed answer must fail cleanly.
"""
from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from exercise_contract import assert_fails_cleanly, assert_fails_naming_the_case, assert_passes

#: Chapter test modules that declare the contract, with the fewest cases a check must run.
CHAPTER_TESTS = {path.stem: getattr(importlib.import_module(path.stem), "MIN_CASES", 4)
                 for path in sorted(Path(__file__).parent.glob("test_ch[0-9][0-9]_*.py"))
                 if hasattr(importlib.import_module(path.stem), "REFERENCES")}


def _declared(attribute: str) -> list[tuple]:
    rows = []
    for module_name, min_cases in CHAPTER_TESTS.items():
        module = importlib.import_module(module_name)
        rows += [(min_cases, *row) for row in _rows(attribute, module)]
    return rows


def _rows(attribute, module):
    if attribute == "REFERENCES":
        for eid, references in module.REFERENCES.items():
            references = references if isinstance(references, (list, tuple)) else [references]
            yield from ((eid, index, answer) for index, answer in enumerate(references))
    elif attribute == "WRONG":
        for eid, answers in module.WRONG.items():
            yield from ((eid, name, answer) for name, answer in answers.items())
    else:
        for eid in module.IDS:
            yield from ((eid, kind, *module.BAD_TYPES[kind]) for kind in sorted(module.BAD_TYPES))


@pytest.mark.parametrize("min_cases, eid, index, answer", _declared("REFERENCES"),
                         ids=lambda value: value if isinstance(value, str) else None)
def test_reference_solution_passes(min_cases, eid, index, answer):
    assert_passes(eid, answer, min_cases=min_cases)


@pytest.mark.parametrize("min_cases, eid, name, answer", _declared("WRONG"),
                         ids=lambda value: value if isinstance(value, str) else None)
def test_plausible_wrong_answer_fails(min_cases, eid, name, answer):
    assert_fails_naming_the_case(eid, answer, name)


@pytest.mark.parametrize("min_cases, eid, kind, answer, fragment", _declared("BAD_TYPES"),
                         ids=lambda value: value if isinstance(value, str) else None)
def test_bad_answers_fail_cleanly(min_cases, eid, kind, answer, fragment):
    assert_fails_cleanly(eid, answer, fragment)


@pytest.mark.parametrize("module_name", sorted(CHAPTER_TESTS))
def test_chapter_exercises_meet_the_standard(module_name):
    """Every exercise the chapter registers is tested here, with a reference and at least two wrong
    answers; at least four exercises; at least one extends the chapter's code and one predicts a
    measured quantity; at most one transcribes; each names its function as the reference does, has
    stars, minutes and a hint, and blocks the package functions that would answer it (a module lists
    in UNBLOCKED the exercises no package function answers)."""
    from dlbook.exercises.core import EXERCISES, chapter_check_modules, get_exercise

    module = importlib.import_module(module_name)
    exercises = [get_exercise(eid) for eid in module.IDS]
    check_module = chapter_check_modules()[int(module_name[len("test_ch"):][:2])]
    assert sorted(eid for eid, ex in EXERCISES.items() if ex.check_fn.__module__ == check_module) == sorted(module.IDS)
    assert set(module.IDS) == set(module.REFERENCES) == set(module.WRONG), module_name
    kinds = [ex.kind for ex in exercises]
    assert len(exercises) >= 4, module_name
    assert "extend" in kinds and "predict" in kinds and kinds.count("transcribe") <= 1, (module_name, kinds)
    unblocked = set(getattr(module, "UNBLOCKED", ()))
    for ex in exercises:
        references = module.REFERENCES[ex.id]
        references = references if isinstance(references, (list, tuple)) else [references]
        assert ex.title and ex.hint and ex.function_name == references[0].__name__, ex.id
        assert ex.difficulty in (1, 2, 3) and ex.minutes > 0, ex.id
        assert bool(ex.blocked) != (ex.id in unblocked), ex.id
        assert len(module.WRONG[ex.id]) >= 2, ex.id
