"""Checks for the exercises of chapter 9 (09_autoencoders): power iteration with deflation, Sanger's
rule, the VAE loss, the variances of two gradient estimators, and the Donsker-Varadhan bound of a
bilinear critic.

Every expected value comes from independent code here: NumPy's eigh and a NumPy run of each
procedure, a NumPy formula for the loss with torch.autograd for its gradient, a simulation of the
two estimators, and Gauss-Hermite quadrature for the bound. Nothing calls dlbook.pca, dlbook.vae or
dlbook.mutual_information, so a bug there cannot make a wrong answer pass. The student's functions
receive and return plain values only (numbers, tensors, tuples).
"""
from __future__ import annotations

import math

import numpy as np
import torch
from numpy.polynomial.hermite_e import hermegauss
from scipy.special import logsumexp

from ..core import Mismatch, as_array, as_float, describe, exercise, expect, expect_close


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _spd(eigenvalues, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A symmetric matrix with these eigenvalues in a random orthonormal basis, and the basis."""
    Q, _ = np.linalg.qr(_rng(seed).normal(size=(len(eigenvalues), len(eigenvalues))))
    C = (Q * np.asarray(eigenvalues, dtype=float)) @ Q.T
    return (C + C.T) / 2, Q


def _pair(answer, shapes, names):
    if not isinstance(answer, (tuple, list)) or len(answer) != 2:
        raise Mismatch(f"a pair ({names[0]}, {names[1]})", describe(answer))
    return tuple(as_array(value, shape, f"{name} of shape {shape}")
                 for value, shape, name in zip(answer, shapes, names))


def _expect_unit_columns_match(got: np.ndarray, expected: np.ndarray, tolerance: float, what: str) -> None:
    """Each column of got equals the same column of expected up to sign."""
    for j in range(expected.shape[1]):
        error = min(np.abs(got[:, j] - expected[:, j]).max(), np.abs(got[:, j] + expected[:, j]).max())
        expect(error <= tolerance, f"{what} {j + 1} equal to the expected unit vector up to sign, to {tolerance:g}",
               f"a largest difference of {error:.3g}")


# ---------------------------------------------------------------------------
# Exercise 9.1: power iteration with deflation
# ---------------------------------------------------------------------------

def _reference_power_iteration(C: np.ndarray, k: int, start: np.ndarray, num_iterations: int):
    C = C.copy()
    values, vectors = [], []
    for j in range(k):
        v = start[:, j] / np.linalg.norm(start[:, j])
        for _ in range(num_iterations):
            v = C @ v
            v = v / np.linalg.norm(v)
        value = v @ C @ v
        C = C - value * np.outer(v, v)
        values.append(value)
        vectors.append(v)
    return np.array(values), np.stack(vectors, axis=1)


def _power_cases():
    """(label, eigenvalues, k, iterations, converged) where converged compares with eigh."""
    return [
        ("p = 6, eigenvalues 6, 3, 1.5, ..., k = 3, 300 iterations", [6, 3, 1.5, 0.7, 0.3, 0.1], 3, 300, True),
        ("p = 40, geometric eigenvalues 0.8^j, k = 5, 400 iterations", list(0.8 ** np.arange(40)), 5, 400, True),
        ("a rank-deficient matrix (two zero eigenvalues), k = 2, 200 iterations", [5, 2, 1, 0, 0], 2, 200, True),
        ("p = 6, k = 3, only 3 iterations (not converged)", [6, 3, 1.5, 0.7, 0.3, 0.1], 3, 3, False),
        ("p = 20, a small gap (1.05), k = 2, 10 iterations (not converged)",
         [2.1, 2.0, 1.0] + [0.5] * 17, 2, 10, False),
        ("p = 8, k = 4, 1 iteration", [8, 6, 4, 2, 1, 1, 1, 1], 4, 1, False),
    ]


@exercise("9.1", title="Power iteration with deflation", function="top_eigenpairs", kind="extend",
          difficulty=2, minutes=30, blocked=("dlbook.pca.pca_eigh", "dlbook.pca.pca_svd"),
          hint="for each component: multiply by the current matrix and normalise num_iterations times, "
               "take the Rayleigh quotient v^T C v, then subtract lambda v v^T from the matrix.")
def check_top_eigenpairs(top_eigenpairs, cases):
    """C: symmetric PSD float64 tensor; start: (p, k) float64; answer: (eigenvalues (k,), vectors (p, k))."""
    for seed, (label, eigenvalues, k, iterations, converged) in enumerate(_power_cases()):
        C, _ = _spd(eigenvalues, 100 + seed)
        p = len(eigenvalues)
        start = _rng(200 + seed).normal(size=(p, k))
        with cases.case(f"top_eigenpairs(C, {k}, start, {iterations}) with {label}"):
            values, vectors = _pair(top_eigenpairs(torch.tensor(C), k, torch.tensor(start), iterations),
                                    ((k,), (p, k)), ("eigenvalues", "vectors"))
            if converged:
                reference_values, reference_vectors = np.linalg.eigh(C)
                reference_values, reference_vectors = reference_values[::-1][:k], reference_vectors[:, ::-1][:, :k]
                for j in range(k):
                    expect_close(values[j], reference_values[j], rtol=1e-8, atol=1e-12)
                _expect_unit_columns_match(vectors, reference_vectors, 1e-6, "eigenvector")
            else:
                reference_values, reference_vectors = _reference_power_iteration(C, k, start, iterations)
                for j in range(k):
                    expect(abs(values[j] - reference_values[j]) <= 1e-10 * (1 + abs(reference_values[j])),
                           f"eigenvalue {j + 1} after {iterations} iterations (not yet converged) "
                           f"{reference_values[j]:.10g}", f"{values[j]:.10g}")
                _expect_unit_columns_match(vectors, reference_vectors, 1e-9, f"vector after {iterations} iterations,")


# ---------------------------------------------------------------------------
# Exercise 9.2: Sanger's generalised Hebbian algorithm
# ---------------------------------------------------------------------------

def _reference_sanger(X: np.ndarray, W0: np.ndarray, lr: np.ndarray) -> np.ndarray:
    W = W0.copy()
    for t in range(len(X)):
        y = W @ X[t]
        W = W + lr[t] * (np.outer(y, X[t]) - np.tril(np.outer(y, y)) @ W)
    return W


def _stream(eigenvalues, num_samples: int, seed: int):
    C, Q = _spd(eigenvalues, seed)
    X = _rng(seed + 1).normal(size=(num_samples, len(eigenvalues))) * np.sqrt(eigenvalues) @ Q.T
    return X, Q


@exercise("9.2", title="Sanger's rule", function="sanger", kind="extend", difficulty=2, minutes=40,
          blocked=("dlbook.pca.oja", "dlbook.pca.hebb", "dlbook.pca.pca_eigh", "dlbook.pca.pca_svd"),
          hint="for each sample compute y = W x, then add lr_t (y x^T - tril(y y^T) W): the lower triangle of "
               "y y^T including its diagonal.")
def check_sanger(sanger, cases):
    """X: (T, d) float64 stream; W0: (k, d); lr: (T,); answer: the final (k, d) weights."""
    short = [("d = 5, k = 3, 40 samples, constant step 0.05", [4.0, 2.0, 1.0, 0.5, 0.2], 3, 40, 0.05),
             ("d = 4, k = 1 (Oja's rule), 30 samples, step 0.1", [3.0, 1.0, 0.5, 0.2], 1, 30, 0.1),
             ("d = 6, k = 6 (all components), 25 samples, step 0.02", [5, 4, 3, 2, 1, 0.5], 6, 25, 0.02),
             ("d = 3, k = 2, 100 samples, step 0.1", [2.0, 1.0, 0.3], 2, 100, 0.1)]
    for seed, (label, eigenvalues, k, steps, step) in enumerate(short):
        X, _ = _stream(eigenvalues, steps, 300 + 10 * seed)
        W0 = _rng(400 + seed).normal(size=(k, len(eigenvalues))) * 0.5
        lr = np.full(steps, step) * (1 + 0.5 * np.sin(np.arange(steps)))          # steps that vary
        with cases.case(f"sanger(X, W0, lr) with {label}: the weights after the run"):
            got = as_array(sanger(torch.tensor(X), torch.tensor(W0), torch.tensor(lr)), (k, len(eigenvalues)))
            expected = _reference_sanger(X, W0, lr)
            error = np.abs(got - expected).max() / (1 + np.abs(expected).max())
            expect(error <= 1e-10, "the weights of this update rule to 1e-10",
                   f"a relative difference of {error:.3g}")

    eigenvalues = [5.0, 2.5, 1.0, 0.3, 0.2, 0.1]
    X, Q = _stream(eigenvalues, 3000, 500)
    W0 = _rng(501).normal(size=(3, 6)) * 0.3
    lr = 0.05 / (1 + np.arange(3000) / 100)
    with cases.case("sanger on a stream of 3000 samples, d = 6, k = 3, lr_t = 0.05 / (1 + t/100): "
                    "row j turns to +-v_j with unit length"):
        got = as_array(sanger(torch.tensor(X), torch.tensor(W0), torch.tensor(lr)), (3, 6))
        for j in range(3):
            cosine = abs(got[j] @ Q[:, j]) / np.linalg.norm(got[j])
            expect(cosine > 0.98, f"|cos(row {j + 1}, v_{j + 1})| above 0.98", f"{cosine:.4f}")
            expect(abs(np.linalg.norm(got[j]) - 1) < 0.02, f"row {j + 1} of length 1 within 0.02",
                   f"{np.linalg.norm(got[j]):.4f}")


# ---------------------------------------------------------------------------
# Exercise 9.3: the VAE loss
# ---------------------------------------------------------------------------

def _softplus(x: np.ndarray) -> np.ndarray:
    return np.logaddexp(0.0, x)


def _reference_vae_loss(x, mu, logvar, eps, W, b, beta) -> float:
    z = mu + np.exp(0.5 * logvar) * eps
    logits = z @ W.T + b
    log_likelihood = (x * logits - _softplus(logits)).sum(1)
    kl = 0.5 * (mu**2 + np.exp(logvar) - 1 - logvar).sum(1)
    return float((-log_likelihood + beta * kl).mean())


def _vae_inputs(n: int, p: int, k: int, seed: int, *, logit_scale: float = 1.0):
    rng = _rng(seed)
    x = rng.uniform(size=(n, p))
    x[rng.uniform(size=(n, p)) < 0.3] = 0.0                     # blank pixels, as in the digits
    mu, logvar = rng.normal(size=(n, k)), 0.8 * rng.normal(size=(n, k))
    eps = rng.normal(size=(n, k))
    W, b = logit_scale * rng.normal(size=(p, k)), logit_scale * rng.normal(size=p)
    return x, mu, logvar, eps, W, b


def _call_vae_loss(vae_loss, inputs, beta):
    return as_float(vae_loss(*(torch.tensor(a) for a in inputs), beta), "one number (the loss)")


def _autograd_mu_gradient(inputs, beta) -> np.ndarray:
    x, mu, logvar, eps, W, b = (torch.tensor(a) for a in inputs)
    mu = mu.clone().requires_grad_()
    z = mu + (0.5 * logvar).exp() * eps
    logits = z @ W.T + b
    loss = (-(x * logits - torch.nn.functional.softplus(logits)).sum(1)
            + beta * 0.5 * (mu**2 + logvar.exp() - 1 - logvar).sum(1)).mean()
    loss.backward()
    return mu.grad.numpy()


@exercise("9.3", title="The VAE loss", function="vae_loss", kind="transcribe", difficulty=1, minutes=20,
          blocked=("dlbook.vae.vae_loss", "dlbook.vae.bernoulli_log_likelihood", "dlbook.vae.gaussian_kl",
                   "dlbook.vae.reparameterize"),
          hint="log p(x|z) = sum_i (x_i l_i - softplus(l_i)) with logits l = z W^T + b; KL = "
               "1/2 sum (mu^2 + exp(logvar) - 1 - logvar); average -log p + beta KL over the batch.")
def check_vae_loss(vae_loss, cases):
    """Float64 tensors in, one number out; compared with a NumPy formula and autograd's gradient."""
    settings = [("a batch of 5 images of 16 pixels, k = 3, beta = 1", (5, 16, 3), 1.0, 1.0),
                ("one image of 64 pixels, k = 2, beta = 1", (1, 64, 2), 1.0, 1.0),
                ("a batch of 8, k = 4, beta = 4 (the KL weighs more)", (8, 12, 4), 4.0, 1.0),
                ("a batch of 6, k = 2, beta = 0 (reconstruction only)", (6, 10, 2), 0.0, 1.0),
                ("logits in the hundreds (a saturated decoder)", (4, 9, 3), 1.0, 120.0)]
    for seed, (label, (n, p, k), beta, scale) in enumerate(settings):
        inputs = _vae_inputs(n, p, k, 600 + seed, logit_scale=scale)
        with cases.case(f"vae_loss(...) with {label}"):
            expect_close(_call_vae_loss(vae_loss, inputs, beta), _reference_vae_loss(*inputs, beta), rtol=1e-9)

    inputs = _vae_inputs(3, 8, 2, 700)
    exact = _autograd_mu_gradient(inputs, 1.0)
    with cases.case("central finite differences of vae_loss in mu against the exact gradient"):
        step = 1e-5
        for i, j in [(0, 0), (1, 1), (2, 0)]:
            plus, minus = [np.array(a) for a in inputs], [np.array(a) for a in inputs]
            plus[1][i, j] += step
            minus[1][i, j] -= step
            numeric = (_call_vae_loss(vae_loss, plus, 1.0) - _call_vae_loss(vae_loss, minus, 1.0)) / (2 * step)
            expect(abs(numeric - exact[i, j]) <= 1e-6 * (1 + abs(exact[i, j])),
                   f"d loss / d mu[{i}, {j}] = {exact[i, j]:.8g}", f"{numeric:.8g} by finite differences")


# ---------------------------------------------------------------------------
# Exercise 9.4: the variances of the pathwise and score-function estimators
# ---------------------------------------------------------------------------

def _measured_variances(mu, sigma, a, m, repeats, seed):
    """Empirical variances of the two m-sample estimators over ``repeats`` independent runs."""
    z = mu + sigma * _rng(seed).normal(size=(repeats, m))
    pathwise = (2 * (z - a)).mean(1)
    score = ((z - a) ** 2 * (z - mu) / sigma**2).mean(1)
    return pathwise.var(), score.var()


@exercise("9.4", title="Predict the variance of two gradient estimators", function="estimator_variances",
          kind="predict", difficulty=2, minutes=30, blocked=("dlbook.vae.gradient_estimates",),
          hint="the pathwise estimator averages 2(z - a); the score-function one averages (u + c)^2 u / sigma^2 "
               "with u = z - mu and c = mu - a. Expand, take expectations term by term, subtract the squared "
               "mean 4c^2, and divide by m.")
def check_estimator_variances(estimator_variances, cases):
    """Numbers in, a pair of numbers out; compared with the check's own simulation within 5 %."""
    settings = [(0.0, 1.0, 3.0, 1), (1.0, 1.0, 0.0, 1), (2.0, 0.5, 2.0, 1), (0.0, 2.0, 1.0, 10),
                (-1.0, 0.7, 1.5, 5), (0.5, 3.0, 0.5, 20)]
    for seed, (mu, sigma, a, m) in enumerate(settings):
        repeats = 400_000 // m
        measured = _measured_variances(mu, sigma, a, m, repeats, 800 + seed)
        with cases.case(f"estimator_variances(mu={mu}, sigma={sigma}, a={a}, num_samples={m}) against "
                        f"{repeats} simulated estimates of each kind"):
            answer = estimator_variances(mu, sigma, a, m)
            if not isinstance(answer, (tuple, list)) or len(answer) != 2:
                raise Mismatch("a pair (pathwise_variance, score_variance)", describe(answer))
            for name, got, value in zip(("pathwise", "score-function"), answer, measured):
                got = as_float(got, f"the {name} variance (a number)")
                expect(abs(got / value - 1) <= 0.05, f"the {name} variance within 5% of the measured {value:.5g}",
                       f"{got:.5g}")


# ---------------------------------------------------------------------------
# Exercise 9.5: the Donsker-Varadhan bound of a bilinear critic
# ---------------------------------------------------------------------------

_NODES, _WEIGHTS = hermegauss(120)
_LOG_WEIGHTS = np.log(_WEIGHTS / math.sqrt(2 * math.pi))


def _measured_bilinear_bound(rho: float, a: float) -> float:
    """Both expectations by 2-D Gauss-Hermite quadrature (standard normal weights)."""
    u, v = _NODES[:, None], _NODES[None, :]
    weights = np.exp(_LOG_WEIGHTS[:, None] + _LOG_WEIGHTS[None, :])
    y = rho * u + math.sqrt(1 - rho**2) * v                     # (x, y) = (u, rho u + ...) is the joint
    joint = (weights * a * u * y).sum()
    log_product = logsumexp(_LOG_WEIGHTS[:, None] + _LOG_WEIGHTS[None, :] + a * u * v)
    return float(joint - log_product)


@exercise("9.5", title="The Donsker-Varadhan bound of a bilinear critic", function="bilinear_bound",
          kind="predict", difficulty=2, minutes=25,
          blocked=("dlbook.mutual_information.donsker_varadhan", "dlbook.mutual_information.gaussian_pairs",
                   "dlbook.mutual_information.shuffle_pairs",
                   "dlbook.mutual_information.gaussian_mutual_information"),
          hint="the joint expectation of a x y is a rho; under the product of marginals, the expectation of "
               "exp(a x y) over y is exp(a^2 x^2 / 2), and then average that over x.")
def check_bilinear_bound(bilinear_bound, cases):
    """Two numbers in, one number out; compared with quadrature to 1e-6."""
    settings = [(0.5, 0.3), (0.9, 0.6), (0.9, 0.9), (0.2, -0.4), (-0.7, -0.5), (0.0, 0.5), (0.8, 0.0),
                (0.3, 0.95)]
    for rho, a in settings:
        measured = _measured_bilinear_bound(rho, a)
        with cases.case(f"bilinear_bound(rho={rho}, a={a}) against numerical integration"):
            got = as_float(bilinear_bound(rho, a), "the bound (a number)")
            expect_close(got, measured, rtol=0, atol=1e-6)
