"""The exercise contract, for every chapter whose exercise tests declare it.

Each listed test module declares REFERENCES (exercise id -> a reference
solution or a list of them), WRONG (id -> {name: plausible wrong answer}),
IDS and BAD_TYPES. Every reference must pass, every wrong answer must fail
naming the case, and every badly typed answer must fail cleanly.
"""
from __future__ import annotations

import importlib

import pytest

from exercise_contract import assert_fails_cleanly, assert_fails_naming_the_case, assert_passes

#: Test modules that follow the contract, with the fewest cases a check must run.
CHAPTER_TESTS = {"test_ch01_neurons": 5, "test_ch02_feedforward": 5, "test_ch03_optimization": 4,
                 "test_ch04_training": 5, "test_ch16_failures": 5, "test_ch17_symmetry": 5}


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
