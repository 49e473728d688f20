"""Variational autoencoders: the closed-form Gaussian KL, the reparameterised sample, the Bernoulli
likelihood, the negative ELBO, a VAE for digits, active units, and the two gradient estimators
of an expectation (pathwise and score function) (Chapter 9).

Noise is drawn on the CPU from the model's own seeded generator and then moved, so a
run is reproducible on every device and never touches the global random stream.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, NamedTuple

import torch
from torch import nn

from . import data, nets, train
from .runtime import generator
from .validation import (
    as_tensor,
    check_broadcastable,
    check_choice,
    check_device,
    check_dtype,
    check_float,
    check_int,
    check_same_shape,
)


def gaussian_kl(mu, logvar) -> torch.Tensor:
    """KL(N(mu, diag exp(logvar)) || N(0, I)) = 1/2 sum_j (mu_j^2 + sigma_j^2 - 1 - log sigma_j^2),
    summed over the last dimension (Chapter 9)."""
    mu = as_tensor("mu", mu, floating=True)
    logvar = as_tensor("logvar", logvar, floating=True)
    check_same_shape("mu", mu, "logvar", logvar)
    return 0.5 * (mu**2 + logvar.exp() - 1 - logvar).sum(-1)


def reparameterize(mu, logvar, eps) -> torch.Tensor:
    """z = mu + sigma * eps with sigma = exp(logvar / 2): a sample of q whose randomness is all in eps,
    so gradients reach mu and logvar (Chapter 9)."""
    mu = as_tensor("mu", mu, floating=True)
    logvar = as_tensor("logvar", logvar, floating=True)
    eps = as_tensor("eps", eps, floating=True)
    check_same_shape("mu", mu, "logvar", logvar)
    check_same_shape("mu", mu, "eps", eps)
    return mu + (0.5 * logvar).exp() * eps


def bernoulli_log_likelihood(logits, x) -> torch.Tensor:
    """log p(x | logits) = sum_i [x_i log p_i + (1 - x_i) log(1 - p_i)], p = sigmoid(logits), summed over
    the last dimension; x may be any intensity in [0, 1] (Chapter 9).

    Written as x * logits - softplus(logits), which never takes the log of 0.
    """
    logits = as_tensor("logits", logits, floating=True)
    x = as_tensor("x", x, floating=True)
    check_broadcastable("logits", logits.shape, "x", x.shape)
    return (x * logits - nn.functional.softplus(logits)).sum(-1)


def vae_loss(x, logits, mu, logvar, *, beta: float = 1.0) -> torch.Tensor:
    """The batch mean of -log p(x | z) + beta KL(q(z | x) || p(z)): the negative ELBO at beta = 1 (Chapter 9)."""
    beta = check_float("beta", beta, low=0.0)
    return (-bernoulli_log_likelihood(logits, x) + beta * gaussian_kl(mu, logvar)).mean()


class VAEOutput(NamedTuple):
    """What a VAE returns for a batch: decoder logits, posterior means and log-variances, the sample z."""

    logits: torch.Tensor
    mu: torch.Tensor
    logvar: torch.Tensor
    z: torch.Tensor


class VAE(nn.Module):
    """A VAE with Gaussian encoder q(z | x) = N(mu(x), diag sigma^2(x)) and Bernoulli decoder (Chapter 9).

    Encoder num_inputs -> hidden -> (mu, log sigma^2), decoder latent_dim -> hidden ->
    logits, both from nets.mlp. The forward pass samples z by reparameterisation with
    noise from the model's own generator.
    """

    def __init__(self, num_inputs: int = 64, latent_dim: int = 2, hidden: int = 256, *, seed: int = 0,
                 dtype: torch.dtype = torch.float32, device="cpu"):
        super().__init__()
        num_inputs = check_int("num_inputs", num_inputs, minimum=1)
        self.latent_dim = check_int("latent_dim", latent_dim, minimum=1)
        hidden = check_int("hidden", hidden, minimum=1)
        seed = check_int("seed", seed, minimum=0)
        dtype, device = check_dtype("dtype", dtype), check_device("device", device)
        self.encoder = nets.mlp((num_inputs, hidden, 2 * latent_dim), seed=seed, dtype=dtype, device=device)
        self.decoder = nets.mlp((latent_dim, hidden, num_inputs), seed=seed + 1, dtype=dtype, device=device)
        self.noise = generator(seed + 2)

    def encode(self, x) -> tuple[torch.Tensor, torch.Tensor]:
        """The posterior means and log-variances, each (N, latent_dim)."""
        mu, logvar = self.encoder(x).chunk(2, dim=-1)
        return mu, logvar

    def decode(self, z) -> torch.Tensor:
        """Decoder logits (N, num_inputs); sigmoid(logits) are the pixel means."""
        return self.decoder(z)

    def forward(self, x) -> VAEOutput:
        mu, logvar = self.encode(x)
        eps = torch.randn(mu.shape, generator=self.noise, dtype=torch.float64).to(mu)
        z = reparameterize(mu, logvar, eps)
        return VAEOutput(self.decode(z), mu, logvar, z)


def vae_objective(beta: float = 1.0) -> Callable:
    """The loss ``loss(output, x)`` that train.fit minimises for a VAE: vae_loss with this beta (Chapter 9)."""
    beta = check_float("beta", beta, low=0.0)

    def loss(output: VAEOutput, x: torch.Tensor) -> torch.Tensor:
        return vae_loss(x, output.logits, output.mu, output.logvar, beta=beta)
    return loss


def latent_activity(mu) -> torch.Tensor:
    """Cov_x(E_q[z_j]): the variance over examples of each posterior mean, shape (latent_dim,) (Chapter 9)."""
    mu = as_tensor("mu", mu, ndim=2, floating=True)
    if len(mu) < 2:
        raise ValueError(f"mu must have at least 2 rows, got {len(mu)}")
    return mu.var(0)


def active_units(mu, threshold: float = 0.01) -> int:
    """The number of latent dimensions whose posterior mean varies with x by more than ``threshold``
    (Burda et al.'s active units) (Chapter 9)."""
    threshold = check_float("threshold", threshold, low=0.0)
    return int((latent_activity(mu) > threshold).sum().item())


# ---------------------------------------------------------------------------
# Two estimators of d/dmu E_{z ~ N(mu, sigma^2)} f(z)
# ---------------------------------------------------------------------------

ESTIMATORS = ("pathwise", "score")


def gradient_estimates(f: Callable, mu: float, sigma: float, num_samples: int, *, num_repeats: int = 1,
                       method: str = "pathwise", seed: int = 0) -> torch.Tensor:
    """``num_repeats`` independent estimates of d/dmu E f(z), z ~ N(mu, sigma^2), each from
    ``num_samples`` draws, float64 (Chapter 9).

    "pathwise" averages f'(mu + sigma eps) (the reparameterisation gradient, f' by autograd);
    "score" averages f(z) (z - mu) / sigma^2 (the score-function or REINFORCE estimator). The
    same seed gives both methods the same draws. ``f`` acts elementwise on a tensor.
    """
    if not callable(f):
        raise TypeError(f"f must be a function of a tensor, got {type(f).__name__}")
    mu = check_float("mu", mu)
    sigma = check_float("sigma", sigma, low=0.0, low_open=True)
    num_samples = check_int("num_samples", num_samples, minimum=1)
    num_repeats = check_int("num_repeats", num_repeats, minimum=1)
    check_choice("method", method, ESTIMATORS)
    eps = torch.randn(num_repeats, num_samples, generator=generator(check_int("seed", seed, minimum=0)),
                      dtype=torch.float64)
    if method == "pathwise":
        z = (mu + sigma * eps).requires_grad_()
        (derivative,) = torch.autograd.grad(f(z).sum(), z)
        return derivative.mean(1)
    z = mu + sigma * eps
    with torch.no_grad():
        return (f(z) * (z - mu) / sigma**2).mean(1)


# ---------------------------------------------------------------------------
# VAEs trained on the digits (cached: the figures, widgets and checkpoints share them)
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class VAERun:
    """Settings of a VAE (64, hidden, latent_dim) trained on the digits' training split with this beta."""

    latent_dim: int
    beta: float = 1.0
    hidden: int = 256
    epochs: int = 30
    batch_size: int = 128
    lr: float = 3e-3
    seed: int = 0
    device: str = "cpu"


class TrainedVAE(NamedTuple):
    model: VAE
    history: train.History


@train.cached
def digits_vae(config: VAERun) -> TrainedVAE:
    """Train a VAE with Bernoulli decoder on the digits by Adam on the beta-weighted negative ELBO (Chapter 9)."""
    digits = data.load_digits(device=config.device)
    model = VAE(64, config.latent_dim, config.hidden, seed=config.seed, device=config.device)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr)
    history = train.fit(model, vae_objective(config.beta), optimizer, (digits.X_train, digits.X_train),
                        epochs=config.epochs, batch_size=config.batch_size, seed=config.seed)
    return TrainedVAE(model, history)
