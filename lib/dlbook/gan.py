"""Generative adversarial networks: the game, its losses, Wasserstein critics and mode coverage (Chapter 10).

The first part works with known distributions: the optimal discriminator
D* = p_data / (p_data + p_model), the value of the game, and a logistic
discriminator fitted by Newton's method (float64, compared with closed forms).
The second part holds the losses, written on the logits or critic scores that
networks return: the discriminator's cross-entropy, the saturating,
non-saturating and Wasserstein generator losses, and the gradient penalty of
WGAN-GP. The third part trains small GANs on a ring of Gaussians. Several
independent networks train at once as an :class:`MLPStack` (one batched matrix
product per layer instead of one per network), so a figure's seeds cost little
more than one run.

Losses take outputs of shape (..., batch, 1) or (..., batch) and average over
the batch, returning one value per leading index: a scalar for one network, a
vector for a stack. A stack is trained on the sum of its members' losses, which
gives each member exactly the gradient it would get alone.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, NamedTuple

import torch
from torch import nn
from torch.nn import functional as F

from . import nets, train
from .runtime import generator as make_generator
from .validation import (
    as_tensor,
    check_bool,
    check_choice,
    check_device,
    check_dtype,
    check_float,
    check_int,
    check_ints,
    check_same_shape,
    check_sequence,
    describe,
)

# ---------------------------------------------------------------------------
# The game on known distributions
# ---------------------------------------------------------------------------


def _masses(name: str, p) -> torch.Tensor:
    p = as_tensor(name, p, floating=True)
    if p.numel() == 0 or (p < 0).any() or not torch.isfinite(p).all():
        raise ValueError(f"{name} must be a non-empty tensor of finite, non-negative values")
    return p


def optimal_discriminator(p_data, p_model) -> torch.Tensor:
    """D*(x) = p_data(x) / (p_data(x) + p_model(x)), and 1/2 where both vanish (Chapter 10).

    Takes densities (or probabilities) evaluated at the same points.
    """
    p, q = _masses("p_data", p_data), _masses("p_model", p_model)
    check_same_shape("p_data", p, "p_model", q)
    total = p + q
    return torch.where(total > 0, p / torch.where(total > 0, total, 1), torch.full_like(total, 0.5))


def game_value(D, p_data, p_model) -> torch.Tensor:
    """V(D, G) = sum p_data log D + sum p_model log(1 - D) for probability vectors (Chapter 10).

    Points where a distribution has no mass contribute nothing (0 log 0 = 0). For
    densities on a grid, pass the densities times the cell width.
    """
    p, q = _masses("p_data", p_data), _masses("p_model", p_model)
    D = as_tensor("D", D, floating=True)
    check_same_shape("p_data", p, "p_model", q)
    check_same_shape("D", D, "p_data", p)
    if (D < 0).any() or (D > 1).any():
        raise ValueError("D must take values in [0, 1] (probabilities that a point is real)")
    return torch.xlogy(p, D).sum(-1) + torch.xlogy(q, 1 - D).sum(-1)


class LogisticFit(NamedTuple):
    """A discriminator whose log-odds are a polynomial: coefficients[k] multiplies x^k."""

    coefficients: torch.Tensor
    iterations: int


def fit_logistic_discriminator(real, fake, *, degree: int = 2, max_iterations: int = 50,
                               tol: float = 1e-12) -> LogisticFit:
    """Logistic regression of "real" (1) against "fake" (0) on features (1, x, ..., x^degree) (Chapter 10).

    1-D samples in, maximum-likelihood coefficients out, by Newton's method in
    float64 (iteratively reweighted least squares). If the true log-odds is such a
    polynomial, as for two Gaussians and degree 2, the fit recovers D*.
    """
    real = as_tensor("real", real, ndim=1, floating=True).double()
    fake = as_tensor("fake", fake, ndim=1, floating=True).double()
    degree = check_int("degree", degree, minimum=0)
    max_iterations = check_int("max_iterations", max_iterations, minimum=1)
    tol = check_float("tol", tol, low=0.0)
    x = torch.cat([real, fake])
    y = torch.cat([torch.ones_like(real), torch.zeros_like(fake)])
    features = x[:, None] ** torch.arange(degree + 1, dtype=torch.float64, device=x.device)  # (n, degree + 1)
    coefficients = torch.zeros(degree + 1, dtype=torch.float64, device=x.device)
    for iteration in range(1, max_iterations + 1):
        prob = torch.sigmoid(features @ coefficients)
        gradient = features.T @ (y - prob)  # of the log-likelihood
        hessian = (features * (prob * (1 - prob))[:, None]).T @ features
        step = torch.linalg.solve(hessian, gradient)
        coefficients = coefficients + step
        if step.abs().max() <= tol * (1 + coefficients.abs().max()):
            break
    return LogisticFit(coefficients, iteration)


# ---------------------------------------------------------------------------
# Losses on network outputs
# ---------------------------------------------------------------------------

GENERATOR_LOSSES = ("saturating", "non_saturating", "wasserstein")


def _outputs(name: str, values) -> torch.Tensor:
    values = as_tensor(name, values, floating=True)
    if values.dim() >= 2 and values.shape[-1] == 1:
        values = values.squeeze(-1)
    if values.dim() == 0 or values.shape[-1] == 0:
        raise ValueError(f"{name} must hold a batch of outputs, shape (..., batch, 1) or (..., batch), "
                         f"got {describe(values)}")
    return values


def value_estimate(real_logits, fake_logits) -> torch.Tensor:
    """The minibatch value V = mean log D(x) + mean log(1 - D(G(z))) from logits a, D = sigmoid(a) (Chapter 10).

    log sigmoid(a) = -softplus(-a) and log(1 - sigmoid(a)) = -softplus(a) never take the log of 0.
    """
    real, fake = _outputs("real_logits", real_logits), _outputs("fake_logits", fake_logits)
    return -F.softplus(-real).mean(-1) - F.softplus(fake).mean(-1)


def discriminator_loss(real_logits, fake_logits) -> torch.Tensor:
    """-V: the discriminator's binary cross-entropy, real labelled 1 and generated 0 (Chapter 10)."""
    return -value_estimate(real_logits, fake_logits)


def generator_loss(fake_outputs, kind: str = "non_saturating") -> torch.Tensor:
    """The generator's loss on the discriminator's logits (or a critic's scores) for its samples (Chapter 10).

    "saturating": mean log(1 - D), the game's own term, flat where D is near 0;
    "non_saturating": -mean log D, same fixed point, steep where D is near 0;
    "wasserstein": -mean f, for a critic f.
    """
    check_choice("kind", kind, GENERATOR_LOSSES)
    out = _outputs("fake_outputs", fake_outputs)
    if kind == "saturating":
        return -F.softplus(out).mean(-1)
    if kind == "non_saturating":
        return F.softplus(-out).mean(-1)
    return -out.mean(-1)


def wasserstein_estimate(real_scores, fake_scores) -> torch.Tensor:
    """mean f(real) - mean f(fake): for a 1-Lipschitz critic f, at most W1 (Chapter 10)."""
    real, fake = _outputs("real_scores", real_scores), _outputs("fake_scores", fake_scores)
    return real.mean(-1) - fake.mean(-1)


def gradient_penalty(critic: Callable, real, fake, *, weight: float = 10.0,
                     generator: torch.Generator | None = None) -> torch.Tensor:
    """WGAN-GP's penalty weight * mean (|grad f(x_hat)| - 1)^2 at random interpolates (Chapter 10).

    x_hat = e real + (1 - e) fake with e ~ U[0, 1] per pair, drawn on the CPU from
    ``generator``. real and fake have shape (..., batch, dim); the result has one
    value per leading index. The gradient is taken with create_graph=True, so the
    penalty can itself be differentiated with respect to the critic's parameters.
    """
    if not callable(critic):
        raise TypeError(f"critic must be a callable network, got {describe(critic)}")
    real = as_tensor("real", real, floating=True)
    fake = as_tensor("fake", fake, floating=True)
    check_same_shape("real", real, "fake", fake)
    if real.dim() < 2:
        raise ValueError(f"real and fake must have shape (..., batch, dim), got {describe(real)}")
    weight = check_float("weight", weight, low=0.0)
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator, got {describe(generator)}")
    mix = torch.rand((*real.shape[:-1], 1), generator=generator, dtype=torch.float64).to(real)
    x_hat = (mix * real.detach() + (1 - mix) * fake.detach()).requires_grad_(True)
    scores = critic(x_hat)
    (grad,) = torch.autograd.grad(scores.sum(), x_hat, create_graph=True)
    return weight * (grad.norm(dim=-1) - 1).pow(2).mean(-1)


@torch.no_grad()
def clip_weights_(module: nn.Module, clip: float) -> None:
    """Clip every parameter of a critic to [-clip, clip] in place, as the original WGAN does (Chapter 10)."""
    if not isinstance(module, nn.Module):
        raise TypeError(f"module must be a torch.nn.Module, got {describe(module)}")
    clip = check_float("clip", clip, low=0.0, low_open=True)
    for param in module.parameters():
        param.clamp_(-clip, clip)


# ---------------------------------------------------------------------------
# Independent networks trained as one
# ---------------------------------------------------------------------------

class MLPStack(nn.Module):
    """Independent MLPs of the same widths, evaluated with one batched matrix product per layer (Chapter 10).

    Member s starts from the weights of ``nets.mlp(widths, seed=seeds[s])``. Inputs
    of shape (S, batch, widths[0]) give outputs (S, batch, widths[-1]); an input
    (batch, widths[0]) is shared by every member. Adam and RMSProp act entry by
    entry, so training the stack on the sum of the members' losses trains each
    member exactly as it would train alone.

    ``lr_scales`` gives member s the learning rate lr * lr_scales[s]: train with
    :meth:`step` instead of ``optimizer.step()``, which scales each member's
    update after the optimizer has made it. SGD (with or without momentum),
    RMSProp and Adam all take steps proportional to their learning rate, so the
    result is exactly the optimizer with that member's learning rate.
    """

    def __init__(self, widths, seeds, *, activation: str = "relu", lr_scales=None,
                 dtype: torch.dtype = torch.float32, device="cpu"):
        super().__init__()
        self.widths = tuple(check_ints("widths", widths, minimum=1, min_length=2))
        self.seeds = tuple(check_ints("seeds", seeds, minimum=0))
        self.activation = check_choice("activation", activation, nets.ACTIVATIONS)
        dtype, device = check_dtype("dtype", dtype), check_device("device", device)
        scales = [1.0] * len(self.seeds) if lr_scales is None else check_sequence(
            "lr_scales", lr_scales, check_float, length=len(self.seeds), low=0.0, low_open=True)
        members = [nets.to_layers(nets.mlp(self.widths, activation=activation, seed=seed, dtype=dtype,
                                           device=device)) for seed in self.seeds]
        self._scaled = lr_scales is not None
        self.register_buffer("lr_scales", torch.tensor(scales, dtype=dtype, device=device)[:, None, None])
        # Stored as (S, fan_in, fan_out) so that a layer is baddbmm(b, h, W).
        self.weights = nn.ParameterList(nn.Parameter(torch.stack([m[i].W.T for m in members]))
                                        for i in range(len(self.widths) - 1))
        self.biases = nn.ParameterList(nn.Parameter(torch.stack([m[i].b for m in members])[:, None, :])
                                       for i in range(len(self.widths) - 1))
        self._act = nets.ACTIVATIONS[activation]()

    @property
    def num_members(self) -> int:
        return len(self.seeds)

    def step(self, optimizer: torch.optim.Optimizer) -> None:
        """``optimizer.step()``, with member s's update multiplied by ``lr_scales[s]``."""
        if not self._scaled:
            optimizer.step()
            return
        params = list(self.parameters())
        before = [p.detach().clone() for p in params]
        optimizer.step()
        with torch.no_grad():
            for param, old in zip(params, before):
                param.sub_(old).mul_(self.lr_scales).add_(old)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() == 2:
            x = x.expand(self.num_members, *x.shape)
        if x.dim() != 3 or x.shape[0] != self.num_members or x.shape[-1] != self.widths[0]:
            raise ValueError(f"x must have shape ({self.num_members}, batch, {self.widths[0]}) or "
                             f"(batch, {self.widths[0]}), got {describe(x)}")
        h = x
        for index, (W, b) in enumerate(zip(self.weights, self.biases)):
            h = torch.baddbmm(b, h, W)  # (S, batch, fan_out)
            if index < len(self.weights) - 1:
                h = self._act(h)
        return h

    def member(self, index: int) -> nn.Sequential:
        """A copy of member ``index`` as an ordinary nn.Sequential (nets.from_layers)."""
        index = check_int("index", index, minimum=0, maximum=self.num_members - 1)
        return nets.from_layers([(W[index].detach().T.clone(), b[index, 0].detach().clone())
                                 for W, b in zip(self.weights, self.biases)], activation=self.activation)

    @torch.no_grad()
    def zero_output_(self) -> MLPStack:
        """Set the last layer to zero, so every member starts as the constant 0 (returns the stack)."""
        self.weights[-1].zero_()
        self.biases[-1].zero_()
        return self


# ---------------------------------------------------------------------------
# A ring of Gaussians and mode coverage
# ---------------------------------------------------------------------------

def ring_centres(num_modes: int = 8, radius: float = 2.0, *, dtype: torch.dtype = torch.float32,
                 device="cpu") -> torch.Tensor:
    """The (num_modes, 2) centres radius (cos 2 pi k / K, sin 2 pi k / K) (Chapter 10)."""
    num_modes = check_int("num_modes", num_modes, minimum=1)
    radius = check_float("radius", radius, low=0.0, low_open=True)
    angles = 2 * math.pi * torch.arange(num_modes, dtype=torch.float64) / num_modes
    centres = radius * torch.stack([torch.cos(angles), torch.sin(angles)], dim=1)
    return centres.to(dtype=check_dtype("dtype", dtype), device=check_device("device", device))


class LabelledPoints(NamedTuple):
    X: torch.Tensor
    y: torch.Tensor


def ring_of_gaussians(shape, *, num_modes: int = 8, radius: float = 2.0, std: float = 0.05,
                      generator: torch.Generator | None = None, dtype: torch.dtype = torch.float32,
                      device="cpu") -> LabelledPoints:
    """Points of an equal mixture of Gaussians N(centre_k, std^2 I) on a circle, and their modes (Chapter 10).

    ``shape`` is the number of points or a tuple such as (members, batch); X has
    shape (*shape, 2) and y (*shape,). Drawn in float64 on the CPU from
    ``generator``, then cast and moved.
    """
    if isinstance(shape, (tuple, list)):
        shape = tuple(check_ints("shape", shape, minimum=1))
    else:
        shape = (check_int("shape", shape, minimum=1),)
    std = check_float("std", std, low=0.0, low_open=True)
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator, got {describe(generator)}")
    centres = ring_centres(num_modes, radius, dtype=torch.float64)
    y = torch.randint(num_modes, shape, generator=generator)
    X = centres[y] + std * torch.randn((*shape, 2), generator=generator, dtype=torch.float64)
    device = check_device("device", device)
    return LabelledPoints(X.to(dtype=check_dtype("dtype", dtype), device=device), y.to(device))


class Coverage(NamedTuple):
    """Modes covered, the share of high-quality samples, and such samples per mode."""

    modes: torch.Tensor          # (...,) number of modes holding at least min_fraction of the samples
    quality: torch.Tensor        # (...,) fraction of samples within 3 std of some centre
    counts: torch.Tensor         # (..., K) samples within 3 std of each centre


def mode_coverage(samples, centres, std: float, *, min_fraction: float = 0.01) -> Coverage:
    """Which modes of a mixture the samples reach (Chapter 10).

    A sample is of high quality if it lies within 3 std of its nearest centre; a
    mode is covered if at least ``min_fraction`` of all samples are such points
    near it. ``samples`` has shape (..., n, d), ``centres`` (K, d).
    """
    samples = as_tensor("samples", samples, floating=True)
    centres = as_tensor("centres", centres, ndim=2, floating=True).to(samples)
    if samples.dim() < 2 or samples.shape[-1] != centres.shape[1] or samples.shape[-2] == 0:
        raise ValueError(f"samples must have shape (..., n, {centres.shape[1]}) with n >= 1, "
                         f"got {describe(samples)}")
    std = check_float("std", std, low=0.0, low_open=True)
    min_fraction = check_float("min_fraction", min_fraction, low=0.0, high=1.0)
    distance, nearest = torch.cdist(samples, centres.expand(*samples.shape[:-2], *centres.shape)).min(-1)
    good = distance < 3 * std
    counts = (F.one_hot(nearest, len(centres)) * good[..., None]).sum(-2)  # (..., K)
    num_samples = samples.shape[-2]
    return Coverage(modes=(counts >= min_fraction * num_samples).sum(-1), quality=good.double().mean(-1),
                    counts=counts)


# ---------------------------------------------------------------------------
# Training GANs on the ring
# ---------------------------------------------------------------------------

LOSSES = ("saturating", "non_saturating", "wgan_gp", "wgan_clip")
STANDARD_GAME = ("saturating", "non_saturating")


@dataclass(frozen=True)
class RingRun:
    """GANs on the ring of Gaussians: one member per (loss, lr, seed), all trained at once (Chapter 10).

    ``losses``: "saturating" and "non_saturating" (the standard game, with a
    discriminator; Adam with betas (0.5, 0.999)), or a single Wasserstein kind,
    "wgan_gp" (Adam with betas (0, 0.9)) or "wgan_clip" (RMSProp, weights clipped
    to ``clip``). ``critic_steps`` discriminator steps per
    generator step; ``conditional`` gives both networks the mode's one-hot label.
    Generator and discriminator of seed s start from ``nets.mlp`` with seeds s
    and 10000 + s whatever the loss and learning rate.
    """

    losses: tuple[str, ...] = ("non_saturating",)
    lrs: tuple[float, ...] = (1e-3,)
    seeds: tuple[int, ...] = (0, 1, 2)
    steps: int = 1000
    batch_size: int = 128
    critic_steps: int = 1
    penalty: float = 10.0
    clip: float = 0.01
    std: float = 0.05
    num_modes: int = 8
    radius: float = 2.0
    hidden: int = 64
    noise_dim: int = 2
    conditional: bool = False
    snapshot_every: int = 100
    num_samples: int = 2000
    num_eval_points: int = 512
    device: str = "cpu"

    @property
    def members(self) -> list[tuple[str, float, int]]:
        """(loss, lr, seed) of every member, in the order of the stack."""
        return [(loss, lr, seed) for loss in self.losses for lr in self.lrs for seed in self.seeds]


class RingResult(NamedTuple):
    """Snapshots of a :class:`RingRun`: generated samples, the critic's gap and the exact W1 per member."""

    members: list[tuple[str, float, int]]  # (loss, lr, seed) of each member
    steps: list[int]                # generator steps at the snapshots
    samples: torch.Tensor           # (snapshots, members, num_samples, 2), always from the same noise
    labels: torch.Tensor            # (num_samples,) the labels the samples were conditioned on
    real: torch.Tensor              # (members, num_eval_points, 2) real points, the same at every snapshot
    critic_gap: torch.Tensor        # (snapshots, members) mean f(real) - mean f(fake) on num_eval_points each
    generator: MLPStack
    critic: MLPStack

    def select(self, loss: str, lr: float | None = None) -> list[int]:
        """Indices of the members trained with ``loss`` (and ``lr``), in seed order."""
        return [i for i, (m_loss, m_lr, _) in enumerate(self.members) if m_loss == loss and lr in (None, m_lr)]


def _check_run(config: RingRun) -> None:
    losses = check_sequence("losses", config.losses, check_choice, choices=LOSSES)
    if not (set(losses) <= set(STANDARD_GAME) or len(losses) == 1):
        raise ValueError(f"losses must be standard-game losses {list(STANDARD_GAME)} or one Wasserstein loss, "
                         f"got {list(losses)}")
    check_sequence("lrs", config.lrs, check_float, low=0.0, low_open=True)
    check_sequence("seeds", config.seeds, check_int, minimum=0)
    for name in ("steps", "batch_size", "critic_steps", "num_modes", "hidden", "noise_dim", "snapshot_every",
                 "num_samples", "num_eval_points"):
        check_int(name, getattr(config, name), minimum=1)
    for name in ("clip", "std", "radius"):
        check_float(name, getattr(config, name), low=0.0, low_open=True)
    check_float("penalty", config.penalty, low=0.0)
    check_bool("conditional", config.conditional)
    if config.num_eval_points > config.num_samples:
        raise ValueError(f"num_eval_points must not exceed num_samples, got {config.num_eval_points} > "
                         f"{config.num_samples}")


def _optimizer(config: RingRun, stack: MLPStack):
    if config.losses[0] == "wgan_clip":
        return torch.optim.RMSprop(stack.parameters(), lr=config.lrs[0])
    betas = (0.0, 0.9) if config.losses[0] == "wgan_gp" else (0.5, 0.999)
    return torch.optim.Adam(stack.parameters(), lr=config.lrs[0], betas=betas)


def penalised_critic_loss(critic, real, fake, *, weight: float = 10.0,
                          generator: torch.Generator | None = None) -> torch.Tensor:
    """WGAN-GP's critic loss mean f(fake) - mean f(real) + gradient penalty, in one pass (Chapter 10).

    The same value as ``-wasserstein_estimate(critic(real), critic(fake)) +
    gradient_penalty(critic, real, fake, ...)`` (with the same generator state),
    but the critic sees real, generated and interpolated points as one batch, so
    each layer is one matrix product instead of three. ``critic`` must treat the
    rows of its input independently.
    """
    real, fake = real.detach(), fake.detach()
    n = real.shape[-2]
    mix = torch.rand((*real.shape[:-1], 1), generator=generator, dtype=torch.float64).to(real)
    x_hat = (mix * real + (1 - mix) * fake).requires_grad_(True)
    scores = critic(torch.cat([real, fake, x_hat], dim=-2))
    (grad,) = torch.autograd.grad(scores[..., 2 * n:, :].sum(), x_hat, create_graph=True)
    gap = wasserstein_estimate(scores[..., :n, :], scores[..., n:2 * n, :])
    return -gap + weight * (grad.norm(dim=-1) - 1).pow(2).mean(-1)


def train_ring_gan(config: RingRun) -> RingResult:
    """Train one generator and one discriminator (or critic) per member on the ring (Chapter 10).

    Each discriminator step draws fresh real points and noise; at step 0 and
    after every ``snapshot_every`` generator steps the run records samples from
    fixed noise and the critic's gap mean f(real) - mean f(fake) between the first
    ``num_eval_points`` of them and as many fixed real points (kept in the result
    for an exact W1 by :func:`dlbook.divergences.w1_assignment`). The networks
    are 2 -> hidden -> hidden -> 2 and 2 -> hidden -> hidden -> 1 ReLU MLPs without
    normalisation.
    """
    if not isinstance(config, RingRun):
        raise TypeError(f"config must be a RingRun, got {describe(config)}")
    _check_run(config)
    device = check_device("device", config.device)
    members = config.members
    S, K, B, seed0 = len(members), config.num_modes, config.batch_size, config.seeds[0]
    label_width = K if config.conditional else 0
    scales = [lr / config.lrs[0] for _, lr, _ in members] if len(config.lrs) > 1 else None
    G = MLPStack((config.noise_dim + label_width, config.hidden, config.hidden, 2), [s for *_, s in members],
                 lr_scales=scales, device=device)
    D = MLPStack((2 + label_width, config.hidden, config.hidden, 1), [10_000 + s for *_, s in members],
                 lr_scales=scales, device=device)
    opt_G, opt_D = _optimizer(config, G), _optimizer(config, D)
    saturating = torch.tensor([loss == "saturating" for loss, *_ in members], device=device)
    wasserstein = config.losses[0] not in STANDARD_GAME
    rng = make_generator(seed0 * 7919 + 1)
    evaluation = make_generator(seed0 * 7919 + 2)  # the same evaluation draws at every snapshot
    fixed_noise = torch.randn(config.num_samples, config.noise_dim, generator=evaluation).to(device)
    fixed_labels = torch.arange(config.num_samples) % K
    ring = dict(num_modes=K, radius=config.radius, std=config.std, device=device)
    real_eval = ring_of_gaussians((S, config.num_eval_points), generator=make_generator(seed0 * 7919 + 3), **ring)

    def labelled(x, labels):
        return x if labels is None else torch.cat([x, F.one_hot(labels, K).to(x)], dim=-1)

    snapshots: dict[str, list] = {"steps": [], "samples": [], "gap": []}

    def snapshot(step):
        n = config.num_eval_points
        with torch.no_grad():
            labels = fixed_labels.to(device).expand(S, -1) if config.conditional else None
            samples = G(labelled(fixed_noise.expand(S, -1, -1), labels))
            gap = wasserstein_estimate(D(labelled(real_eval.X, real_eval.y if config.conditional else None)),
                                       D(labelled(samples[:, :n], None if labels is None else labels[:, :n])))
        snapshots["steps"].append(step)
        snapshots["samples"].append(samples.cpu())
        snapshots["gap"].append(gap.cpu())

    snapshot(0)
    for step in range(1, config.steps + 1):
        # One draw per generator step: real points and noise for every critic step and the generator step.
        real = ring_of_gaussians((config.critic_steps + 1, S, B), generator=rng, **ring)
        noise = torch.randn(config.critic_steps + 1, S, B, config.noise_dim, generator=rng).to(device)
        all_labels = real.y if config.conditional else None
        for k in range(config.critic_steps):
            labels = None if all_labels is None else all_labels[k]
            with torch.no_grad():
                fake = G(labelled(noise[k], labels))
            if not wasserstein:  # real and generated points through the discriminator as one batch
                logits = D(labelled(torch.cat([real.X[k], fake], dim=1),
                                    None if labels is None else torch.cat([labels, labels], dim=1)))
                loss = discriminator_loss(logits[:, :B], logits[:, B:])
            elif config.losses[0] == "wgan_gp":
                both = None if labels is None else torch.cat([labels, labels, labels], dim=1)
                loss = penalised_critic_loss(lambda x: D(labelled(x, both)), real.X[k], fake,
                                             weight=config.penalty, generator=rng)
            else:
                loss = -wasserstein_estimate(D(labelled(real.X[k], labels)), D(labelled(fake, labels)))
            opt_D.zero_grad()
            loss.sum().backward()
            D.step(opt_D)
            if config.losses[0] == "wgan_clip":
                clip_weights_(D, config.clip)
        labels = None if all_labels is None else all_labels[-1]
        scores = D(labelled(G(labelled(noise[-1], labels)), labels))
        if wasserstein:
            g_loss = generator_loss(scores, "wasserstein")
        else:
            g_loss = torch.where(saturating, generator_loss(scores, "saturating"),
                                 generator_loss(scores, "non_saturating"))
        opt_G.zero_grad()
        g_loss.sum().backward()
        G.step(opt_G)
        if step % config.snapshot_every == 0 or step == config.steps:
            snapshot(step)
    return RingResult(members=members, steps=snapshots["steps"], samples=torch.stack(snapshots["samples"]),
                      labels=fixed_labels, real=real_eval.X.cpu(), critic_gap=torch.stack(snapshots["gap"]),
                      generator=G, critic=D)


ring_gan = train.cached(train_ring_gan)


# ---------------------------------------------------------------------------
# Critics between shifted distributions
# ---------------------------------------------------------------------------

CRITICS = ("gp", "clip", "gan")
SETTINGS = ("normal", "lines")


def shifted_pair(setting: str, thetas, num_points: int, *, generator: torch.Generator | None = None,
                 device="cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """Samples (real, fake), each (S, num_points, d), from P_0 and P_theta for every theta (Chapter 10).

    "normal": N(0, 1) against N(theta, 1) on the line (d = 1); "lines": the
    parallel lines law(0, Z) against law(theta, Z) with Z ~ U[0, 1] (d = 2).
    The fake sample is the real one's noise shifted by theta along the first axis.
    """
    check_choice("setting", setting, SETTINGS)
    thetas = torch.tensor(check_sequence("thetas", thetas, check_float), dtype=torch.float64)
    num_points = check_int("num_points", num_points, minimum=1)
    S = len(thetas)
    if setting == "normal":
        real = torch.randn(S, num_points, 1, generator=generator, dtype=torch.float64)
        fake = torch.randn(S, num_points, 1, generator=generator, dtype=torch.float64) + thetas[:, None, None]
    else:
        heights = torch.rand(2, S, num_points, 1, generator=generator, dtype=torch.float64)
        real = torch.cat([torch.zeros_like(heights[0]), heights[0]], dim=-1)
        fake = torch.cat([thetas[:, None, None].expand(S, num_points, 1), heights[1]], dim=-1)
    device = check_device("device", device)
    return real.float().to(device), fake.float().to(device)


@dataclass(frozen=True)
class CriticRun:
    """Critics (or discriminators) trained between P_0 and P_theta, one per theta, all at once (Chapter 10).

    ``kind``: "gp" (Adam with betas (0, 0.9), gradient penalty), "clip" (RMSProp,
    weights clipped to ``clip``) or "gan" (the standard discriminator, Adam with
    betas (0.5, 0.999)). The networks are d -> hidden -> hidden -> 1 ReLU MLPs.
    """

    kind: str = "gp"
    setting: str = "normal"
    thetas: tuple[float, ...] = (0.5, 1.0, 1.5, 2.0, 2.5, 3.0)
    steps: int = 1000
    batch_size: int = 256
    lr: float = 1e-4
    hidden: int = 64
    penalty: float = 10.0
    clip: float = 0.01
    seed: int = 0
    num_eval: int = 20_000
    device: str = "cpu"


class CriticResult(NamedTuple):
    """A trained stack of critics and, per theta, its estimate on fresh samples.

    For critics the estimate is mean f(real) - mean f(fake); for a discriminator
    ("gan") the game's value V, which tends to 0 as the discriminator saturates.
    """

    critic: MLPStack
    estimate: torch.Tensor


def train_critic(config: CriticRun) -> CriticResult:
    """Train one critic per theta of a :class:`CriticRun` on fresh samples at every step (Chapter 10)."""
    if not isinstance(config, CriticRun):
        raise TypeError(f"config must be a CriticRun, got {describe(config)}")
    check_choice("kind", config.kind, CRITICS)
    check_choice("setting", config.setting, SETTINGS)
    for name in ("steps", "batch_size", "hidden", "num_eval"):
        check_int(name, getattr(config, name), minimum=1)
    for name in ("lr", "clip"):
        check_float(name, getattr(config, name), low=0.0, low_open=True)
    check_float("penalty", config.penalty, low=0.0)
    device = check_device("device", config.device)
    dim = 1 if config.setting == "normal" else 2
    seeds = [check_int("seed", config.seed, minimum=0) * 100 + i for i in range(len(config.thetas))]
    # Starting from the constant 0 the critic takes its sign from the data: the penalty alone is
    # symmetric in the sign of the slope and would keep a critic that starts the wrong way round.
    critic = MLPStack((dim, config.hidden, config.hidden, 1), seeds, device=device).zero_output_()
    if config.kind == "clip":
        optimizer = torch.optim.RMSprop(critic.parameters(), lr=config.lr)
        clip_weights_(critic, config.clip)
    else:
        betas = (0.0, 0.9) if config.kind == "gp" else (0.5, 0.999)
        optimizer = torch.optim.Adam(critic.parameters(), lr=config.lr, betas=betas)
    rng = make_generator(config.seed * 7919 + 5)
    for _ in range(config.steps):
        real, fake = shifted_pair(config.setting, config.thetas, config.batch_size, generator=rng, device=device)
        if config.kind == "gan":
            logits = critic(torch.cat([real, fake], dim=1))
            loss = discriminator_loss(logits[:, :config.batch_size], logits[:, config.batch_size:])
        elif config.kind == "gp":
            loss = penalised_critic_loss(critic, real, fake, weight=config.penalty, generator=rng)
        else:
            loss = -wasserstein_estimate(critic(real), critic(fake))
        optimizer.zero_grad()
        loss.sum().backward()
        optimizer.step()
        if config.kind == "clip":
            clip_weights_(critic, config.clip)
    real, fake = shifted_pair(config.setting, config.thetas, config.num_eval,
                              generator=make_generator(config.seed * 7919 + 6), device=device)
    with torch.no_grad():
        if config.kind == "gan":
            estimate = value_estimate(critic(real), critic(fake)).cpu()
        else:
            estimate = wasserstein_estimate(critic(real), critic(fake)).cpu()
    return CriticResult(critic, estimate)


critic_run = train.cached(train_critic)


def shift_gradient(critic: MLPStack, config: CriticRun, kind: str, *, num_points: int = 4096) -> torch.Tensor:
    """d/d theta of the generator's loss when the generator is the shift by theta, one per member (Chapter 10).

    The fake points are P_theta's samples (:func:`shifted_pair`) with theta a
    differentiable tensor, scored by the trained (and now fixed) critic; ``kind`` is
    a generator loss of :func:`generator_loss`.
    """
    if not isinstance(critic, MLPStack):
        raise TypeError(f"critic must be an MLPStack, got {describe(critic)}")
    if not isinstance(config, CriticRun):
        raise TypeError(f"config must be a CriticRun, got {describe(config)}")
    check_choice("kind", kind, GENERATOR_LOSSES)
    _, fake = shifted_pair(config.setting, config.thetas, num_points, generator=make_generator(config.seed + 11),
                           device=critic.weights[0].device)
    thetas = torch.tensor(config.thetas, dtype=fake.dtype, device=fake.device, requires_grad=True)
    shift = torch.zeros_like(fake)
    shift[..., 0] = 1.0
    # fake - theta e_1 is the noise; adding theta back keeps the graph from theta to the points.
    points = fake - thetas.detach()[:, None, None] * shift + thetas[:, None, None] * shift
    (grad,) = torch.autograd.grad(generator_loss(critic(points), kind).sum(), thetas)
    return grad.cpu()
