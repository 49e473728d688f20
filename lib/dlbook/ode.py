"""Fixed-step ODE solvers, their order, and the adjoint method for neural ODEs (Chapter 14).

A vector field is a function ``f(t, z)`` of a float time and a tensor state of
any shape (a batch of states is one tensor with the batch first); it returns
dz/dt with the shape of ``z``. Euler, the explicit midpoint rule and the
classical fourth-order Runge-Kutta rule take ``num_steps`` equal steps from
``t0`` to ``t1`` (``t1 < t0`` integrates backward). Everything stays on the
device and in the dtype of the state; comparisons with closed forms are made
in float64.

The adjoint method computes the gradient of a loss of z(t1) with respect to
z(t0) and to the field's parameters by one backward solve of the augmented
state (z, a, g), with a(t) = dL/dz(t):

    dz/dt = f,   da/dt = -a^T ∂f/∂z,   dg/dt = -a^T ∂f/∂θ,   a(t1) = dL/dz(t1),  g(t1) = 0,

integrated from t1 down to t0, where dL/dz(t0) = a(t0) and dL/dθ = g(t0).
The vector-Jacobian products come from ``torch.autograd.grad`` on one
evaluation of f at a time, so memory does not grow with the number of steps.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np
import torch

from .validation import as_tensor, check_choice, check_float, check_int, describe

Field = Callable[[float, torch.Tensor], torch.Tensor]


def euler_step(f: Field, t: float, z: torch.Tensor, h: float) -> torch.Tensor:
    """One Euler step z + h f(t, z): first order (Chapter 14)."""
    return z + h * f(t, z)


def midpoint_step(f: Field, t: float, z: torch.Tensor, h: float) -> torch.Tensor:
    """One explicit midpoint step: the slope at a half Euler step; second order (Chapter 14)."""
    return z + h * f(t + h / 2, z + (h / 2) * f(t, z))


def rk4_step(f: Field, t: float, z: torch.Tensor, h: float) -> torch.Tensor:
    """One step of the classical Runge-Kutta rule, Simpson-weighted slopes; fourth order (Chapter 14)."""
    k1 = f(t, z)
    k2 = f(t + h / 2, z + (h / 2) * k1)
    k3 = f(t + h / 2, z + (h / 2) * k2)
    k4 = f(t + h, z + h * k3)
    return z + (h / 6) * (k1 + 2 * k2 + 2 * k3 + k4)


#: The steppers by name, with their order of accuracy.
STEPPERS = {"euler": euler_step, "midpoint": midpoint_step, "rk4": rk4_step}
ORDERS = {"euler": 1, "midpoint": 2, "rk4": 4}


def _check_field(f) -> Field:
    if not callable(f):
        raise TypeError(f"f must be a function f(t, z), got {describe(f)}")
    return f


def odeint(f: Field, z0, t0: float, t1: float, num_steps: int, *, method: str = "rk4",
           return_path: bool = False) -> torch.Tensor:
    """Solve dz/dt = f(t, z) from z(t0) = z0 to t1 in ``num_steps`` equal steps (Chapter 14).

    Returns z(t1), or with ``return_path=True`` the states at all num_steps + 1
    times, stacked along a new first dimension. Autograd flows through every
    step, which is backpropagation through the solver.
    """
    f = _check_field(f)
    z = as_tensor("z0", z0, floating=True)
    t0, t1 = check_float("t0", t0), check_float("t1", t1)
    num_steps = check_int("num_steps", num_steps, minimum=1)
    check_choice("method", method, STEPPERS)
    step, h = STEPPERS[method], (t1 - t0) / num_steps
    path = [z]
    for k in range(num_steps):
        z = step(f, t0 + k * h, z, h)
        if return_path:
            path.append(z)
    return torch.stack(path) if return_path else z


def convergence_order(num_steps, errors) -> float:
    """The slope p of log(error) against log(1/num_steps): error ≈ C h^p (Chapter 14)."""
    steps = np.asarray(num_steps, dtype=float)
    errors = np.asarray(errors, dtype=float)
    if steps.shape != errors.shape or steps.ndim != 1 or len(steps) < 2:
        raise ValueError(f"num_steps and errors must be 1-D of the same length >= 2, got {steps.shape} and "
                         f"{errors.shape}")
    if (steps <= 0).any() or (errors <= 0).any():
        raise ValueError("num_steps and errors must be positive (log-log fit)")
    return float(-np.polyfit(np.log(steps), np.log(errors), 1)[0])


class AdjointResult(NamedTuple):
    """The backward solve: z(t0) recovered, dL/dz(t0), and dL/dθ for each parameter."""

    z0: torch.Tensor
    grad_z0: torch.Tensor
    grad_params: tuple[torch.Tensor, ...]


def adjoint_gradients(f: Field, params, z1, grad_z1, t0: float, t1: float, num_steps: int, *,
                      method: str = "rk4") -> AdjointResult:
    """Gradients of a loss L(z(t1)) by the adjoint method, from z(t1) and a(t1) = dL/dz(t1) (Chapter 14).

    ``params`` are the tensors θ that f depends on (each with requires_grad).
    The augmented state (z, a, g) is flattened into one vector and integrated
    from t1 back to t0 with the chosen stepper; no graph outlives one
    evaluation of the augmented field.
    """
    f = _check_field(f)
    params = tuple(params)
    for index, p in enumerate(params):
        if not isinstance(p, torch.Tensor) or not p.requires_grad:
            raise TypeError(f"params[{index}] must be a tensor with requires_grad=True, got {describe(p)}")
    z1 = as_tensor("z1", z1, floating=True).detach()
    grad_z1 = as_tensor("grad_z1", grad_z1, floating=True).detach()
    if grad_z1.shape != z1.shape:
        raise ValueError(f"grad_z1 must have the shape of z1 {tuple(z1.shape)}, got {describe(grad_z1)}")
    sizes = [z1.numel(), z1.numel(), *(p.numel() for p in params)]

    def augmented(t: float, state: torch.Tensor) -> torch.Tensor:
        z, a, *_ = torch.split(state, sizes)
        with torch.enable_grad():
            z = z.detach().reshape(z1.shape).requires_grad_(True)
            dz = f(t, z)
            vjps = torch.autograd.grad(dz, (z, *params), grad_outputs=a.reshape(z1.shape), allow_unused=True)
        vjps = [torch.zeros_like(p) if v is None else v for v, p in zip(vjps, (z, *params))]
        return torch.cat([dz.detach().reshape(-1), *(-v.reshape(-1) for v in vjps)])

    start = torch.cat([z1.reshape(-1), grad_z1.reshape(-1),
                       *(torch.zeros(p.numel(), dtype=z1.dtype, device=z1.device) for p in params)])
    with torch.no_grad():
        end = odeint(augmented, start, t1, t0, num_steps, method=method)
    z0, a0, *grads = torch.split(end, sizes)
    return AdjointResult(z0.reshape(z1.shape), a0.reshape(z1.shape),
                         tuple(g.reshape(p.shape) for g, p in zip(grads, params)))


def count_saved_tensors(fn: Callable, *args) -> int:
    """How many tensors autograd saves for the backward pass while ``fn(*args)`` runs (Chapter 14).

    This counts what backpropagation must keep alive until the backward pass:
    for a solver unrolled in autograd it grows with the number of steps.
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {describe(fn)}")
    count = 0

    def pack(tensor):
        nonlocal count
        count += 1
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        fn(*args)
    return count


def linear_flow_error(A, z0, num_steps: int, *, method: str = "euler", t1: float = 1.0) -> float:
    """Largest error of the fixed-step solution of dz/dt = A z at t1 against expm(t1 A) z0 (Chapter 14).

    With Euler steps this is the weight-tied residual network z <- z + (t1/N) A z
    of N blocks, compared with its continuous limit. The reference comes from
    scipy.linalg.expm.
    """
    from scipy.linalg import expm

    A = as_tensor("A", A, ndim=2, floating=True)
    if A.shape[0] != A.shape[1]:
        raise ValueError(f"A must be square, got {describe(A)}")
    z0 = as_tensor("z0", z0, shape=(None, A.shape[0]), floating=True)
    exact = z0.cpu().double().numpy() @ expm(t1 * A.cpu().double().numpy()).T
    z1 = odeint(lambda t, z: z @ A.T, z0, 0.0, t1, num_steps, method=method)
    return float(np.abs(z1.cpu().double().numpy() - exact).max())


def cubic_spiral_field(A) -> Field:
    """The true field of the spiral example, dz/dt = A z^{∘3} with the cube taken elementwise (Chapter 14)."""
    A = as_tensor("A", A, shape=(2, 2), floating=True)
    return lambda t, z: (z ** 3) @ A.T.to(z.dtype)
