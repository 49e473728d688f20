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
    check_dtype,
    check_finite,
    check_float,
    check_int,
    check_sequence,
    check_square,
    check_values_in,
    describe,
)


class HopfieldRun(NamedTuple):
    """Outcome of run_async: final states, optional snapshots and energies, and convergence (Chapter 1)."""

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


def _signs(name: str, value, *, batched: bool = False) -> tuple[torch.Tensor, bool]:
    """A non-empty ±1 tensor of shape (rows, n) as floats, and whether a single (n,) row was given.

    A single row is accepted (and made a batch of one) only when ``batched``.
    """
    tensor = as_tensor(name, value)
    single = batched and tensor.dim() == 1
    tensor = tensor[None] if single else tensor
    if tensor.dim() != 2 or tensor.numel() == 0:
        expected = "(batch, n) or (n,)" if batched else "(num_patterns, n)"
        raise ValueError(f"{name} must be a non-empty tensor of shape {expected}, got {describe(tensor)}")
    check_values_in(name, tensor, (-1, 1))
    return (tensor if tensor.is_floating_point() else tensor.to(torch.float32)), single


def _network(W, states, bias=None, states_name: str = "states"):
    """Checked (W, states, single, bias): W square and finite, states ±1 rows of W's size, bias (n,)."""
    W = check_finite("W", check_square("W", W))
    n = W.shape[0]
    states, single = _signs(states_name, states, batched=True)
    if states.shape[1] != n:
        raise ValueError(f"{states_name} must have {n} columns to match W, got {states.shape[1]}")
    if bias is None:
        bias = torch.zeros(n, dtype=W.dtype, device=W.device)
    else:
        bias = check_finite("bias", as_tensor("bias", bias, shape=(n,), floating=True))
    return (W, states.to(dtype=W.dtype, device=W.device), single,
            bias.to(dtype=W.dtype, device=W.device))


def hebbian_weights(patterns) -> torch.Tensor:
    """Hebb's outer-product rule W = patterns^T patterns / n with zero diagonal (Chapter 1)."""
    patterns, _ = _signs("patterns", patterns)
    n = patterns.shape[1]
    W = patterns.T @ patterns / n
    # No self-coupling: a neuron must not reinforce its own current state.
    W.fill_diagonal_(0)
    return W


def energy(W, states, bias=None) -> torch.Tensor:
    """Hopfield energy H = -1/2 x^T W x + b.x of each state, shape (batch,) (Chapter 1)."""
    W, states, single, bias = _network(W, states, bias)
    values = -0.5 * ((states @ W) * states).sum(dim=1) + states @ bias
    return values[0] if single else values


def run_async(W, states, *, sweeps: int = 10, seed: int = 0, record_every: int | None = None,
              bias=None) -> HopfieldRun:
    """Asynchronous dynamics: each sweep updates every neuron once, in a random order (Chapter 1).

    x_i <- sign(sum_j W_ij x_j - b_i), vectorised over the batch; for symmetric W with zero
    diagonal the energy never increases.
    Stops early after a sweep that changes no state. Snapshots every ``record_every``
    single-neuron updates (the initial state included) when record_every is given.
    The same run as run_async_reference, the plain loop, in two kernels per update.
    """
    W, states, _, bias = _network(W, states, bias)
    sweeps = check_int("sweeps", sweeps, minimum=0)
    seed = check_int("seed", seed, minimum=0)
    if record_every is not None:
        record_every = check_int("record_every", record_every, minimum=1)

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


def run_async_reference(W, states, *, sweeps: int = 10, seed: int = 0, bias=None) -> HopfieldRun:
    """The textbook loop behind run_async, one neuron at a time (Chapter 1): slower, same result.

    Visits the neurons in the same random orders as run_async with the same seed; records nothing.
    """
    W, states, _, bias = _network(W, states, bias)
    sweeps = check_int("sweeps", sweeps, minimum=0)
    seed = check_int("seed", seed, minimum=0)

    rng = generator(seed)
    x = states.clone()                                    # (batch, n)
    converged = torch.zeros(len(x), dtype=torch.bool, device=x.device)
    sweeps_done = 0
    for _ in range(sweeps):
        before = x.clone()
        for i in torch.randperm(W.shape[0], generator=rng).tolist():
            field = x @ W[i] - bias[i]                    # (batch,): local field h_i of every state
            x[:, i] = torch.where(field >= 0, 1.0, -1.0)  # sign(0) = +1
        sweeps_done += 1
        converged = torch.all(x == before, dim=1)
        if bool(converged.all()):
            break
    return HopfieldRun(x, None, None, sweeps_done, converged)


def run_sync(W, states, *, steps: int = 20, bias=None) -> torch.Tensor:
    """Synchronous dynamics (all neurons at once), which can fall into 2-cycles (Chapter 1).

    Returns the states after 0..steps updates, shape (steps + 1, batch, n).
    """
    W, states, _, bias = _network(W, states, bias)
    steps = check_int("steps", steps, minimum=0)
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
    patterns, single = _signs("patterns", patterns, batched=True)
    flip_prob = check_float("flip_prob", flip_prob, low=0.0, high=1.0)
    seed = check_int("seed", seed, minimum=0)
    flips = torch.rand(patterns.shape, generator=generator(seed), dtype=torch.float64) < flip_prob
    noisy = torch.where(flips.to(patterns.device), -patterns, patterns)
    return noisy[0] if single else noisy


def one_step_flip_fraction(W, patterns) -> float:
    """Fraction of the stored bits that one synchronous update flips (crosstalk errors) (Chapter 1)."""
    W, patterns, _, _ = _network(W, patterns, states_name="patterns")
    return float((sign_pm1(patterns @ W.T) != patterns).to(torch.float64).mean())


def flip_probability(alpha):
    """One-step bit-error probability 1/2 erfc(1/sqrt(2 alpha)) at load alpha = s/n (Chapter 1).

    The crosstalk is approximately N(0, alpha) and the bit flips when it is below -1.
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


class CapacityCurve(NamedTuple):
    """Recall against load, one entry per load, averaged over seeds (Chapter 1).

    alpha is the load simulated, round(alpha n)/n; flip_fraction is the fraction of stored bits
    one update flips (flip_theory its Gaussian prediction); final_overlap the mean overlap of the
    state the dynamics settle in with the pattern they started from; perfect_recall the fraction
    of patterns that the dynamics, started at the pattern, leave exactly unchanged.
    """

    alpha: np.ndarray
    num_patterns: np.ndarray
    flip_fraction: np.ndarray
    flip_theory: np.ndarray
    final_overlap: np.ndarray
    perfect_recall: np.ndarray


def capacity_curve(n: int = 500, alphas=(0.05, 0.10, 0.12, 0.138, 0.16, 0.20, 0.25), *,
                   seeds=(0,), sweeps: int = 20, device="cpu",
                   dtype: torch.dtype = torch.float32) -> CapacityCurve:
    """Recall of random patterns against load alpha = s/n, started at each stored pattern (Chapter 1)."""
    n = check_int("n", n, minimum=2)
    alphas = check_sequence("alphas", alphas, check_float, low=0.0, low_open=True)
    seeds = check_sequence("seeds", seeds, check_int, minimum=0)
    sweeps = check_int("sweeps", sweeps, minimum=1)
    device, dtype = check_device("device", device), check_dtype("dtype", dtype)
    if len(alphas) > 1000:
        raise ValueError(f"alphas must hold at most 1000 loads, got {len(alphas)}")

    num_patterns = np.array([max(1, round(alpha * n)) for alpha in alphas])
    flip, final_overlap, perfect = (np.zeros((len(seeds), len(alphas))) for _ in range(3))
    for row, seed in enumerate(seeds):
        for col, count in enumerate(num_patterns.tolist()):
            # An independent, reproducible stream for every (seed, load) pair.
            run_seed = seed * 1000 + col
            patterns = random_sign_patterns(count, n, seed=run_seed, device=device, dtype=dtype)
            W = hebbian_weights(patterns)
            flip[row, col] = one_step_flip_fraction(W, patterns)
            final = run_async(W, patterns, sweeps=sweeps, seed=run_seed).states
            final_overlap[row, col] = float(overlap(final, patterns).mean())
            perfect[row, col] = float(torch.all(final == patterns, dim=1).to(torch.float64).mean())
    loads = num_patterns / n
    return CapacityCurve(loads, num_patterns, flip.mean(0), flip_probability(loads),
                         final_overlap.mean(0), perfect.mean(0))


def estimate_capacity(curve: CapacityCurve, level: float = 0.9) -> float:
    """Load at which the final overlap of capacity_curve first falls below level (Chapter 1).

    Linear interpolation between the two bracketing loads.
    """
    if not isinstance(curve, CapacityCurve):
        raise TypeError(f"curve must be the CapacityCurve returned by capacity_curve, got {describe(curve)}")
    level = check_float("level", level, low=-1.0, high=1.0)
    alphas = np.asarray(curve.alpha, dtype=np.float64)
    overlaps = np.asarray(curve.final_overlap, dtype=np.float64)
    if alphas.shape != overlaps.shape or alphas.ndim != 1 or len(alphas) == 0:
        raise ValueError("curve must hold alpha and final_overlap arrays of the same length")
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
    patterns, _ = _signs("patterns", patterns)
    indices = check_sequence("indices", indices, check_int, minimum=0,
                              maximum=len(patterns) - 1)
    if len(indices) % 2 == 0 or len(set(indices)) != len(indices):
        raise ValueError(f"indices must name an odd number of distinct patterns, got {indices}")
    # With an odd number of ±1 terms the sum is never 0, so the sign is unambiguous.
    return sign_pm1(patterns[indices].sum(dim=0))


def modern_retrieve(patterns, queries, beta: float = 1.0) -> torch.Tensor:
    """One modern Hopfield step xi <- sign(X^T softmax(beta X xi)), back to ±1 states (Chapter 1).

    Without the sign this is one attention step with the patterns as keys and values; the sign
    rounds the softmax-weighted average of the patterns to a binary state. queries are
    (batch, n) or (n,).
    """
    patterns, _ = _signs("patterns", patterns)
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


class ExactRecallCapacity(NamedTuple):
    """Numbers of patterns recalled exactly: each one with high probability, or all at once (Chapter 1)."""

    per_pattern: float
    all_patterns: float


def exact_recall_capacity(n: int) -> ExactRecallCapacity:
    """Exact-recall capacity (Chapter 1; McEliece et al. 1987): n/(2 ln n) each, n/(4 ln n) all.

    The logarithm is natural; the source's n/(2 log2 n) is wrong.
    """
    n = check_int("n", n, minimum=2)
    return ExactRecallCapacity(n / (2 * math.log(n)), n / (4 * math.log(n)))
