"""Checks of chapter 16's exercises: reference solutions pass, plausible wrong answers fail."""
import math

import pytest
import torch

from dlbook.exercises import run_check

# --- reference solutions (independent of the chapter) ----------------------------------------

def walsh_hadamard(A):
    n = A.shape[0]
    d = n.bit_length() - 1
    if n > 1024:  # too large for the dense matrix: butterflies
        out = A.clone()
        h = 1
        while h < n:
            out = out.reshape(n // (2 * h), 2, h, -1)
            out = torch.cat((out[:, :1] + out[:, 1:], out[:, :1] - out[:, 1:]), dim=1).reshape(n, -1)
            h *= 2
        return out.reshape(A.shape)
    idx = torch.arange(n)
    H = torch.ones(n, n, dtype=A.dtype)
    for bit in range(d):  # (-1)^popcount(i & j), one bit at a time
        H *= 1 - 2 * (((idx[:, None] >> bit) & (idx[None, :] >> bit) & 1)).to(A.dtype)
    return H @ A


def parity_family_variance(G):
    n = G.shape[0]
    return ((G**2).sum(1).mean() / n - (G[0] ** 2).sum() / n**2).item()


def cosine_objective(w, v):
    def m(a):
        return math.exp(-0.5 * float(a @ a))
    return 1 + 0.5 * m(2 * w) + 0.5 * m(2 * v) - m(w - v) - m(w + v)


def debiased_snr(G):
    noise = G.var(dim=0).sum()
    return (((G.mean(0) ** 2).sum() - noise / G.shape[0]) / noise).item()


REFERENCES = {"16.1": walsh_hadamard, "16.2": parity_family_variance, "16.3": cosine_objective,
              "16.4": debiased_snr}


@pytest.mark.parametrize("exercise_id", sorted(REFERENCES))
def test_reference_solutions_pass(exercise_id):
    result = run_check(exercise_id, REFERENCES[exercise_id])
    assert result.passed, result.message


# --- plausible wrong answers -----------------------------------------------------------------

def normalised_walsh_hadamard(A):
    """Wrong: the orthonormal transform H / sqrt(n) instead of H."""
    return walsh_hadamard(A) / math.sqrt(A.shape[0])


def bound_only(G):
    """Wrong: the bound E||g||^2 / 2^d without the correction term."""
    return ((G**2).sum(1).mean() / G.shape[0]).item()


def missing_plus_term(w, v):
    """Wrong: forgets the cos(a + b) half of the cross term."""
    def m(a):
        return math.exp(-0.5 * float(a @ a))
    return 1 + 0.5 * m(2 * w) + 0.5 * m(2 * v) - 2 * m(w - v)


def naive_snr(G):
    """Wrong: no bias correction."""
    noise = G.var(dim=0).sum()
    return ((G.mean(0) ** 2).sum() / noise).item()


@pytest.mark.parametrize("exercise_id, wrong, case_text", [
    ("16.1", normalised_walsh_hadamard, "shape (2, 1)"),
    ("16.2", bound_only, "d = 1"),
    ("16.3", missing_plus_term, "w=[2.0, 2.0]"),
    ("16.4", naive_snr, "zero mean"),
])
def test_wrong_answers_fail_naming_the_case(exercise_id, wrong, case_text):
    result = run_check(exercise_id, wrong)
    assert not result.passed
    assert case_text in result.message, result.message


@pytest.mark.parametrize("exercise_id", sorted(REFERENCES))
@pytest.mark.parametrize("bad", [lambda *args: None, lambda *args: "a string", None])
def test_bad_types_fail_cleanly(exercise_id, bad):
    result = run_check(exercise_id, bad)
    assert not result.passed and result.message
