"""The linear-Gaussian latent-variable model x = W z + b + sigma eps, where everything is exact: the
log-likelihood, the posterior, the ELBO of any Gaussian q and its gap, probabilistic PCA, and a
linear VAE that learns it (Chapter 9).

z ~ N(0, I_k) and eps ~ N(0, I_p), so x ~ N(b, W W^T + sigma^2 I). These functions compare
closed forms to many digits, so they compute in float64 (module policy, CONTRIBUTING.md).
"""
from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import nn

from .runtime import generator
from .vae import gaussian_kl as gaussian_kl_standard
from .validation import as_tensor, check_bool, check_float, check_int, check_square


class LinearGaussian(NamedTuple):
    """Decoder weights W (p x k), offset b (p,) and observation noise variance sigma^2 > 0."""

    W: torch.Tensor
    b: torch.Tensor
    noise_var: float


def linear_gaussian(W, b, noise_var: float) -> LinearGaussian:
    """A checked LinearGaussian in float64 (Chapter 9)."""
    W = as_tensor("W", W, ndim=2, floating=True).to(torch.float64)
    b = as_tensor("b", b, shape=(W.shape[0],), floating=True).to(torch.float64)
    return LinearGaussian(W, b, check_float("noise_var", noise_var, low=0.0, low_open=True))


def _model(model) -> LinearGaussian:
    if not isinstance(model, LinearGaussian):
        raise TypeError(f"model must be a dlbook.linear_gaussian.LinearGaussian, got {type(model).__name__}")
    return model


def _rows(name: str, x, p: int) -> torch.Tensor:
    return as_tensor(name, x, shape=(None, p), floating=True).to(torch.float64)


def marginal(model) -> torch.distributions.MultivariateNormal:
    """p(x) = N(b, W W^T + sigma^2 I) (Chapter 9)."""
    W, b, noise_var = _model(model)
    return torch.distributions.MultivariateNormal(b, W @ W.T + noise_var * torch.eye(len(b), dtype=W.dtype))


def log_likelihood(model, x) -> torch.Tensor:
    """log p(x) of each row of x, exactly (Chapter 9)."""
    return marginal(model).log_prob(_rows("x", x, len(_model(model).b)))


def sample(model, num_samples: int, *, seed: int = 0) -> torch.Tensor:
    """Rows x = W z + b + sigma eps drawn from the model, shape (num_samples, p) (Chapter 9)."""
    W, b, noise_var = _model(model)
    num_samples = check_int("num_samples", num_samples, minimum=1)
    rng = generator(check_int("seed", seed, minimum=0))
    z = torch.randn(num_samples, W.shape[1], generator=rng, dtype=torch.float64)
    eps = torch.randn(num_samples, W.shape[0], generator=rng, dtype=torch.float64)
    return z @ W.T + b + math.sqrt(noise_var) * eps


class GaussianPosterior(NamedTuple):
    """q(z | x) = N(mean, cov) for each row: means (n, k) and one shared covariance (k, k)."""

    mean: torch.Tensor
    cov: torch.Tensor


def posterior(model, x) -> GaussianPosterior:
    """The exact posterior p(z | x) = N(M^-1 W^T (x - b), sigma^2 M^-1) with M = W^T W + sigma^2 I (Chapter 9)."""
    W, b, noise_var = _model(model)
    x = _rows("x", x, len(b))
    M = W.T @ W + noise_var * torch.eye(W.shape[1], dtype=W.dtype)
    return GaussianPosterior(torch.linalg.solve(M, W.T @ (x - b).T).T, noise_var * torch.linalg.inv(M))


def _covariance(name: str, S, k: int) -> torch.Tensor:
    S = check_square(name, S, symmetric=True).to(torch.float64)
    if len(S) != k:
        raise ValueError(f"{name} must be {k} x {k}, got {tuple(S.shape)}")
    return S


def gaussian_kl(mean0, cov0, mean1, cov1) -> torch.Tensor:
    """KL(N(mean0, cov0) || N(mean1, cov1)) for each row of mean0 (one shared cov0) (Chapter 9).

    1/2 [tr(cov1^-1 cov0) + (m1 - m0)^T cov1^-1 (m1 - m0) - k + log det cov1 - log det cov0].
    """
    mean0 = as_tensor("mean0", mean0, floating=True).to(torch.float64)
    k = mean0.shape[-1]
    mean1 = as_tensor("mean1", mean1, floating=True).to(torch.float64)
    cov0, cov1 = _covariance("cov0", cov0, k), _covariance("cov1", cov1, k)
    diff = mean1 - mean0
    mahalanobis = (diff * torch.linalg.solve(cov1, diff.unsqueeze(-1)).squeeze(-1)).sum(-1)
    return 0.5 * (torch.trace(torch.linalg.solve(cov1, cov0)) + mahalanobis - k
                  + torch.logdet(cov1) - torch.logdet(cov0))


def elbo(model, x, q_mean, q_cov) -> torch.Tensor:
    """The ELBO E_q[log p(x | z)] - KL(q || N(0, I)) of each row for q = N(q_mean[i], q_cov), exactly (Chapter 9).

    E_q ||x - b - W z||^2 = ||x - b - W m||^2 + tr(W^T W S) because the decoder is linear.
    """
    W, b, noise_var = _model(model)
    x = _rows("x", x, len(b))
    k = W.shape[1]
    q_mean = as_tensor("q_mean", q_mean, shape=(len(x), k), floating=True).to(torch.float64)
    S = _covariance("q_cov", q_cov, k)
    residual = ((x - b - q_mean @ W.T) ** 2).sum(1) + torch.trace(W.T @ W @ S)
    expected_log_lik = -0.5 * len(b) * math.log(2 * math.pi * noise_var) - residual / (2 * noise_var)
    prior = torch.zeros(k, dtype=torch.float64), torch.eye(k, dtype=torch.float64)
    return expected_log_lik - gaussian_kl(q_mean, S, *prior)


def ppca(X, k: int) -> LinearGaussian:
    """Tipping and Bishop's maximum-likelihood probabilistic PCA with k latent dimensions (Chapter 9).

    sigma^2 = the mean of the p - k smallest eigenvalues of the sample covariance (divisor n),
    W = U_k (Lambda_k - sigma^2 I)^(1/2) (one of the maximisers: any W R with R orthogonal is
    another), b = the mean.
    """
    X = as_tensor("X", X, ndim=2, floating=True).to(torch.float64)
    p = X.shape[1]
    k = check_int("k", k, minimum=0, maximum=p - 1)
    Xc = X - X.mean(0)
    eigenvalues, vectors = torch.linalg.eigh(Xc.T @ Xc / len(X))
    eigenvalues, vectors = eigenvalues.flip(0), vectors.flip(1)
    noise_var = eigenvalues[k:].mean().item()
    W = vectors[:, :k] * (eigenvalues[:k] - noise_var).clamp(min=0).sqrt()
    return LinearGaussian(W, X.mean(0), noise_var)


class LinearVAE(nn.Module):
    """A VAE whose encoder and decoder are linear: q(z | x) = N(V x + c, diag s^2), p(x | z) = N(W z + b,
    sigma^2 I) (Chapter 9).

    With ``learn_noise=False`` sigma^2 stays at ``noise_var``. Its ELBO is computed exactly
    (the expectation over q is a closed form for a linear decoder); at its optimum it is
    probabilistic PCA, and the ELBO equals the log-likelihood (Lucas et al. 2019).
    """

    def __init__(self, num_inputs: int, latent_dim: int, *, noise_var: float = 1.0, learn_noise: bool = True,
                 init_std: float = 0.1, seed: int = 0):
        super().__init__()
        p = check_int("num_inputs", num_inputs, minimum=1)
        k = check_int("latent_dim", latent_dim, minimum=1, maximum=p)
        noise_var = check_float("noise_var", noise_var, low=0.0, low_open=True)
        check_bool("learn_noise", learn_noise)
        init_std = check_float("init_std", init_std, low=0.0, low_open=True)
        rng = generator(check_int("seed", seed, minimum=0))
        draw = lambda *shape: nn.Parameter(init_std * torch.randn(*shape, generator=rng, dtype=torch.float64))  # noqa: E731
        self.V, self.c, self.W, self.b = draw(k, p), draw(k), draw(p, k), draw(p)
        self.log_s2 = nn.Parameter(torch.zeros(k, dtype=torch.float64))
        log_noise = torch.tensor(math.log(noise_var), dtype=torch.float64)
        if learn_noise:
            self.log_noise_var = nn.Parameter(log_noise)
        else:
            self.register_buffer("log_noise_var", log_noise)

    def forward(self, x) -> torch.Tensor:
        """The exact ELBO of each row of x."""
        x = _rows("x", x, self.W.shape[0])
        model = LinearGaussian(self.W, self.b, self.log_noise_var.exp())
        return elbo_of_diagonal_q(model, x, x @ self.V.T + self.c, self.log_s2)

    def model(self) -> LinearGaussian:
        """The generative model p(x | z) p(z) it has learned, detached."""
        return LinearGaussian(self.W.detach().clone(), self.b.detach().clone(), self.log_noise_var.exp().item())


def elbo_of_diagonal_q(model: LinearGaussian, x: torch.Tensor, q_mean: torch.Tensor,
                       q_logvar: torch.Tensor) -> torch.Tensor:
    """:func:`elbo` for q = N(q_mean[i], diag exp(q_logvar)), differentiable in every argument and in the
    model's tensors (the noise variance may be a tensor) (Chapter 9)."""
    W, b, noise_var = model
    p, k = W.shape
    s2 = q_logvar.exp()
    residual = ((x - b - q_mean @ W.T) ** 2).sum(1) + (s2 * (W**2).sum(0)).sum()
    noise_var = torch.as_tensor(noise_var, dtype=x.dtype)
    expected_log_lik = -0.5 * p * torch.log(2 * math.pi * noise_var) - residual / (2 * noise_var)
    return expected_log_lik - gaussian_kl_standard(q_mean, q_logvar.expand_as(q_mean))

