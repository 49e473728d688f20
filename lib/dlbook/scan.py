"""Linear recurrences, the parallel scan, and the eigenvalues of linear recurrent units (Chapter 6).

A recurrence z_t = a_t ⊙ z_{t-1} + b_t that is linear in the state composes
like affine maps: applying (a_1, b_1) and then (a_2, b_2) is the single map
(a_1 a_2, a_2 b_1 + b_2). The composition is associative, so all prefixes can
be computed by a scan in ⌈log₂ T⌉ rounds of elementwise work instead of T
dependent steps. Coefficients may be real or complex and of any shape
(T, ...); the reference loop and the scan accept the same inputs. Float64
(complex128) is the default where a comparison to many digits is the point.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import torch

from .validation import as_tensor, check_choice, check_float, describe


def _coefficients(a, b, z0=None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """a and b as tensors of one shape (T, ...), real or complex, and z0 of shape (...) or None."""
    a, b = (_tensor(name, value) for name, value in (("a", a), ("b", b)))
    if a.dim() == 0 or a.shape[0] == 0:
        raise ValueError(f"a must have at least one step along its first dimension, got {describe(a)}")
    if a.shape != b.shape:
        raise ValueError(f"a and b must have the same shape (T, ...), got {tuple(a.shape)} and {tuple(b.shape)}")
    if z0 is not None:
        z0 = _tensor("z0", z0)
        if z0.shape != a.shape[1:]:
            raise ValueError(f"z0 must have the shape of one step, {tuple(a.shape[1:])}, got {describe(z0)}")
    return a, b, z0


def _tensor(name: str, value) -> torch.Tensor:
    """A floating or complex tensor (as_tensor refuses complex ones, which a scan accepts)."""
    if isinstance(value, torch.Tensor) and value.is_complex():
        return value
    return as_tensor(name, value, floating=True)


def linear_recurrence(a, b, z0=None) -> torch.Tensor:
    """z_t = a_t z_{t-1} + b_t for t = 1..T by a loop, with z_0 = z0 (zeros by default) (Chapter 6).

    a and b have shape (T, ...); the result holds z_1..z_T, shape (T, ...).
    """
    a, b, z0 = _coefficients(a, b, z0)
    z = torch.zeros_like(b[0]) if z0 is None else z0
    out = []
    for a_t, b_t in zip(a, b):
        z = a_t * z + b_t
        out.append(z)
    return torch.stack(out)


def combine(earlier: tuple, later: tuple) -> tuple:
    """The affine map "apply ``earlier``, then ``later``": (a₁, b₁) ∘ (a₂, b₂) = (a₁ a₂, a₂ b₁ + b₂) (Chapter 6)."""
    (a1, b1), (a2, b2) = earlier, later
    return a1 * a2, a2 * b1 + b2


class Scan(NamedTuple):
    """The states z_1..z_T of a linear recurrence and the number of parallel rounds the scan took."""

    values: torch.Tensor
    rounds: int


def parallel_scan(a, b, z0=None) -> Scan:
    """z_t = a_t z_{t-1} + b_t for all t by a Hillis-Steele scan: ⌈log₂ T⌉ rounds (Chapter 6).

    In round r every position t ≥ 2^r combines the map it holds with the one
    2^r places earlier, all positions at once; after the last round position
    t holds the composition of steps 1..t. Depth O(log T), work O(T log T):
    Blelloch's two-sweep scan brings the work down to O(T).
    """
    a, b, z0 = _coefficients(a, b, z0)
    if z0 is not None:
        b = b.clone()
        b[0] = a[0] * z0 + b[0]  # fold the initial state into the first step
    offset, rounds = 1, 0
    while offset < len(a):
        earlier = (a[:-offset], b[:-offset])
        later = (a[offset:], b[offset:])
        a_combined, b_combined = combine(earlier, later)  # every position t ≥ offset at once
        a = torch.cat([a[:offset], a_combined])
        b = torch.cat([b[:offset], b_combined])
        offset, rounds = 2 * offset, rounds + 1
    return Scan(b, rounds)


# ---------------------------------------------------------------------------
# Diagonal linear recurrent units
# ---------------------------------------------------------------------------

def lru_eigenvalues(nu, theta) -> torch.Tensor:
    """λ = exp(-e^ν + iθ): modulus exp(-e^ν) in (0, 1) for every real ν, phase θ (Chapter 6)."""
    nu = as_tensor("nu", nu, floating=True)
    theta = as_tensor("theta", theta, floating=True)
    dtype = torch.promote_types(nu.dtype, theta.dtype)
    return torch.exp(torch.complex(-torch.exp(nu.to(dtype)), theta.to(dtype)))


def nu_from_modulus(r) -> torch.Tensor:
    """The ν with |λ(ν)| = r: ν = log(-log r), for 0 < r < 1 (Chapter 6)."""
    r = as_tensor("r", r, floating=True)
    if not torch.all((r > 0) & (r < 1)):
        raise ValueError("r must lie strictly between 0 and 1")
    return torch.log(-torch.log(r))


def half_life(r: float) -> float:
    """Steps until a memory of modulus r decays to half: ln ½ / ln r (Chapter 6)."""
    r = check_float("r", r, low=0.0, high=1.0, low_open=True, high_open=True)
    return math.log(0.5) / math.log(r)


def rotation_scaling_blocks(eigenvalues) -> torch.Tensor:
    """The real 2 x 2 blocks r [[cos θ, -sin θ], [sin θ, cos θ]] of eigenvalues r e^{iθ}, as (n, 2, 2) (Chapter 6)."""
    lam = eigenvalues if isinstance(eigenvalues, torch.Tensor) and eigenvalues.is_complex() else None
    if lam is None or lam.dim() != 1:
        raise TypeError(f"eigenvalues must be a one-dimensional complex tensor, got {describe(eigenvalues)}")
    re, im = lam.real, lam.imag
    return torch.stack([torch.stack([re, -im], -1), torch.stack([im, re], -1)], -2)


def real_block_recurrence(blocks, inputs) -> torch.Tensor:
    """s_t = M s_{t-1} + u_t with M block diagonal of (n, 2, 2) blocks; inputs (T, n, 2), result (T, n, 2) (Chapter 6).

    The real form of a complex diagonal recurrence: channel j's state is the
    pair (Re ζ_j, Im ζ_j), and multiplying by λ_j rotates and scales the pair.
    """
    blocks = as_tensor("blocks", blocks, shape=(None, 2, 2), floating=True)
    inputs = as_tensor("inputs", inputs, shape=(None, len(blocks), 2), floating=True)
    s = torch.zeros_like(inputs[0])
    out = []
    for u in inputs:
        s = torch.einsum("nij,nj->ni", blocks, s) + u
        out.append(s)
    return torch.stack(out)


def min_gru(X, G, V, *, method: str = "scan") -> torch.Tensor:
    """The gated linear recurrence z_t = σ_t ⊙ z_{t-1} + (1 - σ_t) ⊙ V x_t, σ_t = σ(G x_t) (Chapter 6).

    Feng et al.'s minGRU, written with σ_t as the share kept: the gate depends
    on the input only, never on the state, so the recurrence is linear in z
    and ``method="scan"`` computes it with :func:`parallel_scan` ("loop" runs
    :func:`linear_recurrence`). X is (T, m), G and V are (n, m); the result is (T, n).
    """
    check_choice("method", method, ("scan", "loop"))
    X = as_tensor("X", X, ndim=2, floating=True)
    G = as_tensor("G", G, shape=(None, X.shape[1]), floating=True)
    V = as_tensor("V", V, shape=(G.shape[0], X.shape[1]), floating=True)
    keep = torch.sigmoid(X @ G.T)  # (T, n)
    write = (1 - keep) * (X @ V.T)
    return parallel_scan(keep, write).values if method == "scan" else linear_recurrence(keep, write)
