"""Tests of dlbook.attention against torch's scaled_dot_product_attention and MultiheadAttention."""
import pytest
import torch
import torch.nn.functional as F

from dlbook import attention


def _randn(*shape, seed=0, dtype=torch.float64):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def test_sdpa_matches_torch_with_and_without_masks():
    Q, K, V = _randn(2, 3, 5, 8, seed=0), _randn(2, 3, 7, 8, seed=1), _randn(2, 3, 7, 4, seed=2)
    ours = attention.scaled_dot_product_attention(Q, K, V)
    assert (ours.output - F.scaled_dot_product_attention(Q, K, V)).abs().max() < 1e-14
    keep = _randn(2, 1, 5, 7, seed=3) > -0.5
    keep[..., 0] = True                                   # every query sees at least one key
    masked = attention.scaled_dot_product_attention(Q, K, V, mask=keep)
    assert (masked.output - F.scaled_dot_product_attention(Q, K, V, attn_mask=keep)).abs().max() < 1e-14
    assert torch.all(masked.weights[~keep.expand_as(masked.weights)] == 0)
    K2, V2 = _randn(2, 3, 5, 8, seed=4), _randn(2, 3, 5, 4, seed=5)
    causal = attention.scaled_dot_product_attention(Q, K2, V2, causal=True)
    assert (causal.output - F.scaled_dot_product_attention(Q, K2, V2, is_causal=True)).abs().max() < 1e-14
    assert torch.all(causal.weights.triu(1) == 0)


def test_rows_are_distributions_and_degenerate_cases():
    Q, K, V = _randn(6, 4), _randn(9, 4, seed=1), _randn(9, 3, seed=2)
    out = attention.scaled_dot_product_attention(Q, K, V)
    assert (out.weights.sum(-1) - 1).abs().max() < 1e-14 and torch.all(out.weights >= 0)
    one = attention.scaled_dot_product_attention(Q, K[:1], V[:1])
    assert torch.equal(one.output, V[:1].expand(6, 3))
    same = attention.scaled_dot_product_attention(Q, K[:1].expand(9, 4), V)
    assert (same.output - V.mean(0)).abs().max() < 1e-14


def test_causal_mask_hides_the_future_exactly():
    X = _randn(7, 4).requires_grad_()
    out = attention.scaled_dot_product_attention(X, X, X, causal=True).output
    for t in range(7):
        (grad,) = torch.autograd.grad(out[t].sum(), X, retain_graph=True)
        assert torch.all(grad[t + 1:] == 0) and grad[: t + 1].abs().sum() > 0
    changed = X.detach().clone()
    changed[4:] = _randn(3, 4, seed=9)
    again = attention.scaled_dot_product_attention(changed, changed, changed, causal=True).output
    assert torch.equal(again[:4], out[:4].detach())


def test_self_attention_without_positions_is_permutation_equivariant():
    weights = attention.random_weights(8, seed=1)
    X = _randn(2, 6, 8)
    perm = torch.randperm(6, generator=torch.Generator().manual_seed(3))
    out = attention.multi_head_attention(X, X, X, weights, 2).output
    permuted = attention.multi_head_attention(X[:, perm], X[:, perm], X[:, perm], weights, 2).output
    assert (permuted - out[:, perm]).abs().max() < 1e-13


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("dtype, tol", [(torch.float64, 1e-13), (torch.float32, 1e-6)])
def test_multi_head_attention_matches_torch(batch_first, dtype, tol):
    torch_mha = torch.nn.MultiheadAttention(12, 3, batch_first=batch_first, dtype=dtype)
    with torch.no_grad():
        torch_mha.in_proj_bias.copy_(_randn(36, seed=7))
    weights = attention.weights_from_torch(torch_mha)
    q, kv = _randn(2, 5, 12, seed=1, dtype=dtype), _randn(2, 4, 12, seed=2, dtype=dtype)
    pad = torch.tensor([[False, False, False, True], [False, False, False, False]])   # torch: True = ignore
    if not batch_first:
        q, kv = q.transpose(0, 1), kv.transpose(0, 1)
    expected, expected_weights = torch_mha(q, kv, kv, key_padding_mask=pad)
    ours = attention.multi_head_attention(q, kv, kv, weights, 3, mask=~pad[:, None, :], batch_first=batch_first)
    assert (ours.output - expected).abs().max() < tol
    assert (ours.weights.mean(dim=1) - expected_weights).abs().max() < tol
    causal_q = kv
    expected, _ = torch_mha(causal_q, kv, kv, attn_mask=torch.ones(4, 4, dtype=torch.bool).triu(1))
    ours = attention.multi_head_attention(causal_q, kv, kv, weights, 3, causal=True, batch_first=batch_first)
    assert (ours.output - expected).abs().max() < tol


def test_module_loads_torch_state_and_trains():
    torch_mha = torch.nn.MultiheadAttention(8, 2, batch_first=True, dtype=torch.float64)
    ours = attention.MultiHeadAttention(8, 2, dtype=torch.float64)
    ours.load_state_dict(torch_mha.state_dict())
    X = _randn(3, 5, 8)
    assert (ours(X) - torch_mha(X, X, X)[0]).abs().max() < 1e-13
    ours(X).sum().backward()
    assert ours.in_proj_weight.grad is not None and ours.in_proj_weight.grad.abs().sum() > 0
    assert sum(p.numel() for p in ours.parameters()) == attention.attention_parameter_count(8)
    assert attention.attention_parameter_count(768) == sum(
        p.numel() for p in torch.nn.MultiheadAttention(768, 12, device="meta").parameters()) == 2_362_368


def test_module_is_seeded():
    a, b = attention.MultiHeadAttention(8, 2, seed=3), attention.MultiHeadAttention(8, 2, seed=3)
    assert torch.equal(a.in_proj_weight, b.in_proj_weight)
    assert not torch.equal(a.in_proj_weight, attention.MultiHeadAttention(8, 2, seed=4).in_proj_weight)


def test_additive_attention_masks_and_mixes():
    layer = attention.AdditiveAttention(4, 6, 5, dtype=torch.float64)
    s, H = _randn(3, 4), _randn(3, 7, 6, seed=1)
    keep = attention.padding_mask(torch.tensor([7, 3, 1]), 7)
    out = layer(s, H, mask=keep)
    assert torch.all(out.weights[~keep] == 0) and (out.weights.sum(-1) - 1).abs().max() < 1e-14
    assert (out.output[2] - H[2, 0]).abs().max() < 1e-14
    scores = layer.v(torch.tanh(layer.W_a(s)[:, None] + layer.U_a(H))).squeeze(-1)
    expected = (scores.masked_fill(~keep, -torch.inf).softmax(-1)[..., None] * H).sum(1)
    assert (out.output - expected).abs().max() < 1e-14


def test_score_statistics_scale_like_d():
    small, large = attention.score_statistics(16, seed=0), attention.score_statistics(256, seed=0)
    assert abs(small.variance / 16 - 1) < 0.05 and abs(large.variance / 256 - 1) < 0.05
    assert abs(large.scaled_variance - 1) < 0.05
    assert large.max_weight > 0.8 > 0.3 > large.scaled_max_weight


def test_bad_arguments():
    Q = _randn(3, 4)
    with pytest.raises(ValueError, match="last dimension"):
        attention.scaled_dot_product_attention(Q, _randn(3, 5), _randn(3, 2))
    with pytest.raises(ValueError, match="number of rows"):
        attention.scaled_dot_product_attention(Q, Q, _randn(2, 2))
    with pytest.raises(TypeError, match="Q must hold floating"):
        attention.scaled_dot_product_attention(torch.ones(3, 4, dtype=torch.long), Q, Q)
    with pytest.raises(TypeError, match="mask must be a boolean"):
        attention.scaled_dot_product_attention(Q, Q, Q, mask=torch.ones(3, 3))
    with pytest.raises(ValueError, match="no key"):
        attention.scaled_dot_product_attention(Q, Q, Q, mask=torch.zeros(3, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="do not broadcast"):
        attention.scaled_dot_product_attention(Q, Q, Q, mask=torch.ones(2, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="num_heads must divide"):
        attention.multi_head_attention(_randn(2, 8), _randn(2, 8), _randn(2, 8), attention.random_weights(8), 3)
    with pytest.raises(TypeError, match="weights must be"):
        attention.multi_head_attention(Q, Q, Q, (1, 2), 1)
    with pytest.raises(ValueError, match="lengths must lie"):
        attention.padding_mask(torch.tensor([0, 2]), 3)
    with pytest.raises(ValueError, match="num_heads must divide dim"):
        attention.MultiHeadAttention(10, 3)
    with pytest.raises(TypeError, match="module must be"):
        attention.weights_from_torch(torch.nn.Linear(2, 2))
