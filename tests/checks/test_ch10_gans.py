"""Checks of chapter 10's exercises: references pass, plausible wrong answers fail, bad answers fail cleanly."""
from __future__ import annotations

import math
from pathlib import Path

import nbformat
import numpy as np
import torch
from scipy import integrate

from dlbook import divergences, gan
from dlbook.exercises import EXERCISES, run_check

from exercise_contract import bad_types

#: Fewest cases each check must run (tests/checks/test_contract.py).
MIN_CASES = 5

IDS = ("10.1", "10.2", "10.3", "10.4", "10.5")


# ---------------------------------------------------------------------------
# Reference solutions (independent of the chapter's modules)
# ---------------------------------------------------------------------------

def discrete_gan_optimum(p_data, p_model):
    total = p_data + p_model
    D_star = torch.where(total > 0, p_data / torch.where(total > 0, total, 1.0), torch.full_like(total, 0.5))
    value = torch.xlogy(p_data, D_star).sum() + torch.xlogy(p_model, 1 - D_star).sum()
    return D_star, value.item()


def discrete_gan_optimum_via_js(p_data, p_model):
    """The same value as -log 4 + 2 JS with JS written out (weights 1/2)."""
    p, q = p_data.numpy(), p_model.numpy()
    m = (p + q) / 2
    kl = lambda a, b: sum(x * math.log(x / y) for x, y in zip(a, b) if x > 0)  # noqa: E731
    D = np.where(p + q > 0, p / np.where(p + q > 0, p + q, 1.0), 0.5)
    return torch.tensor(D), -math.log(4) + kl(p, m) + kl(q, m)


def one_sided_penalty(W1, b1, w2, real, fake, mix, weight):
    w2 = w2.detach().clone().requires_grad_(True)
    x_hat = (mix[:, None] * real + (1 - mix[:, None]) * fake).requires_grad_(True)
    scores = torch.tanh(x_hat @ W1.T + b1) @ w2
    (grad_x,) = torch.autograd.grad(scores.sum(), x_hat, create_graph=True)
    penalty = weight * torch.clamp(grad_x.norm(dim=1) - 1, min=0).pow(2).mean()
    (grad_w2,) = torch.autograd.grad(penalty, w2)
    return penalty.item(), grad_w2


def one_sided_penalty_by_hand(W1, b1, w2, real, fake, mix, weight):
    """The input gradient and the derivative with respect to w2 written out (no autograd)."""
    x_hat = mix[:, None] * real + (1 - mix[:, None]) * fake
    slope = 1 - torch.tanh(x_hat @ W1.T + b1) ** 2               # (n, h)
    grad_x = (slope * w2) @ W1                                   # (n, d)
    norms = grad_x.norm(dim=1)
    excess = torch.clamp(norms - 1, min=0)
    # d|g|/dw2_k = (g . W1[k]) slope_k / |g|
    d_norm = (grad_x @ W1.T) * slope / norms[:, None].clamp_min(1e-300)
    grad_w2 = weight * (2 * excess[:, None] * d_norm).mean(0)
    return (weight * excess.pow(2).mean()).item(), grad_w2


def penalised_critic_gap(shift, weight):
    distance = shift.norm().item()
    return distance + distance**2 / (2 * weight)


def count_modes(samples, centres, std, min_fraction):
    distance, nearest = torch.cdist(samples, centres).min(dim=1)
    good = distance < 3 * std
    counts = torch.bincount(nearest[good], minlength=len(centres))
    return int((counts >= min_fraction * len(samples)).sum()), good.double().mean().item()


def mmd_parallel_lines(theta, bandwidth):
    h = bandwidth
    gauss_integral = h * math.sqrt(math.pi / 2) * math.erf(1 / (h * math.sqrt(2)))
    first_moment = h**2 * (1 - math.exp(-1 / (2 * h**2)))
    return 4 * (gauss_integral - first_moment) * (1 - math.exp(-theta**2 / (2 * h**2)))


def mmd_parallel_lines_by_quadrature(theta, bandwidth):
    within, _ = integrate.quad(lambda t: 2 * (1 - t) * math.exp(-t**2 / (2 * bandwidth**2)), 0, 1,
                               epsabs=1e-14, epsrel=1e-13)
    return 2 * within * (1 - math.exp(-theta**2 / (2 * bandwidth**2)))


REFERENCES = {"10.1": [discrete_gan_optimum, discrete_gan_optimum_via_js],
              "10.2": [one_sided_penalty, one_sided_penalty_by_hand],
              "10.3": penalised_critic_gap,
              "10.4": count_modes,
              "10.5": [mmd_parallel_lines, mmd_parallel_lines_by_quadrature]}


# ---------------------------------------------------------------------------
# Plausible wrong answers
# ---------------------------------------------------------------------------

def optimum_by_the_library(p_data, p_model):
    """dlbook.gan: the shortcut the exercise blocks."""
    D = gan.optimal_discriminator(p_data, p_model)
    return D, gan.game_value(D, p_data, p_model).item()


def optimum_swapped(p_data, p_model):
    D, _ = discrete_gan_optimum(p_model, p_data)
    return D, torch.xlogy(p_data, D).sum().item() + torch.xlogy(p_model, 1 - D).sum().item()


def optimum_js_without_halves(p_data, p_model):
    """-log 4 + 2 JS with JS as the sum of the two KL terms (the source's slip)."""
    D, value = discrete_gan_optimum(p_data, p_model)
    return D, -math.log(4) + 2 * (value + math.log(4))


def optimum_zero_where_empty(p_data, p_model):
    D, value = discrete_gan_optimum(p_data, p_model)
    return torch.where(p_data + p_model > 0, D, torch.zeros_like(D)), value


def penalty_by_the_library(W1, b1, w2, real, fake, mix, weight):
    """dlbook.gan.gradient_penalty: the two-sided penalty, and the shortcut the exercise blocks."""
    w2 = w2.detach().clone().requires_grad_(True)
    critic = lambda x: torch.tanh(x @ W1.T + b1) @ w2  # noqa: E731
    penalty = gan.gradient_penalty(critic, real, fake, weight=weight)
    (grad,) = torch.autograd.grad(penalty, w2)
    return penalty.item(), grad


def penalty_two_sided(W1, b1, w2, real, fake, mix, weight):
    w2 = w2.detach().clone().requires_grad_(True)
    x_hat = (mix[:, None] * real + (1 - mix[:, None]) * fake).requires_grad_(True)
    (grad_x,) = torch.autograd.grad((torch.tanh(x_hat @ W1.T + b1) @ w2).sum(), x_hat, create_graph=True)
    penalty = weight * (grad_x.norm(dim=1) - 1).pow(2).mean()
    return penalty.item(), torch.autograd.grad(penalty, w2)[0]


def penalty_without_create_graph(W1, b1, w2, real, fake, mix, weight):
    """The value is right, but the gradient is treated as a constant: zero derivative in w2."""
    x_hat = (mix[:, None] * real + (1 - mix[:, None]) * fake).requires_grad_(True)
    (grad_x,) = torch.autograd.grad((torch.tanh(x_hat @ W1.T + b1) @ w2).sum(), x_hat)
    penalty = weight * torch.clamp(grad_x.norm(dim=1) - 1, min=0).pow(2).mean()
    return penalty.item(), torch.zeros_like(w2)


def penalty_at_real_points(W1, b1, w2, real, fake, mix, weight):
    return one_sided_penalty(W1, b1, w2, real, real, mix, weight)


def gap_without_bias(shift, weight):
    return shift.norm().item()


def gap_biased_low(shift, weight):
    """'The penalty biases the estimate low.'"""
    distance = shift.norm().item()
    return distance - distance**2 / (2 * weight)


def gap_is_the_objective(shift, weight):
    """The optimal value of the penalised objective (gap minus penalty), not the gap."""
    distance = shift.norm().item()
    return distance + distance**2 / (4 * weight)


def gap_by_the_library(shift, weight):
    """Searches the slope of a linear critic along -shift, scoring each with gan.gradient_penalty."""
    distance = shift.norm().item()
    points = torch.zeros(4, len(shift), dtype=torch.float64)
    best = max((s * distance - gan.gradient_penalty(lambda x: -(x @ shift) * s / distance, points, points,
                                                    weight=weight).item(), s)
               for s in np.linspace(0.5, 3.0, 2501))
    return best[1] * distance


def modes_by_the_library(samples, centres, std, min_fraction):
    cover = gan.mode_coverage(samples, centres, std, min_fraction=min_fraction)
    return int(cover.modes), cover.quality.item()


def modes_within_two_std(samples, centres, std, min_fraction):
    return count_modes(samples, centres, 2 * std / 3, min_fraction)


def modes_any_point(samples, centres, std, min_fraction):
    """A mode counts as covered as soon as one good point is near it."""
    return count_modes(samples, centres, std, 1e-12)


def modes_fraction_of_good_points(samples, centres, std, min_fraction):
    """The threshold taken as a share of the good samples instead of all samples."""
    distance, nearest = torch.cdist(samples, centres).min(dim=1)
    good = distance < 3 * std
    counts = torch.bincount(nearest[good], minlength=len(centres))
    return int((counts >= min_fraction * good.sum()).sum()), good.double().mean().item()


def mmd_by_the_library(theta, bandwidth):
    """dlbook.divergences.mmd_squared on samples of the two segments (blocked, and only a Monte Carlo estimate)."""
    real, fake = gan.shifted_pair("lines", (theta,), 2000, generator=torch.Generator().manual_seed(0))
    return divergences.mmd_squared(real[0].double(), fake[0].double(), bandwidth).item()


def mmd_without_within_term(theta, bandwidth):
    """Treats the vertical factor as 1 (as if the heights always agreed)."""
    return 2 * (1 - math.exp(-theta**2 / (2 * bandwidth**2)))


def mmd_kernel_without_half(theta, bandwidth):
    h = bandwidth / math.sqrt(2)
    return mmd_parallel_lines(theta, h)


def mmd_uniform_density_missing(theta, bandwidth):
    """Integrates exp(-t^2 / 2h^2) over [-1, 1] without the triangular density (1 - |t|)."""
    h = bandwidth
    within = 2 * h * math.sqrt(math.pi / 2) * math.erf(1 / (h * math.sqrt(2)))
    return 2 * within * (1 - math.exp(-theta**2 / (2 * h**2)))


WRONG = {
    "10.1": {"dlbook.gan (blocked)": optimum_by_the_library, "D* = q / (p + q)": optimum_swapped,
             "JS without the factors 1/2": optimum_js_without_halves,
             "D* = 0 where both vanish": optimum_zero_where_empty},
    "10.2": {"dlbook.gan.gradient_penalty (blocked)": penalty_by_the_library,
             "the two-sided penalty": penalty_two_sided,
             "no create_graph: no derivative in w2": penalty_without_create_graph,
             "penalty at the real points only": penalty_at_real_points},
    "10.3": {"dlbook.gan.gradient_penalty (blocked)": gap_by_the_library,
             "no bias: the gap is W": gap_without_bias, "biased low": gap_biased_low,
             "the objective's value instead of the gap": gap_is_the_objective},
    "10.4": {"dlbook.gan.mode_coverage (blocked)": modes_by_the_library,
             "within 2 std": modes_within_two_std, "any point covers a mode": modes_any_point,
             "threshold relative to the good points": modes_fraction_of_good_points},
    "10.5": {"dlbook.divergences.mmd_squared on samples (blocked)": mmd_by_the_library,
             "vertical factor left out": mmd_without_within_term,
             "kernel exp(-d^2 / h^2)": mmd_kernel_without_half,
             "no triangular density of the height difference": mmd_uniform_density_missing},
}

BAD_TYPES = bad_types("raises ValueError", "stub", "returns None", "returns a string", "returns NaN",
                      "returns a list")


# ---------------------------------------------------------------------------
# Tests beyond the contract
# ---------------------------------------------------------------------------



def test_the_blocked_shortcuts_would_otherwise_pass_their_cases():
    """Outside the check the library functions do solve the task, so blocking them matters."""
    p = torch.tensor([0.2, 0.0, 0.3, 0.5, 0.0], dtype=torch.float64)
    q = torch.tensor([0.0, 0.1, 0.6, 0.3, 0.0], dtype=torch.float64)
    D, value = optimum_by_the_library(p, q)
    D_ref, value_ref = discrete_gan_optimum(p, q)
    assert torch.allclose(D, D_ref) and math.isclose(value, value_ref, rel_tol=1e-12)
    centres = gan.ring_centres(8, dtype=torch.float64)
    samples = centres[torch.arange(40) % 3] + 0.01
    assert modes_by_the_library(samples, centres, 0.05, 0.01) == count_modes(samples, centres, 0.05, 0.01)


def test_blocked_answers_fail_with_the_shortcut_reason():
    for eid, name in [("10.1", "dlbook.gan (blocked)"), ("10.2", "dlbook.gan.gradient_penalty (blocked)"),
                      ("10.4", "dlbook.gan.mode_coverage (blocked)"),
                      ("10.5", "dlbook.divergences.mmd_squared on samples (blocked)")]:
        result = run_check(eid, WRONG[eid][name])
        assert not result.passed and "is not available inside it" in result.message, (eid, result.message)


def test_the_references_agree():
    gen = torch.Generator().manual_seed(0)
    args = (torch.randn(6, 2, generator=gen, dtype=torch.float64), torch.randn(6, generator=gen, dtype=torch.float64),
            torch.randn(6, generator=gen, dtype=torch.float64), torch.randn(9, 2, generator=gen, dtype=torch.float64),
            torch.randn(9, 2, generator=gen, dtype=torch.float64), torch.rand(9, generator=gen, dtype=torch.float64))
    auto, by_hand = one_sided_penalty(*args, 10.0), one_sided_penalty_by_hand(*args, 10.0)
    assert math.isclose(auto[0], by_hand[0], rel_tol=1e-12) and torch.allclose(auto[1], by_hand[1], atol=1e-12)
    for theta, h in [(1.0, 0.5), (2.0, 1.5), (0.3, 0.2)]:
        assert math.isclose(mmd_parallel_lines(theta, h), mmd_parallel_lines_by_quadrature(theta, h), rel_tol=1e-10)


def test_the_task_cells_show_the_registry_metadata():
    book = Path(__file__).resolve().parents[2] / "book" / "10_gans.ipynb"
    text = "\n".join(c.source for c in nbformat.read(book, as_version=4).cells if c.cell_type == "markdown")
    for eid in IDS:
        ex = EXERCISES[eid]
        assert f"**Exercise {eid}** ({ex.stars}, about {ex.minutes} min, {ex.kind})" in text, eid
