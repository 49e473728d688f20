"""Regularization: weight decay, early stopping, dropout, augmentation, label smoothing, distillation (Chapter 4).

The linear least-squares pieces (ridge and gradient descent in the eigenbasis
of XᵀX) are exact formulas in float64, so the chapter can compare early
stopping and weight decay without noise; the rest are small building blocks
for the digits experiments of the chapter (label noise, shifted digits,
distillation), which keep the dtype of their inputs. Probabilities are named
for what they are: ``drop_prob`` for dropout, ``keep_prob`` for its
marginalized linear form.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F

from . import data, nets, quadratics, train
from .runtime import generator
from .validation import (
    as_tensor,
    check_bool,
    check_choice,
    check_class_indices,
    check_device,
    check_dtype,
    check_finite,
    check_float,
    check_int,
    check_same_length,
    check_same_shape,
)


def _logits(name: str, logits) -> torch.Tensor:
    """An (N, K) floating tensor of logits with K >= 2 classes."""
    logits = as_tensor(name, logits, ndim=2, floating=True)
    if logits.shape[1] < 2:
        raise ValueError(f"{name} must have at least two classes (columns), got shape {tuple(logits.shape)}")
    return logits


def _labels_for(name: str, y, logits: torch.Tensor) -> torch.Tensor:
    """Class indices, one per row of ``logits``."""
    y = as_tensor(name, y, ndim=1)
    if len(y) != len(logits):
        raise ValueError(f"{name} must have {len(logits)} entries (one per row of the logits), got {len(y)}")
    return check_class_indices(name, y, logits.shape[1])


# ---------------------------------------------------------------------------
# Weight decay: as an L2 penalty and decoupled
# ---------------------------------------------------------------------------

def l2_penalty(parameters, mu: float) -> torch.Tensor:
    """μ/2 Σ‖θ‖²: the penalty whose gradient is μθ, i.e. coupled weight decay (Chapter 4)."""
    mu = check_float("mu", mu, low=0.0)
    parameters = list(parameters)
    if not parameters or not all(isinstance(p, torch.Tensor) for p in parameters):
        raise TypeError("parameters must be a non-empty iterable of tensors")
    return 0.5 * mu * sum(p.pow(2).sum() for p in parameters)


def weight_decay_step(theta, grad, lr: float, mu: float) -> torch.Tensor:
    """One gradient step on loss + μ/2‖θ‖²: (1 − ημ)θ − η∇ℓ (Chapter 4; the source's sign is wrong)."""
    theta = as_tensor("theta", theta, floating=True)
    grad = as_tensor("grad", grad, floating=True)
    if theta.shape != grad.shape:
        raise ValueError(f"grad must have the shape of theta {tuple(theta.shape)}, got {tuple(grad.shape)}")
    lr = check_float("lr", lr, low=0.0, low_open=True)
    mu = check_float("mu", mu, low=0.0)
    return (1.0 - lr * mu) * theta - lr * grad


#: How the weight decay enters a run of :func:`decay_trajectory`.
DECAY_MODES = ("l2", "coupled", "decoupled")


def decay_trajectory(X, y, *, optimizer: str, mode: str, mu: float, lr: float, steps: int,
                     momentum: float = 0.0) -> torch.Tensor:
    """Weights of least squares 1/(2N)‖Xw − y‖² over ``steps`` steps from w = 0 (Chapter 4).

    ``mode``: "l2" adds μ/2‖w‖² to the loss; "coupled" passes ``weight_decay=μ`` to
    torch.optim.SGD/Adam (which adds μw to the gradient); "decoupled" shrinks
    w by (1 − ημ) outside the optimizer (torch.optim.AdamW for Adam). Returns
    the (steps + 1, d) trajectory in the dtype of X.
    """
    X = check_finite("X", as_tensor("X", X, ndim=2, floating=True))
    y = check_finite("y", as_tensor("y", y, ndim=1, floating=True))
    check_same_length("X", X, "y", y)
    check_choice("optimizer", optimizer, ("sgd", "adam"))
    check_choice("mode", mode, DECAY_MODES)
    mu = check_float("mu", mu, low=0.0)
    lr = check_float("lr", lr, low=0.0, low_open=True)
    steps = check_int("steps", steps, minimum=0)
    momentum = check_float("momentum", momentum, low=0.0, high=1.0, high_open=True)
    w = torch.zeros(X.shape[1], dtype=X.dtype, device=X.device, requires_grad=True)
    in_optimizer = mu if mode == "coupled" else 0.0
    if optimizer == "sgd":
        opt = torch.optim.SGD([w], lr=lr, momentum=momentum, weight_decay=in_optimizer)
    elif mode == "decoupled":
        opt = torch.optim.AdamW([w], lr=lr, weight_decay=mu)
    else:
        opt = torch.optim.Adam([w], lr=lr, weight_decay=in_optimizer)
    path = [w.detach().clone()]
    for _ in range(steps):
        loss = 0.5 * (X @ w - y).pow(2).mean()
        if mode == "l2":
            loss = loss + l2_penalty([w], mu)
        opt.zero_grad()
        loss.backward()
        if mode == "decoupled" and optimizer == "sgd":
            with torch.no_grad():
                w.mul_(1.0 - lr * mu)  # SGDW: shrink first, then the plain gradient step
        opt.step()
        path.append(w.detach().clone())
    return torch.stack(path)


# ---------------------------------------------------------------------------
# Early stopping versus ridge on linear least squares
# ---------------------------------------------------------------------------

def _check_eigenvalues(eigenvalues) -> torch.Tensor:
    eigenvalues = as_tensor("eigenvalues", eigenvalues, ndim=1).double()
    if torch.any(eigenvalues < 0):
        raise ValueError("eigenvalues must be >= 0 (they are eigenvalues of XᵀX/N)")
    return eigenvalues


def ridge_shrinkage(eigenvalues, mu: float) -> torch.Tensor:
    """Factor λ/(λ + μ) by which ridge shrinks the least-squares solution along each eigenvector (Chapter 4)."""
    eigenvalues = _check_eigenvalues(eigenvalues)
    mu = check_float("mu", mu, low=0.0, low_open=True)
    return eigenvalues / (eigenvalues + mu)


def early_stopping_shrinkage(eigenvalues, lr: float, steps: int) -> torch.Tensor:
    """Factor 1 − (1 − ηλ)^t reached by t gradient steps from 0 along each eigenvector (Chapter 4)."""
    eigenvalues = _check_eigenvalues(eigenvalues)
    lr = check_float("lr", lr, low=0.0, low_open=True)
    steps = check_int("steps", steps, minimum=0)
    if torch.any(lr * eigenvalues >= 2):
        raise ValueError(f"lr must be below 2/λ_max = {2 / eigenvalues.max().item():.4g} for gradient "
                         f"descent to converge, got {lr}")
    return 1.0 - (1.0 - lr * eigenvalues) ** steps


def equivalent_steps(lr: float, mu: float) -> float:
    """t ≈ 1/(ημ): the number of steps at which early stopping acts like weight decay μ (Chapter 4)."""
    lr = check_float("lr", lr, low=0.0, low_open=True)
    mu = check_float("mu", mu, low=0.0, low_open=True)
    return 1.0 / (lr * mu)


def ridge_solution(X, y, mu: float) -> torch.Tensor:
    """argmin 1/(2N)‖Xw − y‖² + μ/2‖w‖², i.e. (XᵀX/N + μI)⁻¹ Xᵀy/N, in float64 (Chapter 4)."""
    X = as_tensor("X", X, ndim=2, floating=True).double()
    y = as_tensor("y", y, ndim=1, floating=True).double()
    check_same_length("X", X, "y", y)
    mu = check_float("mu", mu, low=0.0)
    gram = X.T @ X / len(X)
    eye = torch.eye(X.shape[1], dtype=torch.float64, device=X.device)
    return torch.linalg.solve(gram + mu * eye, X.T @ y / len(X))


def gradient_descent_path(X, y, lr: float, steps: int) -> torch.Tensor:
    """Iterates of gradient descent on 1/(2N)‖Xw − y‖² from w = 0, shape (steps + 1, d), float64 (Chapter 4)."""
    X = as_tensor("X", X, ndim=2, floating=True).double()
    y = as_tensor("y", y, ndim=1, floating=True).double()
    check_same_length("X", X, "y", y)
    lr = check_float("lr", lr, low=0.0, low_open=True)
    gram, moment = X.T @ X / len(X), X.T @ y / len(X)
    return quadratics.gradient_descent(gram, torch.zeros_like(moment), lr, steps, b=moment).iterates


def early_stopped_solution(X, y, lr: float, steps: int) -> torch.Tensor:
    """Gradient descent on 1/(2N)‖Xw − y‖² after ``steps`` steps from 0, in closed form (Chapter 4).

    In the eigenbasis of XᵀX/N the iterate is the least-squares solution shrunk by
    1 − (1 − ηλ)^t, so any t costs one eigendecomposition; X must have full column rank.
    """
    X = as_tensor("X", X, ndim=2, floating=True).double()
    y = as_tensor("y", y, ndim=1, floating=True).double()
    check_same_length("X", X, "y", y)
    eigenvalues, Q = torch.linalg.eigh(X.T @ X / len(X))
    if eigenvalues.min() <= 1e-12 * eigenvalues.max():
        raise ValueError("X must have full column rank (XᵀX is singular)")
    least_squares = Q.T @ (X.T @ y / len(X)) / eigenvalues   # OLS in the eigenbasis
    return Q @ (early_stopping_shrinkage(eigenvalues, lr, steps) * least_squares)


def ill_conditioned_regression(num_train: int = 40, dim: int = 30, *, noise: float = 0.3,
                               num_val: int = 1000, seed: int = 0, device="cpu"):
    """Linear data y = Xw* + noise whose feature scales span two decades, float64 (Chapter 4).

    Returns a dlbook.data.Split (its "test" half is the validation set); the small eigenvalues of XᵀX/N make the
    least-squares fit noisy, so both ridge and early stopping help.
    """
    from .data import Split

    num_train = check_int("num_train", num_train, minimum=1)
    dim = check_int("dim", dim, minimum=1)
    noise = check_float("noise", noise, low=0.0)
    num_val = check_int("num_val", num_val, minimum=1)
    seed = check_int("seed", seed, minimum=0)
    device = check_device("device", device)
    rng = generator(seed)
    scales = torch.logspace(0, -2, dim, dtype=torch.float64)
    X_train = torch.randn(num_train, dim, generator=rng, dtype=torch.float64) * scales
    X_val = torch.randn(num_val, dim, generator=rng, dtype=torch.float64) * scales
    w_star = torch.randn(dim, generator=rng, dtype=torch.float64)
    y_train = X_train @ w_star + noise * torch.randn(num_train, generator=rng, dtype=torch.float64)
    y_val = X_val @ w_star + noise * torch.randn(num_val, generator=rng, dtype=torch.float64)
    return Split(*(t.to(device) for t in (X_train, y_train, X_val, y_val)))


class EarlyStop(NamedTuple):
    """Where early stopping keeps the weights and where it stops training, epochs counted from 0 (Chapter 4)."""

    best: int
    stopped: int


def best_epoch(val_losses, patience: int) -> EarlyStop:
    """Early stopping with patience: the epoch of the best validation loss and the epoch training stops (Chapter 4).

    Training stops after ``patience`` epochs without a strict improvement, or at the last epoch.
    """
    losses = as_tensor("val_losses", val_losses, ndim=1).double()
    if len(losses) == 0:
        raise ValueError("val_losses must not be empty")
    patience = check_int("patience", patience, minimum=1)
    best, waited = 0, 0
    for epoch in range(1, len(losses)):
        if losses[epoch] < losses[best]:
            best, waited = epoch, 0
        else:
            waited += 1
            if waited == patience:
                return EarlyStop(best, epoch)
    return EarlyStop(best, len(losses) - 1)


# ---------------------------------------------------------------------------
# Dropout
# ---------------------------------------------------------------------------

def _inverted_dropout(x: torch.Tensor, p: float, rng: torch.Generator) -> torch.Tensor:
    """Zero each entry with probability p and scale the survivors by 1/(1 − p); masks drawn on the CPU."""
    if p == 0.0:
        return x
    if p == 1.0:
        return torch.zeros_like(x)
    keep = torch.rand(x.shape, generator=rng).to(x.device) >= p
    return torch.where(keep, x / (1.0 - p), torch.zeros_like(x))


def dropout(x, drop_prob: float, *, training: bool = True, seed: int = 0) -> torch.Tensor:
    """Inverted dropout: zero each entry with probability ``drop_prob``, scale survivors by 1/(1 − p) (Chapter 4).

    In evaluation mode (training=False) it is the identity, as nn.Dropout. The mask depends only on ``seed``.
    """
    x = as_tensor("x", x, floating=True)
    p = check_float("drop_prob", drop_prob, low=0.0, high=1.0)
    training = check_bool("training", training)
    seed = check_int("seed", seed, minimum=0)
    return _inverted_dropout(x, p, generator(seed)) if training else x


class Dropout(torch.nn.Module):
    """nn.Dropout with its own seeded generator: a new mask at every call, the same sequence of
    masks for the same seed, and the global random stream left alone (Chapter 4)."""

    def __init__(self, drop_prob: float, *, seed: int = 0):
        super().__init__()
        self.drop_prob = check_float("drop_prob", drop_prob, low=0.0, high=1.0)
        self.generator = generator(check_int("seed", seed, minimum=0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = as_tensor("x", x, floating=True)
        return _inverted_dropout(x, self.drop_prob, self.generator) if self.training else x


def dropout_marginal_loss(X, y, w, keep_prob: float, *, num_masks: int = 0, seed: int = 0) -> float:
    """E_R‖y − (R ⊙ X)w‖² over masks R with Bernoulli(keep_prob) entries on the inputs (Chapter 4).

    num_masks = 0 gives the closed form ‖y − qXw‖² + q(1 − q) wᵀ diag(XᵀX) w with q = keep_prob;
    num_masks > 0 a Monte Carlo average over that many masks. No rescaling (the classical form).
    """
    X = as_tensor("X", X, ndim=2, floating=True).double()
    y = as_tensor("y", y, ndim=1, floating=True).double()
    w = as_tensor("w", w, ndim=1, floating=True).double()
    check_same_length("X", X, "y", y)
    if len(w) != X.shape[1]:
        raise ValueError(f"w must have {X.shape[1]} entries (the columns of X), got {len(w)}")
    q = check_float("keep_prob", keep_prob, low=0.0, high=1.0)
    num_masks = check_int("num_masks", num_masks, minimum=0)
    seed = check_int("seed", seed, minimum=0)
    if num_masks == 0:
        residual = y - q * (X @ w)
        return (residual @ residual + q * (1 - q) * (w.pow(2) * X.pow(2).sum(0)).sum()).item()
    masks = (torch.rand(num_masks, *X.shape, generator=generator(seed), dtype=torch.float64) < q)
    masks = masks.to(X.device)
    predictions = (masks * X) @ w            # (num_masks, N)
    return (y - predictions).pow(2).sum(1).mean().item()


# ---------------------------------------------------------------------------
# Label noise, smoothing and distillation
# ---------------------------------------------------------------------------

def flip_labels(y, fraction: float, num_classes: int, *, seed: int = 0) -> torch.Tensor:
    """Replace round(fraction·N) labels, chosen at random, by a different class drawn uniformly (Chapter 4).

    Exactly that many labels change (a fraction, not a per-label probability).
    """
    num_classes = check_int("num_classes", num_classes, minimum=2)
    y = check_class_indices("y", y, num_classes)
    fraction = check_float("fraction", fraction, low=0.0, high=1.0)
    seed = check_int("seed", seed, minimum=0)
    rng = generator(seed)
    num_flipped = round(fraction * len(y))
    chosen = torch.randperm(len(y), generator=rng)[:num_flipped].to(y.device)
    # A shift in 1..K-1 modulo K always lands on another class, uniformly.
    shift = torch.randint(1, num_classes, (num_flipped,), generator=rng).to(y.device)
    noisy = y.clone()
    noisy[chosen] = (y[chosen] + shift) % num_classes
    return noisy


def smoothed_targets(y, num_classes: int, eps: float, *, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Targets (1 − ε) e_y + ε/K · 1 as an (N, K) tensor (Chapter 4)."""
    num_classes = check_int("num_classes", num_classes, minimum=2)
    y = check_class_indices("y", y, num_classes)
    eps = check_float("eps", eps, low=0.0, high=1.0)
    dtype = check_dtype("dtype", dtype)
    return (1 - eps) * F.one_hot(y, num_classes).to(dtype) + eps / num_classes


def smoothed_cross_entropy(logits, y, eps: float) -> torch.Tensor:
    """Mean cross-entropy against label-smoothed targets; equals F.cross_entropy(label_smoothing=ε) (Chapter 4)."""
    logits = _logits("logits", logits)
    y = _labels_for("y", y, logits)
    targets = smoothed_targets(y, logits.shape[1], eps, dtype=logits.dtype)
    return -(targets * F.log_softmax(logits, dim=1)).sum(1).mean()


class SmoothedOptimum(NamedTuple):
    """The best free logits under label smoothing (Chapter 4): the logit gap between the true class
    and every other, and the minimal loss (the entropy of the smoothed target)."""

    gap: float
    loss: float


def optimal_smoothed_logits(num_classes: int, eps: float) -> SmoothedOptimum:
    """Logit gap log((1 − ε + ε/K)/(ε/K)) and minimal loss of the best logits under smoothing ε (Chapter 4)."""
    num_classes = check_int("num_classes", num_classes, minimum=2)
    eps = check_float("eps", eps, low=0.0, high=1.0, low_open=True)
    p_true = 1 - eps + eps / num_classes
    p_other = eps / num_classes
    entropy = -p_true * math.log(p_true) - (num_classes - 1) * p_other * math.log(p_other)
    return SmoothedOptimum(math.log(p_true / p_other), entropy)


def soft_cross_entropy(student_logits, teacher_logits, temperature: float) -> torch.Tensor:
    """Mean of −Σ_y p_y log q_y with p = softmax(F/T), q = softmax(G/T) (Chapter 4).

    Its gradient with respect to a student logit G is (q − p)/(T N).
    """
    student_logits = _logits("student_logits", student_logits)
    teacher_logits = _logits("teacher_logits", teacher_logits)
    check_same_shape("student_logits", student_logits, "teacher_logits", teacher_logits)
    T = check_float("temperature", temperature, low=0.0, low_open=True)
    p = F.softmax(teacher_logits / T, dim=1)
    return -(p * F.log_softmax(student_logits / T, dim=1)).sum(1).mean()


def distillation_loss(student_logits, teacher_logits, y, temperature: float, alpha: float) -> torch.Tensor:
    """α T² · soft cross-entropy at temperature T + (1 − α) · cross-entropy with the labels (Chapter 4).

    The T² keeps the soft term's gradient on the scale of the hard one as T grows.
    Its argument order (outputs, labels, teacher logits) is the one train.fit uses
    with data (X, y, teacher_logits), after fixing T and α.
    """
    alpha = check_float("alpha", alpha, low=0.0, high=1.0)
    soft = soft_cross_entropy(student_logits, teacher_logits, temperature)
    y = _labels_for("y", y, student_logits)
    hard = F.cross_entropy(student_logits, y)
    return alpha * temperature ** 2 * soft + (1 - alpha) * hard


# ---------------------------------------------------------------------------
# Data augmentation: shifted digits
# ---------------------------------------------------------------------------

def shift_images(X, dx: int, dy: int, *, side: int = 8) -> torch.Tensor:
    """Shift flattened side×side images by (dx, dy) pixels, filling with zeros (no wrap-around) (Chapter 4)."""
    X = as_tensor("X", X, ndim=2)
    side = check_int("side", side, minimum=1)
    if X.shape[1] != side * side:
        raise ValueError(f"X must have side² = {side * side} columns, got {X.shape[1]}")
    dx = check_int("dx", dx, minimum=-side, maximum=side)
    dy = check_int("dy", dy, minimum=-side, maximum=side)
    images = X.reshape(-1, side, side)                       # (N, rows, cols)
    padded = F.pad(images, (side, side, side, side))         # zeros around each image
    top, left = side - dy, side - dx
    return padded[:, top:top + side, left:left + side].reshape(len(X), side * side)


def augment_with_shifts(X, y, max_shift: int = 1, *, side: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    """The data set (X, y) ⋃_τ {(τ(x_i), y_i)} over all shifts |dx|, |dy| ≤ max_shift (Chapter 4)."""
    X = as_tensor("X", X, ndim=2)
    y = as_tensor("y", y, ndim=1)
    check_same_length("X", X, "y", y)
    side = check_int("side", side, minimum=1)
    max_shift = check_int("max_shift", max_shift, minimum=0, maximum=side - 1)
    offsets = range(-max_shift, max_shift + 1)
    shifted = [shift_images(X, dx, dy, side=side) for dx in offsets for dy in offsets]
    return torch.cat(shifted), y.repeat(len(shifted))


# ---------------------------------------------------------------------------
# The label-noise experiment
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class NoiseRun:
    """One run of the label-noise experiment on the digits (Chapter 4).

    A ReLU MLP with layer widths ``widths`` (``nets.mlp``, dropout after each hidden
    ReLU, its masks drawn from the run's seed) is trained with AdamW (decoupled weight decay) on the first ``num_train``
    training digits, a fraction ``flip_fraction`` of whose labels is replaced by a
    wrong class; the test digits keep their labels.
    """

    flip_fraction: float
    weight_decay: float = 0.0
    dropout: float = 0.0
    num_train: int = 400
    widths: tuple[int, ...] = (64, 128, 128, 10)
    lr: float = 3e-3
    epochs: int = 50
    batch_size: int = 100
    seed: int = 0
    device: str = "cpu"

    def __post_init__(self):
        check_float("flip_fraction", self.flip_fraction, low=0.0, high=1.0)
        check_float("weight_decay", self.weight_decay, low=0.0)
        check_float("dropout", self.dropout, low=0.0, high=1.0, high_open=True)
        check_int("num_train", self.num_train, minimum=10)
        if not isinstance(self.widths, tuple):
            raise TypeError(f"widths must be a tuple (it is part of a hashable config), got {self.widths!r}")
        check_float("lr", self.lr, low=0.0, low_open=True)
        check_int("epochs", self.epochs, minimum=1)
        check_int("batch_size", self.batch_size, minimum=1)
        check_int("seed", self.seed, minimum=0)
        check_device("device", self.device)


@train.cached
def label_noise_run(config: NoiseRun) -> train.History:
    """Per-epoch curves of one label-noise run (Chapter 4): ``train_loss``, ``train_acc`` (on the
    noisy labels), ``val_loss`` and ``val_acc`` (on the clean test digits)."""
    digits = data.load_digits(seed=0, device=config.device)
    num_train = check_int("num_train", config.num_train, maximum=len(digits.X_train))
    X = digits.X_train[:num_train]
    y = flip_labels(digits.y_train[:num_train], config.flip_fraction, 10, seed=config.seed)
    model = nets.mlp(config.widths, dropout=config.dropout, seed=config.seed, device=config.device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    return train.fit(model, F.cross_entropy, optimizer, (X, y), epochs=config.epochs,
                     batch_size=config.batch_size, val_data=(digits.X_test, digits.y_test),
                     metrics={"acc": train.accuracy}, seed=config.seed, progress=False)
