"""Checks for the exercises of chapter 16 (16_failures): parities, cosine landscape, gradient SNR.

Expected values are computed here by independent code (dense Hadamard
matrices, brute force over all parity targets, NumPy), not by calling the
chapter's modules, so that a bug there cannot make a wrong answer pass.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from ..core import Mismatch, as_array, as_float, describe, exercise, expect_close


def _hadamard(d: int) -> np.ndarray:
    """Dense Sylvester-Hadamard matrix of order 2^d from the popcount definition."""
    i = np.arange(2**d)
    popcount = np.vectorize(lambda v: bin(v).count("1"))(i[:, None] & i[None, :])
    return np.where(popcount % 2 == 0, 1.0, -1.0)


# ---------------------------------------------------------------------------
# Exercise 16.1: the fast Walsh-Hadamard transform
# ---------------------------------------------------------------------------

@exercise("16.1", title="The fast Walsh-Hadamard transform", function="walsh_hadamard",
          hint="the Hadamard matrix is built recursively from 2 x 2 blocks; apply that recursion "
               "to the data in log2(n) passes instead of forming the matrix.")
def check_walsh_hadamard(walsh_hadamard, cases):
    """A is a float64 tensor of shape (2^d, m); compare with a dense Hadamard product."""
    rng = np.random.default_rng(16)
    for d, m in [(0, 1), (1, 1), (2, 3), (5, 4), (8, 2)]:
        A = rng.normal(size=(2**d, m))
        with cases.case(f"walsh_hadamard(A) for A of shape ({2**d}, {m})"):
            got = as_array(walsh_hadamard(torch.tensor(A)), (2**d, m))
            err = np.abs(got - _hadamard(d) @ A).max()
            if err > 1e-9:
                raise Mismatch("H @ A (max error <= 1e-9)", f"a result off by {err:.3g}")
    # At d = 16 the dense matrix would have 2^32 entries: check two known columns instead.
    n = 2**16
    A = torch.zeros(n, 2, dtype=torch.float64)
    A[0, 0] = 1.0            # H e_0 is the all-ones vector
    A[:, 1] = 1.0            # H 1 = n e_0
    with cases.case("walsh_hadamard(A) at d = 16 (A = [e_0, all ones])"):
        got = as_array(walsh_hadamard(A), (n, 2))
        expected = np.zeros((n, 2))
        expected[:, 0] = 1.0
        expected[0, 1] = n
        if np.abs(got - expected).max() > 1e-9:
            raise Mismatch("columns (1, ..., 1) and (2^16, 0, ..., 0)", "other values")


# ---------------------------------------------------------------------------
# Exercise 16.2: the variance across the complete parity family
# ---------------------------------------------------------------------------

def _brute_force_variance(G: np.ndarray) -> float:
    """Variance across all parity targets S of E_x[chi_S g] (the target-dependent gradient part)."""
    n = G.shape[0]
    d = int(round(math.log2(n)))
    B = _hadamard(d) @ G / n                                   # row S: E_x[chi_S(x) g(x)]
    return float(((B - B.mean(axis=0)) ** 2).sum(axis=1).mean())


@exercise("16.2", title="Variance across all parities", function="parity_family_variance",
          hint="write the variance across targets through the correlations of the gradient with "
               "every parity; the orthogonality of the parities collapses the sum.")
def check_parity_family_variance(parity_family_variance, cases):
    """G is a float64 tensor (2^d, P) of per-sample gradients in all_inputs order."""
    rng = np.random.default_rng(7)
    examples = [("d = 1, P = 1", rng.normal(size=(2, 1))),
                ("d = 3, P = 5", rng.normal(size=(8, 5))),
                ("d = 6, P = 4, a large row 0", np.vstack([10 * np.ones((1, 4)), rng.normal(size=(63, 4))])),
                ("d = 4, every row equal", np.tile(rng.normal(size=(1, 3)), (16, 1)))]
    for label, G in examples:
        with cases.case(f"parity_family_variance(G) with {label}"):
            got = as_float(parity_family_variance(torch.tensor(G)), "the variance as a float")
            expect_close(got, _brute_force_variance(G), rtol=1e-9, atol=1e-12)


# ---------------------------------------------------------------------------
# Exercise 16.3: the cosine objective
# ---------------------------------------------------------------------------

def _cosine_objective(w: np.ndarray, v: np.ndarray) -> float:
    """Closed form via E cos(a.x) = exp(-|a|^2 / 2), written out term by term."""
    def m(a):
        return math.exp(-0.5 * float(a @ a))
    # E cos^2(w.x) - 2 E cos(w.x) cos(v.x) + E cos^2(v.x)
    return (0.5 + 0.5 * m(2 * w)) - (m(w - v) + m(w + v)) + (0.5 + 0.5 * m(2 * v))


@exercise("16.3", title="The cosine landscape in closed form", function="cosine_objective",
          hint="expand the square and use the product-to-sum identities; the Gaussian "
               "expectation of a cosine is an exponential.")
def check_cosine_objective(cosine_objective, cases):
    """w and v are float64 1-D tensors of the same length."""
    examples = [([0.0, 0.0], [2.0, 2.0]), ([2.0, 2.0], [2.0, 2.0]), ([-2.0, -2.0], [2.0, 2.0]),
                ([1.0, 0.5], [2.0, 2.0]), ([0.3, -0.1, 0.7, 0.0, 1.2], [1.0, 1.0, -1.0, 0.5, 0.0]),
                ([8.0], [0.5])]
    for w, v in examples:
        with cases.case(f"cosine_objective(w={w}, v={v})"):
            got = as_float(cosine_objective(torch.tensor(w, dtype=torch.float64),
                                            torch.tensor(v, dtype=torch.float64)))
            expect_close(got, _cosine_objective(np.array(w), np.array(v)), rtol=1e-9, atol=1e-12)


# ---------------------------------------------------------------------------
# Exercise 16.4: a debiased signal-to-noise ratio
# ---------------------------------------------------------------------------

@exercise("16.4", title="A signal-to-noise ratio without bias", function="debiased_snr",
          hint="estimate the squared mean and the noise from the same samples; the naive squared "
               "mean is biased by the noise, so correct for it.")
def check_debiased_snr(debiased_snr, cases):
    """G is a float64 tensor (n, P); the answer must equal the formula, and be near the truth."""
    rng = np.random.default_rng(3)
    examples = [("zero mean, n = 4000, P = 20", rng.normal(size=(4000, 20)), 0.0),
                ("mean 0.5 in every coordinate, n = 4000, P = 10", 0.5 + rng.normal(size=(4000, 10)), 0.25),
                ("two samples", np.array([[1.0, 2.0], [3.0, -2.0]]), None)]
    for label, G, truth in examples:
        n = G.shape[0]
        noise = G.var(axis=0, ddof=1).sum()
        expected = ((G.mean(axis=0) ** 2).sum() - noise / n) / noise
        with cases.case(f"debiased_snr(G) with {label}"):
            got = as_float(debiased_snr(torch.tensor(G)))
            expect_close(got, expected, rtol=1e-8, atol=1e-12)
            if truth is not None and abs(got - truth) > 0.02:
                raise Mismatch(f"a value near the true SNR {truth}", describe(got))
