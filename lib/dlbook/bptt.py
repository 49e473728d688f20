"""Backpropagation through time: Jacobian products, the BPTT sum, gradient clipping (Chapter 6).

The recurrence is the Elman form h_t = φ(U h_{t-1} + V x_t) of one sequence,
with φ the identity ("linear"), tanh or the logistic sigmoid. The gradient
that reaches h_0 from h_t is the product of the per-step Jacobians
J_s = diag φ'(U h_{s-1} + V x_s) U, and its size decides whether a network
can learn dependencies across t steps. Functions that compare with autograd
default to float64 inputs and keep the dtype they are given.
"""
from __future__ import annotations

from typing import NamedTuple

import torch
from torch.autograd.functional import jacobian

from . import recurrent
from .validation import as_tensor, check_choice, check_float, check_int, describe

#: The nonlinearities of the Elman recurrence, and the largest value of each one's derivative (α).
NONLINEARITIES = {"linear": 1.0, "tanh": 1.0, "sigmoid": 0.25}


def _phi(nonlinearity: str, a: torch.Tensor) -> torch.Tensor:
    if nonlinearity == "tanh":
        return torch.tanh(a)
    if nonlinearity == "sigmoid":
        return torch.sigmoid(a)
    return a


def _phi_prime(nonlinearity: str, a: torch.Tensor) -> torch.Tensor:
    if nonlinearity == "tanh":
        return 1 - torch.tanh(a) ** 2
    if nonlinearity == "sigmoid":
        return torch.sigmoid(a) * (1 - torch.sigmoid(a))
    return torch.ones_like(a)


class Recurrence(NamedTuple):
    """An Elman recurrence with its inputs: U (n, n), V (n, m), X (T, m), h0 (n,) and φ."""

    U: torch.Tensor
    V: torch.Tensor
    X: torch.Tensor
    h0: torch.Tensor
    nonlinearity: str


def recurrence(U, V, X, h0=None, nonlinearity: str = "tanh") -> Recurrence:
    """Check and bundle the pieces of h_t = φ(U h_{t-1} + V x_t); h0 defaults to zeros (Chapter 6)."""
    check_choice("nonlinearity", nonlinearity, tuple(NONLINEARITIES))
    U = as_tensor("U", U, ndim=2, floating=True)
    if U.shape[0] != U.shape[1]:
        raise ValueError(f"U must be a square matrix, got {describe(U)}")
    n = U.shape[0]
    V = as_tensor("V", V, ndim=2, floating=True)
    if V.shape[0] != n:
        raise ValueError(f"V must have {n} rows (one per state), got {describe(V)}")
    X = as_tensor("X", X, shape=(None, V.shape[1]), floating=True)
    if len(X) == 0:
        raise ValueError("X must hold at least one step")
    h0 = torch.zeros(n, dtype=U.dtype, device=U.device) if h0 is None else as_tensor(
        "h0", h0, shape=(n,), floating=True)
    return Recurrence(U, V, X, h0, nonlinearity)


def step(rec: Recurrence, h: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """One step h' = φ(U h + V x) (Chapter 6)."""
    return _phi(rec.nonlinearity, rec.U @ h + rec.V @ x)


def states(rec: Recurrence) -> torch.Tensor:
    """The states h_0, h_1, ..., h_T as a (T + 1, n) tensor (Chapter 6)."""
    hs = [rec.h0]
    for x in rec.X:
        hs.append(step(rec, hs[-1], x))
    return torch.stack(hs)


def step_jacobians(rec: Recurrence, *, method: str = "closed") -> torch.Tensor:
    """The per-step Jacobians J_t = ∂h_t/∂h_{t-1}, t = 1..T, as a (T, n, n) tensor (Chapter 6).

    ``method="closed"`` evaluates diag φ'(a_t) U; ``method="autograd"``
    differentiates :func:`step` at each h_{t-1} with ``torch.autograd.functional.jacobian``.
    """
    check_choice("method", method, ("closed", "autograd"))
    hs = states(rec)
    if method == "autograd":
        return torch.stack([jacobian(lambda h: step(rec, h, x), h_prev) for h_prev, x in zip(hs[:-1], rec.X)])
    pre_activations = hs[:-1] @ rec.U.T + rec.X @ rec.V.T  # (T, n): a_t = U h_{t-1} + V x_t
    return _phi_prime(rec.nonlinearity, pre_activations)[:, :, None] * rec.U


def jacobian_products(rec: Recurrence, *, method: str = "closed") -> torch.Tensor:
    """∂h_t/∂h_0 = J_t J_{t-1} ... J_1 for t = 1..T, as a (T, n, n) tensor (Chapter 6)."""
    products, current = [], None
    for J in step_jacobians(rec, method=method):
        current = J if current is None else J @ current
        products.append(current)
    return torch.stack(products)


def jacobian_norms(rec: Recurrence, *, method: str = "closed") -> torch.Tensor:
    """Spectral norms ‖∂h_t/∂h_0‖₂ for t = 1..T (Chapter 6)."""
    return torch.linalg.matrix_norm(jacobian_products(rec, method=method), ord=2)


def state_jacobian_norms(step_fn, h0, X) -> torch.Tensor:
    """‖∂h_t/∂h_0‖₂ for t = 1..T of any recurrence h_t = step_fn(h_{t-1}, x_t), by autograd (Chapter 6).

    ``step_fn`` maps a state (n,) and an input (m,) to the next state (n,);
    X is (T, m). Used for cells other than Elman's, e.g. the antisymmetric RNN.
    (``torch.autograd.functional.jacobian`` rather than ``torch.func``: the
    first call of the latter costs seconds of set-up, more than this work.)
    """
    if not callable(step_fn):
        raise TypeError(f"step_fn must be a function of (h, x), got {describe(step_fn)}")
    h0 = as_tensor("h0", h0, ndim=1, floating=True)
    X = as_tensor("X", X, ndim=2, floating=True)
    products, current, h = [], torch.eye(len(h0), dtype=h0.dtype, device=h0.device), h0
    for x in X:
        current = jacobian(lambda state: step_fn(state, x), h) @ current  # J_t (J_{t-1} ... J_1)
        products.append(current)
        h = step_fn(h, x).detach()
    return torch.linalg.matrix_norm(torch.stack(products), ord=2)


def end_to_end_jacobian(rec: Recurrence) -> torch.Tensor:
    """∂h_T/∂h_0 by autograd through the whole unrolled recurrence (Chapter 6)."""
    return jacobian(lambda h0: states(rec._replace(h0=h0))[-1], rec.h0)


# ---------------------------------------------------------------------------
# The gradient of a loss over all steps, three ways
# ---------------------------------------------------------------------------

class Gradients(NamedTuple):
    """∂E/∂U and ∂E/∂V."""

    U: torch.Tensor
    V: torch.Tensor


def squared_error(rec: Recurrence, W, Y) -> torch.Tensor:
    """E = Σ_t ½ ‖W h_t - y_t‖², the loss summed over steps t = 1..T, with a readout W (p, n) (Chapter 6)."""
    W, Y = _check_readout(rec, W, Y)
    return 0.5 * ((states(rec)[1:] @ W.T - Y) ** 2).sum()


def _check_readout(rec: Recurrence, W, Y) -> tuple[torch.Tensor, torch.Tensor]:
    W = as_tensor("W", W, shape=(None, rec.U.shape[0]), floating=True)
    Y = as_tensor("Y", Y, shape=(len(rec.X), W.shape[0]), floating=True)
    return W, Y


def bptt_by_sum(rec: Recurrence, W, Y) -> Gradients:
    """∂E/∂U and ∂E/∂V as the double sum Σ_t Σ_{k≤t} (∂E_t/∂h_t)(∂h_t/∂h_k)(∂⁺h_k/∂θ) (Chapter 6).

    ∂⁺h_k/∂θ is the *immediate* derivative, with h_{k-1} held fixed. The
    readable form: O(T²) Jacobian-vector products. :func:`bptt` is the same
    sum reorganised as one backward sweep.
    """
    W, Y = _check_readout(rec, W, Y)
    hs = states(rec)
    Js = step_jacobians(rec)
    slopes = _phi_prime(rec.nonlinearity, hs[:-1] @ rec.U.T + rec.X @ rec.V.T)  # (T, n): φ'(a_k)
    grad_U, grad_V = torch.zeros_like(rec.U), torch.zeros_like(rec.V)
    for t in range(len(rec.X)):
        g = W.T @ (W @ hs[t + 1] - Y[t])  # (∂E_t/∂h_t)ᵀ
        for k in range(t, -1, -1):  # g = (∂h_t/∂h_k)ᵀ (∂E_t/∂h_t)ᵀ, for k = t, t-1, ..., 1
            delta = g * slopes[k]  # through φ at step k
            grad_U += torch.outer(delta, hs[k])  # ∂⁺h_k/∂U_ij = φ'(a_k)_i h_{k-1, j}
            grad_V += torch.outer(delta, rec.X[k])
            g = Js[k].T @ g  # one step further back
    return Gradients(grad_U, grad_V)


def bptt(rec: Recurrence, W, Y) -> Gradients:
    """∂E/∂U and ∂E/∂V by one backward sweep: δ_t = ∂E/∂h_t = e_t + J_{t+1}ᵀ δ_{t+1} (Chapter 6)."""
    W, Y = _check_readout(rec, W, Y)
    hs = states(rec)
    slopes = _phi_prime(rec.nonlinearity, hs[:-1] @ rec.U.T + rec.X @ rec.V.T)  # (T, n)
    errors = (hs[1:] @ W.T - Y) @ W  # (T, n): e_t = Wᵀ(W h_t - y_t), the direct part of δ_t
    grad_U, grad_V = torch.zeros_like(rec.U), torch.zeros_like(rec.V)
    through_pre_activation = torch.zeros_like(rec.h0)  # (∂E/∂a_{t+1}); zero beyond the last step
    for t in range(len(rec.X) - 1, -1, -1):
        delta = errors[t] + rec.U.T @ through_pre_activation  # ∂E/∂h_t, every path that starts at h_t
        through_pre_activation = delta * slopes[t]
        grad_U += torch.outer(through_pre_activation, hs[t])
        grad_V += torch.outer(through_pre_activation, rec.X[t])
    return Gradients(grad_U, grad_V)


def bptt_by_autograd(rec: Recurrence, W, Y) -> Gradients:
    """∂E/∂U and ∂E/∂V from torch.autograd, the reference for the two hand-written forms (Chapter 6)."""
    U = rec.U.detach().clone().requires_grad_(True)
    V = rec.V.detach().clone().requires_grad_(True)
    loss = squared_error(rec._replace(U=U, V=V), W, Y)
    grad_U, grad_V = torch.autograd.grad(loss, (U, V))
    return Gradients(grad_U, grad_V)


# ---------------------------------------------------------------------------
# Gradient clipping
# ---------------------------------------------------------------------------

class Clipped(NamedTuple):
    """The clipped gradients and the total norm measured before clipping."""

    grads: list[torch.Tensor]
    total_norm: float


def clip_grad_norm(grads, max_norm: float) -> Clipped:
    """Rescale a list of gradients so their joint 2-norm is at most ``max_norm`` (Chapter 6).

    g ← g · min(1, τ / (‖g‖ + 10⁻⁶)), as ``torch.nn.utils.clip_grad_norm_``
    computes it (the 10⁻⁶ guards against dividing by zero). The direction is
    kept; only a step that would be too long is shortened. Returns new tensors.
    """
    max_norm = check_float("max_norm", max_norm, low=0.0, low_open=True)
    grads = _check_grads(grads)
    total = gradient_norm(grads)
    scale = min(1.0, max_norm / (total + 1e-6))
    return Clipped([g * scale for g in grads], total)


def _check_grads(grads) -> list[torch.Tensor]:
    if isinstance(grads, torch.Tensor) or not isinstance(grads, (list, tuple)) or not grads:
        raise TypeError(f"grads must be a non-empty list of tensors, got {describe(grads)}")
    return [as_tensor(f"grads[{i}]", g, floating=True) for i, g in enumerate(grads)]


def gradient_norm(grads) -> float:
    """The joint 2-norm of a list of gradients, as if they were one long vector (Chapter 6)."""
    return torch.sqrt(sum((g.double() ** 2).sum() for g in _check_grads(grads))).item()


class ClippedOptimizer:
    """An optimizer that clips the gradients' joint norm before each step of another (Chapter 6).

    It offers the two calls ``train.fit`` makes (``zero_grad``, ``step``) and
    records each step's norm before clipping in ``norms``; ``max_norm=None``
    only records.
    """

    def __init__(self, optimizer: torch.optim.Optimizer, max_norm: float | None):
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise TypeError(f"optimizer must be a torch.optim.Optimizer, got {describe(optimizer)}")
        self.optimizer = optimizer
        self.max_norm = None if max_norm is None else check_float("max_norm", max_norm, low=0.0, low_open=True)
        self.norms: list[float] = []

    @property
    def param_groups(self):
        return self.optimizer.param_groups

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.optimizer.zero_grad(set_to_none=set_to_none)

    def step(self) -> None:
        params = [p for group in self.param_groups for p in group["params"] if p.grad is not None]
        if self.max_norm is None:
            self.norms.append(gradient_norm([p.grad for p in params]))
        else:
            clipped = clip_grad_norm([p.grad for p in params], self.max_norm)
            self.norms.append(clipped.total_norm)
            for p, g in zip(params, clipped.grads):
                p.grad.copy_(g)
        self.optimizer.step()


# ---------------------------------------------------------------------------
# How much gradient reaches the first input, at initialisation
# ---------------------------------------------------------------------------

def input_gradient_ratio(kind: str, length: int, *, hidden_size: int = 64, batch_size: int = 32,
                         num_symbols: int = 4, forget_bias: float = 1.0, seed: int = 0,
                         dtype: torch.dtype = torch.float64) -> float:
    """‖∂L/∂x_1‖ / ‖∂L/∂x_T‖ at initialisation, for a loss on the last step (Chapter 6).

    The network reads a batch of the first-token task (one-hot symbols) with a
    ``kind`` layer and classifies from its last state; L is the cross-entropy.
    The ratio says how much weaker the signal from the first input is than the
    one from the last: a network cannot learn what its gradient does not carry.
    ``forget_bias`` applies to the LSTM only.
    """
    length = check_int("length", length, minimum=2)
    data = recurrent.first_token_task(batch_size, length, num_symbols, seed=seed, dtype=dtype)
    model = recurrent.SequenceClassifier(kind, num_symbols, hidden_size, num_symbols,
                                         forget_bias=forget_bias if kind == "lstm" else 0.0, seed=seed).to(dtype)
    X = data.X.clone().requires_grad_(True)
    loss = torch.nn.functional.cross_entropy(model(X), data.y)
    (grad,) = torch.autograd.grad(loss, X)  # (B, T, K)
    return (grad[:, 0].norm() / grad[:, -1].norm()).item()
