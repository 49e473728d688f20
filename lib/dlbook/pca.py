"""Principal component analysis: by SVD and by the covariance's eigenvectors, streaming PCA with
Oja's rule beside plain Hebbian learning, and principal angles between subspaces (Chapter 9).

One convention throughout: the sample covariance divides by n,
``covariance(X) = Xc^T Xc / n`` with ``Xc`` the column-centred data, so that the
eigenvalues are the variances of the scores and the rank-k reconstruction error
is ``n * sum_{j>k} lambda_j``. (scikit-learn's ``explained_variance_`` divides
by n - 1.) These functions compare with closed forms and with other
implementations to many digits, so they compute in float64 (module policy,
CONTRIBUTING.md) unless given another floating dtype.
"""
from __future__ import annotations

from typing import NamedTuple

import torch

from .runtime import generator
from .validation import as_tensor, check_finite, check_float, check_int


class PCA(NamedTuple):
    """A fitted PCA: the column means, the eigenvalues (variances, largest first, divisor n) and the
    unit eigenvectors as the columns of ``components`` (p x p), in the same order."""

    mean: torch.Tensor
    eigenvalues: torch.Tensor
    components: torch.Tensor


def _data(X, dtype) -> torch.Tensor:
    X = as_tensor("X", X, ndim=2, floating=True)
    if len(X) < 2:
        raise ValueError(f"X must have at least 2 rows, got {len(X)}")
    return check_finite("X", X.to(dtype or torch.float64))


def covariance(X, *, dtype: torch.dtype | None = None) -> torch.Tensor:
    """The sample covariance Xc^T Xc / n of the rows of X (divisor n, not n - 1) (Chapter 9)."""
    X = _data(X, dtype)
    Xc = X - X.mean(0)
    return Xc.T @ Xc / len(X)


def _fix_signs(components: torch.Tensor) -> torch.Tensor:
    # An eigenvector is defined up to sign; make the largest entry of each column positive so
    # that the SVD and the eigendecomposition return the same vectors.
    rows = components.abs().argmax(0)
    signs = torch.sign(components[rows, torch.arange(components.shape[1])])
    return components * torch.where(signs == 0, 1.0, signs)


def pca_svd(X, *, dtype: torch.dtype | None = None) -> PCA:
    """PCA from the SVD Xc = U S V^T of the centred data: lambda_j = s_j^2 / n, components V (Chapter 9).

    With fewer rows than columns the missing eigenvalues are zero and the components are
    completed to an orthonormal basis.
    """
    X = _data(X, dtype)
    n, p = X.shape
    mean = X.mean(0)
    _, S, Vh = torch.linalg.svd(X - mean, full_matrices=True)
    eigenvalues = torch.zeros(p, dtype=X.dtype, device=X.device)
    eigenvalues[:len(S)] = S**2 / n
    return PCA(mean, eigenvalues, _fix_signs(Vh.T))


def pca_eigh(X, *, dtype: torch.dtype | None = None) -> PCA:
    """PCA from the eigendecomposition of the sample covariance Xc^T Xc / n (Chapter 9)."""
    X = _data(X, dtype)
    eigenvalues, vectors = torch.linalg.eigh(covariance(X))
    # eigh sorts in ascending order; rounding can leave tiny negative eigenvalues of a PSD matrix.
    return PCA(X.mean(0), eigenvalues.flip(0).clamp(min=0), _fix_signs(vectors.flip(1)))


def _fitted(pca) -> PCA:
    if not isinstance(pca, PCA):
        raise TypeError(f"pca must be a dlbook.pca.PCA (from pca_svd or pca_eigh), got {type(pca).__name__}")
    return pca


def _code_size(k, pca: PCA) -> int:
    return check_int("k", k, minimum=0, maximum=pca.components.shape[1])


def scores(X, pca, k: int) -> torch.Tensor:
    """The first k principal-component scores (X - mean) V_k, shape (n, k) (Chapter 9)."""
    pca = _fitted(pca)
    X = as_tensor("X", X, shape=(None, pca.components.shape[0]), floating=True).to(pca.mean.dtype)
    return (X - pca.mean) @ pca.components[:, :_code_size(k, pca)]


def reconstruct(X, pca, k: int) -> torch.Tensor:
    """The rank-k reconstruction mean + (X - mean) V_k V_k^T of the rows of X (Chapter 9)."""
    k = _code_size(k, _fitted(pca))
    return scores(X, pca, k) @ pca.components[:, :k].T + pca.mean


def reconstruction_error(X, pca, k: int) -> torch.Tensor:
    """The squared Frobenius norm ||X - reconstruct(X, pca, k)||^2; on the fitted data it equals
    n * sum_{j>k} lambda_j (Eckart-Young) (Chapter 9)."""
    X = as_tensor("X", X, ndim=2, floating=True)
    return ((X.to(_fitted(pca).mean.dtype) - reconstruct(X, pca, k)) ** 2).sum()


def explained_variance(eigenvalues) -> torch.Tensor:
    """The cumulative fraction of variance explained by the first 1, 2, ..., p components (Chapter 9)."""
    eigenvalues = as_tensor("eigenvalues", eigenvalues, ndim=1, floating=True)
    if (eigenvalues < 0).any() or eigenvalues.sum() <= 0:
        raise ValueError("eigenvalues must be non-negative with a positive sum")
    return eigenvalues.cumsum(0) / eigenvalues.sum()


def components_for(eigenvalues, fraction: float) -> int:
    """The smallest k whose first k components explain at least ``fraction`` of the variance (Chapter 9)."""
    fraction = check_float("fraction", fraction, low=0.0, high=1.0, low_open=True)
    explained = explained_variance(eigenvalues)
    # A tolerance so that fraction = 1 is reached despite rounding in the cumulative sum.
    return int((explained < fraction - 1e-12).sum().item()) + 1


# ---------------------------------------------------------------------------
# Principal angles between subspaces
# ---------------------------------------------------------------------------

def principal_angles(A, B) -> torch.Tensor:
    """The principal angles (radians, largest first) between the column spaces of A and B (Chapter 9).

    Both matrices have p rows and full column rank. Cosines come from the singular values
    of Q_A^T Q_B; small angles are taken from the sines, the singular values of
    Q_B - Q_A Q_A^T Q_B, because arccos loses all precision near 1 (Björck and Golub).
    """
    A = as_tensor("A", A, ndim=2, floating=True)
    B = as_tensor("B", B, ndim=2, floating=True)
    if A.shape[0] != B.shape[0]:
        raise ValueError(f"A and B must have the same number of rows, got {A.shape[0]} and {B.shape[0]}")
    dtype = torch.promote_types(A.dtype, B.dtype)
    QA, QB = torch.linalg.qr(A.to(dtype))[0], torch.linalg.qr(B.to(dtype))[0]
    if QA.shape[1] < QB.shape[1]:
        QA, QB = QB, QA                                    # angles: one per column of the smaller space
    cosines = torch.linalg.svdvals(QA.T @ QB).clamp(max=1.0)                    # descending
    sines = torch.linalg.svdvals(QB - QA @ (QA.T @ QB)).clamp(max=1.0).flip(0)  # ascending -> pairs
    angles = torch.where(cosines**2 < 0.5, torch.arccos(cosines), torch.arcsin(sines))
    return angles.flip(0)


# ---------------------------------------------------------------------------
# Hebb and Oja: learning the top eigenvector from a stream
# ---------------------------------------------------------------------------

def _stream(X, w0):
    X = as_tensor("X", X, floating=True)
    if X.dim() not in (2, 3):
        raise ValueError(f"X must be a stream (T, d) or a batch of streams (S, T, d), got {tuple(X.shape)}")
    w0 = as_tensor("w0", w0, ndim=1, floating=True).to(X.dtype)
    if w0.shape[0] != X.shape[-1]:
        raise ValueError(f"w0 must have {X.shape[-1]} entries (one per feature of X), got {w0.shape[0]}")
    return check_finite("X", X), w0


def _steps(lr, num_steps: int, dtype) -> torch.Tensor:
    if isinstance(lr, (int, float)) and not isinstance(lr, bool):
        return torch.full((num_steps,), check_float("lr", lr, low=0.0, low_open=True), dtype=dtype)
    lr = as_tensor("lr", lr, ndim=1, floating=True).to(dtype)
    if len(lr) != num_steps or (lr <= 0).any():
        raise ValueError(f"lr must be a positive number or {num_steps} positive step sizes, one per sample")
    return lr


def _run(X, w0, lr, update) -> torch.Tensor:
    """Iterates w_0, ..., w_T of w <- w + lr_t * update(w, x_t, y_t), y_t = w^T x_t, over every stream."""
    X, w0 = _stream(X, w0)
    steps = _steps(lr, X.shape[-2], X.dtype)
    w = w0.expand(X.shape[:-2] + w0.shape).clone()
    iterates = [w]
    for t in range(X.shape[-2]):
        x = X[..., t, :]
        y = (w * x).sum(-1, keepdim=True)
        w = w + steps[t] * update(w, x, y)
        iterates.append(w)
    return torch.stack(iterates)


def hebb(X, w0, lr) -> torch.Tensor:
    """Plain Hebbian learning w <- w + lr * y x with y = w^T x, one update per row of the stream (Chapter 9).

    ``X`` is a stream (T, d) or a batch of independent streams (S, T, d), all started
    from ``w0``; ``lr`` is a number or T step sizes. Returns the iterates, shape
    (T + 1, d) or (T + 1, S, d). In expectation w_t = (I + lr Sigma)^t w_0: it grows
    without bound.
    """
    return _run(X, w0, lr, lambda w, x, y: y * x)


def oja(X, w0, lr) -> torch.Tensor:
    """Oja's rule w <- w + lr * y (x - y w) with y = w^T x, one update per row of the stream (Chapter 9).

    The term - lr y^2 w keeps ||w|| near 1, and w turns towards +-the top eigenvector of
    the covariance: stochastic-gradient PCA. Arguments and result as for :func:`hebb`.
    """
    return _run(X, w0, lr, lambda w, x, y: y * (x - y * w))


def gaussian_stream(covariance_matrix, num_samples: int, *, num_streams: int | None = None,
                    seed: int = 0) -> torch.Tensor:
    """Zero-mean Gaussian samples with this covariance, shape (T, d) or (S, T, d), float64 (Chapter 9)."""
    C = as_tensor("covariance_matrix", covariance_matrix, ndim=2, floating=True).to(torch.float64)
    num_samples = check_int("num_samples", num_samples, minimum=1)
    shape = (num_samples,) if num_streams is None else (check_int("num_streams", num_streams, minimum=1),
                                                        num_samples)
    L = torch.linalg.cholesky(C)
    noise = torch.randn(*shape, C.shape[0], generator=generator(seed), dtype=torch.float64)
    return noise @ L.T


def random_covariance(dim: int, *, seed: int = 0) -> torch.Tensor:
    """A random covariance A A^T / dim with A standard Gaussian (dim x dim), float64 (Chapter 9)."""
    dim = check_int("dim", dim, minimum=1)
    A = torch.randn(dim, dim, generator=generator(seed), dtype=torch.float64)
    return A @ A.T / dim


def hebb_expectation(covariance_matrix, w0, lr: float, num_steps: int) -> torch.Tensor:
    """E[w_t] = (I + lr Sigma)^t w_0 for t = 0..num_steps under plain Hebb with a constant step (Chapter 9).

    Exact because each sample x_t is independent of w_t, so E[x x^T w] = Sigma E[w].
    """
    C = as_tensor("covariance_matrix", covariance_matrix, ndim=2, floating=True).to(torch.float64)
    w0 = as_tensor("w0", w0, ndim=1, floating=True).to(torch.float64)
    lr = check_float("lr", lr, low=0.0, low_open=True)
    num_steps = check_int("num_steps", num_steps, minimum=0)
    step = torch.eye(len(C), dtype=torch.float64) + lr * C
    means = [w0]
    for _ in range(num_steps):
        means.append(step @ means[-1])
    return torch.stack(means)


def abs_cosine(u, v) -> float:
    """|cos| of the angle between two vectors (sign-blind, as eigenvectors are) (Chapter 9)."""
    u = as_tensor("u", u, ndim=1, floating=True)
    v = as_tensor("v", v, ndim=1, floating=True).to(u.dtype)
    if u.shape != v.shape:
        raise ValueError(f"u and v must have the same length, got {len(u)} and {len(v)}")
    norms = u.norm() * v.norm()
    if norms == 0:
        raise ValueError("u and v must be non-zero")
    return min(1.0, abs((u @ v).item()) / norms.item())

