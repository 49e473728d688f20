"""Checks for the exercises of chapter 18 (18_theory): the Marchenko-Pastur density, the long-time error
of minimum-norm least squares, the edge of chaos, the replica-exchange swap and the Rademacher
complexity of an l1 ball.

Expected values are computed here by independent NumPy and SciPy code (the formulas written out,
simulations of least-squares problems, adaptive quadrature with a root finder, Gibbs samples drawn by
inverse transform, a linear programme over the l1 ball), never by calling dlbook.random_matrices,
dlbook.learning_curves, dlbook.signal_propagation, dlbook.langevin or dlbook.implicit_bias.
"""
from __future__ import annotations

import math
import numbers

import numpy as np
import torch
from scipy import integrate, optimize, stats

from ..core import Mismatch, as_array, as_float, describe, exercise, expect, expect_close, seconds_taken

# ---------------------------------------------------------------------------
# Exercise 18.1: the Marchenko-Pastur density
# ---------------------------------------------------------------------------


def _mp_density(x: np.ndarray, gamma: float) -> np.ndarray:
    low, high = (1 - math.sqrt(gamma)) ** 2, (1 + math.sqrt(gamma)) ** 2
    out = np.zeros_like(x)
    inside = (x > max(low, 0.0)) & (x < high)
    xi = x[inside]
    out[inside] = np.sqrt((high - xi) * (xi - low)) / (2 * math.pi * gamma * xi)
    return out


def _mass(density_values: np.ndarray, theta: np.ndarray, low: float, high: float) -> float:
    """Integral over (low, high) after x = m - r cos(theta), dx = r sin(theta) dtheta: no edge singularity."""
    half = (high - low) / 2
    return float(integrate.trapezoid(density_values * half * np.sin(theta), theta))


@exercise("18.1", title="The Marchenko-Pastur density", function="mp_density",
          kind="transcribe", difficulty=1, minutes=10, blocked=("dlbook.random_matrices.marchenko_pastur_density",),
          hint="compute the edges (1 ± sqrt(gamma))^2 first; evaluate the formula only where the point is "
               "strictly inside the support and above 0, and return 0 everywhere else.")
def check_mp_density(mp_density, cases):
    """x is a 1-D float64 array; the answer is an array of the same length."""
    probes = np.array([-1.0, 0.0, 1e-3, 0.05, 0.3, 0.9, 1.0, 1.7, 2.2, 3.5, 5.0, 7.0, 12.0])
    for gamma in (0.25, 0.5, 1.0, 2.0, 4.0):
        with cases.case(f"mp_density(x, {gamma}) at 13 points inside and outside the support"):
            got = as_array(mp_density(probes.copy(), gamma), (len(probes),))
            want = _mp_density(probes, gamma)
            bad = int(np.argmax(np.abs(got - want)))
            expect(np.allclose(got, want, rtol=1e-9, atol=1e-12), f"{want[bad]:.10g} at x = {probes[bad]:g}",
                   f"{got[bad]:.10g}")
    for gamma in (0.3, 3.0):
        low, high = (1 - math.sqrt(gamma)) ** 2, (1 + math.sqrt(gamma)) ** 2
        theta = np.linspace(0, math.pi, 4001)[1:-1]
        x = (high + low) / 2 - (high - low) / 2 * np.cos(theta)
        with cases.case(f"the mass of mp_density(x, {gamma}) over its support"):
            got = as_array(mp_density(x, gamma), (len(x),))
            expect_close(_mass(got, theta, low, high), min(1.0, 1.0 / gamma), atol=1e-4)
    x = np.array([0.5, 1.5, 2.5])
    with cases.case("mp_density on a torch tensor, gamma = 0.5"):
        got = as_array(mp_density(torch.tensor(x), 0.5), (3,))
        expect(np.allclose(got, _mp_density(x, 0.5), rtol=1e-9), str(_mp_density(x, 0.5)), str(got))


# ---------------------------------------------------------------------------
# Exercise 18.2: the long-time error of minimum-norm least squares
# ---------------------------------------------------------------------------


def _real_or_infinity(value, what: str) -> float:
    """The answer as a float that may be infinite; Mismatch for NaN, None, strings, arrays of several values."""
    raw = value
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            raise Mismatch(what, describe(value))
        raw = value.detach().cpu().reshape(()).item()
    elif isinstance(value, np.ndarray):
        if value.size != 1:
            raise Mismatch(what, describe(value))
        raw = value.reshape(()).item()
    elif isinstance(value, np.generic):
        raw = value.item()
    if isinstance(raw, bool) or not isinstance(raw, numbers.Real) or math.isnan(float(raw)):
        raise Mismatch(what, describe(value))
    return float(raw)


def _exact_min_norm_error(d: int, N: int, weight_std: float, noise_std: float) -> float:
    if N > d + 1:
        return noise_std ** 2 * (1 + d / (N - d - 1))
    if N < d - 1:
        return weight_std ** 2 * (1 - N / d) + noise_std ** 2 * (1 + N / (d - N - 1))
    return math.inf


def _simulated_min_norm_error(d: int, N: int, weight_std: float, noise_std: float, num_problems: int,
                              seed: int) -> float:
    rng = np.random.default_rng(seed)
    errors = []
    for _ in range(num_problems):
        X = rng.normal(size=(N, d)) / math.sqrt(d)
        w_teacher = weight_std * rng.normal(size=d)
        y = X @ w_teacher + noise_std * rng.normal(size=N)
        w = np.linalg.lstsq(X, y, rcond=None)[0]              # the minimum-norm solution
        errors.append(((w - w_teacher) ** 2).mean() + noise_std ** 2)
    return float(np.mean(errors))


@exercise("18.2", title="Predicting the interpolation peak", function="predict_min_norm_error",
          kind="predict", difficulty=2, minutes=25,
          blocked=("dlbook.learning_curves.minimum_norm_error", "dlbook.learning_curves.predicted_generalization_error",
                   "dlbook.learning_curves.minimum_norm_solution"),
          hint="with fewer samples than parameters, d - N eigenvalues are zero and keep the teacher's error; "
               "the others are those of X X^T. For a Wishart matrix W with n degrees of freedom in k "
               "dimensions and identity scale, E[W^-1] = I / (n - k - 1).")
def check_predict_min_norm_error(predict_min_norm_error, cases):
    """Arguments are Python numbers; the answer is a float (math.inf where the expectation diverges)."""
    # a simulation the check runs itself: 400 problems of each kind (the sampling error is 2-4 %)
    for d, N, weight_std, noise_std, seed in [(40, 20, 1.0, 0.5, 1), (40, 80, 1.0, 0.5, 2), (30, 24, 1.0, 0.3, 3)]:
        with cases.case(f"predict_min_norm_error({d}, {N}, {weight_std}, {noise_std}) against 400 simulated problems",
                        time_limit=2.0, why="the task asks for a prediction from the theory, not a simulation"):
            got = as_float(predict_min_norm_error(d, N, weight_std, noise_std))
        measured = _simulated_min_norm_error(d, N, weight_std, noise_std, 400, seed)
        with cases.case(f"predict_min_norm_error({d}, {N}, {weight_std}, {noise_std}) = {measured:.3f} measured"):
            expect_close(got, measured, rtol=0.12)
    for d, N, weight_std, noise_std in [(200, 60, 2.0, 0.1), (100, 300, 1.0, 1.0), (500, 497, 1.0, 0.5),
                                        (500, 503, 1.0, 0.5), (1000, 1, 1.5, 0.2), (3, 50, 1.0, 0.5)]:
        with cases.case(f"predict_min_norm_error({d}, {N}, {weight_std}, {noise_std}), exact"):
            got = as_float(predict_min_norm_error(d, N, weight_std, noise_std))
            expect_close(got, _exact_min_norm_error(d, N, weight_std, noise_std), rtol=1e-9)
    for d, N in [(100, 100), (100, 99), (100, 101)]:
        with cases.case(f"predict_min_norm_error({d}, {N}, 1.0, 0.5) at the interpolation threshold"):
            got = _real_or_infinity(predict_min_norm_error(d, N, 1.0, 0.5), "math.inf or a real number")
            expect(got == math.inf, "math.inf (the expectation diverges for |N - d| <= 1)", describe(got))


# ---------------------------------------------------------------------------
# Exercise 18.3: the edge of chaos
# ---------------------------------------------------------------------------


def _gauss_mean(f, q: float) -> float:
    """E f(sqrt(q) z) for z ~ N(0, 1) by adaptive quadrature on [-12, 12]."""
    root = math.sqrt(q)
    return integrate.quad(lambda z: f(root * z) * math.exp(-z * z / 2), -12, 12, points=[0.0], epsabs=1e-13,
                          epsrel=1e-12, limit=400)[0] / math.sqrt(2 * math.pi)


def _critical_sigma_w(sigma_b: float) -> float:
    def chi_1_minus_one(sigma_w):
        q = optimize.brentq(lambda q: sigma_w ** 2 * _gauss_mean(lambda u: math.tanh(u) ** 2, q) + sigma_b ** 2 - q,
                            1e-12, 100.0, xtol=1e-14)
        return sigma_w ** 2 * _gauss_mean(lambda u: 1 / math.cosh(min(abs(u), 300.0)) ** 4, q) - 1
    return optimize.brentq(chi_1_minus_one, 1.0, 6.0, xtol=1e-10)


@exercise("18.3", title="The edge of chaos", function="critical_weight_scale",
          kind="derive", difficulty=2, minutes=30,
          blocked=("dlbook.signal_propagation.critical_sigma_w", "dlbook.signal_propagation.chi1",
                   "dlbook.signal_propagation.fixed_point_variance"),
          hint="for a candidate sigma_w, iterate the variance map to q*, then compute "
               "chi_1 = sigma_w^2 E[sech^4(sqrt(q*) z)]; chi_1 grows with sigma_w, so bisection finds chi_1 = 1. "
               "Integrate on a fine grid: Gauss-Hermite nodes are too sparse where sech^4 lives.")
def check_critical_weight_scale(critical_weight_scale, cases):
    """sigma_b is a Python float; the answer is a float, accepted within 1e-3."""
    for sigma_b in (0.05, 0.3, 0.7, 1.0, 2.0):
        with cases.case(f"critical_weight_scale({sigma_b})"):
            got = as_float(critical_weight_scale(sigma_b))
            expect_close(got, _critical_sigma_w(sigma_b), atol=1e-3)


# ---------------------------------------------------------------------------
# Exercise 18.4: the replica-exchange swap
# ---------------------------------------------------------------------------


def _energy(x):
    return (x ** 2 - 1) ** 2


def _swap_reference(x, temperatures, uniforms, offset):
    out = x.copy()
    for k in range(offset, len(x) - 1, 2):
        accept = np.minimum(1.0, np.exp(np.minimum(0.0, (1 / temperatures[k] - 1 / temperatures[k + 1])
                                                   * (_energy(x[k]) - _energy(x[k + 1])))))
        swap = uniforms[k] < accept
        out[k, swap], out[k + 1, swap] = x[k + 1, swap], x[k, swap]
    return out


def _gibbs_grid(temperature):
    grid = np.linspace(-3, 3, 60_001)
    cdf = integrate.cumulative_trapezoid(np.exp(-_energy(grid) / temperature), grid, initial=0.0)
    return grid, cdf / cdf[-1]


def _gibbs_samples(temperature, size, rng):
    grid, cdf = _gibbs_grid(temperature)
    return np.interp(rng.random(size), cdf, grid)                # inverse transform sampling


@exercise("18.4", title="Replica exchange", function="replica_swap",
          kind="extend", difficulty=2, minutes=30, blocked=("dlbook.langevin.replica_swap_probability",),
          hint="compute the energies of all rows once; for each attempted pair build the boolean mask of "
               "accepted columns and exchange the two rows there with fancy indexing (copy first).")
def check_replica_swap(replica_swap, cases):
    """x (K, M), temperatures (K,), uniforms (K - 1, M) are float64 arrays, offset an int; the answer is (K, M)."""
    rng = np.random.default_rng(18)
    for K, M, offset in [(2, 5, 0), (4, 200, 0), (4, 200, 1), (5, 300, 0), (5, 300, 1), (1, 7, 0)]:
        temperatures = np.sort(rng.uniform(0.1, 1.5, size=K))
        x = rng.normal(scale=1.2, size=(K, M))
        uniforms = rng.random(size=(max(K - 1, 0), M))
        with cases.case(f"replica_swap(x, temperatures, uniforms, {offset}) with K = {K} temperatures, M = {M}"):
            before = x.copy()
            got = as_array(replica_swap(x, temperatures.copy(), uniforms.copy(), offset), (K, M))
            expect(np.array_equal(x, before), "x left unchanged", "x modified in place")
            want = _swap_reference(x, temperatures, uniforms, offset)
            wrong = int((got != want).any(axis=0).sum())
            expect(wrong == 0, "the swaps of the Metropolis rule min{1, exp[(1/T_k - 1/T_(k+1))(V_k - V_(k+1))]}",
                   f"a different result in {wrong} of {M} columns")
    # detailed balance: exact Gibbs samples at every temperature stay Gibbs after one swap
    temperatures = np.array([0.2, 0.35, 0.6, 1.0])
    M = 40_000
    x = np.stack([_gibbs_samples(T, M, rng) for T in temperatures])
    uniforms = rng.random(size=(3, M))
    with cases.case("replica_swap on exact Gibbs samples at T = 0.2, 0.35, 0.6, 1 (each row must stay Gibbs)"):
        got = as_array(replica_swap(x, temperatures, uniforms, 0), (4, M))
        for k, T in enumerate(temperatures):
            grid, cdf = _gibbs_grid(T)
            ks = stats.kstest(got[k], lambda v: np.interp(v, grid, cdf)).statistic
            expect(ks < 0.015, f"row {k} to follow the Gibbs law at T = {T} (KS distance below 0.015)",
                   f"KS distance {ks:.3f}")
    big = rng.normal(size=(2, 1_000_000))
    uniforms = rng.random(size=(1, 1_000_000))
    reference = seconds_taken(_swap_reference, big, np.array([0.3, 0.6]), uniforms, 0)
    with cases.case("replica_swap with M = 1,000,000 columns", time_limit=20 * reference + 0.05,
                    why="the task asks for no loop over the columns"):
        as_array(replica_swap(big, np.array([0.3, 0.6]), uniforms, 0), (2, 1_000_000))


# ---------------------------------------------------------------------------
# Exercise 18.5: the Rademacher complexity of an l1 ball
# ---------------------------------------------------------------------------


def _l1_sup_by_lp(c: np.ndarray, bound: float) -> float:
    """max c.w over |w|_1 <= bound as a linear programme in (w+, w-) >= 0."""
    d = len(c)
    result = optimize.linprog(np.concatenate([-c, c]), A_ub=np.ones((1, 2 * d)), b_ub=[bound],
                              bounds=[(0, None)] * (2 * d), method="highs")
    return -result.fun


@exercise("18.5", title="Rademacher complexity of an l1 ball", function="rademacher_l1",
          kind="extend", difficulty=2, minutes=25,
          blocked=("dlbook.implicit_bias.rademacher_complexity_linear", "dlbook.implicit_bias.rademacher_bound_linear"),
          hint="sum_i sigma_i w.x_i = w.c with c = sum_i sigma_i x_i; on the l1 ball a linear function is "
               "largest at a vertex +-rho e_j (Hölder's inequality: w.c <= |w|_1 |c|_inf).")
def check_rademacher_l1(rademacher_l1, cases):
    """X (N, d) and signs (S, N) are float64 arrays, norm_bound a float; the answer is a float."""
    rng = np.random.default_rng(185)
    for N, d, S, bound in [(5, 3, 4, 1.0), (20, 8, 30, 2.5), (12, 1, 10, 0.7), (30, 40, 25, 1.0)]:
        X = rng.normal(size=(N, d))
        signs = rng.choice([-1.0, 1.0], size=(S, N))
        with cases.case(f"rademacher_l1(X, {bound}, signs) with N = {N}, d = {d}, S = {S} draws"):
            got = as_float(rademacher_l1(X.copy(), bound, signs.copy()))
            want = float(np.mean([_l1_sup_by_lp(s @ X / N, bound) for s in signs]))
            expect_close(got, want, rtol=1e-7)
    X = rng.normal(size=(100, 500))
    signs = rng.choice([-1.0, 1.0], size=(20_000, 100))
    with cases.case("rademacher_l1 with N = 100, d = 500 and 20,000 draws", time_limit=5.0,
                    why="the task asks for a closed-form supremum vectorised over the draws"):
        got = as_float(rademacher_l1(X, 1.0, signs))
    with cases.case("rademacher_l1 with N = 100, d = 500 and 20,000 draws, value"):
        want = float(np.abs(signs @ X / 100).max(axis=1).mean())
        expect_close(got, want, rtol=1e-9)
