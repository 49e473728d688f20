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
    """At least four exercises; at least one extends the chapter's code and one predicts a measured
    quantity; at most one transcribes; each declares its stars, minutes and hint, and is
    tested with a reference and at least two wrong answers."""
    from dlbook.exercises import EXERCISES

    module = importlib.import_module(module_name)
    exercises = [EXERCISES[eid] for eid in module.IDS]
    kinds = [ex.kind for ex in exercises]
    assert len(exercises) >= 4, module_name
    assert "extend" in kinds and "predict" in kinds and kinds.count("transcribe") <= 1, (module_name, kinds)
    for ex in exercises:
        assert ex.title and ex.hint, ex.id
        assert ex.difficulty in (1, 2, 3) and ex.minutes > 0, ex.id
        assert module.REFERENCES.get(ex.id) and len(module.WRONG.get(ex.id, {})) >= 2, ex.id
