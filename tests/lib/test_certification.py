"""Certified bounds: soundness by sampling and the sandwich IBP <= LP <= MILP <= attack."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from dlbook import attacks, certification, nets


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_sandwich_holds_on_random_networks(seed):
    net = nets.mlp((2, 8, 8, 2), seed=seed, dtype=torch.float64)
    x = torch.randn(2, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    label = int(net(x[None]).argmax())
    other = 1 - label
    ibp = certification.interval_margin(net, x, 0.3, label, other)
    lp = certification.lp_margin(net, x, 0.3, label, other)
    exact = certification.milp_margin(net, x, 0.3, label, other)
    X_adv = attacks.pgd(net, x.repeat(20, 1), torch.full((20,), label), 0.3, steps=50,
                        target=torch.full((20,), other), low=None, high=None, seed=seed)
    with torch.no_grad():
        attack = (net(X_adv)[:, label] - net(X_adv)[:, other]).min().item()
    assert ibp <= lp + 1e-7 <= exact + 2e-7 <= attack + 3e-7
    # On a 2-D input a fine grid of the box gets close to the exact minimum.
    grid = torch.stack(torch.meshgrid(*[torch.linspace(-0.3, 0.3, 301, dtype=torch.float64)] * 2,
                                      indexing="ij"), dim=-1).reshape(-1, 2) + x
    with torch.no_grad():
        brute = (net(grid)[:, label] - net(grid)[:, other]).min().item()
    assert exact <= brute + 1e-9 and brute - exact < 0.01


def test_interval_bounds_contain_every_sampled_perturbation():
    net = nets.mlp((5, 16, 16, 3), seed=4, dtype=torch.float64)
    x = torch.rand(5, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    bounds = certification.interval_bounds(net, x, 0.1)
    delta = (2 * torch.rand(10000, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(5)) - 1) * 0.1
    value = x + delta
    linear_index = 0
    with torch.no_grad():
        for module in net:
            value = module(value)
            if isinstance(module, nn.Linear):
                lower = torch.from_numpy(bounds.lower[linear_index])
                upper = torch.from_numpy(bounds.upper[linear_index])
                assert torch.all((value >= lower - 1e-12) & (value <= upper + 1e-12))
                linear_index += 1


def test_interval_step_is_exact_for_one_layer():
    W = np.array([[1.0, -2.0], [0.5, 0.0]])
    lower, upper = certification.interval_step(W, np.array([0.1, -1.0]), np.array([-1.0, 0.0]), np.array([1.0, 2.0]))
    assert np.allclose(lower, [-1 - 4 + 0.1, -0.5 - 1.0]) and np.allclose(upper, [1 + 0.1, 0.5 - 1.0])


def test_certified_rows_survive_the_attack():
    net = nets.mlp((4, 10, 3), seed=1, dtype=torch.float64)
    X = torch.randn(200, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        y = net(X).argmax(dim=1)
    eps = 0.5
    safe = certification.certified(net, X, y, eps)
    assert 0 < safe.sum() < len(X)
    # Row by row: certified means the folded interval margin is positive against every other class.
    for i in range(0, 200, 17):
        margins = [certification.interval_margin(net, X[i], eps, int(y[i]), j) for j in range(3) if j != y[i]]
        assert bool(safe[i]) == (min(margins) > 0)
    X_adv = attacks.pgd(net, X, y, eps, steps=20, low=None, high=None)
    with torch.no_grad():
        assert torch.all(net(X_adv).argmax(dim=1)[safe] == y[safe])


def test_bad_models_and_arguments_are_named():
    with pytest.raises(TypeError, match="nn.Sequential"):
        certification.interval_bounds(nn.Linear(2, 2), torch.zeros(2), 0.1)
    with pytest.raises(TypeError, match="only Linear"):
        certification.interval_bounds(nn.Sequential(nn.Linear(2, 2), nn.Tanh(), nn.Linear(2, 2)), torch.zeros(2), 0.1)
    net = nets.mlp((2, 4, 2), seed=0, dtype=torch.float64)
    with pytest.raises(ValueError, match="x must have shape"):
        certification.interval_bounds(net, torch.zeros(3, dtype=torch.float64), 0.1)
    with pytest.raises(ValueError, match="other must differ"):
        certification.milp_margin(net, torch.zeros(2, dtype=torch.float64), 0.1, 1, 1)
    with pytest.raises(ValueError, match="eps"):
        certification.lp_margin(net, torch.zeros(2, dtype=torch.float64), -1.0, 0, 1)
