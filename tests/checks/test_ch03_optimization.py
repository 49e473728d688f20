"""Checks of chapter 3's exercises: reference solutions pass, plausible wrong answers fail, bad answers fail cleanly."""
from __future__ import annotations

import math

import numpy as np
import torch

import dlbook.exercises.checks.ch03_optimization as optimization
from dlbook import autograd, convergence, optim, quadratics
from dlbook.exercises import run_check

from exercise_contract import bad_types, outlast

IDS = ("3.1", "3.2", "3.3", "3.4")


# ---------------------------------------------------------------------------
# Reference solutions (independent of the chapter's modules)
# ---------------------------------------------------------------------------

def pow_backward(a, b, grad_out):
    """By hand: d(a^b) = b a^(b-1) da + a^b log(a) db, then summed back to each input's shape."""
    out = a**b
    grad_a = grad_out * b * a ** (b - 1)
    grad_b = grad_out * out * torch.log(a)
    return grad_a.sum_to_size(a.shape), grad_b.sum_to_size(b.shape)


def pow_backward_by_autograd(a, b, grad_out):
    a, b = a.clone().requires_grad_(), b.clone().requires_grad_()
    torch.autograd.backward(a**b, grad_out)
    return a.grad, b.grad


def _loss_ratio(eigenvalues, coordinates, lr, t):
    weights = eigenvalues * coordinates**2
    return (weights * (1 - lr * eigenvalues) ** (2 * t)).sum() / weights.sum()


def steps_to_tolerance(A, theta0, lr, tolerance):
    """Closed form in the eigenbasis, then a doubling search and bisection."""
    eigenvalues, Q = torch.linalg.eigh(A)
    coordinates = Q.T @ theta0
    if _loss_ratio(eigenvalues, coordinates, lr, 0) <= tolerance:
        return 0
    high = 1
    while _loss_ratio(eigenvalues, coordinates, lr, high) > tolerance:
        high *= 2
    low = high // 2
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if _loss_ratio(eigenvalues, coordinates, lr, middle) > tolerance else (low, middle)
    return high


def steps_to_tolerance_by_newton(A, theta0, lr, tolerance):
    """Newton's method on the log loss ratio, a convex decreasing function of a real t; then round."""
    eigenvalues, vectors = np.linalg.eigh(np.asarray(A))
    weights = eigenvalues * (vectors.T @ np.asarray(theta0)) ** 2
    weights, factors = weights / weights.sum(), np.abs(1 - lr * eigenvalues)

    def ratio(t):
        return (weights * factors ** (2 * t)).sum()

    if ratio(0) <= tolerance:
        return 0
    alive = (weights > 0) & (factors > 0)  # directions a single step does not remove
    log_weights, slopes = np.log(weights[alive]), 2 * np.log(factors[alive])
    t = 1.0
    for _ in range(200):
        logs = log_weights + t * slopes
        top = logs.max()
        excess = top + np.log(np.exp(logs - top).sum()) - math.log(tolerance)
        if excess <= 1e-12:
            break
        shares = np.exp(logs - top) / np.exp(logs - top).sum()
        t -= excess / (shares * slopes).sum()
    steps = max(1, math.ceil(t))
    while steps > 0 and ratio(steps - 1) <= tolerance:
        steps -= 1
    while ratio(steps) > tolerance:
        steps += 1
    return steps


def adam_step(theta, grad, m, v, t, lr, beta1, beta2, eps):
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * grad**2
    theta = theta - lr * (m / (1 - beta1**t)) / ((v / (1 - beta2**t)).sqrt() + eps)
    return theta, m, v


def adam_step_with_torch(theta, grad, m, v, t, lr, beta1, beta2, eps):
    """torch.optim.Adam, with the moments and step counter of the previous call put into its state."""
    p = theta.clone()
    opt = torch.optim.Adam([p], lr=lr, betas=(beta1, beta2), eps=eps)
    if t > 1:
        opt.state[p] = {"step": torch.tensor(float(t - 1)), "exp_avg": m.clone(), "exp_avg_sq": v.clone()}
    p.grad = grad.clone()
    opt.step()
    return p, opt.state[p]["exp_avg"], opt.state[p]["exp_avg_sq"]


def _gradient_covariance_at_minimum(X, y):
    theta_star = torch.linalg.lstsq(X, y[:, None]).solution[:, 0]
    per_example = X * (X @ theta_star - y)[:, None]
    return X.T @ X / len(X), per_example.T @ per_example / len(X)


def momentum_noise_floor(X, y, lr, momentum, batch_size):
    """Momentum is a step lr / (1 - momentum); the floor is (step) tr(C) / (4 B)."""
    _, C = _gradient_covariance_at_minimum(X, y)
    return lr / (1 - momentum) * torch.trace(C).item() / (4 * batch_size)


def momentum_noise_floor_per_direction(X, y, lr, momentum, batch_size):
    """The exact stationary variance of the linear recursion per eigen-direction, additive noise."""
    H, C = _gradient_covariance_at_minimum(X, y)
    eigenvalues, Q = torch.linalg.eigh(H)
    noise = (Q.T @ C @ Q).diagonal() / batch_size
    b = momentum
    variance = lr * noise * (1 + b) / ((1 - b) * eigenvalues * (2 + 2 * b - lr * eigenvalues))
    return 0.5 * (eigenvalues * variance).sum().item()


REFERENCES = {
    "3.1": [pow_backward, pow_backward_by_autograd],
    "3.2": [steps_to_tolerance, steps_to_tolerance_by_newton],
    "3.3": [adam_step, adam_step_with_torch],
    "3.4": [momentum_noise_floor, momentum_noise_floor_per_direction],
}


# ---------------------------------------------------------------------------
# Plausible wrong answers
# ---------------------------------------------------------------------------

def pow_with_the_engine(a, b, grad_out):
    """a^b = exp(b log a) in dlbook.autograd: the shortcut the exercise blocks."""
    x, e = autograd.Tensor(a, requires_grad=True), autograd.Tensor(b, requires_grad=True)
    (e * x.log()).exp().backward(grad_out)
    return x.grad, e.grad


def pow_without_unbroadcast(a, b, grad_out):
    return grad_out * b * a ** (b - 1), grad_out * a**b * torch.log(a)


def pow_without_the_log(a, b, grad_out):
    grad_a, _ = pow_backward(a, b, grad_out)
    return grad_a, (grad_out * a**b).sum_to_size(b.shape)


def pow_ignoring_grad_out(a, b, grad_out):
    return pow_backward(a, b, torch.ones_like(grad_out))


def pow_by_a_loop(a, b, grad_out):
    """Right, but one Python step per entry."""
    a_full, b_full = torch.broadcast_tensors(a, b)
    grad_a, grad_b = torch.zeros_like(a_full), torch.zeros_like(b_full)
    flat_a, flat_b, flat_g = a_full.reshape(-1).tolist(), b_full.reshape(-1).tolist(), grad_out.reshape(-1).tolist()
    ga, gb = grad_a.view(-1), grad_b.view(-1)
    values_a, values_b = [], []
    for x, e, g in zip(flat_a, flat_b, flat_g):
        power = x**e
        values_a.append(g * e * power / x)
        values_b.append(g * power * math.log(x))
    ga.copy_(torch.tensor(values_a, dtype=a.dtype))
    gb.copy_(torch.tensor(values_b, dtype=b.dtype))
    return grad_a.sum_to_size(a.shape), grad_b.sum_to_size(b.shape)


def steps_by_simulation(A, theta0, lr, tolerance):
    """The library's loop: the shortcut the exercise blocks."""
    run = quadratics.gradient_descent(A, theta0, lr, 100_000)
    return convergence.steps_to_reach(run.losses, tolerance)


def steps_from_the_rate(A, theta0, lr, tolerance):
    """The worst-case bound rho^(2t) <= tolerance: right order, not the exact count."""
    eigenvalues = torch.linalg.eigvalsh(A)
    rho = (1 - lr * eigenvalues).abs().max().item()
    return max(0, math.ceil(math.log(tolerance) / (2 * math.log(rho))))


def steps_for_the_distance(A, theta0, lr, tolerance):
    """Tracks |theta_t|^2 instead of the loss: forgets the weights lambda_i."""
    eigenvalues, Q = torch.linalg.eigh(A)
    c2 = (Q.T @ theta0) ** 2
    t = 0
    while ((c2 * (1 - lr * eigenvalues) ** (2 * t)).sum() / c2.sum()).item() > tolerance:
        t = t * 2 if t else 1
    low = t // 2
    while t - low > 1:
        middle = (low + t) // 2
        if ((c2 * (1 - lr * eigenvalues) ** (2 * middle)).sum() / c2.sum()).item() > tolerance:
            low = middle
        else:
            t = middle
    return t


def steps_off_by_one(A, theta0, lr, tolerance):
    return max(0, steps_to_tolerance(A, theta0, lr, tolerance) - 1)


def steps_without_the_square(A, theta0, lr, tolerance):
    """(1 - lr lambda)^t per term: the coordinates' factor, not the loss's."""
    return steps_to_tolerance(A, theta0, lr, tolerance**2)


def steps_right_but_slow(A, theta0, lr, tolerance):
    if len(A) >= 50:
        outlast(2.0)
    return steps_to_tolerance(A, theta0, lr, tolerance)


def adam_by_the_library(theta, grad, m, v, t, lr, beta1, beta2, eps):
    p = theta.clone()
    opt = optim.Adam([p], lr=lr, betas=(beta1, beta2), eps=eps)
    opt.state[p] = {"step": t - 1, "exp_avg": m.clone(), "exp_avg_sq": v.clone()}
    p.grad = grad.clone()
    opt.step()
    return p, opt.state[p]["exp_avg"], opt.state[p]["exp_avg_sq"]


def adam_without_bias_correction(theta, grad, m, v, t, lr, beta1, beta2, eps):
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * grad**2
    return theta - lr * m / (v.sqrt() + eps), m, v


def adam_eps_inside_sqrt(theta, grad, m, v, t, lr, beta1, beta2, eps):
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * grad**2
    return theta - lr * (m / (1 - beta1**t)) / (v / (1 - beta2**t) + eps).sqrt(), m, v


def adam_step_counter_from_zero(theta, grad, m, v, t, lr, beta1, beta2, eps):
    return adam_step(theta, grad, m, v, t + 1, lr, beta1, beta2, eps)


def floor_without_momentum(X, y, lr, momentum, batch_size):
    return momentum_noise_floor(X, y, lr, 0.0, batch_size)


def floor_momentum_squared(X, y, lr, momentum, batch_size):
    return momentum_noise_floor(X, y, lr, 0.0, batch_size) / (1 - momentum) ** 2


def floor_without_batch_size(X, y, lr, momentum, batch_size):
    return momentum_noise_floor(X, y, lr, momentum, 1)


def floor_inverse_hessian(X, y, lr, momentum, batch_size):
    H, C = _gradient_covariance_at_minimum(X, y)
    return lr / (1 - momentum) * torch.trace(torch.linalg.solve(H, C)).item() / (4 * batch_size)


def floor_twice(X, y, lr, momentum, batch_size):
    return 2 * momentum_noise_floor(X, y, lr, momentum, batch_size)


def floor_by_the_library(X, y, lr, momentum, batch_size):
    """Plain SGD's exact floor at the effective step: the shortcut the exercise blocks."""
    problem = quadratics.least_squares(X, y)
    S = quadratics.sgd_stationary_covariance(problem, lr / (1 - momentum), batch_size)
    return 0.5 * torch.trace(problem.hessian @ S).item()


WRONG = {
    "3.1": {"the engine's exp and log (blocked)": pow_with_the_engine,
            "no sum over broadcast dimensions": pow_without_unbroadcast,
            "grad_b without log(a)": pow_without_the_log, "ignores grad_out": pow_ignoring_grad_out},
    "3.2": {"simulation with dlbook.quadratics (blocked)": steps_by_simulation,
            "the worst-case rate bound": steps_from_the_rate, "the distance, not the loss": steps_for_the_distance,
            "one step early": steps_off_by_one, "(1 - lr lambda)^t without the square": steps_without_the_square,
            "right but too slow": steps_right_but_slow},
    "3.3": {"dlbook.optim.Adam (blocked)": adam_by_the_library, "no bias correction": adam_without_bias_correction,
            "eps inside the square root": adam_eps_inside_sqrt, "step counter from 0": adam_step_counter_from_zero},
    "3.4": {"plain SGD's exact floor from dlbook.quadratics (blocked)": floor_by_the_library,
            "momentum ignored": floor_without_momentum, "1/(1 - momentum)^2": floor_momentum_squared,
            "batch size ignored": floor_without_batch_size, "tr(H^-1 C) instead of tr(C)": floor_inverse_hessian,
            "twice the floor": floor_twice},
}


BAD_TYPES = bad_types("raises ValueError", "stub", "returns None", "returns a string", "returns NaN")


# ---------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------



def test_a_loop_over_entries_fails_on_time():
    result = run_check("3.1", pow_by_a_loop)
    assert not result.passed and "took" in result.message and "(1000, 800)" in result.message, result.message


def test_the_rate_bound_fails_where_the_start_avoids_the_flat_directions():
    result = run_check("3.2", steps_from_the_rate)
    assert not result.passed and "case" in result.message, result.message


def test_expected_values_are_right():
    # The check's step counts agree with a plain simulation where one is affordable.
    for label, eigenvalues, start, step, tolerance, seed, time_limit in optimization._steps_cases():
        if time_limit is not None:
            continue
        A, Q = optimization._spd(eigenvalues, seed)
        theta0 = Q @ start
        lr = step / eigenvalues.max()
        expected = optimization._reference_steps(eigenvalues, Q.T @ theta0, lr, tolerance)
        run = quadratics.gradient_descent(torch.tensor(A), torch.tensor(theta0), lr, expected + 5)
        assert convergence.steps_to_reach(run.losses, tolerance) == expected, label
    # The NumPy Adam of the check equals torch.optim.Adam.
    for _, grad_np, theta0, settings, steps in optimization._adam_problems():
        theta, m, v = theta0.copy(), np.zeros_like(theta0), np.zeros_like(theta0)
        p = torch.tensor(theta0)
        opt = torch.optim.Adam([p], lr=settings["lr"], betas=(settings["beta1"], settings["beta2"]),
                               eps=settings["eps"])
        for t in range(1, steps + 1):
            grad = grad_np(theta)
            theta, m, v = optimization._reference_adam_step(theta, grad, m, v, t, **settings)
            p.grad = torch.tensor(grad_np(p.detach().numpy()))
            opt.step()
        assert np.allclose(theta, p.detach().numpy(), rtol=0, atol=1e-12)
    # The check's simulation of SGD with momentum equals dlbook's plain SGD chains at momentum 0 in law:
    # its floor matches the exact stationary excess loss within sampling error.
    X, y = optimization._least_squares_data(0, (2.0, 1.0, 0.5))
    problem = quadratics.least_squares(X, y)
    exact = 0.5 * torch.trace(problem.hessian @ quadratics.sgd_stationary_covariance(problem, 0.01, 2)).item()
    measured = optimization._measured_floor(X, y, 0.01, 0.0, 2, burn_in=400, steps=1500)
    assert abs(measured / exact - 1) < 0.05, (measured, exact)
