"""Tests of dlbook.low_rank: the truncated SVD against Eckart-Young's closed form and parameter counts."""
import pytest
import torch
from torch import nn

from dlbook import low_rank, nets


def _matrix(m, n, seed=0):
    return torch.randn(m, n, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


@pytest.mark.parametrize("rank", [0, 1, 5, 20, 30])
def test_truncation_error_equals_tail_singular_values(rank):
    W = _matrix(40, 30)
    factors = low_rank.truncated_svd(W, rank)
    assert factors.A.shape == (40, rank) and factors.B.shape == (rank, 30)
    sigma = torch.linalg.svdvals(W)
    tail = sigma[rank:].pow(2).sum().sqrt().item()
    assert abs(torch.linalg.matrix_norm(W - factors.matrix()).item() - tail) < 1e-10
    assert abs(low_rank.truncation_error(W, rank) - tail) < 1e-12
    assert torch.linalg.matrix_rank(factors.matrix()).item() == rank


def test_truncated_svd_beats_other_rank_r_matrices():
    """Eckart-Young: random rank-5 matrices and a perturbed optimum are never better."""
    W = _matrix(20, 15, seed=1)
    best = low_rank.truncation_error(W, 5)
    A, B = low_rank.truncated_svd(W, 5)
    for seed in range(20):
        noise = 1e-3 * _matrix(20, 5, seed=seed + 10)
        assert torch.linalg.matrix_norm(W - (A + noise) @ B).item() >= best
        P, Q = _matrix(20, 5, seed=seed + 50), _matrix(5, 15, seed=seed + 90)
        assert torch.linalg.matrix_norm(W - P @ Q).item() > best


def test_low_rank_parameters():
    assert low_rank.low_rank_parameters(64, 256, 8) == 8 * (64 + 256)
    layer = low_rank.low_rank_linear(nn.Linear(64, 256, dtype=torch.float64), 8)
    weights = sum(m.weight.numel() for m in layer)
    assert weights == low_rank.low_rank_parameters(64, 256, 8)


def test_low_rank_linear_at_full_rank_is_the_same_map():
    linear = nn.Linear(12, 7, dtype=torch.float64)
    X = _matrix(50, 12, seed=2)
    pair = low_rank.low_rank_linear(linear, 7)
    assert (pair(X) - linear(X)).abs().max().item() < 1e-12
    low = low_rank.low_rank_linear(linear, 3)
    A, B = low_rank.truncated_svd(linear.weight.detach(), 3)
    assert (low(X) - (X @ (A @ B).T + linear.bias)).abs().max().item() < 1e-12


def test_low_rank_model_replaces_only_layers_that_save_weights():
    model = nets.mlp((64, 256, 256, 10), dtype=torch.float64)
    small = low_rank.low_rank_model(model, 16)
    assert nets.num_parameters(small) < nets.num_parameters(model)
    kinds = [type(m).__name__ for m in small]
    assert kinds == ["Sequential", "ReLU", "Sequential", "ReLU", "Linear"]  # 16(256+10) > 2560
    X = _matrix(5, 64, seed=3)
    assert small(X).shape == (5, 10)
    # Rank 64 is the full rank of the 256 x 64 input layer: that pair computes the same map.
    full_first = low_rank.low_rank_model(model, 64)[0]
    assert (full_first(X) - model[0](X)).abs().max().item() < 1e-12
    assert model[0].weight.shape == (256, 64)  # the original is untouched


def test_bad_inputs():
    W = _matrix(4, 3)
    with pytest.raises(ValueError, match="rank"):
        low_rank.truncated_svd(W, 4)
    with pytest.raises(ValueError, match="rank"):
        low_rank.truncation_error(W, -1)
    with pytest.raises(ValueError, match="W"):
        low_rank.truncated_svd(torch.ones(3, dtype=torch.float64), 1)
    with pytest.raises(TypeError, match="W"):
        low_rank.truncated_svd(torch.ones(3, 3, dtype=torch.long), 1)
    with pytest.raises(ValueError, match="W must be finite"):
        low_rank.truncated_svd(torch.full((2, 2), float("inf")), 1)
    with pytest.raises(TypeError, match="linear"):
        low_rank.low_rank_linear(W, 1)
    with pytest.raises(ValueError, match="rank"):
        low_rank.low_rank_linear(nn.Linear(3, 2), 0)
    with pytest.raises(TypeError, match="model"):
        low_rank.low_rank_model(nn.Linear(3, 2), 1)
    with pytest.raises(ValueError, match="rank"):
        low_rank.low_rank_parameters(3, 2, 3)
