"""Physics-informed neural networks: residuals by automatic differentiation, losses, training (Chapter 14).

A PINN is a network u(x) or u(t, x) trained so that the differential equation
holds at collocation points and the boundary and initial conditions hold where
they are given. The residual is computed by differentiating the network with
respect to its inputs with ``torch.autograd.grad(..., create_graph=True)``, so
the loss can in turn be differentiated with respect to the weights. Any
function of a tensor can stand in for the network, in particular the exact
solution, whose residual must vanish: that tests the residual code.

The two problems of the chapter have closed-form solutions:

- Poisson, -u'' = π² sin(πx) on (0, 1), u(0) = u(1) = 0, solved by u = sin(πx);
- heat, u_t = κ u_xx on (0, 1), u(0, x) = sin(πx), u(t, 0) = u(t, 1) = 0, solved by
  u = exp(-κπ²t) sin(πx).

Inputs are columns: x of shape (N, 1) for Poisson, (t, x) of shape (N, 2) for heat.
"""
from __future__ import annotations

import math
from typing import Callable, NamedTuple

import torch

from .runtime import generator
from .validation import as_tensor, check_dtype, check_float, check_int, describe

Network = Callable[[torch.Tensor], torch.Tensor]


def _check_network(u) -> Network:
    if not callable(u):
        raise TypeError(f"u must be a network or function of its input tensor, got {describe(u)}")
    return u


def input_gradient(values: torch.Tensor, inputs: torch.Tensor) -> torch.Tensor:
    """d values / d inputs row by row, for values (N, 1) computed from inputs (N, k); keeps the graph (Chapter 14).

    Each output row depends only on its own input row, so the gradient of the
    sum gives every row's derivatives at once.
    """
    (gradient,) = torch.autograd.grad(values.sum(), inputs, create_graph=True)
    return gradient


def poisson_source(x: torch.Tensor) -> torch.Tensor:
    """The right-hand side π² sin(πx) of the chapter's Poisson problem."""
    return math.pi ** 2 * torch.sin(math.pi * x)


def poisson_exact(x: torch.Tensor) -> torch.Tensor:
    """The solution sin(πx) of -u'' = π² sin(πx), u(0) = u(1) = 0."""
    return torch.sin(math.pi * x)


def heat_exact(tx: torch.Tensor, kappa: float) -> torch.Tensor:
    """The solution exp(-κπ²t) sin(πx) of u_t = κ u_xx with u(0, x) = sin(πx) and zero boundary values."""
    return torch.exp(-kappa * math.pi ** 2 * tx[:, :1]) * torch.sin(math.pi * tx[:, 1:])


def poisson_residual(u: Network, x) -> torch.Tensor:
    """The residual -u''(x) - π² sin(πx) at points x of shape (N, 1), differentiable in u's weights."""
    u = _check_network(u)
    x = as_tensor("x", x, shape=(None, 1), floating=True).detach().requires_grad_(True)
    u_x = input_gradient(u(x), x)
    u_xx = input_gradient(u_x, x)
    return -u_xx - poisson_source(x)


def heat_residual(u: Network, tx, kappa) -> torch.Tensor:
    """The residual u_t - κ u_xx at points (t, x) of shape (N, 2); κ may be a trainable tensor."""
    u = _check_network(u)
    tx = as_tensor("tx", tx, shape=(None, 2), floating=True).detach().requires_grad_(True)
    if not isinstance(kappa, torch.Tensor):
        kappa = check_float("kappa", kappa, low=0.0)
    grads = input_gradient(u(tx), tx)               # (N, 2): u_t, u_x
    u_xx = input_gradient(grads[:, 1:], tx)[:, 1:]  # d(u_x)/dx
    return grads[:, :1] - kappa * u_xx


class PoissonPoints(NamedTuple):
    """Collocation points inside (0, 1) and the two boundary points."""

    interior: torch.Tensor
    boundary: torch.Tensor


class HeatPoints(NamedTuple):
    """Collocation points (t, x) inside, points on the initial line t = 0 and on the walls x = 0, 1."""

    interior: torch.Tensor
    initial: torch.Tensor
    boundary: torch.Tensor


def poisson_points(num_interior: int, *, seed: int = 0, dtype=torch.float64, device="cpu") -> PoissonPoints:
    """Uniform random collocation points in (0, 1) and the boundary {0, 1}, as columns."""
    num_interior = check_int("num_interior", num_interior, minimum=1)
    dtype = check_dtype("dtype", dtype)
    interior = torch.rand(num_interior, 1, dtype=torch.float64, generator=generator(seed))
    boundary = torch.tensor([[0.0], [1.0]], dtype=torch.float64)
    return PoissonPoints(interior.to(dtype=dtype, device=device), boundary.to(dtype=dtype, device=device))


def heat_points(num_interior: int, num_initial: int, num_boundary: int, *, t_max: float = 1.0, seed: int = 0,
                dtype=torch.float64, device="cpu") -> HeatPoints:
    """Uniform random points in (0, t_max) x (0, 1), on t = 0, and on x ∈ {0, 1} (half on each wall)."""
    counts = [check_int(name, value, minimum=1) for name, value in
              (("num_interior", num_interior), ("num_initial", num_initial), ("num_boundary", num_boundary))]
    t_max = check_float("t_max", t_max, low=0.0, low_open=True)
    dtype = check_dtype("dtype", dtype)
    gen = generator(seed)
    interior = torch.rand(counts[0], 2, dtype=torch.float64, generator=gen) * torch.tensor([t_max, 1.0],
                                                                                             dtype=torch.float64)
    initial = torch.cat([torch.zeros(counts[1], 1, dtype=torch.float64),
                         torch.rand(counts[1], 1, dtype=torch.float64, generator=gen)], dim=1)
    walls = (torch.arange(counts[2]) % 2).to(torch.float64)[:, None]
    boundary = torch.cat([t_max * torch.rand(counts[2], 1, dtype=torch.float64, generator=gen), walls], dim=1)
    return HeatPoints(*(p.to(dtype=dtype, device=device) for p in (interior, initial, boundary)))


class PinnLoss(NamedTuple):
    """The two parts of a PINN loss: data (boundary and initial values) and the mean squared residual."""

    data: torch.Tensor
    residual: torch.Tensor


def poisson_loss(u: Network, points: PoissonPoints) -> PinnLoss:
    """MSE of u at the boundary (target 0) and of the Poisson residual at the collocation points."""
    return PinnLoss((u(points.boundary) ** 2).mean(), (poisson_residual(u, points.interior) ** 2).mean())


def heat_loss(u: Network, points: HeatPoints, kappa) -> PinnLoss:
    """MSE of the initial values sin(πx) and zero wall values, and of the heat residual."""
    initial_error = u(points.initial) - torch.sin(math.pi * points.initial[:, 1:])
    data = torch.cat([initial_error, u(points.boundary)])
    return PinnLoss((data ** 2).mean(), (heat_residual(u, points.interior, kappa) ** 2).mean())


def fit(loss_fn: Callable[[], PinnLoss], params, *, adam_steps: int, lr: float, lbfgs_steps: int = 0,
        residual_weight: float = 1.0) -> list[float]:
    """Minimise data + c·residual with Adam, then full-batch L-BFGS with a strong-Wolfe line search (Chapter 14).

    ``loss_fn()`` evaluates the PinnLoss on fixed points; ``params`` are the
    tensors to train (the network's weights, and a coefficient for an inverse
    problem). Returns the total loss after every Adam step and every L-BFGS
    iteration.
    """
    if not callable(loss_fn):
        raise TypeError(f"loss_fn must be callable, got {describe(loss_fn)}")
    params = list(params)
    adam_steps = check_int("adam_steps", adam_steps, minimum=0)
    lbfgs_steps = check_int("lbfgs_steps", lbfgs_steps, minimum=0)
    lr = check_float("lr", lr, low=0.0, low_open=True)
    weight = check_float("residual_weight", residual_weight, low=0.0)

    def total() -> torch.Tensor:
        parts = loss_fn()
        return parts.data + weight * parts.residual

    losses = []
    adam = torch.optim.Adam(params, lr=lr)
    for _ in range(adam_steps):
        adam.zero_grad()
        loss = total()
        loss.backward()
        adam.step()
        losses.append(loss.item())
    if lbfgs_steps:
        lbfgs = torch.optim.LBFGS(params, lr=1.0, max_iter=lbfgs_steps, history_size=50,
                                  tolerance_grad=1e-12, tolerance_change=1e-15, line_search_fn="strong_wolfe")

        def closure():
            lbfgs.zero_grad()
            loss = total()
            loss.backward()
            losses.append(loss.item())
            return loss

        lbfgs.step(closure)
    return losses


def relative_l2(approx: torch.Tensor, exact: torch.Tensor) -> float:
    """‖approx - exact‖ / ‖exact‖ over all entries, as a float."""
    approx = as_tensor("approx", approx, floating=True)
    exact = as_tensor("exact", exact, floating=True)
    if approx.shape != exact.shape:
        raise ValueError(f"approx and exact must have the same shape, got {describe(approx)} and {describe(exact)}")
    return float(torch.linalg.vector_norm(approx - exact) / torch.linalg.vector_norm(exact))
