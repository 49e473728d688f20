"""Closed forms for linear classifiers against brute force and simulation."""
from __future__ import annotations

import itertools

import pytest
import torch

from dlbook import linear_robustness as lr


def _problem(seed=0, d=3, classes=4, n=50):
    rng = torch.Generator().manual_seed(seed)
    W = torch.randn(classes, d, generator=rng, dtype=torch.float64)
    b = torch.randn(classes, generator=rng, dtype=torch.float64)
    X = torch.randn(n, d, generator=rng, dtype=torch.float64)
    y = (X @ W.T + b).argmax(dim=1)
    return W, b, X, y


def test_worst_case_margins_match_the_corners_of_the_box():
    W, b, X, y = _problem()
    eps = 0.3
    corners = torch.tensor(list(itertools.product([-eps, eps], repeat=3)), dtype=torch.float64)
    scores = (X[:, None, :] + corners) @ W.T + b                     # (N, 8, classes)
    true = scores.gather(2, y[:, None, None].expand(-1, 8, 1))
    others = scores.clone()
    others[torch.arange(len(X)), :, y] = -torch.inf
    brute = (true[..., 0] - others.max(dim=2).values).min(dim=1).values
    assert torch.allclose(lr.worst_case_margins(W, b, X, y, eps), brute, atol=1e-12)


def test_robust_accuracy_falls_with_eps_and_l2_uses_the_euclidean_norm():
    W, b, X, y = _problem(seed=1)
    accuracies = [lr.robust_accuracy(W, b, X, y, eps) for eps in (0.0, 0.1, 0.3, 1.0)]
    assert accuracies[0] == 1.0 and accuracies == sorted(accuracies, reverse=True)
    m = lr.worst_case_margins(W, b, X, y, 0.2, norm="l2")
    scores = X @ W.T + b
    j = (scores - torch.eye(4, dtype=torch.float64)[y] * 1e9).argmax(dim=1)
    assert torch.all(m <= scores.gather(1, y[:, None])[:, 0] - scores.gather(1, j[:, None])[:, 0]
                     - 0.2 * (W[y] - W[j]).norm(dim=1) + 1e-12)


def test_binary_worst_case_loss_is_attained_by_the_sign_step():
    rng = torch.Generator().manual_seed(3)
    theta = torch.randn(5, generator=rng, dtype=torch.float64)
    X = torch.randn(10, 5, generator=rng, dtype=torch.float64)
    y = torch.sign(torch.randn(10, generator=rng, dtype=torch.float64))
    X_adv = X - 0.1 * y[:, None] * theta.sign()
    expected = torch.log1p(torch.exp(-y * (X_adv @ theta)))
    assert torch.allclose(lr.binary_worst_case_loss(theta, X, y, 0.1), expected, atol=1e-13)


def test_gaussian_model_accuracy_matches_simulation():
    d = 400
    mean = torch.ones(d, dtype=torch.float64)
    sigma = d ** 0.25
    X, y = lr.gaussian_model_sample(4, mean, sigma, seed=0)
    w = lr.averaging_classifier(X, y)
    exact = lr.gaussian_model_accuracy(w, mean, sigma, 0.5)
    X_test, y_test = lr.gaussian_model_sample(20000, mean, sigma, seed=1)
    standard = ((X_test @ w) * y_test > 0).double().mean().item()
    robust = ((X_test @ w) * y_test - 0.5 * w.abs().sum() > 0).double().mean().item()
    assert abs(standard - exact.standard) < 0.01 and abs(robust - exact.robust) < 0.01


def test_bad_arguments_are_named():
    W, b, X, y = _problem()
    with pytest.raises(ValueError, match="b must have shape"):
        lr.worst_case_margins(W, b[:2], X, y, 0.1)
    with pytest.raises(ValueError, match="norm"):
        lr.worst_case_margins(W, b, X, y, 0.1, norm="l1")
    with pytest.raises(ValueError, match="y must hold labels"):
        lr.binary_worst_case_loss(W[0], X, y.double(), 0.1)
    with pytest.raises(ValueError, match="w must not be all zeros"):
        lr.gaussian_model_accuracy(torch.zeros(3, dtype=torch.float64), torch.ones(3), 1.0, 0.1)
