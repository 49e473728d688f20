"""Functions of sets and point clouds: Deep Sets, power sums and PointNet (Chapter 8).

A batch of sets of different sizes is one tensor (B, M, d) padded with NaN:
element m of set b is absent when ``X[b, m]`` is NaN. The models replace the
padding by zeros before any arithmetic and leave it out of every pooling, so
no NaN reaches a gradient. Point clouds all have the same number of points and
need no padding.

Trained models default to float32; the power sums and their inverse, which are
compared with exact values, work in float64.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch
from torch import nn

from . import nets, train
from .runtime import generator
from .validation import (
    as_tensor,
    check_bool,
    check_choice,
    check_device,
    check_dtype,
    check_float,
    check_int,
    check_ints,
    describe,
)

#: Symmetric functions that pool a set of vectors into one vector.
AGGREGATIONS = ("sum", "mean", "max")
#: The shapes of the synthetic point clouds, in label order.
SHAPES = ("sphere", "cube", "cylinder")
#: The targets of the Deep Sets experiment: the largest element and the (population) variance.
SET_TARGETS = ("max", "variance")


# ---------------------------------------------------------------------------
# Sets as padded tensors, and pooling
# ---------------------------------------------------------------------------

def present(X) -> torch.Tensor:
    """Which elements of a NaN-padded batch (B, M, d) are present: a boolean (B, M) (Chapter 8)."""
    X = as_tensor("X", X, ndim=3, floating=True)
    return ~torch.isnan(X).any(dim=2)


def pad_sets(sets, *, dtype: torch.dtype = torch.float32, device="cpu") -> torch.Tensor:
    """Stack sets of shape (M_b, d) into one (B, max M_b, d) tensor padded with NaN (Chapter 8)."""
    if isinstance(sets, torch.Tensor) or not isinstance(sets, (list, tuple)) or not sets:
        raise TypeError(f"sets must be a non-empty list of (M, d) tensors, got {describe(sets)}")
    sets = [as_tensor(f"sets[{i}]", s, ndim=2, floating=True) for i, s in enumerate(sets)]
    if len({s.shape[1] for s in sets}) != 1:
        raise ValueError("every set must hold vectors of the same dimension d")
    out = torch.full((len(sets), max(len(s) for s in sets), sets[0].shape[1]), float("nan"),
                     dtype=check_dtype("dtype", dtype), device=check_device("device", device))
    for index, s in enumerate(sets):
        out[index, :len(s)] = s.to(dtype=out.dtype, device=out.device)
    return out


def pool(H, mask=None, aggregation: str = "sum") -> torch.Tensor:
    """Pool (B, M, k) over the elements that ``mask`` (B, M) marks present: sum, mean or max (Chapter 8).

    Any of the three is invariant to the order of the elements. Every set must
    have at least one element.
    """
    check_choice("aggregation", aggregation, AGGREGATIONS)
    H = as_tensor("H", H, ndim=3, floating=True)
    if mask is None:
        mask = torch.ones(H.shape[:2], dtype=torch.bool, device=H.device)
    mask = as_tensor("mask", mask, shape=tuple(H.shape[:2]))
    if mask.dtype != torch.bool:
        raise TypeError(f"mask must be a boolean tensor, got {describe(mask)}")
    keep = mask[:, :, None]
    if aggregation == "max":
        return H.masked_fill(~keep, float("-inf")).amax(dim=1)
    total = (H * keep).sum(dim=1)
    return total / mask.sum(dim=1, keepdim=True).clamp(min=1) if aggregation == "mean" else total


# ---------------------------------------------------------------------------
# Deep Sets
# ---------------------------------------------------------------------------

class DeepSets(nn.Module):
    """f(X) = ρ(⊕_m φ(x_m)) with ⊕ a sum, mean or max and φ, ρ multilayer perceptrons (Zaheer et al.; Chapter 8).

    ``phi_widths`` = (d, hidden..., latent) and ``rho_widths`` = (latent, hidden..., outputs).
    The input is a NaN-padded batch (B, M, d).
    """

    def __init__(self, phi_widths, rho_widths, *, aggregation: str = "sum", seed: int = 0,
                 dtype: torch.dtype = torch.float32, device="cpu"):
        super().__init__()
        phi_widths = check_ints("phi_widths", phi_widths, minimum=1, min_length=2)
        rho_widths = check_ints("rho_widths", rho_widths, minimum=1, min_length=2)
        if phi_widths[-1] != rho_widths[0]:
            raise ValueError(f"phi's output width {phi_widths[-1]} must equal rho's input width {rho_widths[0]}")
        self.aggregation = check_choice("aggregation", aggregation, AGGREGATIONS)
        seed = check_int("seed", seed, minimum=0)
        self.phi = nets.mlp(phi_widths, seed=seed, dtype=dtype, device=device)
        self.rho = nets.mlp(rho_widths, seed=seed + 1, dtype=dtype, device=device)

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        mask = ~torch.isnan(X).any(dim=2)
        features = self.phi(torch.where(mask[:, :, None], X, torch.zeros_like(X)))     # (B, M, latent)
        return self.rho(pool(features, mask, self.aggregation))


def random_sets(num_sets: int, min_size: int, max_size: int, *, seed: int = 0,
                dtype: torch.dtype = torch.float32, device="cpu") -> torch.Tensor:
    """Sets of U[0, 1] scalars, sizes uniform on {min_size..max_size}, NaN-padded to (B, max_size, 1) (Chapter 8)."""
    num_sets = check_int("num_sets", num_sets, minimum=1)
    min_size = check_int("min_size", min_size, minimum=1)
    max_size = check_int("max_size", max_size, minimum=min_size)
    rng = generator(check_int("seed", seed, minimum=0))
    X = torch.rand(num_sets, max_size, 1, generator=rng, dtype=torch.float64)
    sizes = torch.randint(min_size, max_size + 1, (num_sets,), generator=rng)
    X[torch.arange(max_size)[None, :] >= sizes[:, None]] = float("nan")
    return X.to(dtype=check_dtype("dtype", dtype), device=check_device("device", device))


def set_target(X, target: str) -> torch.Tensor:
    """The largest element ("max") or the population variance ("variance") of each scalar set, (B, 1) (Chapter 8)."""
    check_choice("target", target, SET_TARGETS)
    X = as_tensor("X", X, ndim=3, floating=True)
    if X.shape[2] != 1:
        raise ValueError(f"X must hold sets of scalars (B, M, 1), got {describe(X)}")
    mask = present(X)
    if not mask.any(dim=1).all():
        raise ValueError("every set must have at least one element")
    values = torch.where(mask, X[:, :, 0], torch.zeros_like(X[:, :, 0]))
    if target == "max":
        return values.masked_fill(~mask, float("-inf")).amax(dim=1, keepdim=True)
    count = mask.sum(dim=1, keepdim=True)
    mean = values.sum(dim=1, keepdim=True) / count
    return (((values - mean) * mask) ** 2).sum(dim=1, keepdim=True) / count


class SetRun(NamedTuple):
    """A trained Deep Sets model and its training curve."""

    model: DeepSets
    history: train.History


def fit_deep_sets(aggregation: str, target: str, *, num_sets: int = 4096, min_size: int = 5, max_size: int = 20,
                  latent: int = 16, num_hidden: int = 64, epochs: int = 16, batch_size: int = 64,
                  lr: float = 1e-3, seed: int = 0, device="cpu") -> SetRun:
    """Train Deep Sets (φ: 1 → hidden → latent, ρ: latent → hidden → 1) on the square loss with Adam (Chapter 8)."""
    X = random_sets(num_sets, min_size, max_size, seed=seed, device=device)
    y = set_target(X, target)
    model = DeepSets((1, num_hidden, latent), (latent, num_hidden, 1), aggregation=aggregation,
                     seed=seed, device=device)
    optimizer = torch.optim.Adam(model.parameters(), lr=check_float("lr", lr, low=0.0, low_open=True))
    history = train.fit(model, nn.functional.mse_loss, optimizer, (X, y), epochs=epochs,
                        batch_size=batch_size, seed=seed)
    return SetRun(model, history)


def set_mse(model: nn.Module, target: str, size: int, *, num_sets: int = 2000, seed: int = 1) -> float:
    """Test mean squared error on fresh sets of exactly ``size`` elements (Chapter 8)."""
    parameter = next(model.parameters())
    X = random_sets(num_sets, size, size, seed=seed, dtype=parameter.dtype, device=parameter.device)
    return train.evaluate(model, X, set_target(X, target), loss_fn=nn.functional.mse_loss)["loss"]


# ---------------------------------------------------------------------------
# Power sums: a sum decomposition that is injective on multisets
# ---------------------------------------------------------------------------

def power_sums(x, num_powers: int | None = None) -> torch.Tensor:
    """p_k = Σ_m x_m^k for k = 1..num_powers (default: the size M of the multiset), in float64 (Chapter 8).

    ``x`` is one multiset (M,) or a batch (B, M); this is Σ_m φ(x_m) with φ(x) = (x, x², ..., x^K).
    """
    x = as_tensor("x", x, floating=True).to(torch.float64)
    if x.dim() not in (1, 2):
        raise ValueError(f"x must be a multiset (M,) or a batch (B, M), got {describe(x)}")
    num_powers = x.shape[-1] if num_powers is None else check_int("num_powers", num_powers, minimum=1)
    powers = torch.arange(1, num_powers + 1, dtype=torch.float64, device=x.device)
    return (x[..., :, None] ** powers).sum(dim=-2)


def multiset_from_power_sums(p) -> torch.Tensor:
    """The sorted multiset of M reals whose first M power sums are ``p`` (Chapter 8).

    Newton's identities give the elementary symmetric polynomials e_1..e_M
    from p_1..p_M (k e_k = Σ_{i=1}^k (-1)^{i-1} e_{k-i} p_i), and the multiset is the
    set of roots of t^M - e_1 t^{M-1} + e_2 t^{M-2} - ... (numpy.roots).
    """
    p = as_tensor("p", p, ndim=1, floating=True).to(torch.float64)
    if len(p) == 0:
        raise ValueError("p must hold at least one power sum")
    sums = p.cpu().numpy()
    e = [1.0]
    for k in range(1, len(sums) + 1):
        e.append(sum((-1) ** (i - 1) * e[k - i] * sums[i - 1] for i in range(1, k + 1)) / k)
    coefficients = [(-1) ** k * e[k] for k in range(len(e))]
    roots = np.roots(coefficients)
    return torch.as_tensor(np.sort(roots.real), dtype=torch.float64, device=p.device)


# ---------------------------------------------------------------------------
# Point clouds
# ---------------------------------------------------------------------------

def random_rotations(num: int, *, seed: int = 0, dtype: torch.dtype = torch.float64, device="cpu") -> torch.Tensor:
    """Uniformly random rotation matrices (num, 3, 3) from normalised Gaussian quaternions (Chapter 8)."""
    num = check_int("num", num, minimum=1)
    q = torch.randn(num, 4, generator=generator(check_int("seed", seed, minimum=0)), dtype=torch.float64)
    w, x, y, z = (q / q.norm(dim=1, keepdim=True)).unbind(dim=1)
    R = torch.stack([
        1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
        2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
        2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y),
    ], dim=1).reshape(num, 3, 3)
    return R.to(dtype=check_dtype("dtype", dtype), device=check_device("device", device))


def _surface_points(shape: str, num: int, rng: torch.Generator) -> torch.Tensor:
    """Uniform points (num, 3) on a unit sphere, the surface of [-1, 1]³ or a cylinder of radius 1 and height 2."""
    if shape == "sphere":
        points = torch.randn(num, 3, generator=rng, dtype=torch.float64)
        return points / points.norm(dim=1, keepdim=True)
    u = 2 * torch.rand(num, 3, generator=rng, dtype=torch.float64) - 1
    if shape == "cube":
        face = torch.randint(0, 6, (num,), generator=rng)
        axis, sign = face % 3, 1.0 - 2.0 * (face // 3).double()
        u[torch.arange(num), axis] = sign
        return u
    # Cylinder: the side has area 4π and each cap π, so a point lies on the side with probability 2/3.
    angle = math.pi * u[:, 0]
    on_side = torch.rand(num, generator=rng, dtype=torch.float64) < 2 / 3
    radius = torch.where(on_side, torch.ones(num, dtype=torch.float64),
                         torch.rand(num, generator=rng, dtype=torch.float64).sqrt())
    height = torch.where(on_side, u[:, 1], torch.sign(u[:, 2]))
    return torch.stack([radius * torch.cos(angle), radius * torch.sin(angle), height], dim=1)


class PointClouds(NamedTuple):
    """Point clouds (N, P, 3) and their shape labels (N,) (indices into SHAPES)."""

    X: torch.Tensor
    y: torch.Tensor


def shape_clouds(num_clouds: int, num_points: int = 128, *, noise: float = 0.02, rotate: bool = True,
                 seed: int = 0, dtype: torch.dtype = torch.float32, device="cpu") -> PointClouds:
    """Clouds sampled on the surface of a sphere, a cube or a cylinder, rotated at random, plus noise (Chapter 8)."""
    num_clouds = check_int("num_clouds", num_clouds, minimum=1)
    num_points = check_int("num_points", num_points, minimum=1)
    noise = check_float("noise", noise, low=0.0)
    rotate = check_bool("rotate", rotate)
    seed = check_int("seed", seed, minimum=0)
    rng = generator(seed)
    y = torch.randint(0, len(SHAPES), (num_clouds,), generator=rng)
    X = torch.empty(num_clouds, num_points, 3, dtype=torch.float64)
    for label, shape in enumerate(SHAPES):
        chosen = (y == label).nonzero().flatten()
        X[chosen] = _surface_points(shape, len(chosen) * num_points, rng).reshape(len(chosen), num_points, 3)
    if rotate:
        X = X @ random_rotations(num_clouds, seed=seed + 1).transpose(1, 2)
    X = X + noise * torch.randn(X.shape, generator=rng, dtype=torch.float64)
    return PointClouds(X.to(dtype=check_dtype("dtype", dtype), device=check_device("device", device)), y.to(device))


class PointNet(nn.Module):
    """A shared per-point MLP, a max over the points, and a classifier head (Qi et al.; Chapter 8).

    ``point_widths`` = (3, ..., K) for the shared MLP (a ReLU after every layer,
    so features are non-negative) and ``head_widths`` = (K, ..., classes).
    """

    def __init__(self, point_widths=(3, 32, 64), head_widths=(64, 32, 3), *, seed: int = 0,
                 dtype: torch.dtype = torch.float32, device="cpu"):
        super().__init__()
        point_widths = check_ints("point_widths", point_widths, minimum=1, min_length=2)
        head_widths = check_ints("head_widths", head_widths, minimum=1, min_length=2)
        if point_widths[-1] != head_widths[0]:
            raise ValueError(f"the global feature has {point_widths[-1]} entries but the head expects {head_widths[0]}")
        seed = check_int("seed", seed, minimum=0)
        self.point_mlp = nn.Sequential(nets.mlp(point_widths, seed=seed, dtype=dtype, device=device), nn.ReLU())
        self.head = nets.mlp(head_widths, seed=seed + 1, dtype=dtype, device=device)

    def point_features(self, X: torch.Tensor) -> torch.Tensor:
        """The features of every point, (B, P, K): the same MLP applied to each point."""
        return self.point_mlp(X)

    def global_feature(self, X: torch.Tensor) -> torch.Tensor:
        """The max over the points of their features, (B, K)."""
        return self.point_features(X).amax(dim=1)

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        return self.head(self.global_feature(X))


def critical_points(model: PointNet, X) -> list[torch.Tensor]:
    """For each cloud, the sorted indices of the points that attain the max in some feature (Chapter 8).

    The global feature of the cloud restricted to these points equals that of
    the whole cloud, and there are at most K of them (one per feature).
    """
    if not isinstance(model, PointNet):
        raise TypeError(f"model must be a sets.PointNet, got {describe(model)}")
    X = as_tensor("X", X, ndim=3, floating=True)
    with torch.no_grad():
        winners = model.point_features(X).argmax(dim=1)            # (B, K): the point that wins each feature
    return [torch.unique(row) for row in winners]


class PointNetSegmentation(nn.Module):
    """A per-point head on [local feature, global feature]: equivariant to permutations of the points (Chapter 8)."""

    def __init__(self, backbone: PointNet, widths, *, seed: int = 0):
        super().__init__()
        if not isinstance(backbone, PointNet):
            raise TypeError(f"backbone must be a sets.PointNet, got {describe(backbone)}")
        widths = check_ints("widths", widths, minimum=1, min_length=2)
        width = backbone.head[0].in_features
        if widths[0] != 2 * width:
            raise ValueError(f"widths[0] must be 2 K = {2 * width} (local and global features), got {widths[0]}")
        parameter = next(backbone.parameters())
        self.backbone = backbone
        self.head = nets.mlp(widths, seed=check_int("seed", seed, minimum=0), dtype=parameter.dtype,
                             device=parameter.device)

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        local = self.backbone.point_features(X)                                  # (B, P, K)
        global_ = local.amax(dim=1, keepdim=True).expand_as(local)                # (B, P, K)
        return self.head(torch.cat([local, global_], dim=2))                      # (B, P, classes)


class TNet(nn.Module):
    """PointNet's input transform: a small PointNet that predicts a 3 x 3 matrix A, applied as x -> A x (Chapter 8).

    A starts at the identity, but nothing makes it a rotation: it is a general
    linear map, which the PointNet paper only pushes toward orthogonality with
    the penalty :func:`orthogonality_penalty`.
    """

    def __init__(self, point_widths=(3, 32, 64), *, seed: int = 0, dtype: torch.dtype = torch.float32, device="cpu"):
        super().__init__()
        point_widths = check_ints("point_widths", point_widths, minimum=1, min_length=2)
        if point_widths[0] != 3:
            raise ValueError(f"point_widths must start with 3 (points in space), got {point_widths[0]}")
        self.net = PointNet(point_widths, (point_widths[-1], 9), seed=check_int("seed", seed, minimum=0),
                            dtype=dtype, device=device)

    def matrices(self, X: torch.Tensor) -> torch.Tensor:
        """The predicted matrices (B, 3, 3)."""
        return torch.eye(3, dtype=X.dtype, device=X.device) + self.net(X).reshape(-1, 3, 3)

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        return X @ self.matrices(X).transpose(1, 2)


def orthogonality_penalty(A) -> torch.Tensor:
    """‖I - A Aᵀ‖_F² for each matrix of a batch (..., k, k); zero exactly for orthogonal A (Chapter 8)."""
    A = as_tensor("A", A, floating=True)
    if A.dim() < 2 or A.shape[-1] != A.shape[-2]:
        raise ValueError(f"A must be square matrices (..., k, k), got {describe(A)}")
    eye = torch.eye(A.shape[-1], dtype=A.dtype, device=A.device)
    return ((eye - A @ A.transpose(-1, -2)) ** 2).sum(dim=(-2, -1))


def fit_pointnet(*, num_train: int = 960, num_points: int = 128, noise: float = 0.02, epochs: int = 10,
                 batch_size: int = 32, lr: float = 1e-3, width: int = 64, seed: int = 0, device="cpu"):
    """Train a PointNet (3 → 32 → width, max, width → 32 → 3) on rotated shape clouds with Adam (Chapter 8).

    Returns the model and its train.History.
    """
    width = check_int("width", width, minimum=1)
    data = shape_clouds(num_train, num_points, noise=noise, seed=seed, device=device)
    model = PointNet((3, 32, width), (width, 32, len(SHAPES)), seed=seed, device=device)
    optimizer = torch.optim.Adam(model.parameters(), lr=check_float("lr", lr, low=0.0, low_open=True))
    history = train.fit(model, nn.functional.cross_entropy, optimizer, (data.X, data.y), epochs=epochs,
                        batch_size=batch_size, seed=seed)
    return model, history
