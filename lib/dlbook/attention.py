"""Attention written out: scaled dot-product, multi-head and additive attention, with masks (Chapter 7).

Scaled dot-product attention maps queries Q (..., T_q, d_k), keys K (..., T_k, d_k)
and values V (..., T_k, d_v) to softmax(Q Kᵀ / √d_k) V: row i of the output is a
convex combination of the values, weighted by how well query i matches each key.
A boolean ``mask`` says which keys each query may see (True = may attend, the
convention of ``torch.nn.functional.scaled_dot_product_attention``); ``causal=True``
hides every key that comes after the query. Multi-head attention projects the
inputs, splits the width into heads, attends in each and mixes the heads with an
output projection; its weights have exactly the layout of
``torch.nn.MultiheadAttention`` (``in_proj_weight`` stacks the q, k and v
projections by rows), so :func:`weights_from_torch` copies them and the tests
compare with torch. Additive (Bahdanau) attention scores a query against keys
with a small network, vᵀ tanh(W_a s + U_a h). Functions that draw random numbers
default to float64, since they serve comparisons to many digits.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import nn

from .runtime import generator
from .validation import (
    as_tensor,
    check_bool,
    check_broadcastable,
    check_device,
    check_dtype,
    check_float,
    check_int,
    describe,
)


class Attention(NamedTuple):
    """What attention returns: the outputs and the weights that made them."""

    output: torch.Tensor    # (..., T_q, d_v)
    weights: torch.Tensor   # (..., T_q, T_k), or (B, h, T_q, T_k) for several heads; rows sum to 1


def causal_mask(num_queries: int, num_keys: int | None = None, *, device="cpu") -> torch.Tensor:
    """Boolean (T_q, T_k) mask, True where key j may be seen by query i, i.e. j <= i (Chapter 7)."""
    num_queries = check_int("num_queries", num_queries, minimum=1)
    num_keys = num_queries if num_keys is None else check_int("num_keys", num_keys, minimum=1)
    device = check_device("device", device)
    return torch.ones(num_queries, num_keys, dtype=torch.bool, device=device).tril()


def padding_mask(lengths, max_length: int, *, device="cpu") -> torch.Tensor:
    """Boolean (B, max_length) mask, True at the first ``lengths[b]`` positions of sequence b (Chapter 7).

    As a key mask for attention it becomes ``padding_mask(...)[:, None, :]`` (broadcast over queries).
    """
    lengths = as_tensor("lengths", lengths, ndim=1)
    if lengths.is_floating_point() or lengths.dtype == torch.bool:
        raise TypeError(f"lengths must hold integers, got {describe(lengths)}")
    max_length = check_int("max_length", max_length, minimum=1)
    if len(lengths) and (lengths.min() < 1 or lengths.max() > max_length):
        raise ValueError(f"lengths must lie in 1..{max_length}, got values in "
                         f"{lengths.min().item()}..{lengths.max().item()}")
    device = check_device("device", device)
    return torch.arange(max_length, device=device) < lengths.to(device)[:, None]


def _check_mask(mask, shape: tuple) -> torch.Tensor:
    mask = as_tensor("mask", mask)
    if mask.dtype != torch.bool:
        raise TypeError(f"mask must be a boolean tensor (True = may attend), got {describe(mask)}")
    check_broadcastable("mask", mask.shape, "the attention scores", shape)
    return mask


def masked_softmax(scores: torch.Tensor, keep: torch.Tensor | None) -> torch.Tensor:
    """Softmax over the last axis with the entries where ``keep`` is False set to exactly 0 (Chapter 7)."""
    if keep is None:
        return scores.softmax(dim=-1)
    if not keep.any(dim=-1).all():
        raise ValueError("mask leaves some query with no key to attend to (a row of False): "
                         "its softmax would be 0/0")
    # exp(-inf) = 0, so hidden keys get weight exactly 0 and the rest renormalise among themselves.
    return scores.masked_fill(~keep, float("-inf")).softmax(dim=-1)


def scaled_dot_product_attention(Q, K, V, *, mask=None, causal: bool = False, scale: float | None = None) -> Attention:
    """softmax(Q Kᵀ · scale) V with scale = 1/√d_k by default, optional boolean and causal masks (Chapter 7).

    Q is (..., T_q, d_k), K (..., T_k, d_k), V (..., T_k, d_v); the leading axes broadcast.
    ``mask`` broadcasts to (..., T_q, T_k), True where a query may attend to a key.
    """
    Q = as_tensor("Q", Q, floating=True)
    K = as_tensor("K", K, floating=True)
    V = as_tensor("V", V, floating=True)
    for name, tensor in (("Q", Q), ("K", K), ("V", V)):
        if tensor.dim() < 2:
            raise ValueError(f"{name} must have at least 2 dimensions (..., T, d), got {describe(tensor)}")
    if Q.shape[-1] != K.shape[-1]:
        raise ValueError(f"Q and K must have the same last dimension d_k, got {Q.shape[-1]} and {K.shape[-1]}")
    if K.shape[-2] != V.shape[-2]:
        raise ValueError(f"K and V must have the same number of rows T_k, got {K.shape[-2]} and {V.shape[-2]}")
    causal = check_bool("causal", causal)
    scale = 1 / math.sqrt(Q.shape[-1]) if scale is None else check_float("scale", scale, low=0.0, low_open=True)
    if mask is not None:
        shape = torch.broadcast_shapes(Q.shape[:-1], K.shape[:-2] + (1,)) + (K.shape[-2],)
        mask = _check_mask(mask, shape).to(Q.device)
    return _attend(Q, K, V, mask, causal, scale)


def _attend(Q, K, V, mask, causal: bool, scale: float) -> Attention:
    """The computation of :func:`scaled_dot_product_attention`, on checked arguments."""
    scores = Q @ K.transpose(-2, -1) * scale                      # (..., T_q, T_k)
    keep = causal_mask(Q.shape[-2], K.shape[-2], device=Q.device) if causal else None
    if mask is not None:
        keep = mask if keep is None else keep & mask
    weights = masked_softmax(scores, keep)
    return Attention(weights @ V, weights)


# ---------------------------------------------------------------------------
# Multi-head attention in torch.nn.MultiheadAttention's layout
# ---------------------------------------------------------------------------

class MultiHeadWeights(NamedTuple):
    """Projections of multi-head attention, each (out, in) as in torch: q = x W_qᵀ + b_q."""

    W_q: torch.Tensor
    W_k: torch.Tensor
    W_v: torch.Tensor
    b_q: torch.Tensor
    b_k: torch.Tensor
    b_v: torch.Tensor
    W_o: torch.Tensor
    b_o: torch.Tensor


def weights_from_torch(module: nn.Module, *, dtype: torch.dtype | None = None) -> MultiHeadWeights:
    """Copy the weights of ``torch.nn.MultiheadAttention`` (or :class:`MultiHeadAttention`) (Chapter 7).

    ``in_proj_weight`` (3d, d) stacks the query, key and value projections by rows, in that order.
    """
    if not isinstance(module, (nn.MultiheadAttention, MultiHeadAttention)):
        raise TypeError(f"module must be a torch.nn.MultiheadAttention, got {describe(module)}")
    if getattr(module, "in_proj_weight", None) is None:
        raise ValueError("module must use one fused in_proj_weight (kdim == vdim == embed_dim)")
    dim = module.in_proj_weight.shape[1]
    W_q, W_k, W_v = module.in_proj_weight.detach().chunk(3, dim=0)
    if module.in_proj_bias is None:
        b_q = b_k = b_v = torch.zeros(dim, dtype=W_q.dtype, device=W_q.device)
    else:
        b_q, b_k, b_v = module.in_proj_bias.detach().chunk(3)
    W_o = module.out_proj.weight.detach()
    b_o = module.out_proj.bias.detach() if module.out_proj.bias is not None else torch.zeros_like(b_q)
    weights = MultiHeadWeights(W_q, W_k, W_v, b_q, b_k, b_v, W_o, b_o)
    if dtype is not None:
        weights = MultiHeadWeights(*(w.to(check_dtype("dtype", dtype)).clone() for w in weights))
    return weights


def random_weights(dim: int, *, seed: int = 0, dtype: torch.dtype = torch.float64, device="cpu") -> MultiHeadWeights:
    """Multi-head weights drawn like torch's initialisation (uniform, ±√(6/(2d)) projections) (Chapter 7)."""
    dim = check_int("dim", dim, minimum=1)
    dtype, device = check_dtype("dtype", dtype), check_device("device", device)
    gen = generator(seed)
    bound = math.sqrt(6 / (2 * dim))

    def draw(*shape, scale):
        return ((2 * torch.rand(*shape, generator=gen, dtype=torch.float64) - 1) * scale).to(device, dtype)

    projections = [draw(dim, dim, scale=bound) for _ in range(3)]
    biases = [draw(dim, scale=0.1) for _ in range(3)]
    return MultiHeadWeights(*projections, *biases, draw(dim, dim, scale=1 / math.sqrt(dim)), draw(dim, scale=0.1))


def _split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    B, T, d = x.shape
    return x.reshape(B, T, num_heads, d // num_heads).transpose(1, 2)   # (B, h, T, d/h)


def multi_head_attention(query, key, value, weights: MultiHeadWeights, num_heads: int, *, mask=None,
                         causal: bool = False, batch_first: bool = True) -> Attention:
    """Multi-head attention as torch.nn.MultiheadAttention computes it, with per-head weights (Chapter 7).

    Inputs are (B, T, d) with ``batch_first`` (else (T, B, d), torch's default), or (T, d) unbatched.
    ``mask`` broadcasts to (B, T_q, T_k) (True = may attend), batch first whatever ``batch_first``
    says; a key-padding mask of shape (B, T_k) is passed as ``mask[:, None, :]``. Returns the output,
    shaped like ``query``, and the weights of every head, (B, h, T_q, T_k); torch's averaged weights
    are ``weights.mean(dim=1)``.
    """
    num_heads = check_int("num_heads", num_heads, minimum=1)
    batch_first = check_bool("batch_first", batch_first)
    causal = check_bool("causal", causal)
    if not isinstance(weights, MultiHeadWeights):
        raise TypeError(f"weights must be MultiHeadWeights (see weights_from_torch), got {describe(weights)}")
    query = as_tensor("query", query, floating=True)
    key = as_tensor("key", key, floating=True)
    value = as_tensor("value", value, floating=True)
    if query.dim() not in (2, 3) or key.dim() != query.dim() or value.dim() != query.dim():
        raise ValueError(f"query, key and value must all be (B, T, d) or all (T, d), got {describe(query)}, "
                         f"{describe(key)} and {describe(value)}")
    dim = weights.W_q.shape[0]
    if dim % num_heads:
        raise ValueError(f"num_heads must divide the width {dim}, got {num_heads}")
    for name, tensor in (("query", query), ("key", key), ("value", value)):
        if tensor.shape[-1] != dim:
            raise ValueError(f"{name} must have width {dim} (that of the weights), got {describe(tensor)}")
    unbatched = query.dim() == 2
    if unbatched:
        query, key, value = query[None], key[None], value[None]
    elif not batch_first:
        query, key, value = query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1)
    if key.shape[:2] != value.shape[:2] or key.shape[0] != query.shape[0]:
        raise ValueError(f"key and value must have the same batch and length, and the batch of query, got "
                         f"{describe(query)}, {describe(key)} and {describe(value)}")
    if mask is not None:
        mask = _check_mask(mask, (query.shape[0], query.shape[1], key.shape[1])).to(query.device)
    output, heads = _multi_head(query, key, value, weights, num_heads, mask, causal)
    if unbatched:
        return Attention(output[0], heads[0])
    return Attention(output if batch_first else output.transpose(0, 1), heads)


def _multi_head(query, key, value, weights: MultiHeadWeights, num_heads: int, mask, causal: bool):
    """Multi-head attention on checked, batch-first arguments: the output and every head's weights."""
    q = _split_heads(query @ weights.W_q.T + weights.b_q, num_heads)    # (B, h, T_q, d/h)
    k = _split_heads(key @ weights.W_k.T + weights.b_k, num_heads)      # (B, h, T_k, d/h)
    v = _split_heads(value @ weights.W_v.T + weights.b_v, num_heads)    # (B, h, T_k, d/h)
    if mask is not None:
        mask = mask.reshape((1,) * (3 - mask.dim()) + tuple(mask.shape))
        mask = mask.unsqueeze(-3)                                        # (B, 1, T_q, T_k): the same for every head
    heads = _attend(q, k, v, mask, causal, 1 / math.sqrt(q.shape[-1]))
    B, h, T_q, d_head = heads.output.shape
    output = heads.output.transpose(1, 2).reshape(B, T_q, h * d_head) @ weights.W_o.T + weights.b_o
    return output, heads.weights


class MultiHeadAttention(nn.Module):
    """Trainable multi-head attention with torch's parameter names, so its state_dict loads both ways (Chapter 7).

    Batch first. ``forward`` returns the output; :meth:`attend` also the weights of every head.
    Parameters are drawn from ``seed`` (xavier-uniform projections, zero biases, as torch does).
    """

    def __init__(self, dim: int, num_heads: int, *, seed: int = 0, dtype: torch.dtype = torch.float32,
                 device="cpu"):
        super().__init__()
        dim, num_heads = check_int("dim", dim, minimum=1), check_int("num_heads", num_heads, minimum=1)
        if dim % num_heads:
            raise ValueError(f"num_heads must divide dim, got dim={dim} and num_heads={num_heads}")
        dtype, device = check_dtype("dtype", dtype), check_device("device", device)
        self.num_heads = num_heads
        gen = generator(seed)
        bound = math.sqrt(6 / (dim + dim))        # xavier-uniform of each (d, d) block, as torch does
        weight = (2 * torch.rand(3 * dim, dim, generator=gen, dtype=torch.float64) - 1) * bound
        self.in_proj_weight = nn.Parameter(weight.to(device, dtype))
        self.in_proj_bias = nn.Parameter(torch.zeros(3 * dim, dtype=dtype, device=device))
        self.out_proj = nn.Linear(dim, dim, dtype=dtype, device=device)
        with torch.no_grad():
            out = (2 * torch.rand(dim, dim, generator=gen, dtype=torch.float64) - 1) / math.sqrt(dim)
            self.out_proj.weight.copy_(out)
            self.out_proj.bias.zero_()

    def attend(self, query, key=None, value=None, *, mask=None, causal: bool = False) -> Attention:
        """Output and per-head weights; ``key`` and ``value`` default to ``query`` (self-attention)."""
        key = query if key is None else key
        value = key if value is None else value
        if query.dim() != 3 or key.dim() != 3 or value.dim() != 3:
            raise ValueError(f"query, key and value must be batch-first (B, T, d), got {describe(query)}, "
                             f"{describe(key)} and {describe(value)}")
        if mask is not None:
            mask = _check_mask(mask, (query.shape[0], query.shape[1], key.shape[1]))
        # The checks of multi_head_attention cost more than the arithmetic of a tiny model's step.
        return Attention(*_multi_head(query, key, value, self.projections(), self.num_heads, mask, causal))

    def projections(self) -> MultiHeadWeights:
        """The parameters as :class:`MultiHeadWeights` (views that carry gradients)."""
        W_q, W_k, W_v = self.in_proj_weight.chunk(3, dim=0)
        b_q, b_k, b_v = self.in_proj_bias.chunk(3)
        return MultiHeadWeights(W_q, W_k, W_v, b_q, b_k, b_v, self.out_proj.weight, self.out_proj.bias)

    def forward(self, query, key=None, value=None, *, mask=None, causal: bool = False) -> torch.Tensor:
        return self.attend(query, key, value, mask=mask, causal=causal).output


def attention_parameter_count(dim: int, *, bias: bool = True) -> int:
    """Parameters of multi-head attention of width d: 4d² weights and 4d biases, whatever the heads (Chapter 7)."""
    dim = check_int("dim", dim, minimum=1)
    return 4 * dim * dim + (4 * dim if check_bool("bias", bias) else 0)


# ---------------------------------------------------------------------------
# Additive (Bahdanau) attention
# ---------------------------------------------------------------------------

class AdditiveAttention(nn.Module):
    """Bahdanau's attention: score(s, h_j) = vᵀ tanh(W_a s + U_a h_j), softmax over j (Chapter 7).

    ``forward(s, H, mask=None)`` takes queries s, one per sequence (B, d_s) or several (B, T_q, d_s),
    and annotations H (B, T, d_h); it returns the contexts Σ_j α_j h_j, (B, d_h) or (B, T_q, d_h),
    and the weights α, (B, T) or (B, T_q, T).
    """

    def __init__(self, query_dim: int, key_dim: int, hidden_dim: int, *, dtype: torch.dtype = torch.float32,
                 device="cpu"):
        super().__init__()
        sizes = {name: check_int(name, value, minimum=1) for name, value in
                 (("query_dim", query_dim), ("key_dim", key_dim), ("hidden_dim", hidden_dim))}
        dtype, device = check_dtype("dtype", dtype), check_device("device", device)
        self.W_a = nn.Linear(sizes["query_dim"], sizes["hidden_dim"], bias=False, dtype=dtype, device=device)
        self.U_a = nn.Linear(sizes["key_dim"], sizes["hidden_dim"], dtype=dtype, device=device)
        self.v = nn.Linear(sizes["hidden_dim"], 1, bias=False, dtype=dtype, device=device)

    def forward(self, s: torch.Tensor, H: torch.Tensor, mask=None) -> Attention:
        single = s.dim() == 2
        queries = self.W_a(s[:, None] if single else s)                                   # (B, T_q, hidden)
        scores = self.v(torch.tanh(queries[:, :, None] + self.U_a(H)[:, None])).squeeze(-1)   # (B, T_q, T)
        if mask is not None:
            mask = _check_mask(mask[:, None] if single else mask, scores.shape)
        weights = masked_softmax(scores, mask)
        contexts = weights @ H                                                            # (B, T_q, d_h)
        return Attention(contexts[:, 0], weights[:, 0]) if single else Attention(contexts, weights)


# ---------------------------------------------------------------------------
# Why 1/√d_k
# ---------------------------------------------------------------------------

class ScoreStatistics(NamedTuple):
    """Dot products of random unit-variance queries and keys, and what softmax makes of them."""

    variance: float             # Var(q·k), about d
    scaled_variance: float      # Var(q·k / √d), about 1
    max_weight: float           # mean largest softmax weight over the keys, unscaled scores
    scaled_max_weight: float    # the same with scaled scores


def score_statistics(dim: int, *, num_queries: int = 10_000, num_keys: int = 16, seed: int = 0) -> ScoreStatistics:
    """Variance of q·k for q, k ~ N(0, I_d) and the mean largest attention weight over ``num_keys`` keys (Chapter 7)."""
    dim = check_int("dim", dim, minimum=1)
    num_queries = check_int("num_queries", num_queries, minimum=2)
    num_keys = check_int("num_keys", num_keys, minimum=1)
    gen = generator(seed)
    q = torch.randn(num_queries, 1, dim, generator=gen, dtype=torch.float64)
    k = torch.randn(num_queries, num_keys, dim, generator=gen, dtype=torch.float64)
    scores = (q * k).sum(dim=-1)                                   # (num_queries, num_keys)
    scaled = scores / math.sqrt(dim)
    return ScoreStatistics(scores.var().item(), scaled.var().item(),
                           scores.softmax(dim=-1).max(dim=-1).values.mean().item(),
                           scaled.softmax(dim=-1).max(dim=-1).values.mean().item())
