"""Tests of dlbook.pinn: residuals vanish on the exact solutions, match hand derivatives, training works."""
from __future__ import annotations

import math

import pytest
import torch

from dlbook import nets, pinn


def test_exact_solutions_have_zero_residual():
    x = pinn.poisson_points(50, seed=1).interior
    assert pinn.poisson_residual(pinn.poisson_exact, x).abs().max() < 1e-12
    tx = pinn.heat_points(50, 5, 6, seed=2).interior
    assert pinn.heat_residual(lambda p: pinn.heat_exact(p, 0.3), tx, 0.3).abs().max() < 1e-12


def test_residuals_of_perturbed_functions_equal_their_analytic_values():
    x = torch.linspace(0.1, 0.9, 9, dtype=torch.float64)[:, None]
    # u = sin(πx) + x³ has -u'' - π² sin(πx) = -6x
    residual = pinn.poisson_residual(lambda s: torch.sin(math.pi * s) + s ** 3, x)
    torch.testing.assert_close(residual, -6 * x)
    tx = torch.tensor([[0.2, 0.3], [0.5, 0.7]], dtype=torch.float64)
    # u = t x² has u_t - κ u_xx = x² - 2κt
    residual = pinn.heat_residual(lambda p: p[:, :1] * p[:, 1:] ** 2, tx, 0.5)
    torch.testing.assert_close(residual, tx[:, 1:] ** 2 - tx[:, :1])


def test_residual_is_differentiable_in_the_weights_and_in_kappa():
    u = nets.mlp((2, 8, 1), activation="tanh", seed=0, dtype=torch.float64)
    kappa = torch.tensor(0.2, dtype=torch.float64, requires_grad=True)
    points = pinn.heat_points(20, 5, 6, seed=0)
    loss = pinn.heat_loss(u, points, kappa)
    grads = torch.autograd.grad(loss.data + loss.residual, [kappa, *u.parameters()])
    assert all(torch.isfinite(g).all() and g.abs().sum() > 0 for g in grads)


def test_points_lie_where_they_should():
    p = pinn.heat_points(100, 10, 20, t_max=2.0, seed=0)
    assert p.interior.shape == (100, 2) and (p.interior[:, 0] <= 2).all() and (p.interior[:, 1] <= 1).all()
    assert (p.initial[:, 0] == 0).all() and set(p.boundary[:, 1].tolist()) == {0.0, 1.0}
    assert torch.equal(pinn.poisson_points(5, seed=3).interior, pinn.poisson_points(5, seed=3).interior)


def test_a_short_fit_solves_poisson():
    u = nets.mlp((1, 16, 1), activation="tanh", seed=0, dtype=torch.float64)
    points = pinn.poisson_points(32, seed=0)
    losses = pinn.fit(lambda: pinn.poisson_loss(u, points), u.parameters(), adam_steps=200, lr=1e-2,
                      lbfgs_steps=100)
    x = torch.linspace(0, 1, 101, dtype=torch.float64)[:, None]
    with torch.no_grad():
        assert pinn.relative_l2(u(x), pinn.poisson_exact(x)) < 1e-2
    assert losses[-1] < 1e-3 * losses[0]


def test_bad_arguments_raise_clear_errors():
    with pytest.raises(ValueError, match="x must have shape"):
        pinn.poisson_residual(pinn.poisson_exact, torch.zeros(3, 2, dtype=torch.float64))
    with pytest.raises(TypeError, match="u must be"):
        pinn.poisson_residual(3, torch.zeros(3, 1, dtype=torch.float64))
    with pytest.raises(ValueError, match="kappa"):
        pinn.heat_residual(pinn.poisson_exact, torch.zeros(3, 2, dtype=torch.float64), -1.0)
    with pytest.raises(ValueError, match="num_interior"):
        pinn.poisson_points(0)
    with pytest.raises(ValueError, match="same shape"):
        pinn.relative_l2(torch.zeros(3), torch.ones(4))
    with pytest.raises(ValueError, match="lr"):
        pinn.fit(lambda: None, [], adam_steps=1, lr=0.0)
