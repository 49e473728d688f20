"""Synthetic and bundled data sets shared by the chapters (no downloads, ever).

Random numbers are drawn on the CPU from ``runtime.generator(seed)`` in
float64 and only then cast and moved, so a seed gives the same data on every
device and (up to rounding) in every dtype.
"""
from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np
import torch

from .runtime import generator
from .validation import check_bool, check_device, check_dtype, check_float, check_int


class SeparableData(NamedTuple):
    """Points, ±1 labels and the separator (unit normal, offset) that labelled them."""

    X: torch.Tensor
    y: torch.Tensor
    w_star: torch.Tensor
    b_star: float


class Split(NamedTuple):
    """A train/test split of a labelled data set."""

    X_train: torch.Tensor
    y_train: torch.Tensor
    X_test: torch.Tensor
    y_test: torch.Tensor


def linearly_separable(num_points: int = 100, dim: int = 2, margin: float = 0.1, *,
                       bias: bool = True, seed: int = 0, device="cpu",
                       dtype: torch.dtype = torch.float32) -> SeparableData:
    """Points uniform in [-1, 1]^dim kept at distance >= margin from a random hyperplane (Chapter 1).

    Labels are sign(w_star . x + b_star) as float ±1; the data margin is >= ``margin``.
    """
    num_points = check_int("num_points", num_points, minimum=1)
    dim = check_int("dim", dim, minimum=1)
    margin = check_float("margin", margin, low=0.0)
    bias = check_bool("bias", bias)
    seed = check_int("seed", seed, minimum=0)
    device, dtype = check_device("device", device), check_dtype("dtype", dtype)

    rng = generator(seed)
    w_star = torch.randn(dim, generator=rng, dtype=torch.float64)
    w_star = w_star / w_star.norm()
    b_star = (torch.rand((), generator=rng, dtype=torch.float64) * 0.6 - 0.3).item() if bias else 0.0
    # Reject with the separator and points rounded to the output dtype, so the
    # margin guarantee holds for the tensors the caller actually receives.
    w_star = w_star.to(dtype).to(torch.float64)
    b_star = float(torch.tensor(b_star, dtype=dtype))
    largest_distance = (w_star.abs().sum() + abs(b_star)).item() / w_star.norm().item()
    if margin >= largest_distance:
        raise ValueError(f"margin must be below {largest_distance:.3f}, the largest distance from "
                         f"this hyperplane inside the cube [-1, 1]^{dim}, got {margin}")

    kept, num_kept, num_drawn = [], 0, 0
    acceptance = 0.5
    for _ in range(200):
        # Batch size from the acceptance rate seen so far: a handful of rounds at most.
        batch = max(256, math.ceil(1.5 * (num_points - num_kept) / max(acceptance, 1e-4)))
        candidates = (torch.rand(batch, dim, generator=rng, dtype=torch.float64) * 2 - 1)
        candidates = candidates.to(dtype).to(torch.float64)
        distance = (candidates @ w_star + b_star).abs() / w_star.norm()
        accepted = candidates[distance >= margin]
        kept.append(accepted)
        num_kept += len(accepted)
        num_drawn += batch
        acceptance = max(num_kept / num_drawn, 1e-4)
        if num_kept >= num_points:
            break
    else:
        raise ValueError(f"margin={margin} leaves too little of the cube: only {num_kept} of "
                         f"{num_points} points were found; choose a smaller margin")
    X = torch.cat(kept)[:num_points]
    y = torch.where(X @ w_star + b_star >= 0, 1.0, -1.0)
    return SeparableData(X.to(device=device, dtype=dtype), y.to(device=device, dtype=dtype),
                         w_star.to(device=device, dtype=dtype), b_star)


#: Encodings of a bit: 0/1 (Boolean circuits, Chapters 1-2) or +1/-1 with bit 1 -> -1
#: (parities as characters, Chapter 16).
ENCODINGS = ("01", "pm1")


def hypercube(num_bits: int, *, encoding: str = "01", dtype: torch.dtype = torch.float32,
              device="cpu") -> torch.Tensor:
    """All 2^n points of the n-bit cube as rows, row i being i in binary, most significant bit first.

    ``encoding="01"`` gives {0, 1}^n; ``encoding="pm1"`` maps bit b to 1 - 2b, so
    row 0 is all +1 and a parity is a product of coordinates (Chapters 1, 2, 16).
    """
    num_bits = check_int("num_bits", num_bits, minimum=1, maximum=24)
    if encoding not in ENCODINGS:
        raise ValueError(f"encoding must be one of {list(ENCODINGS)}, got {encoding!r}")
    dtype, device = check_dtype("dtype", dtype), check_device("device", device)
    codes = torch.arange(2**num_bits)
    shifts = torch.arange(num_bits - 1, -1, -1)
    bits = (codes[:, None] >> shifts) & 1                      # (2^n, n), MSB first
    values = bits if encoding == "01" else 1 - 2 * bits
    return values.to(device=device, dtype=dtype)


def xor(device="cpu", dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """The four corners of {0,1}^2 with XOR labels as ±1 (XOR true = +1) (Chapter 1)."""
    device, dtype = check_device("device", device), check_dtype("dtype", dtype)
    X = torch.tensor([[0, 0], [0, 1], [1, 0], [1, 1]], dtype=dtype, device=device)
    y = torch.tensor([-1, 1, 1, -1], dtype=dtype, device=device)
    return X, y


def random_sign_patterns(num_patterns: int, dim: int, *, seed: int = 0, device="cpu",
                         dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """An iid uniform ±1 matrix of shape (num_patterns, dim), e.g. Hopfield memories (Chapter 1)."""
    num_patterns = check_int("num_patterns", num_patterns, minimum=1)
    dim = check_int("dim", dim, minimum=1)
    seed = check_int("seed", seed, minimum=0)
    device, dtype = check_device("device", device), check_dtype("dtype", dtype)
    bits = torch.randint(0, 2, (num_patterns, dim), generator=generator(seed))
    return (2 * bits - 1).to(device=device, dtype=dtype)


def gaussian_blobs(num_points: int = 200, num_classes: int = 2, dim: int = 2, spread: float = 1.0,
                   *, radius: float = 3.0, seed: int = 0,
                   device="cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """Isotropic Gaussian clusters (std ``spread``) around centres spaced on a circle of ``radius``.

    Classes are balanced and shuffled; returns (X float32, y int64). Used from Chapter 1 on.
    """
    num_classes = check_int("num_classes", num_classes, minimum=1)
    num_points = check_int("num_points", num_points, minimum=num_classes)
    dim = check_int("dim", dim, minimum=1)
    spread = check_float("spread", spread, low=0.0)
    radius = check_float("radius", radius, low=0.0)
    seed = check_int("seed", seed, minimum=0)
    device = check_device("device", device)

    # Centres evenly spaced on a circle in the first two coordinates, so that
    # the same spread means the same overlap whatever the dimension.
    centres = torch.zeros(num_classes, dim, dtype=torch.float64)
    if dim == 1:
        centres[:, 0] = torch.linspace(-radius, radius, num_classes, dtype=torch.float64)
    else:
        angles = 2 * math.pi * torch.arange(num_classes, dtype=torch.float64) / num_classes
        centres[:, 0], centres[:, 1] = radius * torch.cos(angles), radius * torch.sin(angles)
    rng = generator(seed)
    y = torch.arange(num_points) % num_classes
    y = y[torch.randperm(num_points, generator=rng)]
    X = centres[y] + spread * torch.randn(num_points, dim, generator=rng, dtype=torch.float64)
    return X.to(device=device, dtype=torch.float32), y.to(device)


def two_moons(num_points: int = 200, noise: float = 0.1, *, seed: int = 0,
              device="cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """Two interleaved half circles (scikit-learn's make_moons); returns (X float32, y int64)."""
    from sklearn.datasets import make_moons

    num_points = check_int("num_points", num_points, minimum=2)
    noise = check_float("noise", noise, low=0.0)
    seed = check_int("seed", seed, minimum=0)
    device = check_device("device", device)
    X, y = make_moons(n_samples=num_points, noise=noise, random_state=seed)
    return (torch.tensor(X, dtype=torch.float32, device=device),
            torch.tensor(y, dtype=torch.int64, device=device))


@functools.lru_cache(maxsize=1)
def _digits_arrays() -> tuple[np.ndarray, np.ndarray]:
    # Bundled with scikit-learn (no network); cached because parsing takes ~30 ms.
    from sklearn.datasets import load_digits as sklearn_load_digits

    bunch = sklearn_load_digits()
    return (bunch.data / 16.0).astype(np.float32), bunch.target.astype(np.int64)


def load_digits(*, test_fraction: float = 0.25, seed: int = 0, device="cpu",
                flatten: bool = True) -> Split:
    """scikit-learn's bundled 8x8 digits (1797 images), pixels in [0, 1], stratified seeded split.

    X has shape (N, 64), or (N, 1, 8, 8) with flatten=False; labels are int64.
    """
    from sklearn.model_selection import train_test_split

    test_fraction = check_float("test_fraction", test_fraction, low=0.0, high=1.0,
                                low_open=True, high_open=True)
    seed = check_int("seed", seed, minimum=0)
    flatten = check_bool("flatten", flatten)
    device = check_device("device", device)
    X, y = _digits_arrays()
    # Stratification needs at least one image of each of the 10 classes on each side.
    if round(test_fraction * len(y)) < 10 or round((1 - test_fraction) * len(y)) < 10:
        raise ValueError(f"test_fraction must leave at least 10 images on each side, got {test_fraction}")
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=test_fraction, random_state=seed, stratify=y)
    shape = (-1, 64) if flatten else (-1, 1, 8, 8)
    return Split(torch.tensor(X_train, device=device).reshape(shape),
                 torch.tensor(y_train, device=device),
                 torch.tensor(X_test, device=device).reshape(shape),
                 torch.tensor(y_test, device=device))
