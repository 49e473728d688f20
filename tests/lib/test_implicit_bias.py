"""Tests of dlbook.implicit_bias: max-margin bias of logistic regression, deep linear nets, Rademacher."""
import itertools
import math

import numpy as np
import pytest
import torch
from sklearn.svm import SVC

from dlbook import implicit_bias as ib
from dlbook.runtime import generator


def _separable(seed, num_points=40):
    g = generator(seed)
    X = torch.randn(num_points, 2, generator=g, dtype=torch.float64)
    w = torch.tensor([1.0, 0.5], dtype=torch.float64)
    y = torch.sign(X @ w)
    return X + 0.3 * y.unsqueeze(1) * w / w.norm(), y          # push the classes apart


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_max_margin_direction_matches_sklearn_svc(seed):
    X, y = _separable(seed)
    direction = ib.max_margin_direction(X, y)
    # symmetric copies make the SVC intercept zero, so its hyperplane passes through the origin
    svc = SVC(kernel="linear", C=1e6).fit(torch.cat([X, -X]).numpy(), torch.cat([y, -y]).numpy())
    assert abs(svc.intercept_[0]) < 1e-3
    assert ib.angle_degrees(direction, torch.tensor(svc.coef_[0])) < 0.01      # measured <= 0.004 degrees
    margins = y * (X @ direction)
    assert margins.min() > 0 and abs(direction.norm().item() - 1) < 1e-12
    # no other unit direction on a fine circle has a larger smallest margin
    angles = torch.linspace(0, 2 * math.pi, 20_001, dtype=torch.float64)
    circle = torch.stack([angles.cos(), angles.sin()], 1)
    assert (y.unsqueeze(1) * (X @ circle.T)).min(0).values.max() <= margins.min() + 1e-9


def test_first_step_is_the_autograd_gradient():
    X, y = _separable(0)
    w = torch.zeros(2, dtype=torch.float64, requires_grad=True)
    grad, = torch.autograd.grad(ib.logistic_loss(X, y, w), w)
    torch.testing.assert_close(ib.logistic_gradient_descent(X, y, lr=0.3, steps=1).weights[0], -0.3 * grad)
    w1 = torch.tensor([0.2, -0.4], dtype=torch.float64)
    want = torch.nn.functional.binary_cross_entropy_with_logits(X @ w1, (y + 1) / 2)
    torch.testing.assert_close(ib.logistic_loss(X, y, w1), want)


@pytest.mark.parametrize("seed", [1, 3])
def test_gradient_descent_turns_toward_the_max_margin_direction(seed):
    X, y = _separable(seed)
    direction = ib.max_margin_direction(X, y)
    margin = (y * (X @ direction)).min().item()
    run = ib.logistic_gradient_descent(X, y, steps=10_000, record=[1000, 10_000])
    angles = [ib.angle_degrees(w, direction) for w in run.weights]
    # measured 5.4 -> 3.8 and 4.9 -> 2.9 degrees (2.3 and 1.6 after 10^5 steps); the angle shrinks
    # like 1 / log t, and is not monotone over the first hundred steps
    assert angles[0] > angles[1] + 1.0
    norms = run.weights.norm(dim=1)
    # ‖w‖ grows like log(t) / margin: the last decade adds 0.77-0.80 of ln(10) / margin (measured)
    per_decade = (norms[1] - norms[0]).item() / (math.log(10) / margin)
    assert 0.6 < per_decade < 1.0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_normalized_gradient_descent_converges_fast(seed):
    X, y = _separable(seed)
    run = ib.logistic_gradient_descent(X, y, steps=1000, normalized=True)
    assert ib.angle_degrees(run.weights[-1], ib.max_margin_direction(X, y)) < 0.3     # measured 0.03-0.15


def _regression(seed=5):
    g = generator(seed)
    X = torch.randn(50, 5, generator=g, dtype=torch.float64)
    Y = X @ torch.randn(5, 3, generator=g, dtype=torch.float64) + 0.5 * torch.randn(50, 3, generator=g,
                                                                                    dtype=torch.float64)
    return X, Y


def test_least_squares_loss_matches_numpy():
    X, Y = _regression()
    W, *_ = np.linalg.lstsq(X.numpy(), Y.numpy(), rcond=None)
    assert ib.least_squares_loss(X, Y) == pytest.approx(0.5 * ((Y.numpy() - X.numpy() @ W) ** 2).sum() / 50,
                                                        rel=1e-12)
    weights = ib.deep_linear_init((5, 8, 8, 3), seed=0)
    assert ib.end_to_end(weights).shape == (3, 5)
    torch.testing.assert_close(ib.end_to_end(weights), weights[2] @ weights[1] @ weights[0])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_deep_linear_network_reaches_the_optimum_and_stays_balanced(seed):
    X, Y = _regression()
    initial = ib.deep_linear_init((5, 8, 8, 3), seed=seed)
    drifts = []
    for lr, steps in [(0.1, 400), (0.05, 800)]:
        final = ib.deep_linear_gradient_descent(X, Y, initial, lr=lr, steps=steps)
        assert ib.squared_loss(X, Y, final).item() - ib.least_squares_loss(X, Y) < 1e-8
        drifts.append(ib.balance_drift(initial, final))
    # the flow conserves the balance matrices; gradient descent drifts in proportion to lr
    # (measured 0.057-0.059 and 0.029-0.030)
    assert drifts[0] < 0.1 and 1.8 < drifts[0] / drifts[1] < 2.2


def test_rademacher_complexity_of_the_linear_class():
    X = torch.randn(12, 3, generator=generator(0), dtype=torch.float64)
    signs = torch.tensor(list(itertools.product([-1.0, 1.0], repeat=12)), dtype=torch.float64)
    exact = (2.0 * (signs @ X).norm(dim=1) / 12).mean().item()       # all 4096 sign vectors
    estimate = ib.rademacher_complexity_linear(X, 2.0, num_draws=20_000, seed=1)
    assert estimate == pytest.approx(exact, rel=0.01)
    assert exact < ib.rademacher_bound_linear(X, 2.0) == pytest.approx(2.0 * math.sqrt((X ** 2).sum()) / 12)
    assert ib.rademacher_complexity_linear(X, 6.0, num_draws=2000, seed=4) == pytest.approx(
        3 * ib.rademacher_complexity_linear(X, 2.0, num_draws=2000, seed=4), rel=1e-14)


def test_bad_inputs():
    X, y = _separable(0)
    with pytest.raises(ValueError, match="y"):
        ib.logistic_gradient_descent(X, (y + 1) / 2, steps=3)
    with pytest.raises(ValueError, match="record"):
        ib.logistic_gradient_descent(X, y, steps=3, record=[5])
    with pytest.raises(ValueError, match="lr"):
        ib.logistic_gradient_descent(X, y, lr=0.0)
    with pytest.raises(ValueError, match="separable"):
        ib.max_margin_direction(torch.tensor([[1.0, 0.0], [2.0, 0.0]]), torch.tensor([1.0, -1.0]))
    with pytest.raises(ValueError, match="non-zero"):
        ib.angle_degrees(torch.zeros(2), torch.ones(2))
    with pytest.raises(ValueError, match="weights\\[1\\]"):
        ib.end_to_end([torch.ones(4, 3, dtype=torch.float64), torch.ones(2, 5, dtype=torch.float64)])
    with pytest.raises(TypeError, match="weights"):
        ib.balance_matrices(torch.ones(3, 3))
    with pytest.raises(ValueError, match="Y"):
        ib.squared_loss(torch.ones(4, 3, dtype=torch.float64), torch.ones(4, 5, dtype=torch.float64),
                        [torch.ones(2, 3, dtype=torch.float64)])
    with pytest.raises(ValueError, match="norm_bound"):
        ib.rademacher_bound_linear(X, -1.0)
    with pytest.raises(ValueError, match="widths"):
        ib.deep_linear_init((5,))


def test_fast_deep_linear_descent_equals_the_autograd_reference():
    X, Y = _regression()
    initial = ib.deep_linear_init([5, 8, 8, 3], seed=4)
    fast = ib.deep_linear_gradient_descent(X, Y, initial, lr=0.05, steps=50)
    reference = ib.deep_linear_gradient_descent_reference(X, Y, initial, lr=0.05, steps=50)
    for a, b in zip(fast, reference):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-13)
    assert all((a - b).abs().max() > 1e-3 for a, b in zip(fast, initial))
