"""Checks for the exercises of chapter 10 (10_gans): the game's optimum, a one-sided gradient
penalty, the bias of a penalised critic, mode counts and the kernel distance between parallel lines.

Expected values are computed here by independent NumPy and SciPy code (hand-written gradients,
finite differences, numerical optimisation and quadrature), never by calling dlbook.gan or
dlbook.divergences.
"""
from __future__ import annotations

import math

import numpy as np
import torch
from scipy import integrate, optimize

from ..core import Mismatch, as_array, as_float, as_int, describe, exercise, expect, expect_close, expect_equal

# ---------------------------------------------------------------------------
# Exercise 10.1: the optimum of a discrete game
# ---------------------------------------------------------------------------


def _xlogy(x, y):
    out = np.zeros_like(x)
    mask = x > 0
    with np.errstate(divide="ignore"):
        out[mask] = x[mask] * np.log(y[mask])
    return out


def _discrete_optimum(p, q):
    D = np.full_like(p, 0.5)
    mask = p + q > 0
    D[mask] = p[mask] / (p[mask] + q[mask])
    return D, float(_xlogy(p, D).sum() + _xlogy(q, 1 - D).sum())


def _probabilities(rng, n, zeros=0):
    p = rng.random(n)
    if zeros:
        p[rng.choice(n, size=zeros, replace=False)] = 0.0
    return p / p.sum()


def _unpack_pair(out, what):
    if not isinstance(out, tuple) or len(out) != 2:
        raise Mismatch(f"{what} (a tuple)", describe(out))
    return out


@exercise("10.1", title="The optimum of a discrete game", function="discrete_gan_optimum",
          kind="derive", difficulty=2, minutes=20,
          blocked=("dlbook.gan.optimal_discriminator", "dlbook.gan.game_value",
                   "dlbook.divergences.js_divergence", "dlbook.divergences.kl_divergence"),
          hint="maximise p log D + q log(1 - D) point by point, then substitute; 0 log 0 = 0.")
def check_discrete_gan_optimum(discrete_gan_optimum, cases):
    """Probability vectors are 1-D float64 tensors; the answer is (D_star tensor, value float)."""
    rng = np.random.default_rng(10)
    disjoint = (np.r_[0.5, 0.5, 0.0, 0.0], np.r_[0.0, 0.0, 0.25, 0.75])
    equal = _probabilities(rng, 7)
    cases_list = [("two random distributions on 10 points", _probabilities(rng, 10), _probabilities(rng, 10)),
                  ("equal distributions", equal, equal.copy()),
                  ("disjoint supports", *disjoint),
                  ("zeros in both, one point empty in both", np.r_[0.2, 0.0, 0.3, 0.5, 0.0],
                   np.r_[0.0, 0.1, 0.6, 0.3, 0.0]),
                  ("one point carries everything", np.r_[1.0, 0.0, 0.0], np.r_[0.2, 0.3, 0.5]),
                  ("random distributions on 500 points with zeros", _probabilities(rng, 500, zeros=60),
                   _probabilities(rng, 500, zeros=40))]
    for label, p, q in cases_list:
        with cases.case(f"discrete_gan_optimum on {label}"):
            out = _unpack_pair(discrete_gan_optimum(torch.tensor(p), torch.tensor(q)), "a pair (D_star, value)")
            D_star = as_array(out[0], p.shape, f"D_star of shape {p.shape}")
            value = as_float(out[1], "the value as a finite number")
            D_ref, value_ref = _discrete_optimum(p, q)
            worst = np.abs(D_star - D_ref).max()
            expect(worst < 1e-10, "D* = p / (p + q), and 1/2 where both vanish",
                   f"a discriminator that differs by up to {worst:.3g}")
            expect_close(value, value_ref, atol=1e-10)


# ---------------------------------------------------------------------------
# Exercise 10.2: a one-sided gradient penalty
# ---------------------------------------------------------------------------


def _input_gradients(W1, b1, w2, X):
    """Rows grad_x f(x_i) for f(x) = w2 . tanh(W1 x + b1), by hand."""
    hidden = np.tanh(X @ W1.T + b1)                       # (n, h)
    return ((1 - hidden**2) * w2) @ W1                    # (n, d)


def _one_sided(W1, b1, w2, real, fake, mix, weight):
    x_hat = mix[:, None] * real + (1 - mix[:, None]) * fake
    norms = np.linalg.norm(_input_gradients(W1, b1, w2, x_hat), axis=1)
    return weight * np.mean(np.maximum(norms - 1, 0.0) ** 2)


def _critic_case(rng, d, h, n, scale):
    W1 = rng.normal(size=(h, d)) * scale
    b1 = rng.normal(size=h) * 0.5
    w2 = rng.normal(size=h) * scale
    real = rng.normal(size=(n, d))
    fake = rng.normal(size=(n, d)) + 1.5
    mix = rng.random(n)
    return W1, b1, w2, real, fake, mix


@exercise("10.2", title="A one-sided gradient penalty", function="one_sided_penalty", kind="extend",
          difficulty=2, minutes=30, blocked=("dlbook.gan.gradient_penalty",),
          hint="ask autograd for the gradient with respect to the interpolates with create_graph=True, "
               "clamp the norm minus 1 at 0, square, average, then differentiate with respect to w2.")
def check_one_sided_penalty(one_sided_penalty, cases):
    """Tensors are float64; the answer is (penalty float, gradient tensor of shape (h,))."""
    rng = np.random.default_rng(11)
    settings = [("a steep critic (every norm above 1)", 2, 8, 40, 1.5, 10.0),
                ("a flat critic (every norm below 1)", 2, 8, 40, 0.1, 10.0),
                ("a critic with norms on both sides of 1", 3, 16, 60, 0.45, 5.0),
                ("one input dimension", 1, 4, 30, 0.8, 10.0),
                ("a wider critic in five dimensions", 5, 32, 50, 0.3, 2.0)]
    for label, d, h, n, scale, weight in settings:
        W1, b1, w2, real, fake, mix = _critic_case(rng, d, h, n, scale)
        with cases.case(f"one_sided_penalty for {label}, weight {weight:g}"):
            args = [torch.tensor(a) for a in (W1, b1, w2, real, fake, mix)]
            out = _unpack_pair(one_sided_penalty(*args, weight), "a pair (penalty, gradient with respect to w2)")
            penalty = as_float(out[0], "the penalty as a finite number")
            grad = as_array(out[1], (h,), f"the gradient with respect to w2, of shape ({h},)")
            expected = _one_sided(W1, b1, w2, real, fake, mix, weight)
            expect_close(penalty, expected, rtol=1e-8, atol=1e-12)
            step = 1e-6
            numeric = np.array([(_one_sided(W1, b1, w2 + step * e, real, fake, mix, weight)
                                 - _one_sided(W1, b1, w2 - step * e, real, fake, mix, weight)) / (2 * step)
                                for e in np.eye(h)])
            gap = np.abs(grad - numeric).max()
            expect(gap <= 1e-6 * (1 + np.abs(numeric).max()),
                   "the gradient of the penalty with respect to w2 (central differences agree to 1e-6)",
                   f"a gradient that differs by up to {gap:.3g}")


# ---------------------------------------------------------------------------
# Exercise 10.3: the bias of a penalised critic
# ---------------------------------------------------------------------------


def _measured_gap(shift, weight, seed, num_points=200_000):
    """Maximise the sampled WGAN-GP objective over linear critics f(x) = a.x and return the gap."""
    rng = np.random.default_rng(seed)
    d = len(shift)
    real = rng.normal(size=(num_points, d))
    fake = rng.normal(size=(num_points, d)) + shift
    difference = real.mean(axis=0) - fake.mean(axis=0)    # the gap of a.x is a . difference

    def negative_objective(a):
        # a linear critic has gradient a at every interpolate, so the sampled penalty is weight (|a| - 1)^2
        return -(a @ difference - weight * (np.linalg.norm(a) - 1) ** 2)

    start = -np.asarray(shift, dtype=float) / max(np.linalg.norm(shift), 1e-12)
    best = optimize.minimize(negative_objective, start, method="Nelder-Mead",
                             options={"xatol": 1e-10, "fatol": 1e-12, "maxiter": 20_000})
    return float(best.x @ difference)


@exercise("10.3", title="Predict the bias of a penalised critic", function="penalised_critic_gap",
          kind="predict", difficulty=3, minutes=30,
          blocked=("dlbook.gan.gradient_penalty", "dlbook.gan.train_critic", "dlbook.gan.critic_run"),
          hint="a linear critic has the same gradient everywhere; write the objective as a function of the "
               "norm of a along the best direction and maximise it.")
def check_penalised_critic_gap(penalised_critic_gap, cases):
    """shift is a 1-D float64 tensor, weight a float; the answer is the gap as a float."""
    for label, shift, weight, seed in [("m = (3, 0), lambda = 10", [3.0, 0.0], 10.0, 0),
                                       ("m = (1,), lambda = 1", [1.0], 1.0, 1),
                                       ("m = (-2,), lambda = 2", [-2.0], 2.0, 2),
                                       ("m = (1, 2, 2), lambda = 3", [1.0, 2.0, 2.0], 3.0, 3),
                                       ("m = (0.5, -0.5, 0, 0), lambda = 0.5", [0.5, -0.5, 0.0, 0.0], 0.5, 4)]:
        with cases.case(f"penalised_critic_gap for {label}"):
            predicted = as_float(penalised_critic_gap(torch.tensor(shift, dtype=torch.float64), weight))
        with cases.case(f"penalised_critic_gap for {label} against a measurement"):
            measured = _measured_gap(np.array(shift), weight, seed)
            expect(abs(predicted - measured) <= 0.03,
                   f"the measured gap {measured:.4f} (maximising the sampled objective over linear critics), "
                   "within 0.03",
                   f"a prediction of {predicted:.4f}")


# ---------------------------------------------------------------------------
# Exercise 10.4: counting modes
# ---------------------------------------------------------------------------


def _ring(num_modes, radius=2.0):
    angles = 2 * np.pi * np.arange(num_modes) / num_modes
    return radius * np.stack([np.cos(angles), np.sin(angles)], axis=1)


def _count_modes(samples, centres, std, min_fraction):
    distance = np.linalg.norm(samples[:, None, :] - centres[None, :, :], axis=2)
    nearest, good = distance.argmin(axis=1), distance.min(axis=1) < 3 * std
    counts = np.bincount(nearest[good], minlength=len(centres))
    return int((counts >= min_fraction * len(samples)).sum()), float(good.mean())


@exercise("10.4", title="Counting modes", function="count_modes", kind="transcribe", difficulty=1, minutes=10,
          blocked=("dlbook.gan.mode_coverage",),
          hint="distance to the nearest centre, keep the points within 3 std, count them per centre.")
def check_count_modes(count_modes, cases):
    """samples and centres are float64 tensors; std and min_fraction floats; the answer is (int, float)."""
    rng = np.random.default_rng(12)
    centres = _ring(8)
    five = centres[np.arange(500) % 5] + 0.02 * rng.normal(size=(500, 2))
    spread = centres[rng.integers(8, size=1000)] + 0.08 * rng.normal(size=(1000, 2))   # some beyond 3 std
    sparse = np.concatenate([np.repeat(centres[:1], 985, axis=0), np.repeat(centres[1:2], 10, axis=0),
                             np.repeat(centres[2:3], 5, axis=0)])
    angles = rng.random(400) * 2 * np.pi
    ring_of_points = 2.0 * np.stack([np.cos(angles), np.sin(angles)], axis=1)
    grid = np.stack(np.meshgrid(np.arange(-2, 3), np.arange(-2, 3)), -1).reshape(-1, 2).astype(float)
    on_grid = np.repeat(grid, 32, axis=0) + 0.1 * rng.normal(size=(800, 2))
    for label, samples, cs, std, fraction in [
            ("500 points on 5 of 8 modes", five, centres, 0.05, 0.01),
            ("1000 points with std 0.08 around modes of std 0.05", spread, centres, 0.05, 0.01),
            ("a mode with exactly 1 % of the points and one with 0.5 %", sparse, centres, 0.05, 0.01),
            ("points spread evenly along the circle", ring_of_points, centres, 0.05, 0.01),
            ("25 modes on a grid, a higher threshold", on_grid, grid, 0.05, 0.03)]:
        with cases.case(f"count_modes on {label}"):
            out = _unpack_pair(count_modes(torch.tensor(samples), torch.tensor(cs), std, fraction),
                               "a pair (modes, quality)")
            modes, quality = as_int(out[0], "the number of modes as an integer"), as_float(out[1])
            expected_modes, expected_quality = _count_modes(samples, cs, std, fraction)
            expect_equal(modes, expected_modes)
            expect_close(quality, expected_quality, atol=1e-12)


# ---------------------------------------------------------------------------
# Exercise 10.5: the kernel distance between parallel lines
# ---------------------------------------------------------------------------


def _mmd_lines_by_quadrature(theta, h):
    """E k(x, x') + E k(y, y') - 2 E k(x, y) with the expectations over the heights integrated numerically."""
    def vertical(shift):
        value, _ = integrate.dblquad(lambda z, w: math.exp(-(shift**2 + (z - w) ** 2) / (2 * h**2)), 0, 1, 0, 1,
                                     epsabs=1e-13, epsrel=1e-12)
        return value
    return 2 * vertical(0.0) - 2 * vertical(theta)


@exercise("10.5", title="The kernel distance between parallel lines", function="mmd_parallel_lines",
          kind="derive", difficulty=2, minutes=25,
          blocked=("dlbook.divergences.mmd_squared", "dlbook.divergences.mmd_squared_reference",
                   "dlbook.divergences.gaussian_kernel"),
          hint="the kernel factorises into exp(-theta^2 / 2h^2) times a kernel on the heights; the mean of the "
               "latter over two uniform heights is an integral of (1 - |t|) exp(-t^2 / 2h^2).")
def check_mmd_parallel_lines(mmd_parallel_lines, cases):
    """theta and bandwidth are floats; the answer is a float."""
    for theta, h in [(1.0, 0.5), (0.0, 0.5), (-0.3, 0.2), (2.0, 1.5), (0.05, 3.0), (4.0, 0.1)]:
        with cases.case(f"mmd_parallel_lines({theta:g}, {h:g})"):
            got = as_float(mmd_parallel_lines(theta, h))
            expect_close(got, _mmd_lines_by_quadrature(theta, h), rtol=1e-8, atol=1e-11)
