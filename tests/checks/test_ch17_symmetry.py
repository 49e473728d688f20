"""Checks of chapter 17's exercises: reference solutions pass, plausible wrong answers fail."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.linalg import solve_discrete_lyapunov
from scipy.optimize import linear_sum_assignment

from dlbook.exercises import run_check

# --- reference solutions -------------------------------------------------------------------

def permute_hidden_units(layers, perms):
    out = []
    for index, (W, b) in enumerate(layers):
        if index > 0:
            W = W[:, perms[index - 1]]
        if index < len(layers) - 1:
            W, b = W[perms[index]], b[perms[index]]
        out.append((W, b))
    return out


def log10_equivalent_settings(hidden_widths, odd_activation):
    return sum(math.lgamma(n + 1) / math.log(10) + (n * math.log10(2) if odd_activation else 0)
               for n in hidden_widths)


def match_layer(W_a, W_b):
    rows, cols = linear_sum_assignment((W_a @ W_b.T).numpy(), maximize=True)
    return torch.as_tensor(cols[np.argsort(rows)])


def stationary_covariance(H, C, lr):
    A = torch.eye(len(H), dtype=torch.float64) - lr * H
    return torch.as_tensor(solve_discrete_lyapunov(A.numpy(), lr ** 2 * C.numpy()))


REFERENCES = {"17.1": permute_hidden_units, "17.2": log10_equivalent_settings,
              "17.3": match_layer, "17.4": stationary_covariance}


# --- plausible wrong answers ----------------------------------------------------------------

def permute_rows_only(layers, perms):
    """Forgets to permute the next layer's columns: the function changes."""
    return [(W[perms[i]], b[perms[i]]) if i < len(layers) - 1 else (W, b) for i, (W, b) in enumerate(layers)]


def permute_with_inverse_columns(layers, perms):
    """Uses the inverse permutation on the wrong side: keeps the function but not the given permutation."""
    inverse = [torch.argsort(p) for p in perms]
    return permute_hidden_units(layers, inverse)


def stirling_without_minus_n(hidden_widths, odd_activation):
    """log(n!) ≈ n log n, the source's estimate."""
    return sum(n * math.log10(n) + (n * math.log10(2) if odd_activation else 0) for n in hidden_widths)


def forgets_sign_flips(hidden_widths, odd_activation):
    return log10_equivalent_settings(hidden_widths, False)


def counts_output_layer(hidden_widths, odd_activation):
    return log10_equivalent_settings(list(hidden_widths) + [10], odd_activation)


def sort_matching(W_a, W_b):
    """The source's canonical sort by the first weight: pairs units by rank."""
    order_a, order_b = torch.argsort(W_a[:, 0]), torch.argsort(W_b[:, 0])
    perm = torch.empty_like(order_a)
    perm[order_a] = order_b
    return perm


def minimises_cost(W_a, W_b):
    """Forgets maximize=True: finds the worst matching."""
    rows, cols = linear_sum_assignment((W_a @ W_b.T).numpy())
    return torch.as_tensor(cols[np.argsort(rows)])


def small_lr_limit(H, C, lr):
    """Continuous-time answer lr C / 2H, right only for lr -> 0 and commuting H, C."""
    return lr / 2 * torch.linalg.solve(H, C)


def forgets_lr_squared(H, C, lr):
    A = torch.eye(len(H), dtype=torch.float64) - lr * H
    return torch.as_tensor(solve_discrete_lyapunov(A.numpy(), C.numpy()))


WRONG = {
    "17.1": {"rows only": permute_rows_only, "inverse permutation": permute_with_inverse_columns},
    "17.2": {"n log n": stirling_without_minus_n, "no sign flips": forgets_sign_flips,
             "output layer counted": counts_output_layer},
    "17.3": {"sort by first weight": sort_matching, "minimises": minimises_cost},
    "17.4": {"small-lr limit": small_lr_limit, "no lr squared": forgets_lr_squared},
}


@pytest.mark.parametrize("eid", sorted(REFERENCES))
def test_reference_passes(eid):
    result = run_check(eid, REFERENCES[eid])
    assert result.passed, result.message
    assert result.cases_total >= 5


@pytest.mark.parametrize("eid,name", [(e, n) for e in WRONG for n in WRONG[e]])
def test_wrong_answer_fails_naming_the_case(eid, name):
    result = run_check(eid, WRONG[eid][name])
    assert not result.passed, f"{name} passed {eid}"
    assert result.message.startswith("case ") and "expected" in result.message and "got" in result.message


@pytest.mark.parametrize("eid", sorted(REFERENCES))
@pytest.mark.parametrize("answer", [lambda *a: None, lambda *a: "seventeen", lambda *a: float("nan"),
                                    lambda *a: torch.zeros(3, 3)])
def test_bad_types_fail_cleanly(eid, answer):
    result = run_check(eid, answer)
    assert not result.passed and result.message.startswith("case ")


def test_not_a_function_fails():
    assert not run_check("17.2", None).passed
