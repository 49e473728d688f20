"""Hopfield networks: Hebbian storage, energy descent, recall, spurious states and capacity (Chapter 1).

Conventions: patterns are ±1 float tensors of shape (num_patterns, n); states
are batched (batch, n); sign(0) = +1. Random choices are drawn on the CPU from
``runtime.generator(seed)``, so a seed gives the same run on every device.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch

from .data import random_sign_patterns
from .runtime import generator
from .validation import (
    as_tensor,
    check_device,
    check_finite,
    check_float,
    check_int,
    check_labels_pm1,
    check_sequence,
)


class HopfieldRun(NamedTuple):
    """Outcome of run_async: final states, optional snapshots and energies, and convergence."""

    states: torch.Tensor
    trajectory: torch.Tensor | None
    energies: torch.Tensor | None
    sweeps_done: int
    converged: torch.Tensor


def sign_pm1(x: torch.Tensor) -> torch.Tensor:
    """Elementwise sign with sign(0) = +1, so states stay in {-1, +1} (Chapter 1)."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a tensor, got {type(x).__name__}")
    return torch.where(x >= 0, 1.0, -1.0).to(x.dtype if x.is_floating_point() else torch.float32)


def _check_pm1(name: str, value, *, batched: bool = False) -> torch.Tensor:
    """A ±1 float tensor of shape (rows, n); a single (n,) row is accepted when batched."""
    tensor = as_tensor(name, value)
    if batched and tensor.dim() == 1:
        tensor = tensor[None]
    if tensor.dim() != 2:
        expected = "(batch, n) or (n,)" if batched else "(num_patterns, n)"
        raise ValueError(f"{name} must have shape {expected}, got shape {tuple(tensor.shape)}")
    if tensor.numel() == 0:
        raise ValueError(f"{name} must not be empty, got shape {tuple(tensor.shape)}")
    check_labels_pm1(name, tensor)
    return tensor if tensor.is_floating_point() else tensor.to(torch.float32)


def _check_weights(W) -> torch.Tensor:
    W = as_tensor("W", W, ndim=2)
    if W.shape[0] != W.shape[1]:
        raise ValueError(f"W must be square (n, n), got shape {tuple(W.shape)}")
    W = W if W.is_floating_point() else W.to(torch.float32)
    return check_finite("W", W)


def _check_states_for(W: torch.Tensor, states, name: str = "states") -> tuple[torch.Tensor, bool]:
    """Batched ±1 states matching W; also says whether a single (n,) state was given."""
    states = as_tensor(name, states)
    single = states.dim() == 1
    states = _check_pm1(name, states, batched=True)
    if states.shape[1] != W.shape[0]:
        raise ValueError(f"{name} must have {W.shape[0]} columns to match W, got {states.shape[1]}")
    return states.to(dtype=W.dtype, device=W.device), single


def _check_bias(W: torch.Tensor, bias) -> torch.Tensor:
    if bias is None:
        return torch.zeros(W.shape[0], dtype=W.dtype, device=W.device)
    bias = as_tensor("bias", bias, ndim=1)
    if bias.shape[0] != W.shape[0]:
        raise ValueError(f"bias must have {W.shape[0]} entries to match W, got {bias.shape[0]}")
    return check_finite("bias", bias.to(dtype=W.dtype, device=W.device))


def hebbian_weights(patterns) -> torch.Tensor:
    """Hebb's outer-product rule W = patterns^T patterns / n with zero diagonal (Chapter 1)."""
    patterns = _check_pm1("patterns", patterns)
    n = patterns.shape[1]
    W = patterns.T @ patterns / n
    # No self-coupling: a neuron must not reinforce its own current state.
    W.fill_diagonal_(0)
    return W


def energy(W, states, bias=None) -> torch.Tensor:
    """Hopfield energy H = -1/2 x^T W x + b.x of each state, shape (batch,) (Chapter 1)."""
    W = _check_weights(W)
    states, single = _check_states_for(W, states)
    bias = _check_bias(W, bias)
    values = -0.5 * ((states @ W) * states).sum(dim=1) + states @ bias
    return values[0] if single else values


def run_async(W, states, *, sweeps: int = 10, seed: int = 0, record_every: int | None = None,
              bias=None) -> HopfieldRun:
    """Asynchronous dynamics: each sweep updates every neuron once, in a random order (Chapter 1).

    x_i <- sign(sum_j W_ij x_j - b_i), vectorised over the batch; for symmetric W with zero
    diagonal the energy never increases.
    Stops early after a sweep that changes no state. Snapshots every ``record_every``
    single-neuron updates (the initial state included) when record_every is given.
    """
    W = _check_weights(W)
    states, _ = _check_states_for(W, states)
    sweeps = check_int("sweeps", sweeps, minimum=0)
    seed = check_int("seed", seed, minimum=0)
    if record_every is not None:
        record_every = check_int("record_every", record_every, minimum=1)
    bias = _check_bias(W, bias)

    n = W.shape[0]
    rng = generator(seed)
    # Keep the states transposed, (n, batch), so that one neuron's update
    # reads row i of W and writes row i of the states, both contiguous.
    # A fresh (n, batch) buffer: .contiguous() alone may return a view of the
    # caller's tensor (batch 1), which the in-place updates would overwrite.
    current = states.T.clone(memory_format=torch.contiguous_format)   # (n, batch)
    current_T = current.T                                 # a view: (batch, n)
    W_rows, state_rows = W.contiguous().unbind(0), current.unbind(0)
    # 0.0 - b is +0.0 (never -0.0) where b = 0; adding it to the field turns a
    # -0.0 field into +0.0, so copysign below implements sign(0) = +1 exactly.
    # addmv + copysign is two kernels per update: twice as fast as where().
    offsets = (0.0 - bias).unbind(0)
    one = torch.ones((), dtype=W.dtype, device=W.device)
    snapshots = [current_T.clone()] if record_every else None
    converged = torch.zeros(current.shape[1], dtype=torch.bool, device=W.device)
    sweeps_done, num_updates = 0, 0
    for _ in range(sweeps):
        before = current.clone()
        for i in torch.randperm(n, generator=rng).tolist():
            field = torch.addmv(offsets[i], current_T, W_rows[i])   # (batch,): all rows at once
            torch.copysign(one, field, out=state_rows[i])
            num_updates += 1
            if record_every and num_updates % record_every == 0:
                snapshots.append(current_T.clone())
        sweeps_done += 1
        converged = torch.all(current == before, dim=0)
        if bool(converged.all()):
            break
    final = current.T.contiguous()
    if record_every is None:
        return HopfieldRun(final, None, None, sweeps_done, converged)
    trajectory = torch.stack(snapshots)                   # (T, batch, n)
    energies = energy(W, trajectory.reshape(-1, n), bias).reshape(trajectory.shape[:2])
    return HopfieldRun(final, trajectory, energies, sweeps_done, converged)


def run_sync(W, states, *, steps: int = 20, bias=None) -> torch.Tensor:
    """Synchronous dynamics (all neurons at once), which can fall into 2-cycles (Chapter 1).

    Returns the states after 0..steps updates, shape (steps + 1, batch, n).
    """
    W = _check_weights(W)
    states, _ = _check_states_for(W, states)
    steps = check_int("steps", steps, minimum=0)
    bias = _check_bias(W, bias)
    history = [states]
    for _ in range(steps):
        history.append(sign_pm1(history[-1] @ W.T - bias))
    return torch.stack(history)


def overlap(states, patterns) -> torch.Tensor:
    """Overlap m = x . pattern / n of each state with its matching pattern row, shape (batch,) (Chapter 1).

    patterns may also be a single (n,) pattern compared with every state.
    """
    states = as_tensor("states", states)
    patterns = as_tensor("patterns", patterns)
    if states.dim() not in (1, 2):
        raise ValueError(f"states must have shape (batch, n) or (n,), got {tuple(states.shape)}")
    if patterns.dim() not in (1, 2):
        raise ValueError(f"patterns must have shape (batch, n) or (n,), got {tuple(patterns.shape)}")
    if patterns.shape[-1] != states.shape[-1] or (
            patterns.dim() == 2 and states.dim() == 2 and patterns.shape[0] != states.shape[0]):
        raise ValueError(f"patterns must match states row for row: got states of shape "
                         f"{tuple(states.shape)} and patterns of shape {tuple(patterns.shape)}")
    dtype = states.dtype if states.is_floating_point() else torch.float32
    states = states.to(dtype)
    return (states * patterns.to(dtype=dtype, device=states.device)).sum(-1) / states.shape[-1]


def overlap_matrix(a, b) -> torch.Tensor:
    """All overlaps a_i . b_j / n between two sets of ±1 vectors, shape (len(a), len(b)) (Chapter 1)."""
    a = as_tensor("a", a, ndim=2)
    b = as_tensor("b", b, ndim=2)
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"a and b must have the same number of columns, got {a.shape[1]} and {b.shape[1]}")
    dtype = a.dtype if a.is_floating_point() else torch.float32
    return a.to(dtype) @ b.to(dtype=dtype, device=a.device).T / a.shape[1]


def corrupt(patterns, flip_prob: float, *, seed: int = 0) -> torch.Tensor:
    """Flip each bit of ±1 patterns independently with probability flip_prob (Chapter 1)."""
    patterns = as_tensor("patterns", patterns)
    single = patterns.dim() == 1
    patterns = _check_pm1("patterns", patterns, batched=True)
    flip_prob = check_float("flip_prob", flip_prob, low=0.0, high=1.0)
    seed = check_int("seed", seed, minimum=0)
    flips = torch.rand(patterns.shape, generator=generator(seed), dtype=torch.float64) < flip_prob
    noisy = torch.where(flips.to(patterns.device), -patterns, patterns)
    return noisy[0] if single else noisy


def one_step_flip_fraction(W, patterns) -> float:
    """Fraction of the stored bits that one synchronous update flips (crosstalk errors) (Chapter 1)."""
    W = _check_weights(W)
    patterns, _ = _check_states_for(W, patterns, "patterns")
    return float((sign_pm1(patterns @ W.T) != patterns).to(torch.float64).mean())


def flip_probability(alpha):
    """One-step bit-error probability 1/2 erfc(1/sqrt(2 alpha)) at load alpha = s/n (Chapter 1).

    Crosstalk is ~N(0, alpha); errata E3: the source's integral misses its normalisation.
    """
    from scipy.special import erfc

    if isinstance(alpha, (list, tuple, np.ndarray, torch.Tensor)):
        values = as_tensor("alpha", alpha).to(torch.float64).cpu().numpy()
        if not np.all(np.isfinite(values)) or np.any(values < 0):
            raise ValueError("alpha must hold finite loads >= 0")
        with np.errstate(divide="ignore"):
            return 0.5 * erfc(1.0 / np.sqrt(2.0 * values))
    alpha = check_float("alpha", alpha, low=0.0)
    return 0.0 if alpha == 0 else float(0.5 * erfc(1.0 / math.sqrt(2.0 * alpha)))


def capacity_curve(n: int = 500, alphas=(0.05, 0.10, 0.12, 0.138, 0.16, 0.20, 0.25), *,
                   seeds=(0,), sweeps: int = 20, device="cpu") -> dict:
    """Recall of random patterns against load alpha = s/n, started at each stored pattern (Chapter 1).

    Returns numpy arrays: alpha (the load simulated, round(alpha n)/n), num_patterns,
    flip_fraction, flip_theory, final_overlap and perfect_recall, averaged over seeds.
    """
    n = check_int("n", n, minimum=2)
    alphas = check_sequence("alphas", alphas, check_float, low=0.0, low_open=True)
    seeds = check_sequence("seeds", seeds, check_int, minimum=0)
    sweeps = check_int("sweeps", sweeps, minimum=1)
    device = check_device("device", device)
    if len(alphas) > 1000:
        raise ValueError(f"alphas must hold at most 1000 loads, got {len(alphas)}")

    num_patterns = np.array([max(1, round(alpha * n)) for alpha in alphas])
    flip, final_overlap, perfect = (np.zeros((len(seeds), len(alphas))) for _ in range(3))
    for row, seed in enumerate(seeds):
        for col, count in enumerate(num_patterns.tolist()):
            # An independent, reproducible stream for every (seed, load) pair.
            run_seed = seed * 1000 + col
            patterns = random_sign_patterns(count, n, seed=run_seed, device=device)
            W = hebbian_weights(patterns)
            flip[row, col] = one_step_flip_fraction(W, patterns)
            final = run_async(W, patterns, sweeps=sweeps, seed=run_seed).states
            final_overlap[row, col] = float(overlap(final, patterns).mean())
            perfect[row, col] = float(torch.all(final == patterns, dim=1).to(torch.float64).mean())
    loads = num_patterns / n
    return {"alpha": loads, "num_patterns": num_patterns, "flip_fraction": flip.mean(0),
            "flip_theory": flip_probability(loads), "final_overlap": final_overlap.mean(0),
            "perfect_recall": perfect.mean(0)}


def estimate_capacity(curve: dict, level: float = 0.9) -> float:
    """Load at which the final overlap of capacity_curve first falls below level (Chapter 1).

    Linear interpolation between the two bracketing loads.
    """
    if not isinstance(curve, dict) or "alpha" not in curve or "final_overlap" not in curve:
        raise TypeError("curve must be the dict returned by capacity_curve, with 'alpha' and 'final_overlap'")
    level = check_float("level", level, low=-1.0, high=1.0)
    alphas = np.asarray(curve["alpha"], dtype=np.float64)
    overlaps = np.asarray(curve["final_overlap"], dtype=np.float64)
    if alphas.shape != overlaps.shape or alphas.ndim != 1 or len(alphas) == 0:
        raise ValueError("curve must hold 'alpha' and 'final_overlap' arrays of the same length")
    below = np.flatnonzero(overlaps < level)
    if len(below) == 0:
        raise ValueError(f"the curve never falls below level={level}; extend alphas to larger loads")
    k = int(below[0])
    if k == 0:
        raise ValueError(f"the curve is below level={level} already at the first load "
                         f"{alphas[0]:.3g}; start alphas at a smaller load")
    fraction = (overlaps[k - 1] - level) / (overlaps[k - 1] - overlaps[k])
    return float(alphas[k - 1] + fraction * (alphas[k] - alphas[k - 1]))


def mixture_state(patterns, indices=(0, 1, 2)) -> torch.Tensor:
    """Spurious mixture state sign(x_a + x_b + x_c + ...) of an odd number of patterns (Chapter 1)."""
    patterns = _check_pm1("patterns", patterns)
    indices = check_sequence("indices", indices, check_int, minimum=0,
                              maximum=len(patterns) - 1)
    if len(indices) % 2 == 0 or len(set(indices)) != len(indices):
        raise ValueError(f"indices must name an odd number of distinct patterns, got {indices}")
    # With an odd number of ±1 terms the sum is never 0, so the sign is unambiguous.
    return sign_pm1(patterns[indices].sum(dim=0))


def modern_retrieve(patterns, queries, beta: float = 1.0) -> torch.Tensor:
    """One modern (continuous) Hopfield step xi <- X^T softmax(beta X xi), then sign (Chapter 1).

    This is one attention step with the patterns as keys and values; queries are (batch, n) or (n,).
    """
    patterns = _check_pm1("patterns", patterns)
    queries = as_tensor("queries", queries)
    single = queries.dim() == 1
    if queries.dim() == 1:
        queries = queries[None]
    if queries.dim() != 2 or queries.shape[1] != patterns.shape[1]:
        raise ValueError(f"queries must have shape (batch, {patterns.shape[1]}) or "
                         f"({patterns.shape[1]},), got {tuple(queries.shape)}")
    queries = check_finite("queries", queries.to(dtype=patterns.dtype, device=patterns.device))
    beta = check_float("beta", beta, low=0.0, low_open=True)
    attention = torch.softmax(beta * queries @ patterns.T, dim=1)     # (batch, num_patterns)
    retrieved = sign_pm1(attention @ patterns)
    return retrieved[0] if single else retrieved


def exact_recall_capacity(n: int) -> tuple[float, float]:
    """Exact-recall capacity (Chapter 1; McEliece et al. 1987): n/(2 ln n) each, n/(4 ln n) all.

    Errata E4: the source's n/(2 log2 n) is wrong.
    """
    n = check_int("n", n, minimum=2)
    return n / (2 * math.log(n)), n / (4 * math.log(n))
