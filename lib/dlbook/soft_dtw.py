"""Dynamic time warping and its smoothed, differentiable version soft-DTW (Chapter 14).

DTW aligns two series x (length n) and y (length m) through the recursion

    R[i, j] = C[i, j] + min(R[i-1, j-1], R[i-1, j], R[i, j-1]),   R[0, 0] = 0,  R[i, 0] = R[0, j] = ∞,

over a cost matrix C (n, m), and returns R[n, m]. Soft-DTW replaces the
minimum by the soft minimum min_γ(v) = -γ log Σ exp(-v_k / γ), which is
smooth and tends to the minimum as γ → 0; its gradient with respect to C is
the expected alignment, computed by a backward recursion of the same shape
(Cuturi and Blondel, 2017). Cells with equal i + j do not depend on each
other, so the forward pass runs one vectorised update per anti-diagonal.
Everything is in the dtype of C; comparisons use float64.
"""
from __future__ import annotations

import math

import torch

from .validation import as_tensor, check_float, describe


def soft_min(values: torch.Tensor, gamma: float, dim: int = -1) -> torch.Tensor:
    """-γ log Σ exp(-v/γ) along ``dim``; the hard minimum when γ = 0 (Chapter 14).

    min(v) - γ log k <= soft_min(v) <= min(v) for k values, and its gradient is softmax(-v/γ).
    """
    gamma = check_float("gamma", gamma, low=0.0)
    if gamma == 0:
        return values.min(dim=dim).values
    return -gamma * torch.logsumexp(-values / gamma, dim=dim)


def squared_distances(x, y) -> torch.Tensor:
    """The cost matrix C[i, j] = ‖x_i - y_j‖² of two series of shapes (n,) or (n, d) and (m,) or (m, d)."""
    x = as_tensor("x", x, floating=True)
    y = as_tensor("y", y, floating=True)
    x, y = (x[:, None] if x.dim() == 1 else x), (y[:, None] if y.dim() == 1 else y)
    if x.dim() != 2 or y.dim() != 2 or x.shape[1] != y.shape[1]:
        raise ValueError(f"x and y must be series of shape (n, d) and (m, d), got {describe(x)} and {describe(y)}")
    return ((x[:, None, :] - y[None, :, :]) ** 2).sum(-1)


def _check_cost(cost) -> torch.Tensor:
    cost = as_tensor("cost", cost, ndim=2, floating=True)
    if cost.shape[0] < 1 or cost.shape[1] < 1:
        raise ValueError(f"cost must be a non-empty (n, m) matrix, got {describe(cost)}")
    return cost


def soft_dtw(cost, gamma: float) -> torch.Tensor:
    """Soft-DTW value R[n, m] of a cost matrix (n, m); exact DTW for γ = 0; differentiable in cost (Chapter 14)."""
    cost = _check_cost(cost)
    gamma = check_float("gamma", gamma, low=0.0)
    n, m = cost.shape
    far = torch.finfo(cost.dtype).max ** 0.25    # stands for ∞ where a cell lies outside the grid
    padded = torch.full((n + 1, m + 1), far, dtype=cost.dtype, device=cost.device)
    padded = torch.cat([padded[:1], torch.cat([padded[1:, :1], cost], dim=1)])   # C at [1:, 1:]
    rows = torch.arange(n + 1, device=cost.device)
    # diagonal k holds R[i, k - i] for i = 0..n; entries outside the grid stay at `far`
    before_last = torch.full((n + 1,), far, dtype=cost.dtype, device=cost.device)
    before_last = torch.where(rows == 0, torch.zeros_like(before_last), before_last)   # k = 0: R[0, 0] = 0
    last = torch.full((n + 1,), far, dtype=cost.dtype, device=cost.device)             # k = 1

    def shifted(diagonal):                                                          # entry i holds diagonal[i - 1]
        return torch.cat([diagonal.new_full((1,), far), diagonal[:-1]])

    for k in range(2, n + m + 1):
        cols = k - rows
        inside = (rows >= 1) & (cols >= 1) & (cols <= m)
        candidates = torch.stack([shifted(before_last), shifted(last), last])      # (3, n + 1)
        step = padded[rows, cols.clamp(0, m)] + soft_min(candidates, gamma, dim=0)
        before_last, last = last, torch.where(inside, step, torch.full_like(step, far))
    return last[n]


def dtw(cost) -> torch.Tensor:
    """Exact DTW value: the recursion with the hard minimum (Chapter 14)."""
    return soft_dtw(cost, 0.0)


def soft_dtw_alignment(cost, gamma: float) -> torch.Tensor:
    """The expected alignment E = ∂ soft_dtw / ∂C by the backward recursion of Cuturi and Blondel (Chapter 14).

    E[i, j] is the probability that the Gibbs distribution over alignment paths
    (weight exp(-path cost / γ)) passes through cell (i, j); E[n, m] = E[1, 1] = 1.
    Written cell by cell, in the order of the algorithm, for clarity.
    """
    cost = _check_cost(cost)
    gamma = check_float("gamma", gamma, low=0.0, low_open=True)
    n, m = cost.shape
    C = cost.detach().double().cpu().tolist()
    R = [[math.inf] * (m + 2) for _ in range(n + 2)]
    R[0][0] = 0.0
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            options = (R[i - 1][j - 1], R[i - 1][j], R[i][j - 1])
            low = min(options)
            R[i][j] = C[i - 1][j - 1] + low - gamma * math.log(sum(math.exp(-(v - low) / gamma) for v in options))
    R[n + 1][m + 1] = R[n][m]
    for i in range(n + 1):
        R[i][m + 1] = -math.inf
    for j in range(m + 1):
        R[n + 1][j] = -math.inf
    D = [[0.0] * (m + 2) for _ in range(n + 2)]
    for i in range(n):
        D[i + 1][1:m + 1] = C[i]
    E = [[0.0] * (m + 2) for _ in range(n + 2)]
    E[n + 1][m + 1] = 1.0

    def weight(successor_i, successor_j, i, j):
        # how much of the path mass at the successor cell came through (i, j)
        return math.exp((R[successor_i][successor_j] - R[i][j] - D[successor_i][successor_j]) / gamma)

    for j in range(m, 0, -1):
        for i in range(n, 0, -1):
            E[i][j] = (E[i + 1][j] * weight(i + 1, j, i, j) + E[i][j + 1] * weight(i, j + 1, i, j)
                       + E[i + 1][j + 1] * weight(i + 1, j + 1, i, j))
    return torch.tensor([row[1:m + 1] for row in E[1:n + 1]], dtype=cost.dtype, device=cost.device)


def dtw_path(cost) -> list[tuple[int, int]]:
    """One optimal DTW alignment path, as (i, j) index pairs from (0, 0) to (n-1, m-1), by backtracking."""
    cost = _check_cost(cost)
    n, m = cost.shape
    C = cost.detach().double().cpu().tolist()
    R = [[math.inf] * (m + 1) for _ in range(n + 1)]
    R[0][0] = 0.0
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            R[i][j] = C[i - 1][j - 1] + min(R[i - 1][j - 1], R[i - 1][j], R[i][j - 1])
    path, i, j = [(n - 1, m - 1)], n, m
    while (i, j) != (1, 1):
        i, j = min(((i - 1, j - 1), (i - 1, j), (i, j - 1)), key=lambda cell: R[cell[0]][cell[1]])
        path.append((i - 1, j - 1))
    return path[::-1]
