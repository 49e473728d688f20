"""Checks of chapter 18's exercises: references pass, plausible wrong answers fail, bad answers fail cleanly."""
from __future__ import annotations

import math
from pathlib import Path

import nbformat
import numpy as np
import torch
from scipy import integrate, optimize

from dlbook import implicit_bias, langevin, learning_curves, random_matrices, signal_propagation
from dlbook.exercises import EXERCISES

from exercise_contract import bad_types, outlast

#: Fewest cases each check must run (tests/checks/test_contract.py).
MIN_CASES = 5

IDS = ("18.1", "18.2", "18.3", "18.4", "18.5")


# ---------------------------------------------------------------------------
# Reference solutions (independent of the chapter's modules)
# ---------------------------------------------------------------------------

def mp_density(x, gamma):
    x = np.asarray(x, dtype=float)
    low, high = (1 - math.sqrt(gamma)) ** 2, (1 + math.sqrt(gamma)) ** 2
    inside = (x > low) & (x < high) & (x > 0)
    safe = np.where(inside, x, 1.0)
    return np.where(inside, np.sqrt(np.clip((high - safe) * (safe - low), 0, None)) / (2 * math.pi * gamma * safe), 0.0)


def mp_density_torch(x, gamma):
    """The same with torch, written from the factored form sqrt(4 gamma - (x - 1 - gamma)^2)."""
    x = torch.as_tensor(x, dtype=torch.float64)
    inside_root = 4 * gamma - (x - 1 - gamma) ** 2
    value = torch.sqrt(inside_root.clamp_min(0)) / (2 * math.pi * gamma * torch.where(x > 0, x, torch.ones_like(x)))
    return torch.where((inside_root > 0) & (x > 0), value, torch.zeros_like(x))


def predict_min_norm_error(num_params, num_samples, weight_std, noise_std):
    d, N = num_params, num_samples
    if N > d + 1:
        return noise_std ** 2 * (1 + d / (N - d - 1))
    if N < d - 1:
        return weight_std ** 2 * (1 - N / d) + noise_std ** 2 * (1 + N / (d - N - 1))
    return math.inf


def predict_min_norm_error_by_ratio(num_params, num_samples, weight_std, noise_std):
    """The same written with alpha = N / d and the trace of the inverse Wishart mean."""
    d, N = num_params, num_samples
    if abs(N - d) <= 1:
        return float("inf")
    alpha = N / d
    zero_fraction = max(0.0, 1 - alpha)
    rank = min(N, d)
    trace_inverse = rank * d / (max(N, d) - rank - 1)   # E tr of the inverse Wishart (scale 1/d), non-zero part
    return weight_std ** 2 * zero_fraction + noise_std ** 2 * (1 + trace_inverse / d)


def critical_weight_scale(sigma_b):
    z = np.linspace(-12, 12, 2401)
    gauss = np.exp(-z ** 2 / 2) / math.sqrt(2 * math.pi) * (z[1] - z[0])

    def chi_1(sigma_w):
        q = 1.0
        for _ in range(5000):
            q_next = sigma_w ** 2 * gauss @ np.tanh(math.sqrt(q) * z) ** 2 + sigma_b ** 2
            if abs(q_next - q) < 1e-13:
                break
            q = q_next
        return sigma_w ** 2 * gauss @ (1 / np.cosh(math.sqrt(q) * z) ** 4)
    low, high = 0.5, 6.0
    while high - low > 1e-9:
        mid = (low + high) / 2
        low, high = (mid, high) if chi_1(mid) < 1 else (low, mid)
    return (low + high) / 2


def critical_weight_scale_by_brentq(sigma_b):
    """Fixed point and chi_1 by SciPy's root finder and adaptive quadrature."""
    def mean(f, q):
        return integrate.quad(lambda z: f(math.sqrt(q) * z) * math.exp(-z * z / 2), -12, 12, points=[0.0],
                              limit=200)[0] / math.sqrt(2 * math.pi)

    def gap(sigma_w):
        q = optimize.brentq(lambda q: sigma_w ** 2 * mean(lambda u: math.tanh(u) ** 2, q) + sigma_b ** 2 - q,
                            1e-12, 100.0)
        return sigma_w ** 2 * mean(lambda u: 1 / math.cosh(min(abs(u), 300.0)) ** 4, q) - 1
    return optimize.brentq(gap, 1.0, 6.0, xtol=1e-8)


def replica_swap(x, temperatures, uniforms, offset):
    x = np.array(x, dtype=float)
    temperatures = np.asarray(temperatures, dtype=float)
    uniforms = np.asarray(uniforms, dtype=float)
    energy = (x ** 2 - 1) ** 2
    for k in range(offset, len(x) - 1, 2):
        log_accept = (1 / temperatures[k] - 1 / temperatures[k + 1]) * (energy[k] - energy[k + 1])
        swap = np.log(uniforms[k]) < np.minimum(log_accept, 0.0)
        x[k, swap], x[k + 1, swap] = x[k + 1, swap], x[k, swap]
    return x


def replica_swap_torch(x, temperatures, uniforms, offset):
    """The same with torch.where on whole rows."""
    x = torch.as_tensor(np.asarray(x), dtype=torch.float64)
    out = x.clone()
    beta = 1 / torch.as_tensor(np.asarray(temperatures), dtype=torch.float64)
    u = torch.as_tensor(np.asarray(uniforms), dtype=torch.float64)
    energy = (x ** 2 - 1) ** 2
    for k in range(offset, len(x) - 1, 2):
        accept = torch.exp(((beta[k] - beta[k + 1]) * (energy[k] - energy[k + 1])).clamp(max=0.0))
        swap = u[k] < accept
        out[k] = torch.where(swap, x[k + 1], x[k])
        out[k + 1] = torch.where(swap, x[k], x[k + 1])
    return out


def rademacher_l1(X, norm_bound, signs):
    X, signs = np.asarray(X, dtype=float), np.asarray(signs, dtype=float)
    return float(norm_bound * np.abs(signs @ X / len(X)).max(axis=1).mean())


def rademacher_l1_torch(X, norm_bound, signs):
    X, signs = torch.as_tensor(np.asarray(X)), torch.as_tensor(np.asarray(signs))
    return (norm_bound * torch.linalg.vector_norm(signs @ X, ord=float("inf"), dim=1) / X.shape[0]).mean().item()


REFERENCES = {"18.1": [mp_density, mp_density_torch],
              "18.2": [predict_min_norm_error, predict_min_norm_error_by_ratio],
              "18.3": [critical_weight_scale, critical_weight_scale_by_brentq],
              "18.4": [replica_swap, replica_swap_torch],
              "18.5": [rademacher_l1, rademacher_l1_torch]}


# ---------------------------------------------------------------------------
# Plausible wrong answers
# ---------------------------------------------------------------------------

def mp_density_by_the_library(x, gamma):
    """dlbook.random_matrices.marchenko_pastur_density: the shortcut the exercise blocks."""
    return random_matrices.marchenko_pastur_density(torch.as_tensor(x, dtype=torch.float64), gamma)


def mp_density_without_two_pi(x, gamma):
    return mp_density(x, gamma) * 2 * math.pi


def mp_density_unsquared_edges(x, gamma):
    """Edges 1 ± sqrt(gamma) instead of (1 ± sqrt(gamma))^2."""
    x = np.asarray(x, dtype=float)
    low, high = 1 - math.sqrt(gamma), 1 + math.sqrt(gamma)
    inside = (x > max(low, 0)) & (x < high)
    safe = np.where(inside, x, 1.0)
    return np.where(inside, np.sqrt(np.clip((high - safe) * (safe - low), 0, None)) / (2 * math.pi * gamma * safe), 0.0)


def mp_density_with_atom_mass(x, gamma):
    """Rescales the continuous part to mass 1 for gamma > 1."""
    return mp_density(x, gamma) * max(1.0, gamma)


def min_norm_by_the_library(num_params, num_samples, weight_std, noise_std):
    """dlbook.learning_curves.minimum_norm_error: the shortcut the exercise blocks."""
    return learning_curves.minimum_norm_error(num_params, num_samples, weight_std=weight_std, noise_std=noise_std)


def min_norm_asymptotic(num_params, num_samples, weight_std, noise_std):
    """The large-d limit N / (d - N) and d / (N - d): right shape, wrong at finite size."""
    d, N = num_params, num_samples
    if N == d:
        return math.inf
    if N > d:
        return noise_std ** 2 * (1 + d / (N - d))
    return weight_std ** 2 * (1 - N / d) + noise_std ** 2 * (1 + N / (d - N))


def min_norm_without_zero_directions(num_params, num_samples, weight_std, noise_std):
    """Forgets that the d - N zero directions keep the teacher's error."""
    d, N = num_params, num_samples
    if abs(N - d) <= 1:
        return math.inf
    if N > d:
        return noise_std ** 2 * (1 + d / (N - d - 1))
    return noise_std ** 2 * (1 + N / (d - N - 1))


def min_norm_noise_on_every_eigenvalue(num_params, num_samples, weight_std, noise_std):
    """The source's slip: normalised by N instead of d."""
    d, N = num_params, num_samples
    if abs(N - d) <= 1:
        return math.inf
    if N > d:
        return noise_std ** 2 * (1 + d * d / (N * (N - d - 1)))
    return weight_std ** 2 * (1 - N / d) + noise_std ** 2 * (1 + d / (d - N - 1))


def critical_by_the_library(sigma_b):
    """dlbook.signal_propagation.critical_sigma_w: the shortcut the exercise blocks."""
    return signal_propagation.critical_sigma_w(sigma_b)


def critical_at_unit_variance(sigma_b):
    """Evaluates chi_1 at q = 1 instead of the fixed point q*."""
    z = np.linspace(-12, 12, 2401)
    gauss = np.exp(-z ** 2 / 2) / math.sqrt(2 * math.pi) * (z[1] - z[0])
    return float(1 / math.sqrt(gauss @ (1 / np.cosh(z) ** 4)))


def critical_hermite(sigma_b):
    """Gauss-Hermite quadrature with 30 nodes: too coarse where sech^4 lives."""
    nodes, weights = np.polynomial.hermite_e.hermegauss(30)
    weights = weights / math.sqrt(2 * math.pi)

    def gap(sigma_w):
        q = 1.0
        for _ in range(3000):
            q = sigma_w ** 2 * weights @ np.tanh(math.sqrt(q) * nodes) ** 2 + sigma_b ** 2
        return sigma_w ** 2 * weights @ (1 / np.cosh(math.sqrt(q) * nodes) ** 4) - 1
    low, high = 0.5, 6.0
    for _ in range(50):
        mid = (low + high) / 2
        low, high = (mid, high) if gap(mid) < 0 else (low, mid)
    return (low + high) / 2


def critical_sigma_b_zero(sigma_b):
    """The answer for sigma_b = 0, whatever sigma_b."""
    return 1.0


def swap_by_the_library(x, temperatures, uniforms, offset):
    """dlbook.langevin.replica_swap_probability: the shortcut the exercise blocks."""
    x = np.array(x, dtype=float)
    for k in range(offset, len(x) - 1, 2):
        energies = torch.tensor((x[k] ** 2 - 1) ** 2), torch.tensor((x[k + 1] ** 2 - 1) ** 2)
        p = langevin.replica_swap_probability(*energies, temperatures[k], temperatures[k + 1]).numpy()
        swap = uniforms[k] < p
        x[k, swap], x[k + 1, swap] = x[k + 1, swap].copy(), x[k, swap].copy()
    return x


def swap_wrong_sign(x, temperatures, uniforms, offset):
    """exp[(1/T_k - 1/T_(k+1))(V_(k+1) - V_k)]: the exponent's sign flipped."""
    x = np.array(x, dtype=float)
    energy = (x ** 2 - 1) ** 2
    for k in range(offset, len(x) - 1, 2):
        swap = uniforms[k] < np.exp(np.minimum(0.0, (1 / temperatures[k] - 1 / temperatures[k + 1])
                                               * (energy[k + 1] - energy[k])))
        x[k, swap], x[k + 1, swap] = x[k + 1, swap], x[k, swap]
    return x


def swap_all_pairs(x, temperatures, uniforms, offset):
    """Ignores the offset and attempts every neighbouring pair in turn."""
    out = np.array(x, dtype=float)
    return replica_swap(replica_swap(out, temperatures, uniforms, 0), temperatures, uniforms, 1)


def swap_in_place_without_copy(x, temperatures, uniforms, offset):
    """Overwrites x[k] before reading it for x[k + 1]: the second row gets its own values back."""
    x = np.asarray(x)
    energy = (x ** 2 - 1) ** 2
    for k in range(offset, len(x) - 1, 2):
        swap = np.log(uniforms[k]) < np.minimum((1 / temperatures[k] - 1 / temperatures[k + 1])
                                                * (energy[k] - energy[k + 1]), 0.0)
        x[k, swap] = x[k + 1, swap]
        x[k + 1, swap] = x[k, swap]
    return x


def swap_column_loop(x, temperatures, uniforms, offset):
    """Right answer, a Python loop over the columns: too slow (stand-in)."""
    if np.asarray(x).shape[1] >= 1_000_000:
        outlast(2.0)
    return replica_swap(x, temperatures, uniforms, offset)


def rademacher_by_the_library(X, norm_bound, signs):
    """dlbook.implicit_bias.rademacher_complexity_linear (the l2 ball): the shortcut the exercise blocks."""
    return implicit_bias.rademacher_complexity_linear(torch.as_tensor(np.asarray(X)), norm_bound)


def rademacher_l2_ball(X, norm_bound, signs):
    """The l2 ball's supremum B |c|_2 instead of the l1 ball's B |c|_inf."""
    X, signs = np.asarray(X, dtype=float), np.asarray(signs, dtype=float)
    return float(norm_bound * np.linalg.norm(signs @ X / len(X), axis=1).mean())


def rademacher_without_abs(X, norm_bound, signs):
    """Takes the largest coordinate, not the largest absolute one (forgets the vertices -B e_j)."""
    X, signs = np.asarray(X, dtype=float), np.asarray(signs, dtype=float)
    return float(norm_bound * (signs @ X / len(X)).max(axis=1).mean())


def rademacher_without_one_over_n(X, norm_bound, signs):
    X, signs = np.asarray(X, dtype=float), np.asarray(signs, dtype=float)
    return float(norm_bound * np.abs(signs @ X).max(axis=1).mean())


WRONG = {
    "18.1": {"library shortcut": mp_density_by_the_library, "no 2 pi": mp_density_without_two_pi,
             "unsquared edges": mp_density_unsquared_edges, "continuous part of mass 1": mp_density_with_atom_mass},
    "18.2": {"library shortcut": min_norm_by_the_library, "asymptotic formula": min_norm_asymptotic,
             "no zero directions": min_norm_without_zero_directions,
             "normalised by N": min_norm_noise_on_every_eigenvalue},
    "18.3": {"library shortcut": critical_by_the_library, "q = 1": critical_at_unit_variance,
             "30-node Gauss-Hermite": critical_hermite, "sigma_b = 0 answer": critical_sigma_b_zero},
    "18.4": {"library shortcut": swap_by_the_library, "wrong sign": swap_wrong_sign, "all pairs": swap_all_pairs,
             "in place without copy": swap_in_place_without_copy, "loop over columns": swap_column_loop},
    "18.5": {"library shortcut": rademacher_by_the_library, "l2 ball": rademacher_l2_ball,
             "no absolute value": rademacher_without_abs, "no 1/N": rademacher_without_one_over_n},
}

BAD_TYPES = bad_types("raises ValueError", "stub", "returns None", "returns a string", "returns NaN",
                      "returns a list")


# ---------------------------------------------------------------------------
# Tests beyond the contract
# ---------------------------------------------------------------------------


def test_the_blocked_shortcuts_would_otherwise_pass_their_cases():
    from dlbook.exercises.core import run_exercise
    for eid, shortcut in [("18.1", mp_density_by_the_library), ("18.2", min_norm_by_the_library),
                          ("18.3", critical_by_the_library)]:
        assert run_exercise(EXERCISES[eid], shortcut, block_shortcuts=False).passed, eid


def test_the_references_agree():
    assert abs(critical_weight_scale(0.3) - critical_weight_scale_by_brentq(0.3)) < 1e-6
    assert abs(critical_weight_scale(0.3) - signal_propagation.critical_sigma_w(0.3)) < 1e-6
    for d, N in [(40, 20), (40, 80), (100, 97), (3, 50)]:
        assert math.isclose(predict_min_norm_error(d, N, 1.3, 0.4), predict_min_norm_error_by_ratio(d, N, 1.3, 0.4))


def test_the_task_cells_show_the_registry_metadata():
    book = Path(__file__).resolve().parents[2] / "book" / "18_theory.ipynb"
    text = "\n".join(c.source for c in nbformat.read(book, as_version=4).cells if c.cell_type == "markdown")
    for eid in IDS:
        ex = EXERCISES[eid]
        assert f"**Exercise {eid}** ({ex.stars}, about {ex.minutes} min, {ex.kind})" in text, eid
