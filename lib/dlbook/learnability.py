"""Learnability beyond parities: flat landscapes, decomposition, conditioning, flat activations (Chapter 16).

* Linear-periodic targets (Shamir 2016): the square loss of a cosine neuron
  cos(w.x) against a target cos(v.x) under Gaussian inputs has a closed form,
  which shows a landscape that is flat everywhere except near +-v.
* End-to-end versus decomposition (Shalev-Shwartz et al. 2017, Section 3), on
  vectors instead of images: the parity of k item labels, learned from the
  tuple label alone or with the item labels as extra supervision.
* Conditioning (Section 4): piecewise-linear curves f = W p, the inverse
  U = W^{-1} (a [1, -2, 1] convolution) and why gradient descent needs a
  number of steps that grows like a power of n unless the features are whitened.
* Flat activations (Section 5): a staircase activation has zero derivative,
  so the gradient never moves, while the "forward-only" update does.

Closed forms and least squares are computed in float64; the networks that are
trained (tuples) in float32.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch.func import grad, hessian, vmap

from . import nets, quadratics
from .runtime import generator
from .validation import (
    as_tensor,
    check_bool,
    check_device,
    check_dtype,
    check_float,
    check_int,
    check_same_length,
    check_square,
    describe,
)

__all__ = ["cosine_loss", "MonteCarlo", "cosine_loss_mc", "cosine_grad", "cosine_hessian",
           "target_variance", "Tuples", "tuple_data", "tuple_network", "GradientSNR", "item_grad_snr",
           "TupleRuns", "train_tuples", "integration_matrix", "second_difference_matrix", "PWLCurves",
           "pwl_curves", "patch_features", "whitening", "gd_least_squares", "staircase", "train_staircase"]


# ---------------------------------------------------------------------------
# Linear-periodic targets: a cosine neuron under Gaussian inputs
# ---------------------------------------------------------------------------

def _check_w_v(w, v):
    w = as_tensor("w", w, dtype=torch.float64)
    v = as_tensor("v", v, ndim=1, dtype=torch.float64)
    if w.dim() == 0 or w.shape[-1] != v.shape[0]:
        raise ValueError(f"w must end in a dimension of size {v.shape[0]} like v, got shape {tuple(w.shape)}")
    return w, v.to(w.device)


def _mean_cos(a: torch.Tensor, keepdim: bool = False) -> torch.Tensor:
    """E cos(a.x) = exp(-|a|^2 / 2) for x ~ N(0, I), for a batch of vectors a (..., d)."""
    return torch.exp(-0.5 * (a**2).sum(dim=-1, keepdim=keepdim))


def cosine_loss(w, v) -> torch.Tensor:
    """F(w) = E_x (cos(w.x) - cos(v.x))^2 for x ~ N(0, I), in closed form; w may be a batch (..., d) (Chapter 16).

    Uses E cos(a.x) = exp(-|a|^2 / 2) and cos a cos b = (cos(a - b) + cos(a + b)) / 2.
    """
    w, v = _check_w_v(w, v)
    e = _mean_cos
    return 0.5 * (1 + e(2 * w)) - e(w - v) - e(w + v) + 0.5 * (1 + e(2 * v))


class MonteCarlo(NamedTuple):
    """A Monte Carlo average and its standard error (Chapter 16)."""

    mean: float
    standard_error: float


def cosine_loss_mc(w, v, num_samples: int = 100_000, *, seed: int = 0) -> MonteCarlo:
    """Monte Carlo estimate of cosine_loss at one w, with its standard error (Chapter 16)."""
    w, v = _check_w_v(w, v)
    if w.dim() != 1:
        raise ValueError(f"w must be a single vector here, got shape {tuple(w.shape)}")
    num_samples = check_int("num_samples", num_samples, minimum=2)
    X = torch.randn(num_samples, v.shape[0], generator=generator(seed), dtype=torch.float64).to(w.device)
    losses = (torch.cos(X @ w) - torch.cos(X @ v)) ** 2
    return MonteCarlo(losses.mean().item(), (losses.std() / math.sqrt(num_samples)).item())


def cosine_grad(w, v) -> torch.Tensor:
    """Closed-form gradient of cosine_loss with respect to w (batch allowed) (Chapter 16)."""
    w, v = _check_w_v(w, v)

    def e(a):
        return _mean_cos(a, keepdim=True)

    return -2 * w * e(2 * w) + (w - v) * e(w - v) + (w + v) * e(w + v)


def cosine_hessian(w, v) -> torch.Tensor:
    """Hessian of cosine_loss at one point w (torch.func.hessian of the closed form) (Chapter 16)."""
    w, v = _check_w_v(w, v)
    if w.dim() != 1:
        raise ValueError(f"w must be a single vector here, got shape {tuple(w.shape)}")
    return hessian(lambda u: cosine_loss(u, v))(w)


def target_variance(d: int, radius: float, *, w_norm: float = 1.0, num_targets: int = 20_000,
                    seed: int = 0) -> float:
    """Variance across targets v (uniform on the sphere of the given radius) of the gradient at w (Chapter 16).

    Shamir's Theorem 2 bounds this; w is a fixed vector of norm w_norm.
    """
    d = check_int("d", d, minimum=1)
    radius = check_float("radius", radius, low=0, low_open=True)
    w_norm = check_float("w_norm", w_norm, low=0)
    num_targets = check_int("num_targets", num_targets, minimum=2)
    directions = torch.randn(num_targets, d, generator=generator(seed), dtype=torch.float64)
    V = radius * directions / directions.norm(dim=1, keepdim=True)            # (T, d)
    w = torch.zeros(d, dtype=torch.float64)
    w[0] = w_norm
    # The target-dependent part of the gradient; the rest is the same for every v.
    b = (w - V) * _mean_cos(w - V, keepdim=True) + (w + V) * _mean_cos(w + V, keepdim=True)   # (T, d)
    return ((b - b.mean(dim=0)) ** 2).sum(dim=1).mean().item()


# ---------------------------------------------------------------------------
# End-to-end versus decomposition: the parity of k item labels
# ---------------------------------------------------------------------------

class Tuples(NamedTuple):
    """k Gaussian items per example with their labels sign(u.z) and the tuple label, their product (Chapter 16)."""

    Z: torch.Tensor        # (num, k, dim)
    items: torch.Tensor    # (num, k) in {-1, +1}
    labels: torch.Tensor   # (num,) in {-1, +1}


def tuple_data(num: int, k: int, dim: int = 10, *, seed: int = 0, direction_seed: int = 1234,
               device="cpu") -> Tuples:
    """Draw ``num`` tuples of k items z ~ N(0, I_dim); item label sign(u.z), tuple label the product (Chapter 16).

    The hidden direction u depends only on ``direction_seed``, so that train and test agree.
    """
    num = check_int("num", num, minimum=1)
    k = check_int("k", k, minimum=1)
    dim = check_int("dim", dim, minimum=1)
    device = check_device("device", device)
    u = torch.randn(dim, generator=generator(check_int("direction_seed", direction_seed, minimum=0)))
    Z = torch.randn(num, k, dim, generator=generator(seed))
    items = torch.where(Z @ u > 0, 1.0, -1.0)
    return Tuples(Z.to(device), items.to(device), items.prod(dim=1).to(device))


def tuple_network(k: int, dim: int = 10, hidden: int = 50, head: int = 100, *, seed: int = 0,
                  device="cpu") -> dict:
    """Parameters of the paper's tuple network, with vectors for images (Chapter 16).

    A shared item scorer dim -> hidden -> 1 (nets.mlp, seed ``seed``), a sigmoid of each
    item's score, and a head k -> head -> 1 on the k sigmoids (nets.mlp, seed ``seed + 1``).
    Returned as a dict of float32 tensors, ready for torch.func.
    """
    k = check_int("k", k, minimum=1)
    dim, hidden, head = (check_int(name, value, minimum=1) for name, value in (("dim", dim), ("hidden", hidden),
                                                                                 ("head", head)))
    seed = check_int("seed", seed, minimum=0)
    (s1, s2) = nets.random_layers((dim, hidden, 1), seed=seed, dtype=torch.float32, device=device)
    (h1, h2) = nets.random_layers((k, head, 1), seed=seed + 1, dtype=torch.float32, device=device)
    return {"s1.weight": s1.W, "s1.bias": s1.b, "s2.weight": s2.W[0], "s2.bias": s2.b[0],
            "h1.weight": h1.W, "h1.bias": h1.b, "h2.weight": h2.W[0], "h2.bias": h2.b[0]}


def _item_scores(p: dict, Z: torch.Tensor) -> torch.Tensor:
    """Scores (..., k) of one net's scorer on items Z (..., k, dim)."""
    hidden = torch.relu(Z @ p["s1.weight"].T + p["s1.bias"])
    return hidden @ p["s2.weight"] + p["s2.bias"]


def _head(p: dict, scores: torch.Tensor) -> torch.Tensor:
    """Tuple prediction (...,) of one net's head on the sigmoids of its item scores (..., k)."""
    hidden = torch.relu(torch.sigmoid(scores) @ p["h1.weight"].T + p["h1.bias"])
    return hidden @ p["h2.weight"] + p["h2.bias"]


def _tuple_output(p: dict, Z: torch.Tensor) -> torch.Tensor:
    return _head(p, _item_scores(p, Z))


def _losses(p, Z, items, labels):
    """Mean hinge losses of one net: on the tuple label and on the item labels."""
    scores = _item_scores(p, Z)
    tuple_loss = torch.relu(1 - labels * _head(p, scores)).mean()
    item_loss = torch.relu(1 - items * scores).mean()
    return tuple_loss, item_loss


class GradientSNR(NamedTuple):
    """Signal-to-noise ratio of a gradient estimated from mini-batches (Chapter 16).

    ``snr`` and ``naive`` average one estimate of ||E g||^2 per mini-batch, with and
    without the correction -tr(Cov)/batch_size; both are divided by the noise tr(Cov g).
    ``standard_error`` is that of ``snr``, from the spread across mini-batches.
    """

    snr: float
    naive: float
    standard_error: float


def item_grad_snr(k: int, decompose: bool, *, num_batches: int = 200, batch_size: int = 100,
                  seed: int = 0) -> GradientSNR:
    """Signal-to-noise ratio at initialisation of the gradient on the item scorer's last layer (Chapter 16).

    Per-sample gradients g come from vmap over grad. Each mini-batch gives the unbiased
    estimate ||mean g||^2 - tr(Cov g) / batch_size of the signal ||E g||^2; the naive
    ||mean g||^2 is too large by tr(Cov g) / batch_size, which is all it measures when the
    signal is zero. End-to-end (decompose=False) uses the tuple loss; decomposition adds
    the item loss.
    """
    k = check_int("k", k, minimum=1)
    decompose = check_bool("decompose", decompose)
    num_batches = check_int("num_batches", num_batches, minimum=2)
    batch_size = check_int("batch_size", batch_size, minimum=2)
    Z, items, labels = tuple_data(num_batches * batch_size, k, seed=seed + 1)
    params = tuple_network(k, seed=seed)
    last = {name: params[name] for name in ("s2.weight", "s2.bias")}
    rest = {name: t for name, t in params.items() if name not in last}

    def sample_loss(last_layer, z, item, label):
        tuple_loss, item_loss = _losses({**rest, **last_layer}, z[None], item[None], label[None])
        return tuple_loss + item_loss if decompose else tuple_loss

    grads = vmap(grad(sample_loss), in_dims=(None, 0, 0, 0))(last, Z, items, labels)
    G = torch.cat([grads["s2.weight"], grads["s2.bias"][:, None]], dim=1).double()
    batches = G.reshape(num_batches, batch_size, -1)                         # (num_batches, batch_size, P)
    noise = G.var(dim=0).sum()                                               # tr Cov(g), from every sample
    naive = (batches.mean(dim=1) ** 2).sum(dim=1)                            # (num_batches,)
    unbiased = naive - batches.var(dim=1).sum(dim=1) / batch_size
    return GradientSNR((unbiased.mean() / noise).item(), (naive.mean() / noise).item(),
                       (unbiased.std() / math.sqrt(num_batches) / noise).item())


@dataclass(frozen=True)
class TupleRuns:
    """Test accuracy of end-to-end and decomposition training for several k (Chapter 16)."""

    ks: tuple
    steps: torch.Tensor       # (E,)
    end_to_end: torch.Tensor  # (len(ks), E) tuple accuracy
    decomposed: torch.Tensor  # (len(ks), E)


def train_tuples(ks=(1, 2, 3, 4), *, steps: int = 1500, batch_size: int = 200, lr: float = 1e-3,
                 eval_every: int = 100, test_size: int = 2000, seed: int = 0) -> TupleRuns:
    """Adam on fresh tuples; for each k one end-to-end and one decomposition net, trained together (Chapter 16).

    The two nets of one k start from the same weights and see the same data; the only
    difference is the extra item loss of the decomposition net.
    """
    ks = tuple(check_int(f"ks[{i}]", k, minimum=1) for i, k in enumerate(ks))
    steps = check_int("steps", steps, minimum=1)
    batch_size = check_int("batch_size", batch_size, minimum=1)
    lr = check_float("lr", lr, low=0, low_open=True)
    eval_every = check_int("eval_every", eval_every, minimum=1)
    test_size = check_int("test_size", test_size, minimum=1)
    seed = check_int("seed", seed, minimum=0)
    groups = []
    for i, k in enumerate(ks):
        one = tuple_network(k, seed=seed + 2 * i)
        # (2, ...): the end-to-end and the decomposition copy of the same initial net.
        groups.append((k, {n: t.repeat(2, *[1] * t.dim()).requires_grad_() for n, t in one.items()}))
    opt = torch.optim.Adam([t for _, p in groups for t in p.values()], lr=lr)
    item_weight = torch.tensor([0.0, 1.0])                      # (end-to-end, decomposition)
    batched_losses = vmap(_losses, in_dims=(0, None, None, None))
    tests = [tuple_data(test_size, k, seed=10_000 + k) for k in ks]
    recorded_steps, accs = [], []

    def record(step):
        with torch.no_grad():
            row = [(vmap(_tuple_output, in_dims=(0, None))(p, Z) * labels > 0).float().mean(dim=1)
                   for (_, p), (Z, _, labels) in zip(groups, tests)]
        recorded_steps.append(step)
        accs.append(torch.stack(row))                           # (len(ks), 2)

    record(0)
    for step in range(1, steps + 1):
        loss = 0.0
        for j, (k, p) in enumerate(groups):
            Z, items, labels = tuple_data(batch_size, k, seed=seed + 1 + step * len(ks) + j)
            tuple_loss, item_loss = batched_losses(p, Z, items, labels)            # (2,), (2,)
            loss = loss + (tuple_loss + item_weight * item_loss).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % eval_every == 0 or step == steps:
            record(step)
    acc = torch.stack(accs, dim=2)                              # (len(ks), 2, E)
    return TupleRuns(ks, torch.tensor(recorded_steps), acc[:, 0], acc[:, 1])


# ---------------------------------------------------------------------------
# Conditioning: piecewise-linear curves
# ---------------------------------------------------------------------------

def integration_matrix(n: int, *, dtype: torch.dtype = torch.float64, device="cpu") -> torch.Tensor:
    """W with W[i, j] = max(i - j + 1, 0): f = W p turns slope changes p into curve values f (Chapter 16)."""
    n = check_int("n", n, minimum=1)
    dtype, device = check_dtype("dtype", dtype), check_device("device", device)
    i = torch.arange(n, device=device)
    return torch.clamp(i[:, None] - i[None, :] + 1, min=0).to(dtype)


def second_difference_matrix(n: int, *, dtype: torch.dtype = torch.float64, device="cpu") -> torch.Tensor:
    """U = W^{-1}: ones on the diagonal and second subdiagonal, -2 on the first, a [1, -2, 1] filter (Chapter 16)."""
    n = check_int("n", n, minimum=1)
    dtype, device = check_dtype("dtype", dtype), check_device("device", device)
    U = torch.eye(n, dtype=dtype, device=device)
    U -= 2 * torch.diag(torch.ones(n - 1, dtype=dtype, device=device), -1)
    U += torch.diag(torch.ones(n - 2, dtype=dtype, device=device), -2) if n > 2 else 0
    return U


class PWLCurves(NamedTuple):
    """Piecewise-linear curves: slope changes p and curve values f = p W^T, both (num, n) (Chapter 16)."""

    slopes: torch.Tensor
    curves: torch.Tensor


def pwl_curves(num: int, n: int = 100, k: int = 3, *, seed: int = 0, device="cpu") -> PWLCurves:
    """Random piecewise-linear curves with k slope changes U[-1, 1] at distinct knots in [3, n - 4] (Chapter 16).

    p also holds a random offset at position 0; the curves are f = p W^T (float64).
    """
    num = check_int("num", num, minimum=1)
    n = check_int("n", n, minimum=12)
    k = check_int("k", k, minimum=1, maximum=n - 7)
    device = check_device("device", device)
    gen = generator(seed)
    knots = torch.argsort(torch.rand(num, n - 7, generator=gen), dim=1)[:, :k] + 3  # (num, k)
    p = torch.zeros(num, n, dtype=torch.float64)
    p.scatter_(1, knots, 2 * torch.rand(num, k, generator=gen, dtype=torch.float64) - 1)
    p[:, 0] = 2 * torch.rand(num, generator=gen, dtype=torch.float64) - 1
    p = p.to(device)
    return PWLCurves(p, p @ integration_matrix(n, device=device).T)


def patch_features(f: torch.Tensor) -> torch.Tensor:
    """Rows (f_t, f_{t-1}, f_{t-2}) of every curve and position t >= 2: the inputs of a 3-tap filter (Chapter 16)."""
    f = as_tensor("f", f, ndim=2, floating=True)
    if f.shape[1] < 3:
        raise ValueError(f"f must have at least 3 columns, got shape {tuple(f.shape)}")
    windows = f.unfold(1, 3, 1).flip(-1)                        # (num, n - 2, 3), newest first
    return windows.reshape(-1, 3)


def whitening(C: torch.Tensor) -> torch.Tensor:
    """C^{-1/2} of a symmetric positive definite matrix: the whitening of the paper's Section 4.1.3 (Chapter 16)."""
    C = check_square("C", C, symmetric=True).to(torch.float64)
    eig, vecs = torch.linalg.eigh(C)
    if eig[0] <= 0:
        raise ValueError("C must be positive definite")
    return vecs @ torch.diag(eig.rsqrt()) @ vecs.T


def gd_least_squares(A: torch.Tensor, b: torch.Tensor, steps: int) -> torch.Tensor:
    """Gradient descent with step 1/L on (1/2N)||A x - b||^2 from x = 0 (Chapter 16).

    Returns the relative suboptimality (F(x_t) - F*) / (F(x_0) - F*) after
    each of the ``steps`` steps (dlbook.quadratics.least_squares_gd).
    """
    A = as_tensor("A", A, ndim=2, floating=True).double()
    b = as_tensor("b", b, ndim=1, floating=True).double().to(A.device)
    check_same_length("A", A, "b", b)
    if len(A) < A.shape[1]:
        raise ValueError(f"A must have at least as many rows as columns, got {describe(A)}")
    steps = check_int("steps", steps, minimum=1)
    problem = quadratics.least_squares(A, b)
    lr = 1 / torch.linalg.eigvalsh(problem.hessian)[-1].item()
    gaps = quadratics.least_squares_gd(problem, lr, steps).losses
    return gaps[1:] / gaps[0]


# ---------------------------------------------------------------------------
# Flat activations: a staircase has zero derivative
# ---------------------------------------------------------------------------

def staircase(z: torch.Tensor, straight_through: bool = False) -> torch.Tensor:
    """floor(z); with straight_through the backward pass treats it as the identity (Chapter 16)."""
    z = as_tensor("z", z, floating=True)
    straight_through = check_bool("straight_through", straight_through)
    if straight_through:
        return z + (torch.floor(z) - z).detach()
    return torch.floor(z)


def train_staircase(straight_through: bool, *, d: int = 5, steps: int = 300, lr: float = 0.05,
                    batch_size: int = 256, scale: float = 4.0, seed: int = 0) -> torch.Tensor:
    """Fit w in y = floor(w.x) to targets y = floor(v.x) (x ~ N(0, I), |v| = scale) by gradient steps (Chapter 16).

    Returns the distance |w_t - v| after every step. With plain gradients it never moves
    (the derivative of floor is zero); with the forward-only (straight-through) update it converges.
    """
    straight_through = check_bool("straight_through", straight_through)
    d = check_int("d", d, minimum=1)
    steps = check_int("steps", steps, minimum=1)
    lr = check_float("lr", lr, low=0, low_open=True)
    batch_size = check_int("batch_size", batch_size, minimum=1)
    scale = check_float("scale", scale, low=0, low_open=True)
    gen = generator(check_int("seed", seed, minimum=0))
    v = torch.randn(d, generator=gen, dtype=torch.float64)
    v = scale * v / v.norm()
    w = (0.1 * torch.randn(d, generator=gen, dtype=torch.float64)).requires_grad_()
    distances = []
    for _ in range(steps):
        X = torch.randn(batch_size, d, generator=gen, dtype=torch.float64)
        loss = 0.5 * ((staircase(X @ w, straight_through) - torch.floor(X @ v)) ** 2).mean()
        (g,) = torch.autograd.grad(loss, w)
        with torch.no_grad():
            w -= lr * g
        distances.append((w - v).norm().item())
    return torch.tensor(distances)
