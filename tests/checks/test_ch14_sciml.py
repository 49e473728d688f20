"""Checks of chapter 14's exercises: reference solutions pass, plausible wrong answers fail."""
from __future__ import annotations

import math

import numpy as np
import torch

from dlbook import ode, pinn, soft_dtw
from dlbook.exercises.checks import ch14_sciml as checks

from exercise_contract import bad_types

#: Fewest cases each check must run (tests/checks/test_contract.py).
MIN_CASES = 5

IDS = ["14.1", "14.2", "14.3", "14.4"]


# ---------------------------------------------------------------------------
# Reference solutions (independent of the chapter's modules and of the notebook)
# ---------------------------------------------------------------------------

ORDER = {"euler": 1, "midpoint": 2, "heun": 2, "kutta3": 3, "rk4": 4}


def error_reduction(method, factor):
    return float(factor) ** ORDER[method]


def burgers_residual(W1, b1, w2, b2, tx, nu, *, variant="right"):
    tx = tx.clone().requires_grad_(True)
    u = (torch.tanh(tx @ W1.T + b1) @ w2 + b2)[:, None]
    (grads,) = torch.autograd.grad(u.sum(), tx, create_graph=True)
    u_t, u_x = grads[:, :1], grads[:, 1:]
    (second,) = torch.autograd.grad(u_x.sum(), tx, create_graph=True)
    u_xx = second[:, 1:]
    if variant == "minus advection":
        return u_t - u * u_x - nu * u_xx
    if variant == "first derivative for the diffusion":
        return u_t + u * u_x - nu * u_x
    if variant == "mixed derivative":
        return u_t + u * u_x - nu * second[:, :1]
    return u_t + u * u_x - nu * u_xx


def _rk4(f, state, t, h, num_steps):
    for k in range(num_steps):
        s = t + k * h
        k1 = f(s, state)
        k2 = f(s + h / 2, state + h / 2 * k1)
        k3 = f(s + h / 2, state + h / 2 * k2)
        k4 = f(s + h, state + h * k3)
        state = state + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return state


def linear_ode_gradients(A, z0, y, t1, num_steps, *, variant="right"):
    d = len(z0)
    z1 = _rk4(lambda t, z: A @ z, z0, 0.0, t1 / num_steps, num_steps)
    a1 = z1 - y
    sign = 1.0 if variant == "adjoint sign flipped" else -1.0

    def augmented(t, state):
        z, a = state[:d], state[d:2 * d]
        return torch.cat([A @ z, sign * A.T @ a, -torch.outer(a, z).reshape(-1)])

    start = torch.cat([z1, a1, torch.zeros(d * d, dtype=A.dtype)])
    end = _rk4(augmented, start, t1, -t1 / num_steps, num_steps)
    grad_A = end[2 * d:].reshape(d, d)
    if variant == "transposed":
        grad_A = grad_A.T
    grad_t1 = float(a1 @ (A @ z1)) if variant != "a . z" else float(a1 @ z1)
    return grad_A, end[d:2 * d], grad_t1


def soft_dtw_gradient(C, gamma, *, variant="right"):
    n, m = C.shape
    C = C.double().numpy()
    R = np.full((n + 2, m + 2), np.inf)
    R[0, 0] = 0.0
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            v = np.array([R[i - 1, j - 1], R[i - 1, j], R[i, j - 1]])
            if variant == "hard path":
                R[i, j] = C[i - 1, j - 1] + v.min()
            else:
                R[i, j] = C[i - 1, j - 1] + v.min() - gamma * np.log(np.exp(-(v - v.min()) / gamma).sum())
    if variant == "hard path":
        E = np.zeros((n, m))
        i, j = n, m
        while True:
            E[i - 1, j - 1] = 1.0
            if (i, j) == (1, 1):
                break
            i, j = min(((i - 1, j - 1), (i - 1, j), (i, j - 1)), key=lambda c: R[c])
        return torch.tensor(E)
    scale = 1.0 if variant == "no division by gamma" else gamma
    R[n + 1, m + 1] = R[n, m]
    R[:n + 1, m + 1] = -np.inf
    R[n + 1, :m + 1] = -np.inf
    D = np.zeros((n + 2, m + 2))
    D[1:n + 1, 1:m + 1] = C
    E = np.zeros((n + 2, m + 2))
    E[n + 1, m + 1] = 1.0
    for j in range(m, 0, -1):
        for i in range(n, 0, -1):
            E[i, j] = sum(E[p, q] * math.exp((R[p, q] - R[i, j] - D[p, q]) / scale)
                          for p, q in ((i + 1, j), (i, j + 1), (i + 1, j + 1)))
    return torch.tensor(E[1:n + 1, 1:m + 1])


REFERENCES = {"14.1": error_reduction, "14.2": burgers_residual, "14.3": linear_ode_gradients,
              "14.4": soft_dtw_gradient}


# ---------------------------------------------------------------------------
# Plausible wrong answers
# ---------------------------------------------------------------------------

def _reduction_by_package(method, factor):
    A, z0 = torch.eye(2, dtype=torch.float64), torch.ones(1, 2, dtype=torch.float64)
    method = {"heun": "midpoint", "kutta3": "rk4"}.get(method, method)
    return ode.linear_flow_error(A, z0, 10, method=method) / ode.linear_flow_error(A, z0, 10 * factor, method=method)


def _burgers_by_package(W1, b1, w2, b2, tx, nu):
    return pinn.heat_residual(lambda p: (torch.tanh(p @ W1.T + b1) @ w2 + b2)[:, None], tx, nu)


def _gradients_by_package(A, z0, y, t1, num_steps):
    A = A.clone().requires_grad_(True)
    z1 = ode.odeint(lambda t, z: A @ z, z0, 0.0, t1, num_steps)
    result = ode.adjoint_gradients(lambda t, z: A @ z, [A], z1, z1 - y, 0.0, t1, num_steps)
    return result.grad_params[0], result.grad_z0, float((z1 - y) @ (A @ z1))


def _alignment_by_package(C, gamma):
    return soft_dtw.soft_dtw_alignment(C, gamma)


WRONG = {
    "14.1": {
        "the local error's exponent, factor^(p + 1)": lambda method, factor: float(factor) ** (ORDER[method] + 1),
        "every method first order": lambda method, factor: float(factor),
        "Heun and Kutta's rule taken as first order": lambda method, factor: float(factor) ** {
            "euler": 1, "midpoint": 2, "heun": 1, "kutta3": 1, "rk4": 4}[method],
        "measured with the package": _reduction_by_package,
    },
    "14.2": {
        "advection with a minus sign": lambda *a: burgers_residual(*a, variant="minus advection"),
        "first derivative in the diffusion term": lambda *a: burgers_residual(*a, variant="first derivative for "
                                                                                 "the diffusion"),
        "mixed derivative u_xt for u_xx": lambda *a: burgers_residual(*a, variant="mixed derivative"),
        "the package's heat residual (no advection)": _burgers_by_package,
    },
    "14.3": {
        "adjoint sign flipped, da/dt = +A^T a": lambda *a: linear_ode_gradients(*a, variant="adjoint sign flipped"),
        "grad_A transposed": lambda *a: linear_ode_gradients(*a, variant="transposed"),
        "grad_t1 = a . z instead of a . f(z)": lambda *a: linear_ode_gradients(*a, variant="a . z"),
        "the package's adjoint": _gradients_by_package,
    },
    "14.4": {
        "the indicator of the hard DTW path": lambda C, gamma: soft_dtw_gradient(C, gamma, variant="hard path"),
        "weights not divided by gamma": lambda C, gamma: soft_dtw_gradient(C, gamma, variant="no division by gamma"),
        "normalised to sum to one": lambda C, gamma: soft_dtw_gradient(C, gamma) / soft_dtw_gradient(C, gamma).sum(),
        "the package's alignment": _alignment_by_package,
    },
}


BAD_TYPES = bad_types("raises ValueError", "stub", "returns None", "returns a string", "returns a 3x3 tensor",
                      "returns NaN", "returns a list")


# ---------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------



def test_measured_reductions_follow_the_orders():
    for method, order in ORDER.items():
        assert abs(math.log(checks._measured_reduction(method, 2) / 2 ** order)) < math.log(1.1)


def test_hand_derivatives_of_the_burgers_residual_equal_autograd():
    label, W1, b1, w2, b2, tx, nu = checks._burgers_cases()[0]
    got = burgers_residual(torch.tensor(W1), torch.tensor(b1), torch.tensor(w2), b2, torch.tensor(tx), nu)
    np.testing.assert_allclose(got.detach().numpy(), checks._burgers_expected(W1, b1, w2, b2, tx, nu), atol=1e-12)


def test_exact_linear_ode_gradients_match_finite_differences():
    label, A, z0, y, t1, _ = checks._linear_ode_cases()[0]

    def loss(A_, t1_):
        return 0.5 * np.sum((checks.expm(t1_ * A_) @ z0 - y) ** 2)

    grad_A, _, grad_t1 = checks._linear_ode_expected(A, z0, y, t1)
    bump = np.zeros_like(A)
    bump[0, 1] = 1e-6
    assert abs((loss(A + bump, t1) - loss(A - bump, t1)) / 2e-6 - grad_A[0, 1]) < 1e-7
    assert abs((loss(A, t1 + 1e-6) - loss(A, t1 - 1e-6)) / 2e-6 - grad_t1) < 1e-7
