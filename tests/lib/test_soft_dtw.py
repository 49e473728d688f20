"""Tests of dlbook.soft_dtw against a plain double loop, autograd and finite differences."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from dlbook import soft_dtw


def _loop(C, gamma):
    n, m = C.shape
    R = np.full((n + 1, m + 1), np.inf)
    R[0, 0] = 0.0
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            v = np.array([R[i - 1, j - 1], R[i - 1, j], R[i, j - 1]])
            R[i, j] = C[i - 1, j - 1] + (v.min() if gamma == 0 else
                                         v.min() - gamma * np.log(np.exp(-(v - v.min()) / gamma).sum()))
    return R[n, m]


def _cost(n=7, m=9, seed=0):
    rng = np.random.default_rng(seed)
    return soft_dtw.squared_distances(torch.tensor(rng.standard_normal(n)), torch.tensor(rng.standard_normal(m)))


@pytest.mark.parametrize("gamma", [0.0, 0.01, 0.3, 2.0])
@pytest.mark.parametrize("shape", [(1, 1), (1, 5), (6, 1), (7, 9), (12, 4)])
def test_vectorised_recursion_equals_the_loop(gamma, shape):
    C = _cost(*shape)
    assert math.isclose(soft_dtw.soft_dtw(C, gamma).item(), _loop(C.numpy(), gamma), rel_tol=1e-12, abs_tol=1e-12)


def test_alignment_is_the_gradient():
    C = _cost(8, 11, seed=1)
    for gamma in (0.05, 0.5):
        Cg = C.clone().requires_grad_()
        (grad,) = torch.autograd.grad(soft_dtw.soft_dtw(Cg, gamma), Cg)
        E = soft_dtw.soft_dtw_alignment(C, gamma)
        torch.testing.assert_close(E, grad, atol=1e-12, rtol=0)
        assert math.isclose(E[0, 0].item(), 1.0) and math.isclose(E[-1, -1].item(), 1.0)
    assert torch.autograd.gradcheck(lambda c: soft_dtw.soft_dtw(c, 0.2), (C.clone().requires_grad_(),))


def test_soft_min_bounds_and_gradient():
    v = torch.randn(50, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    s = soft_dtw.soft_min(v, 0.1)
    assert (s <= v.min(-1).values).all() and (s >= v.min(-1).values - 0.1 * math.log(4)).all()
    vg = v.clone().requires_grad_()
    (grad,) = torch.autograd.grad(soft_dtw.soft_min(vg, 0.1).sum(), vg)
    torch.testing.assert_close(grad, torch.softmax(-v / 0.1, dim=-1))


def test_dtw_path_is_monotone_and_has_the_dtw_cost():
    C = _cost(6, 9, seed=2)
    path = soft_dtw.dtw_path(C)
    assert path[0] == (0, 0) and path[-1] == (5, 8)
    assert all(0 <= i2 - i1 <= 1 and 0 <= j2 - j1 <= 1 for (i1, j1), (i2, j2) in zip(path, path[1:]))
    assert math.isclose(sum(C[i, j].item() for i, j in path), soft_dtw.dtw(C).item(), rel_tol=1e-12)


def test_bad_arguments_raise_clear_errors():
    with pytest.raises(ValueError, match="cost must have 2"):
        soft_dtw.soft_dtw(torch.zeros(3, dtype=torch.float64), 0.1)
    with pytest.raises(ValueError, match="gamma"):
        soft_dtw.soft_dtw(torch.zeros(2, 2, dtype=torch.float64), -1.0)
    with pytest.raises(ValueError, match="gamma"):
        soft_dtw.soft_dtw_alignment(torch.zeros(2, 2, dtype=torch.float64), 0.0)
    with pytest.raises(ValueError, match="series"):
        soft_dtw.squared_distances(torch.zeros(3, 2), torch.zeros(4, 3))
    with pytest.raises(TypeError, match="cost"):
        soft_dtw.dtw(torch.zeros(2, 2, dtype=torch.int64))
