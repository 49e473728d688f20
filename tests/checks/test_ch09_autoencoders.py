"""Checks of chapter 9's exercises: reference solutions pass, plausible wrong answers fail, bad answers fail cleanly."""
from __future__ import annotations

import math

import numpy as np
import torch

import dlbook.exercises.checks.ch09_autoencoders as autoencoders_checks
from dlbook import mutual_information, pca, vae
from dlbook.exercises import run_check

from exercise_contract import bad_types

IDS = ("9.1", "9.2", "9.3", "9.4", "9.5")
MIN_CASES = 5


# ---------------------------------------------------------------------------
# Reference solutions (independent of the chapter's modules)
# ---------------------------------------------------------------------------

def top_eigenpairs(C, k, start, num_iterations):
    C = C.clone()
    values, vectors = [], []
    for j in range(k):
        v = start[:, j] / start[:, j].norm()
        for _ in range(num_iterations):
            v = C @ v
            v = v / v.norm()
        value = v @ C @ v
        C = C - value * torch.outer(v, v)
        values.append(value)
        vectors.append(v)
    return torch.stack(values), torch.stack(vectors, 1)


def top_eigenpairs_in_numpy(C, k, start, num_iterations):
    C, start = torch.as_tensor(C).numpy(), torch.as_tensor(start).numpy()
    values, vectors = [], []
    for j in range(k):
        v = start[:, j] / np.linalg.norm(start[:, j])
        for _ in range(num_iterations):
            v = C @ v
            v /= np.linalg.norm(v)
        values.append(v @ C @ v)
        vectors.append(v)
        C = C - values[-1] * np.outer(v, v)
    return np.array(values), np.stack(vectors, 1)


def sanger(X, W0, lr):
    W = W0.clone()
    for t in range(len(X)):
        y = W @ X[t]
        W = W + lr[t] * (torch.outer(y, X[t]) - torch.tril(torch.outer(y, y)) @ W)
    return W


def sanger_unit_by_unit(X, W0, lr):
    """Row j learns from x minus the reconstructions of rows 1..j-1, with Oja's term for itself."""
    W = W0.clone()
    for t in range(len(X)):
        x, new = X[t], W.clone()
        residual = x.clone()
        for j in range(len(W)):
            y = W[j] @ x
            residual = residual - y * W[j]
            new[j] = W[j] + lr[t] * y * residual
        W = new
    return W


def vae_loss(x, mu, logvar, eps, decoder_weight, decoder_bias, beta):
    z = mu + torch.exp(logvar / 2) * eps
    logits = z @ decoder_weight.T + decoder_bias
    nll = torch.nn.functional.binary_cross_entropy_with_logits(logits, x, reduction="none").sum(1)
    kl = 0.5 * (mu**2 + logvar.exp() - 1 - logvar).sum(1)
    return (nll + beta * kl).mean().item()


def vae_loss_in_numpy(x, mu, logvar, eps, decoder_weight, decoder_bias, beta):
    x, mu, logvar, eps, W, b = (np.asarray(t) for t in (x, mu, logvar, eps, decoder_weight, decoder_bias))
    logits = (mu + np.exp(logvar / 2) * eps) @ W.T + b
    nll = (np.logaddexp(0.0, logits) - x * logits).sum(1)
    kl = 0.5 * (mu**2 + np.exp(logvar) - 1 - logvar).sum(1)
    return float(np.mean(nll + beta * kl))


def estimator_variances(mu, sigma, a, num_samples):
    c = mu - a
    return 4 * sigma**2 / num_samples, (15 * sigma**2 + 14 * c**2 + c**4 / sigma**2) / num_samples


def estimator_variances_by_moments(mu, sigma, a, num_samples):
    """E g^2 - (E g)^2 from the Gaussian moments of u = z - mu, expanded by NumPy's polynomials."""
    c = mu - a
    moments = {0: 1.0, 2: sigma**2, 4: 3 * sigma**4, 6: 15 * sigma**6}
    square = np.polynomial.polynomial.polypow([c, 1.0], 4)          # (c + u)^4
    second = sum(coef * moments.get(power + 2, 0.0) for power, coef in enumerate(square)) / sigma**4
    return 4 * sigma**2 / num_samples, (second - 4 * c**2) / num_samples


def bilinear_bound(rho, a):
    return a * rho + 0.5 * math.log(1 - a**2)


def bilinear_bound_by_integral(rho, a):
    """The marginal term by one-dimensional numerical integration over x (scipy.integrate.quad)."""
    from scipy.integrate import quad

    value, _ = quad(lambda x: math.exp(a**2 * x**2 / 2 - x**2 / 2) / math.sqrt(2 * math.pi), -math.inf, math.inf,
                    epsabs=1e-13, epsrel=1e-13)
    return a * rho - math.log(value)


REFERENCES = {
    "9.1": [top_eigenpairs, top_eigenpairs_in_numpy],
    "9.2": [sanger, sanger_unit_by_unit],
    "9.3": [vae_loss, vae_loss_in_numpy],
    "9.4": [estimator_variances, estimator_variances_by_moments],
    "9.5": [bilinear_bound, bilinear_bound_by_integral],
}


# ---------------------------------------------------------------------------
# Plausible wrong answers
# ---------------------------------------------------------------------------

def eigenpairs_by_the_library(C, k, start, num_iterations):
    """A square root of C as data, then dlbook.pca: the shortcut the exercise blocks."""
    values, vectors = torch.linalg.eigh(C)
    root = vectors * values.clamp(min=0).sqrt()
    fitted = pca.pca_eigh(torch.cat([root, -root]) * math.sqrt(len(C)))
    return fitted.eigenvalues[:k], fitted.components[:, :k]


def eigenpairs_by_eigh(C, k, start, num_iterations):
    values, vectors = torch.linalg.eigh(C)
    return values.flip(0)[:k], vectors.flip(1)[:, :k]


def eigenpairs_without_deflation(C, k, start, num_iterations):
    values, vectors = [], []
    for j in range(k):
        v = start[:, j] / start[:, j].norm()
        for _ in range(num_iterations):
            v = C @ v
            v = v / v.norm()
        values.append(v @ C @ v)
        vectors.append(v)
    return torch.stack(values), torch.stack(vectors, 1)


def eigenpairs_with_norm_as_eigenvalue(C, k, start, num_iterations):
    """|C v| instead of the Rayleigh quotient: the same at convergence, not before."""
    C = C.clone()
    values, vectors = [], []
    for j in range(k):
        v = start[:, j] / start[:, j].norm()
        for _ in range(num_iterations):
            v = C @ v
            v = v / v.norm()
        value = (C @ v).norm()
        C = C - value * torch.outer(v, v)
        values.append(value)
        vectors.append(v)
    return torch.stack(values), torch.stack(vectors, 1)


def sanger_by_the_library(X, W0, lr):
    """Oja's rule from dlbook.pca for each unit on the deflated stream: the shortcut the exercise blocks."""
    rows = []
    residual = X.clone()
    for j in range(len(W0)):
        w = pca.oja(residual, W0[j], lr)[-1]
        rows.append(w)
        residual = residual - (residual @ w)[:, None] * w
    return torch.stack(rows)


def sanger_full_triangle(X, W0, lr):
    """Oja's subspace rule (the whole y y^T): finds the subspace, not the eigenvectors."""
    W = W0.clone()
    for t in range(len(X)):
        y = W @ X[t]
        W = W + lr[t] * (torch.outer(y, X[t]) - torch.outer(y, y) @ W)
    return W


def sanger_strict_triangle(X, W0, lr):
    """Without the diagonal: no Oja term, the norms grow."""
    W = W0.clone()
    for t in range(len(X)):
        y = W @ X[t]
        W = W + lr[t] * (torch.outer(y, X[t]) - torch.tril(torch.outer(y, y), diagonal=-1) @ W)
    return W


def sanger_by_eigh(X, W0, lr):
    values, vectors = torch.linalg.eigh(X.T @ X / len(X))
    return vectors.flip(1)[:, :len(W0)].T.contiguous()


def vae_loss_by_the_library(x, mu, logvar, eps, decoder_weight, decoder_bias, beta):
    z = vae.reparameterize(mu, logvar, eps)
    return vae.vae_loss(x, z @ decoder_weight.T + decoder_bias, mu, logvar, beta=beta).item()


def vae_loss_naive_probabilities(x, mu, logvar, eps, decoder_weight, decoder_bias, beta):
    z = mu + (0.5 * logvar).exp() * eps
    p = torch.sigmoid(z @ decoder_weight.T + decoder_bias)
    nll = -(x * p.log() + (1 - x) * (1 - p).log()).sum(1)
    return (nll + beta * 0.5 * (mu**2 + logvar.exp() - 1 - logvar).sum(1)).mean().item()


def vae_loss_logvar_as_log_sigma(x, mu, logvar, eps, decoder_weight, decoder_bias, beta):
    z = mu + logvar.exp() * eps
    logits = z @ decoder_weight.T + decoder_bias
    nll = torch.nn.functional.binary_cross_entropy_with_logits(logits, x, reduction="none").sum(1)
    return (nll + beta * 0.5 * (mu**2 + (2 * logvar).exp() - 1 - 2 * logvar).sum(1)).mean().item()


def vae_loss_summed_over_the_batch(x, mu, logvar, eps, decoder_weight, decoder_bias, beta):
    return len(x) * vae_loss(x, mu, logvar, eps, decoder_weight, decoder_bias, beta)


def vae_loss_without_beta(x, mu, logvar, eps, decoder_weight, decoder_bias, beta):
    return vae_loss(x, mu, logvar, eps, decoder_weight, decoder_bias, 1.0)


def vae_loss_mean_over_pixels(x, mu, logvar, eps, decoder_weight, decoder_bias, beta):
    z = mu + (0.5 * logvar).exp() * eps
    logits = z @ decoder_weight.T + decoder_bias
    nll = torch.nn.functional.binary_cross_entropy_with_logits(logits, x)
    return (nll + beta * 0.5 * (mu**2 + logvar.exp() - 1 - logvar).sum(1).mean()).item()


def variances_by_the_library(mu, sigma, a, num_samples):
    """Measured with dlbook.vae: the shortcut the exercise blocks."""
    def f(z):
        return (z - a) ** 2
    path = vae.gradient_estimates(f, mu, sigma, num_samples, num_repeats=20000, method="pathwise")
    score = vae.gradient_estimates(f, mu, sigma, num_samples, num_repeats=20000, method="score")
    return path.var().item(), score.var().item()


def variances_second_moment(mu, sigma, a, num_samples):
    """E g^2 instead of Var g: forgets to subtract the squared mean."""
    c = mu - a
    return (4 * sigma**2 + 4 * c**2) / num_samples, (15 * sigma**2 + 18 * c**2 + c**4 / sigma**2) / num_samples


def variances_single_sample(mu, sigma, a, num_samples):
    return estimator_variances(mu, sigma, a, 1)


def variances_without_the_c4_term(mu, sigma, a, num_samples):
    c = mu - a
    return 4 * sigma**2 / num_samples, (15 * sigma**2 + 14 * c**2) / num_samples


def variances_sigma_not_squared(mu, sigma, a, num_samples):
    c = mu - a
    return 4 * sigma / num_samples, (15 * sigma + 14 * c**2 + c**4 / sigma) / num_samples


def bound_by_the_library(rho, a):
    """A Monte Carlo estimate with dlbook.mutual_information: the shortcut the exercise blocks."""
    pairs = mutual_information.gaussian_pairs(200_000, rho, seed=0)
    shuffled = mutual_information.shuffle_pairs(pairs, seed=1)
    critic = lambda p: a * p[:, 0] * p[:, 1]  # noqa: E731
    return mutual_information.donsker_varadhan(critic(pairs), critic(shuffled)).item()


def bound_by_monte_carlo(rho, a):
    """The student's own simulation: close, but nowhere near 1e-6."""
    rng = np.random.default_rng(0)
    u = rng.normal(size=(2, 1_000_000))
    x, y = u[0], rho * u[0] + math.sqrt(1 - rho**2) * u[1]
    return float(a * (x * y).mean() - np.log(np.exp(a * x * rng.permutation(y)).mean()))


def bound_by_jensen(rho, a):
    """log E e^T replaced by E T = 0: an upper estimate, not the bound."""
    return a * rho


def bound_without_the_half(rho, a):
    return a * rho + math.log(1 - a**2)


def bound_is_the_mutual_information(rho, a):
    return -0.5 * math.log(1 - rho**2)


WRONG = {
    "9.1": {
        "dlbook.pca (blocked)": eigenpairs_by_the_library,
        "eigh, not power iteration": eigenpairs_by_eigh,
        "no deflation": eigenpairs_without_deflation,
        "|C v| as the eigenvalue": eigenpairs_with_norm_as_eigenvalue,
    },
    "9.2": {
        "Oja's rule from dlbook.pca (blocked)": sanger_by_the_library,
        "the full y y^T (Oja's subspace rule)": sanger_full_triangle,
        "the strict lower triangle": sanger_strict_triangle,
        "eigh of the stream's covariance": sanger_by_eigh,
    },
    "9.3": {
        "dlbook.vae (blocked)": vae_loss_by_the_library,
        "log of sigmoid probabilities": vae_loss_naive_probabilities,
        "logvar read as log sigma": vae_loss_logvar_as_log_sigma,
        "summed over the batch": vae_loss_summed_over_the_batch,
        "beta ignored": vae_loss_without_beta,
        "mean over pixels": vae_loss_mean_over_pixels,
    },
    "9.4": {
        "simulated with dlbook.vae (blocked)": variances_by_the_library,
        "second moment, not variance": variances_second_moment,
        "one sample only": variances_single_sample,
        "without c^4 / sigma^2": variances_without_the_c4_term,
        "sigma for sigma^2": variances_sigma_not_squared,
    },
    "9.5": {
        "Monte Carlo with dlbook (blocked)": bound_by_the_library,
        "the student's own Monte Carlo": bound_by_monte_carlo,
        "Jensen: log E e^T -> E T": bound_by_jensen,
        "without the 1/2": bound_without_the_half,
        "the mutual information itself": bound_is_the_mutual_information,
    },
}

BAD_TYPES = bad_types("raises ValueError", "stub", "returns None", "returns a string", "returns NaN")


# ---------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------



def test_the_subspace_rule_fails_on_the_long_stream_not_only_on_exact_iterates():
    result = run_check("9.2", sanger_full_triangle)
    assert not result.passed and "case" in result.message


def test_expected_values_are_right():
    # The quadrature of exercise 9.5 equals the closed form.
    for rho, a in [(0.5, 0.3), (0.3, 0.95), (-0.7, -0.5)]:
        assert abs(autoencoders_checks._measured_bilinear_bound(rho, a) - bilinear_bound(rho, a)) < 1e-9
    # The simulation of exercise 9.4 agrees with the formula (well inside the 5 % it allows).
    for seed, (mu, sigma, a, m) in enumerate([(0.0, 1.0, 3.0, 1), (0.5, 3.0, 0.5, 20)]):
        measured = autoencoders_checks._measured_variances(mu, sigma, a, m, 400_000 // m, 800 + seed)
        for got, want in zip(measured, estimator_variances(mu, sigma, a, m)):
            assert abs(got / want - 1) < 0.025, (got, want)
    # The reference power iteration converges to NumPy's eigh.
    C, _ = autoencoders_checks._spd([6, 3, 1.5, 0.7, 0.3, 0.1], 0)
    start = np.random.default_rng(1).normal(size=(6, 3))
    values, _ = autoencoders_checks._reference_power_iteration(C, 3, start, 300)
    assert np.allclose(values, np.linalg.eigvalsh(C)[::-1][:3], rtol=1e-10)
