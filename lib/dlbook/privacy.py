"""Privacy basics: randomized response and clipped noisy gradients (Chapter 15).

Randomized response reports the true bit with probability p = e^ε/(1 + e^ε) and its
negation otherwise, which is ε-differentially private for each respondent. The share of
"yes" reports has mean λ = pπ + (1 - p)(1 - π), so π̂ = (λ̂ - (1 - p))/(2p - 1) is unbiased,
with variance λ(1 - λ)/(n (2p - 1)²). Clipped noisy gradients (the step of DP-SGD) bound
each example's influence: per-example gradients are clipped to norm C, summed, and
Gaussian noise of standard deviation σC is added before averaging. No privacy accounting
(ε, δ for the whole run) is done here. Functions keep the dtype of their inputs.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from .runtime import generator
from .validation import as_tensor, check_float, check_int, check_same_length, describe


def truth_probability(epsilon: float) -> float:
    """p = e^ε / (1 + e^ε), the probability of reporting the true bit (Chapter 15)."""
    epsilon = check_float("epsilon", epsilon, low=0.0)
    return 1.0 / (1.0 + math.exp(-epsilon))


def _bits(name: str, bits) -> torch.Tensor:
    bits = as_tensor(name, bits)
    if bits.dtype != torch.bool:
        if bits.is_floating_point() or not torch.all((bits == 0) | (bits == 1)):
            raise TypeError(f"{name} must hold booleans or 0/1 integers, got {describe(bits)}")
        bits = bits.bool()
    if bits.numel() == 0:
        raise ValueError(f"{name} must not be empty")
    return bits


def randomized_response(answers, epsilon: float, *, seed: int = 0) -> torch.Tensor:
    """Each true bit is reported with probability e^ε/(1 + e^ε), flipped otherwise (Chapter 15).

    ``answers`` is a boolean (or 0/1) tensor of any shape; the result is boolean.
    """
    answers = _bits("answers", answers)
    p = truth_probability(epsilon)
    keep = torch.rand(answers.shape, generator=generator(seed), dtype=torch.float64) < p
    return answers == keep.to(answers.device)  # keep: the answer itself; otherwise its negation


def estimate_proportion(reports, epsilon: float) -> torch.Tensor:
    """Unbiased estimate π̂ = (λ̂ - (1 - p)) / (2p - 1) of the true share of 1s along the last dimension
    (Chapter 15)."""
    reports = _bits("reports", reports)
    p = truth_probability(epsilon)
    if p == 0.5:
        raise ValueError("epsilon must be > 0: at epsilon = 0 the reports carry no information")
    share = reports.to(torch.float64).mean(dim=-1)
    return (share - (1 - p)) / (2 * p - 1)


def estimate_variance(proportion: float, epsilon: float, num_respondents: int) -> float:
    """Var π̂ = λ(1 - λ) / (n (2p - 1)²) with λ = pπ + (1 - p)(1 - π) (Chapter 15).

    This is for respondents drawn at random from a population with share π: each report is
    then an independent coin with P(1) = λ. For a fixed set of answers only the flips vary,
    and the variance is the smaller p(1 - p) / (n (2p - 1)²).
    """
    proportion = check_float("proportion", proportion, low=0.0, high=1.0)
    epsilon = check_float("epsilon", epsilon, low=0.0, low_open=True)
    num_respondents = check_int("num_respondents", num_respondents, minimum=1)
    p = truth_probability(epsilon)
    share = p * proportion + (1 - p) * (1 - proportion)
    return share * (1 - share) / (num_respondents * (2 * p - 1) ** 2)


def _model_data(model, X, y):
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {describe(model)}")
    X = as_tensor("X", X, floating=True)
    y = as_tensor("y", y)
    if X.dim() < 2:
        raise ValueError(f"X must have a batch dimension and features, got {describe(X)}")
    check_same_length("X", X, "y", y)
    return X, y


def per_example_gradients(model: nn.Module, X, y, loss_fn=nn.functional.cross_entropy) -> dict[str, torch.Tensor]:
    """Gradient of loss_fn on each example separately, by torch.func.vmap over torch.func.grad (Chapter 15).

    Returns {parameter name: tensor of shape (n, *parameter shape)}.
    """
    from torch.func import functional_call, grad, vmap

    X, y = _model_data(model, X, y)
    params = {name: p.detach() for name, p in model.named_parameters()}

    def loss_one(p, x, target):
        return loss_fn(functional_call(model, p, (x.unsqueeze(0),)), target.unsqueeze(0))

    return vmap(grad(loss_one), in_dims=(None, 0, 0))(params, X, y)


def per_example_gradients_loop(model: nn.Module, X, y, loss_fn=nn.functional.cross_entropy) -> dict[str, torch.Tensor]:
    """The readable reference of :func:`per_example_gradients`: one backward pass per example (Chapter 15)."""
    X, y = _model_data(model, X, y)
    names, params = zip(*model.named_parameters())
    rows = [torch.autograd.grad(loss_fn(model(X[i:i + 1]), y[i:i + 1]), params) for i in range(len(X))]
    return {name: torch.stack([row[j] for row in rows]) for j, name in enumerate(names)}


def _per_example(per_example) -> dict[str, torch.Tensor]:
    if not isinstance(per_example, dict) or not per_example:
        raise TypeError(f"per_example must be a dict of per-example gradients, got {describe(per_example)}")
    grads = {name: as_tensor(f"per_example[{name!r}]", g, floating=True) for name, g in per_example.items()}
    sizes = {len(g) for g in grads.values()}
    if len(sizes) != 1:
        raise ValueError(f"per_example gradients must share their first (example) dimension, got sizes {sizes}")
    return grads


def per_example_norms(per_example) -> torch.Tensor:
    """The Euclidean norm of each example's gradient over all parameters together, shape (n,) (Chapter 15)."""
    grads = _per_example(per_example)
    return torch.sqrt(sum(g.reshape(len(g), -1).pow(2).sum(1) for g in grads.values()))


def clip_per_example(per_example, max_norm: float) -> dict[str, torch.Tensor]:
    """Scale each example's gradient by min(1, C / ‖g_i‖) so that every norm is at most C (Chapter 15)."""
    grads = _per_example(per_example)
    max_norm = check_float("max_norm", max_norm, low=0.0, low_open=True)
    norms = per_example_norms(grads)
    # torch.where, not min(1, C / norm): a scalar divided by a tensor is computed as C * (1 / norm),
    # which is not exactly 1 when norm == C; gradients within the bound must come back unchanged.
    factors = torch.where(norms > max_norm, max_norm / norms, torch.ones_like(norms))
    return {name: g * factors.view(-1, *([1] * (g.dim() - 1))) for name, g in grads.items()}


def noisy_clipped_gradient(per_example, max_norm: float, noise_multiplier: float, *,
                           seed: int = 0) -> dict[str, torch.Tensor]:
    """(Σ_i clip(g_i, C) + N(0, σ²C² I)) / n, the DP-SGD gradient estimate (Chapter 15)."""
    clipped = clip_per_example(per_example, max_norm)
    noise_multiplier = check_float("noise_multiplier", noise_multiplier, low=0.0)
    rng = generator(check_int("seed", seed, minimum=0))
    result = {}
    for name, g in clipped.items():
        noise = torch.randn(g.shape[1:], generator=rng, dtype=torch.float64).to(device=g.device, dtype=g.dtype)
        result[name] = (g.sum(0) + noise_multiplier * max_norm * noise) / len(g)
    return result


def private_sgd_step(model: nn.Module, X, y, *, lr: float, max_norm: float, noise_multiplier: float,
                     seed: int = 0, loss_fn=nn.functional.cross_entropy) -> nn.Module:
    """One SGD step of ``model`` (in place) with the clipped noisy gradient of the batch (X, y) (Chapter 15)."""
    lr = check_float("lr", lr, low=0.0)
    gradient = noisy_clipped_gradient(per_example_gradients(model, X, y, loss_fn), max_norm, noise_multiplier,
                                      seed=seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.sub_(lr * gradient[name])
    return model


def private_sgd(model: nn.Module, X, y, *, epochs: int, batch_size: int, lr: float, max_norm: float,
                noise_multiplier: float, seed: int = 0, loss_fn=nn.functional.cross_entropy) -> nn.Module:
    """Train ``model`` in place with clipped noisy SGD steps; returns it (Chapter 15).

    Mini-batches are drawn as ``train.fit`` draws them (a seeded permutation per epoch), so
    with no noise and a bound no gradient reaches this is ``train.fit`` with plain SGD.
    Each step's noise has its own seed. No privacy budget is computed.
    """
    X, y = _model_data(model, X, y)
    epochs = check_int("epochs", epochs, minimum=1)
    batch_size = check_int("batch_size", batch_size, minimum=1)
    shuffler = generator(check_int("seed", seed, minimum=0))
    step = 0
    for _ in range(epochs):
        order = torch.randperm(len(X), generator=shuffler).to(X.device)
        for start in range(0, len(X), batch_size):
            rows = order[start:start + batch_size]
            private_sgd_step(model, X[rows], y[rows], lr=lr, max_norm=max_norm, noise_multiplier=noise_multiplier,
                             seed=seed * 1_000_003 + step, loss_fn=loss_fn)
            step += 1
    return model
