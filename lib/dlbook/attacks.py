"""Adversarial attacks and adversarial training for classifiers (Chapter 13).

An attack looks for a perturbation delta in an allowed set, the l-infinity or
l2 ball of radius ``eps`` around each input (intersected with the pixel box
[low, high] unless the box is switched off with ``low=None``), that makes the
loss large. FGSM takes one signed-gradient step; PGD takes many smaller steps,
each followed by a projection back onto the allowed set. Everything is
batched: the rows of X are attacked at once, and because the loss is a sum
over rows, the gradient of row i is the gradient of row i's own loss.
"""
from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from .runtime import generator
from .validation import as_tensor, check_choice, check_float, check_int, describe

NORMS = ("linf", "l2")


def _check_model(model) -> nn.Module:
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {describe(model)}")
    return model


def _check_inputs(model, X, y, eps):
    _check_model(model)
    X = as_tensor("X", X, ndim=2, floating=True)
    y = as_tensor("y", y, shape=(len(X),))
    if y.is_floating_point():
        raise TypeError(f"y must hold integer class indices, got {describe(y)}")
    eps = check_float("eps", eps, low=0.0)
    return X, y.long(), eps


def _check_box(low, high):
    if (low is None) != (high is None):
        raise ValueError(f"low and high must both be numbers or both be None, got {low!r} and {high!r}")
    if low is None:
        return None
    low, high = check_float("low", low), check_float("high", high)
    if low >= high:
        raise ValueError(f"low must be below high, got low={low} and high={high}")
    return low, high


def _objective(model, X, y, target):
    """Summed cross-entropy (untargeted) or summed logit difference z_target - z_y (targeted)."""
    logits = model(X)
    if target is None:
        return F.cross_entropy(logits, y, reduction="sum")
    rows = torch.arange(len(X), device=X.device)
    return (logits[rows, target] - logits[rows, y]).sum()


def _input_gradient(model, X, y, target=None) -> torch.Tensor:
    with torch.enable_grad():  # attacks are often run inside torch.no_grad()
        X = X.detach().requires_grad_(True)
        (gradient,) = torch.autograd.grad(_objective(model, X, y, target), X)
    return gradient


def _clip_to_box(X_adv, box):
    return X_adv if box is None else X_adv.clamp(*box)


def fgsm(model: nn.Module, X, y, eps: float, *, low: float | None = 0.0, high: float | None = 1.0) -> torch.Tensor:
    """The fast gradient sign method: X + eps sign(grad_x cross-entropy), clipped to the box (Chapter 13)."""
    X, y, eps = _check_inputs(model, X, y, eps)
    box = _check_box(low, high)
    return _clip_to_box(X + eps * _input_gradient(model, X, y).sign(), box).detach()


def _project(delta, eps, norm):
    if norm == "linf":
        return delta.clamp(-eps, eps)
    norms = delta.norm(dim=1, keepdim=True)
    return delta * torch.clamp(eps / norms.clamp_min(1e-12), max=1.0)


def _random_start(X, eps, norm, seed):
    """A uniform draw from the ball: a cube for l-infinity, direction times eps U^(1/d) for l2."""
    rng = generator(seed)
    if norm == "linf":
        delta = (2 * torch.rand(X.shape, generator=rng, dtype=torch.float64) - 1) * eps
    else:
        direction = torch.randn(X.shape, generator=rng, dtype=torch.float64)
        direction /= direction.norm(dim=1, keepdim=True)
        radius = eps * torch.rand(len(X), 1, generator=rng, dtype=torch.float64) ** (1 / X.shape[1])
        delta = direction * radius
    return delta.to(dtype=X.dtype, device=X.device)


def _ascent_direction(gradient, norm):
    """The steepest-ascent unit step: sign(g) in l-infinity, g / ||g||_2 in l2."""
    if norm == "linf":
        return gradient.sign()
    return gradient / gradient.norm(dim=1, keepdim=True).clamp_min(1e-12)


def pgd(model: nn.Module, X, y, eps: float, *, steps: int = 20, step_size: float | None = None,
        norm: str = "linf", random_start: bool = True, target=None, low: float | None = 0.0,
        high: float | None = 1.0, seed: int = 0, return_path: bool = False):
    """Projected gradient ascent on the loss inside the ``norm`` ball of radius ``eps`` (Chapter 13).

    Each step moves by ``step_size`` (default 2.5 eps / steps, so the iterate
    can cross the ball and still has room to settle) along the steepest-ascent
    direction of the norm, then projects delta onto the ball and x + delta onto
    the box [low, high] (``low=high=None``: no box). ``target`` (class indices)
    makes the attack targeted: it maximises z_target - z_y instead of the
    cross-entropy. ``return_path=True`` also returns the iterates, shape
    (steps + 1, N, d).
    """
    X, y, eps = _check_inputs(model, X, y, eps)
    steps = check_int("steps", steps, minimum=1)
    step_size = 2.5 * eps / steps if step_size is None else check_float("step_size", step_size, low=0.0)
    check_choice("norm", norm, NORMS)
    box = _check_box(low, high)
    if target is not None:
        target = as_tensor("target", target, shape=(len(X),)).long().to(X.device)
    delta = _random_start(X, eps, norm, check_int("seed", seed, minimum=0)) if random_start \
        else torch.zeros_like(X)
    X_adv = _clip_to_box(X + delta, box)
    path = [X_adv]
    for _ in range(steps):
        step = step_size * _ascent_direction(_input_gradient(model, X_adv, y, target), norm)
        # Project onto the ball around X, then onto the box: X lies in the box, so the
        # second projection only moves coordinates towards X and keeps delta in the ball.
        X_adv = _clip_to_box(X + _project(X_adv + step - X, eps, norm), box).detach()
        path.append(X_adv)
    return (X_adv, torch.stack(path)) if return_path else X_adv


def adversarial_training(model: nn.Module, optimizer: torch.optim.Optimizer, X, y, *, eps: float,
                         epochs: int, steps: int = 7, batch_size: int | None = None, norm: str = "linf",
                         low: float | None = None, high: float | None = None, seed: int = 0) -> list[float]:
    """Train on PGD examples found afresh at every step (Madry et al.; Chapter 13); returns the mean
    adversarial loss of each epoch.

    By Danskin's theorem the gradient of max_delta L(w, x + delta) with respect
    to the weights is the gradient of L at the maximiser, so each step attacks
    the batch with the weights held fixed and then descends on the attacked batch.
    """
    X, y, eps = _check_inputs(model, X, y, eps)
    epochs = check_int("epochs", epochs, minimum=1)
    batch_size = len(X) if batch_size is None else check_int("batch_size", batch_size, minimum=1)
    shuffler = generator(check_int("seed", seed, minimum=0))
    losses = []
    for epoch in range(epochs):
        order = torch.randperm(len(X), generator=shuffler).to(X.device)
        total = 0.0
        for index, start in enumerate(range(0, len(X), batch_size)):
            batch = order[start:start + batch_size]
            X_adv = X[batch] if eps == 0 else pgd(model, X[batch], y[batch], eps, steps=steps, norm=norm,
                                                   low=low, high=high, seed=seed + 7919 * epoch + index)
            loss = F.cross_entropy(model(X_adv), y[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item() * len(batch)
        losses.append(total / len(X))
    return losses


class NoisyDefence(nn.Module):
    """A randomised defence: log of the softmax of ``model`` averaged over ``samples`` inputs
    x + N(0, sigma^2) (Chapter 13).

    Every call draws fresh noise from the defence's own seeded generator. With
    ``samples=1`` an attacker who differentiates it sees one random draw; with
    many samples the gradient estimates that of the expected prediction, the
    expectation-over-transformation attack of Athalye et al.
    """

    def __init__(self, model: nn.Module, sigma: float, samples: int = 1, *, seed: int = 0):
        super().__init__()
        self.model = _check_model(model)
        self.sigma = check_float("sigma", sigma, low=0.0)
        self.samples = check_int("samples", samples, minimum=1)
        self.rng = generator(check_int("seed", seed, minimum=0))

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        X = as_tensor("X", X, ndim=2, floating=True)
        noise = torch.randn(self.samples, *X.shape, generator=self.rng, dtype=torch.float64).to(X)
        logits = self.model((X + self.sigma * noise).reshape(-1, X.shape[1]))      # (samples * N, classes)
        probabilities = F.softmax(logits, dim=1).reshape(self.samples, len(X), -1)
        return probabilities.mean(dim=0).log()
