"""Tests of dlbook.ode: steppers against closed forms and scipy, their orders, the adjoint method."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.integrate import solve_ivp
from scipy.linalg import expm, expm_frechet

from dlbook import ode, runtime


def _linear_problem(seed=0, d=3):
    gen = runtime.generator(seed)
    A = 0.5 * torch.randn(d, d, dtype=torch.float64, generator=gen)
    z0 = torch.randn(d, dtype=torch.float64, generator=gen)
    y = torch.randn(d, dtype=torch.float64, generator=gen)
    return A, z0, y


@pytest.mark.parametrize("method, expected_order", [("euler", 1), ("midpoint", 2), ("rk4", 4)])
def test_each_stepper_has_its_order_on_a_linear_system(method, expected_order):
    A, z0, _ = _linear_problem()
    steps = [10, 20, 40, 80]
    errors = [ode.linear_flow_error(A, z0[None], n, method=method) for n in steps]
    assert abs(ode.convergence_order(steps, errors) - expected_order) < 0.15


def test_rk4_matches_solve_ivp_on_a_nonlinear_batch():
    field = ode.cubic_spiral_field([[-0.1, 2.0], [-2.0, -0.1]])
    z0 = torch.tensor([[2.0, 0.0], [0.5, -1.0]], dtype=torch.float64)
    z1 = ode.odeint(field, z0, 0.0, 2.0, 2000)
    for row in range(2):
        reference = solve_ivp(lambda t, z: field(t, torch.tensor(z)).numpy(), (0.0, 2.0), z0[row].numpy(),
                              method="DOP853", rtol=1e-12, atol=1e-12).y[:, -1]
        np.testing.assert_allclose(z1[row].numpy(), reference, atol=1e-9)


def test_path_has_all_states_and_time_dependent_fields_get_the_right_times():
    path = ode.odeint(lambda t, z: torch.full_like(z, 3 * t ** 2), torch.zeros(1, dtype=torch.float64),
                      0.0, 2.0, 8, return_path=True)
    assert path.shape == (9, 1)
    np.testing.assert_allclose(path[-1].item(), 8.0, atol=1e-12)    # ∫ 3t² = t³, exact for RK4 (Simpson)
    backward = ode.odeint(lambda t, z: torch.full_like(z, 3 * t ** 2), path[-1], 2.0, 0.0, 8)
    assert abs(backward.item()) < 1e-12


def test_euler_is_a_weight_tied_residual_network():
    A, z0, _ = _linear_problem(1)
    z = z0.clone()
    for _ in range(50):
        z = z + (1 / 50) * A @ z
    torch.testing.assert_close(ode.odeint(lambda t, s: A @ s, z0, 0.0, 1.0, 50, method="euler"), z)


def test_adjoint_gradient_equals_the_frechet_derivative():
    A, z0, y = _linear_problem(2)
    A = A.requires_grad_()
    field = lambda t, z: A @ z  # noqa: E731
    with torch.no_grad():
        z1 = ode.odeint(field, z0, 0.0, 1.0, 100)
    result = ode.adjoint_gradients(field, [A], z1, z1 - y, 0.0, 1.0, 100)
    E = expm(A.detach().numpy())
    residual = E @ z0.numpy() - y.numpy()
    expected = expm_frechet(A.detach().numpy().T, np.outer(residual, z0.numpy()), compute_expm=False)
    np.testing.assert_allclose(result.grad_params[0].numpy(), expected, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(result.grad_z0.numpy(), E.T @ residual, atol=1e-10)
    np.testing.assert_allclose(result.z0.numpy(), z0.numpy(), atol=1e-12)


def test_adjoint_equals_autograd_through_the_solver_for_an_mlp_field():
    gen = runtime.generator(3)
    W1 = torch.randn(16, 2, dtype=torch.float64, generator=gen).requires_grad_()
    b1 = torch.randn(16, dtype=torch.float64, generator=gen).requires_grad_()
    W2 = (0.3 * torch.randn(2, 16, dtype=torch.float64, generator=gen)).requires_grad_()
    field = lambda t, z: torch.tanh(z @ W1.T + b1) @ W2.T  # noqa: E731
    z0 = torch.randn(4, 2, dtype=torch.float64, generator=gen)
    z1 = ode.odeint(field, z0.clone().requires_grad_(), 0.0, 1.0, 200)
    loss = (z1 ** 2).sum() / 2
    expected = torch.autograd.grad(loss, [W1, b1, W2])
    result = ode.adjoint_gradients(field, [W1, b1, W2], z1.detach(), z1.detach(), 0.0, 1.0, 200)
    for got, want in zip(result.grad_params, expected):
        assert (got - want).norm() / want.norm() < 1e-7


def test_unused_parameters_get_zero_gradients_and_saved_tensors_grow_with_steps():
    A, z0, _ = _linear_problem(4)
    A, unused = A.requires_grad_(), torch.ones(2, dtype=torch.float64, requires_grad=True)
    result = ode.adjoint_gradients(lambda t, z: A @ z, [A, unused], z0, z0, 0.0, 1.0, 5)
    assert torch.equal(result.grad_params[1], torch.zeros(2, dtype=torch.float64))
    counts = [ode.count_saved_tensors(lambda n: ode.odeint(lambda t, z: torch.tanh(A @ z), z0, 0.0, 1.0, n), n)
              for n in (10, 20, 30)]
    assert counts[2] - counts[1] == counts[1] - counts[0] > 0      # a fixed number of tensors per step


def test_convergence_order_fits_a_power_law():
    assert math.isclose(ode.convergence_order([10, 100], [1e-2, 1e-6]), 4.0)


def test_bad_arguments_raise_clear_errors():
    z0 = torch.zeros(2, dtype=torch.float64)
    with pytest.raises(TypeError, match="f must be a function"):
        ode.odeint("field", z0, 0.0, 1.0, 10)
    with pytest.raises(ValueError, match="method"):
        ode.odeint(lambda t, z: z, z0, 0.0, 1.0, 10, method="rk45")
    with pytest.raises(ValueError, match="num_steps"):
        ode.odeint(lambda t, z: z, z0, 0.0, 1.0, 0)
    with pytest.raises(TypeError, match="z0"):
        ode.odeint(lambda t, z: z, torch.zeros(2, dtype=torch.int64), 0.0, 1.0, 10)
    with pytest.raises(TypeError, match="params"):
        ode.adjoint_gradients(lambda t, z: z, [torch.ones(2)], z0, z0, 0.0, 1.0, 10)
    with pytest.raises(ValueError, match="grad_z1"):
        ode.adjoint_gradients(lambda t, z: z, [], z0, torch.zeros(3, dtype=torch.float64), 0.0, 1.0, 10)
    with pytest.raises(ValueError, match="A must be square"):
        ode.linear_flow_error(torch.zeros(2, 3, dtype=torch.float64), z0, 10)
    with pytest.raises(ValueError, match="positive"):
        ode.convergence_order([10, 20], [0.0, 1.0])
