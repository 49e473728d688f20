"""Checks for the exercises of chapter 14 (14_sciml): how much a finer step buys each solver, the residual
of Burgers' equation for a tanh network, gradients of a linear ODE (including the end time) by the adjoint
method, and the gradient of soft-DTW by its backward recursion.

Expected values come from independent code: fixed-step solvers written here in NumPy, the network's input
derivatives written out by hand, SciPy's expm and expm_frechet, and finite differences of a plain NumPy
soft-DTW loop. Nothing calls dlbook.ode, dlbook.pinn or dlbook.soft_dtw, so a bug there cannot make a wrong
answer pass. The student's functions receive strings, numbers and float64 tensors only.
"""
from __future__ import annotations

import math

import numpy as np
import torch
from scipy.linalg import expm, expm_frechet

from ..core import Mismatch, as_array, as_float, describe, exercise, expect


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _expect_close_array(name: str, got: np.ndarray, expected: np.ndarray, rtol: float) -> None:
    """Largest error relative to the largest expected entry below rtol; the message shows the worst entry."""
    scale = max(np.abs(expected).max(), 1e-300)
    error = np.abs(got - expected) / scale
    worst = np.unravel_index(np.argmax(error), error.shape)
    expect(error.max() <= rtol, f"{name} within {rtol:g} (relative to its largest entry); at index "
                                f"{tuple(int(i) for i in worst)} {expected[worst]:.10g}", f"{got[worst]:.10g}")


# ---------------------------------------------------------------------------
# Exercise 14.1: how much a finer step buys (predict)
# ---------------------------------------------------------------------------

#: Butcher tableaux (a, b, c) of the explicit methods the check measures.
_TABLEAUX = {
    "euler": ([[]], [1.0], [0.0]),
    "midpoint": ([[], [0.5]], [0.0, 1.0], [0.0, 0.5]),
    "heun": ([[], [1.0]], [0.5, 0.5], [0.0, 1.0]),
    "kutta3": ([[], [0.5], [-1.0, 2.0]], [1 / 6, 2 / 3, 1 / 6], [0.0, 0.5, 1.0]),
    "rk4": ([[], [0.5], [0.0, 0.5], [0.0, 0.0, 1.0]], [1 / 6, 1 / 3, 1 / 3, 1 / 6], [0.0, 0.5, 0.5, 1.0]),
}


def _solve(method: str, A: np.ndarray, z0: np.ndarray, num_steps: int) -> np.ndarray:
    a, b, _ = _TABLEAUX[method]
    h, z = 1.0 / num_steps, z0.copy()
    for _ in range(num_steps):
        slopes = []
        for row in a:
            stage = z + h * sum((coef * k for coef, k in zip(row, slopes)), np.zeros_like(z))
            slopes.append(A @ stage)
        z = z + h * sum(weight * k for weight, k in zip(b, slopes))
    return z


def _measured_reduction(method: str, factor: int, base_steps: int = 10) -> float:
    """error(N) / error(factor N) at t = 1 on a fixed 4-dimensional linear system, against expm."""
    gen = _rng(1401)
    A = gen.standard_normal((4, 4))
    A /= np.linalg.norm(A, 2)
    z0 = gen.standard_normal(4)
    exact = expm(A) @ z0
    errors = [np.abs(_solve(method, A, z0, n) - exact).max() for n in (base_steps, factor * base_steps)]
    return float(errors[0] / errors[1])


@exercise("14.1", title="How much a finer step buys", function="error_reduction", kind="predict",
          difficulty=1, minutes=15,
          blocked=("dlbook.ode.odeint", "dlbook.ode.linear_flow_error", "dlbook.ode.convergence_order",
                   "dlbook.ode.euler_step", "dlbook.ode.midpoint_step", "dlbook.ode.rk4_step"),
          hint="the global error of a method of order p behaves like C h^p; dividing h by the factor divides "
               "the error by factor^p. Heun's method has order two and Kutta's third-order rule order three.")
def check_error_reduction(error_reduction, cases):
    """Predictions against ratios measured here with NumPy solvers on a linear system, within 25 %."""
    for method, factor in (("euler", 2), ("euler", 10), ("midpoint", 3), ("heun", 2), ("kutta3", 2),
                           ("kutta3", 10), ("rk4", 2), ("rk4", 10)):
        with cases.case(f"error_reduction({method!r}, {factor})"):
            got = as_float(error_reduction(method, factor))
            measured = _measured_reduction(method, factor)
            expect(got > 0 and abs(math.log(got / measured)) <= math.log(1.25),
                   f"a ratio within 25 % of the measured {measured:.4g}", f"{got:.4g}")


# ---------------------------------------------------------------------------
# Exercise 14.2: the residual of Burgers' equation (extend)
# ---------------------------------------------------------------------------

def _burgers_expected(W1, b1, w2, b2, tx, nu):
    """u_t + u u_x - nu u_xx for u = w2 . tanh(W1 (t, x) + b1) + b2, by hand."""
    h = np.tanh(tx @ W1.T + b1)                      # (N, H)
    dh = 1 - h ** 2                                  # tanh'
    ddh = -2 * h * dh                                # tanh''
    u = h @ w2 + b2
    u_t = (dh * W1[:, 0]) @ w2
    u_x = (dh * W1[:, 1]) @ w2
    u_xx = (ddh * W1[:, 1] ** 2) @ w2
    return (u_t + u * u_x - nu * u_xx)[:, None]


def _burgers_cases():
    cases = []
    for label, hidden, num_points, seed, scale, nu in (
            ("H = 8, 20 points, nu = 0.01/pi", 8, 20, 1, 1.0, 0.01 / math.pi),
            ("H = 1, 3 points, nu = 0.5", 1, 3, 2, 1.0, 0.5),
            ("H = 16, 50 points, large weights, nu = 0.1", 16, 50, 3, 3.0, 0.1),
            ("H = 5, 10 points, nu = 0 (inviscid)", 5, 10, 4, 1.0, 0.0),
            ("H = 32, 100 points, nu = 1", 32, 100, 5, 0.5, 1.0)):
        gen = _rng(seed)
        W1 = scale * gen.standard_normal((hidden, 2))
        b1, w2, b2 = gen.standard_normal(hidden), gen.standard_normal(hidden), float(gen.standard_normal())
        tx = np.column_stack([gen.uniform(0, 1, num_points), gen.uniform(-1, 1, num_points)])
        cases.append((label, W1, b1, w2, b2, tx, nu))
    return cases


@exercise("14.2", title="The residual of Burgers' equation", function="burgers_residual", kind="extend",
          difficulty=2, minutes=30,
          blocked=("dlbook.pinn.heat_residual", "dlbook.pinn.poisson_residual", "dlbook.pinn.input_gradient"),
          hint="build u from the weights on a copy of tx with requires_grad, take torch.autograd.grad of u.sum() "
               "with create_graph=True for (u_t, u_x), and differentiate the u_x column again for u_xx.")
def check_burgers_residual(burgers_residual, cases):
    """Against input derivatives written out by hand, to 1e-10 relative."""
    for label, W1, b1, w2, b2, tx, nu in _burgers_cases():
        with cases.case(f"burgers_residual(...) with {label}"):
            args = [torch.tensor(v) for v in (W1, b1, w2)] + [b2, torch.tensor(tx), nu]
            got = as_array(burgers_residual(*args), (len(tx), 1), f"a residual tensor of shape ({len(tx)}, 1)")
            _expect_close_array("the residual", got, _burgers_expected(W1, b1, w2, b2, tx, nu), 1e-10)


# ---------------------------------------------------------------------------
# Exercise 14.3: gradients of a linear ODE by the adjoint method, end time included (extend)
# ---------------------------------------------------------------------------

def _linear_ode_expected(A, z0, y, t1):
    E = expm(t1 * A)
    z1 = E @ z0
    r = z1 - y
    grad_A = t1 * expm_frechet(t1 * A.T, np.outer(r, z0), compute_expm=False)   # d/dA of exp(t1 A)
    return grad_A, E.T @ r, float(r @ (A @ z1))


def _linear_ode_cases():
    cases = []
    for label, d, seed, norm, t1, num_steps in (
            ("d = 3, ||A|| = 1, t1 = 1", 3, 1, 1.0, 1.0, 200),
            ("d = 1, t1 = 1", 1, 2, 0.7, 1.0, 100),
            ("d = 5, ||A|| = 0.5, t1 = 2", 5, 3, 0.5, 2.0, 200),
            ("d = 2, ||A|| = 3, t1 = 0.5", 2, 4, 3.0, 0.5, 300)):
        gen = _rng(1430 + seed)
        A = gen.standard_normal((d, d))
        A *= norm / np.linalg.norm(A, 2)
        cases.append((label, A, gen.standard_normal(d), gen.standard_normal(d), t1, num_steps))
    rotation = np.array([[0.0, -2.0], [2.0, 0.0]])
    cases.append(("a rotation, A = [[0, -2], [2, 0]], t1 = 1.5", rotation, np.array([1.0, 0.0]),
                  np.array([0.0, 1.0]), 1.5, 300))
    return cases


def _triple(answer, d):
    if not isinstance(answer, (tuple, list)) or len(answer) != 3:
        raise Mismatch("a triple (grad_A, grad_z0, grad_t1)", describe(answer))
    return (as_array(answer[0], (d, d), f"grad_A of shape ({d}, {d})"),
            as_array(answer[1], (d,), f"grad_z0 of shape ({d},)"), as_float(answer[2], "grad_t1, a real number"))


@exercise("14.3", title="Gradients of a linear ODE, end time included", function="linear_ode_gradients",
          kind="extend", difficulty=3, minutes=40,
          blocked=("dlbook.ode.adjoint_gradients", "dlbook.ode.linear_flow_error"),
          hint="integrate z forward to t1; then integrate (z, a, g) from t1 back to 0 with RK4, with dz/dt = A z, "
               "da/dt = -A^T a, dg/dt = -a z^T, a(t1) = z(t1) - y, g(t1) = 0. dL/dt1 is how fast L changes "
               "when the solution runs a little longer: a(t1) . f(z(t1)).")
def check_linear_ode_gradients(linear_ode_gradients, cases):
    """Against the exact gradients from expm and expm_frechet, to 1e-7 relative."""
    for label, A, z0, y, t1, num_steps in _linear_ode_cases():
        with cases.case(f"linear_ode_gradients(...) with {label}, {num_steps} steps"):
            answer = linear_ode_gradients(torch.tensor(A), torch.tensor(z0), torch.tensor(y), t1, num_steps)
            grad_A, grad_z0, grad_t1 = _triple(answer, len(z0))
            want_A, want_z0, want_t1 = _linear_ode_expected(A, z0, y, t1)
            _expect_close_array("grad_A", grad_A, want_A, 1e-7)
            _expect_close_array("grad_z0", grad_z0, want_z0, 1e-7)
            expect(abs(grad_t1 - want_t1) <= 1e-7 * max(1.0, abs(want_t1)), f"grad_t1 = {want_t1:.10g}",
                   f"{grad_t1:.10g}")


# ---------------------------------------------------------------------------
# Exercise 14.4: the gradient of soft-DTW (derive)
# ---------------------------------------------------------------------------

def _soft_dtw_value(C: np.ndarray, gamma: float) -> float:
    n, m = C.shape
    R = np.full((n + 1, m + 1), np.inf)
    R[0, 0] = 0.0
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            v = np.array([R[i - 1, j - 1], R[i - 1, j], R[i, j - 1]])
            low = v.min()
            R[i, j] = C[i - 1, j - 1] + low - gamma * np.log(np.exp(-(v - low) / gamma).sum())
    return float(R[n, m])


def _soft_dtw_fd(C: np.ndarray, gamma: float, step: float = 1e-6) -> np.ndarray:
    grad = np.zeros_like(C)
    for index in np.ndindex(*C.shape):
        up, down = C.copy(), C.copy()
        up[index] += step
        down[index] -= step
        grad[index] = (_soft_dtw_value(up, gamma) - _soft_dtw_value(down, gamma)) / (2 * step)
    return grad


def _soft_dtw_cases():
    cases = []
    for label, (n, m), seed, gamma in (
            ("n = 6, m = 8, gamma = 0.1", (6, 8), 1, 0.1),
            ("n = 5, m = 5, gamma = 1", (5, 5), 2, 1.0),
            ("n = 9, m = 4, gamma = 0.01", (9, 4), 3, 0.01),
            ("n = 1, m = 5, gamma = 0.5 (one row: every cell is on the path)", (1, 5), 4, 0.5),
            ("n = 1, m = 1", (1, 1), 5, 0.3)):
        gen = _rng(1440 + seed)
        x, y = np.sin(np.linspace(0, 3, n)) + 0.2 * gen.standard_normal(n), np.sin(np.linspace(0, 3, m) ** 1.2)
        cases.append((label, (x[:, None] - y[None, :]) ** 2, gamma))
    return cases


@exercise("14.4", title="The gradient of soft-DTW", function="soft_dtw_gradient", kind="derive",
          difficulty=2, minutes=35,
          blocked=("dlbook.soft_dtw.soft_dtw", "dlbook.soft_dtw.soft_dtw_alignment", "dlbook.soft_dtw.dtw",
                   "dlbook.soft_dtw.soft_min", "dlbook.soft_dtw.dtw_path"),
          hint="the soft minimum's gradient is a softmax: cell (i, j) passes on to each successor the share "
               "exp((R[successor] - R[i, j] - C[successor]) / gamma) of that successor's expected visits.")
def check_soft_dtw_gradient(soft_dtw_gradient, cases):
    """Against central finite differences of a plain NumPy soft-DTW, to 1e-6 relative."""
    for label, C, gamma in _soft_dtw_cases():
        with cases.case(f"soft_dtw_gradient(C, gamma) with {label}"):
            got = as_array(soft_dtw_gradient(torch.tensor(C), gamma), C.shape,
                           f"a gradient tensor of shape {C.shape}")
            _expect_close_array("dR[n, m]/dC", got, _soft_dtw_fd(C, gamma), 1e-6)
