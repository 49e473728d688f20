"""Checks of chapter 7's exercises: reference solutions pass, plausible wrong answers fail, bad answers fail
cleanly."""
from __future__ import annotations

import itertools
import math

import numpy as np
import torch

import dlbook.exercises.checks.ch07_transformers as transformers_checks
from dlbook import masked_lm, seq2seq, transformer

from exercise_contract import bad_types

IDS = ("7.1", "7.2", "7.3", "7.4", "7.5")
MIN_CASES = 5


# ---------------------------------------------------------------------------
# Reference solutions (independent of the chapter's modules)
# ---------------------------------------------------------------------------

def rotary(X, positions, base):
    d = X.shape[1]
    omega = base ** (-torch.arange(0, d, 2, dtype=X.dtype) / d)
    angle = positions[:, None] * omega
    even, odd = X[:, 0::2], X[:, 1::2]
    return torch.stack((even * angle.cos() - odd * angle.sin(), even * angle.sin() + odd * angle.cos()),
                       dim=-1).reshape(X.shape)


def rotary_complex(X, positions, base):
    """The pairs as complex numbers, multiplied by unit complex numbers."""
    d = X.shape[1]
    z = torch.view_as_complex(X.reshape(X.shape[0], d // 2, 2).contiguous())
    omega = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    return torch.view_as_real(z * torch.polar(torch.ones_like(omega), positions[:, None] * omega)).reshape(X.shape)


def sorting_ceiling(length, num_symbols):
    """E[max count] / T with P(max <= m) = T!/V^T [x^T] (sum_{k<=m} x^k/k!)^V, by polynomial powers in NumPy."""
    T, V = length, num_symbols
    factorials = np.array([math.factorial(k) for k in range(T + 1)], dtype=float)
    expected_max = 0.0
    for m in range(T):
        series = np.where(np.arange(T + 1) <= m, 1 / factorials, 0.0)
        power = np.array([1.0])
        for _ in range(V):
            power = np.convolve(power, series)[:T + 1]
        at_most = math.factorial(T) * (power[T] if len(power) > T else 0.0) / V**T
        expected_max += 1 - at_most
    return expected_max / T


def sorting_ceiling_by_multisets(length, num_symbols):
    """E[max count] / T by a recursion over symbols: the joint law of (total so far, largest so far)."""
    T, V = length, num_symbols
    # state: (used, largest) -> number of ways weighted by multinomial coefficients / T!
    states = {(0, 0): 1.0}
    for _ in range(V):
        new = {}
        for (used, largest), weight in states.items():
            for k in range(T - used + 1):
                key = (used + k, max(largest, k))
                new[key] = new.get(key, 0.0) + weight / math.factorial(k)
        states = new
    total = sum(w * largest for (used, largest), w in states.items() if used == T)
    return total * math.factorial(T) / V**T / T


def bert_parameters(vocab_size, max_positions, num_segments, dim, num_layers, ff_dim, pooler):
    embeddings = (vocab_size + max_positions + num_segments) * dim + 2 * dim
    block = 4 * dim * dim + 4 * dim + 2 * dim * ff_dim + ff_dim + dim + 4 * dim
    return embeddings + num_layers * block + (dim * dim + dim if pooler else 0)


def mask_tokens(tokens, vocab_size, mask_id, special_ids, seed):
    gen = torch.Generator().manual_seed(seed)
    special = torch.tensor(sorted(set(special_ids) | {mask_id}))
    ordinary = torch.tensor([i for i in range(vocab_size) if i not in set(special.tolist())])
    selected = (torch.rand(tokens.shape, generator=gen) < 0.15) & ~torch.isin(tokens, special)
    action = torch.rand(tokens.shape, generator=gen)
    random_tokens = ordinary[torch.randint(0, len(ordinary), tokens.shape, generator=gen)]
    inputs = torch.where(selected & (action < 0.8), mask_id, tokens)
    inputs = torch.where(selected & (action >= 0.8) & (action < 0.9), random_tokens, inputs)
    return inputs, selected


def mask_tokens_numpy(tokens, vocab_size, mask_id, special_ids, seed):
    """NumPy, with the choices drawn by one categorical draw per token."""
    rng = np.random.default_rng(seed)
    x = tokens.numpy()
    special = set(special_ids) | {mask_id}
    ordinary = np.array([i for i in range(vocab_size) if i not in special])
    selectable = ~np.isin(x, list(special))
    selected = selectable & (rng.random(x.shape) < 0.15)
    action = rng.choice(3, size=x.shape, p=[0.8, 0.1, 0.1])
    out = x.copy()
    out[selected & (action == 0)] = mask_id
    where = selected & (action == 1)
    out[where] = rng.choice(ordinary, size=int(where.sum()))
    return torch.tensor(out), torch.tensor(selected)


def local_attention(Q, K, V, window):
    T, d_k = Q.shape
    w = min(window, T)
    K_windows = torch.cat((K.new_zeros(w - 1, d_k), K)).unfold(0, w, 1).transpose(1, 2)
    V_windows = torch.cat((V.new_zeros(w - 1, V.shape[1]), V)).unfold(0, w, 1).transpose(1, 2)
    scores = (Q[:, None, :] * K_windows).sum(-1) / math.sqrt(d_k)
    exists = torch.arange(T)[:, None] - (w - 1) + torch.arange(w)[None] >= 0
    weights = scores.masked_fill(~exists, float("-inf")).softmax(dim=-1)
    return (weights[:, :, None] * V_windows).sum(1)


def local_attention_by_offsets(Q, K, V, window):
    """Scores for each offset s = 0..w-1 as shifted products, then a softmax over the offsets."""
    T, d_k = Q.shape
    w = min(window, T)
    scores = torch.full((T, w), float("-inf"), dtype=Q.dtype)
    for s in range(w):
        scores[s:, s] = (Q[s:] * K[:T - s]).sum(1) / math.sqrt(d_k)
    weights = scores.softmax(1)
    out = torch.zeros(T, V.shape[1], dtype=V.dtype)
    for s in range(w):
        out[s:] += weights[s:, s:s + 1] * V[:T - s]
    return out


REFERENCES = {
    "7.1": [rotary, rotary_complex],
    "7.2": [sorting_ceiling, sorting_ceiling_by_multisets],
    "7.3": [bert_parameters],
    "7.4": [mask_tokens, mask_tokens_numpy],
    "7.5": [local_attention, local_attention_by_offsets],
}


# ---------------------------------------------------------------------------
# Plausible wrong answers
# ---------------------------------------------------------------------------

def rotary_by_the_library(X, positions, base):
    rows = [X[t] @ transformer.relative_rotation(float(p), X.shape[1], base=base).T for t, p in enumerate(positions)]
    return torch.stack(rows)


def rotary_misprinted_frequencies(X, positions, base):
    """omega_i = base^(-i/d): the pairs turn too slowly."""
    d = X.shape[1]
    angle = positions[:, None] * base ** (-torch.arange(d // 2, dtype=X.dtype) / d)
    even, odd = X[:, 0::2], X[:, 1::2]
    return torch.stack((even * angle.cos() - odd * angle.sin(), even * angle.sin() + odd * angle.cos()),
                       dim=-1).reshape(X.shape)


def rotary_clockwise(X, positions, base):
    return rotary(X, -positions, base)


def rotary_halves(X, positions, base):
    """Pairs (x_i, x_(i + d/2)), the convention of some libraries, not the one asked for."""
    d = X.shape[1]
    omega = base ** (-torch.arange(0, d, 2, dtype=X.dtype) / d)
    angle = positions[:, None] * omega
    first, second = X[:, :d // 2], X[:, d // 2:]
    return torch.cat((first * angle.cos() - second * angle.sin(), first * angle.sin() + second * angle.cos()), 1)


def ceiling_by_training(length, num_symbols):
    config = seq2seq.TaskRun("tagger", task="sort", length=length, num_symbols=num_symbols, positions="none",
                             steps=10, batch_size=8, epochs=1)
    return seq2seq.train_task(config).token_accuracy


def ceiling_chance(length, num_symbols):
    return 1 / num_symbols


def ceiling_copy_own_symbol(length, num_symbols):
    """Label each position with its own symbol: right where the string and its sorted version agree
    (exact over all strings when there are few, else over 200,000 random ones)."""
    if num_symbols**length <= 100_000:
        X = np.array(list(itertools.product(range(num_symbols), repeat=length)))
    else:
        X = np.random.default_rng(0).integers(0, num_symbols, size=(200_000, length))
    return float((X == np.sort(X, axis=1)).mean())


def ceiling_most_frequent_symbol_share(length, num_symbols):
    """Expected share of the commonest symbol, computed as if the counts were independent Poisson variables."""
    lam = length / num_symbols
    cdf = np.cumsum([math.exp(-lam) * lam**k / math.factorial(k) for k in range(length + 1)])
    expected_max = sum(1 - c**num_symbols for c in cdf[:length])
    return float(expected_max / length)


def bert_by_the_library(vocab_size, max_positions, num_segments, dim, num_layers, ff_dim, pooler):
    config = transformer.BertConfig(vocab_size, max_positions, num_segments, dim, num_layers, 1, ff_dim, pooler)
    return transformer.bert_parameter_count(config)


def bert_without_embedding_norm(*args):
    return bert_parameters(*args) - 2 * args[3]


def bert_attention_without_biases(*args):
    return bert_parameters(*args) - 4 * args[3] * args[4]


def mask_by_the_library(tokens, vocab_size, mask_id, special_ids, seed):
    out = masked_lm.bert_mask(tokens, vocab_size=vocab_size, mask_id=mask_id, special_ids=special_ids, seed=seed)
    return out.inputs, out.selected


def mask_everything_selected(tokens, vocab_size, mask_id, special_ids, seed):
    """No 80/10/10: every selected token becomes [MASK]."""
    _, selected = mask_tokens(tokens, vocab_size, mask_id, special_ids, seed)
    return torch.where(selected, mask_id, tokens), selected


def mask_special_tokens_too(tokens, vocab_size, mask_id, special_ids, seed):
    return mask_tokens(tokens, vocab_size, mask_id, [], seed)


def mask_random_from_whole_vocabulary(tokens, vocab_size, mask_id, special_ids, seed):
    gen = torch.Generator().manual_seed(seed)
    selected = (torch.rand(tokens.shape, generator=gen) < 0.15) & ~torch.isin(tokens, torch.tensor(special_ids))
    action = torch.rand(tokens.shape, generator=gen)
    random_tokens = torch.randint(0, vocab_size, tokens.shape, generator=gen)
    inputs = torch.where(selected & (action < 0.8), mask_id, tokens)
    return torch.where(selected & (action >= 0.8) & (action < 0.9), random_tokens, inputs), selected


def mask_ignoring_seed(tokens, vocab_size, mask_id, special_ids, seed):
    return mask_tokens(tokens, vocab_size, mask_id, special_ids, 0)


def local_attention_two_sided(Q, K, V, window):
    """Neighbours on both sides, |i - j| < window."""
    T = Q.shape[0]
    i, j = torch.arange(T)[:, None], torch.arange(T)[None]
    scores = (Q @ K.T / math.sqrt(Q.shape[1])).masked_fill((i - j).abs() >= window, float("-inf"))
    return scores.softmax(1) @ V


def local_attention_one_too_many(Q, K, V, window):
    """window + 1 keys: i - window <= j <= i."""
    return local_attention(Q, K, V, window + 1)


def local_attention_by_the_library(Q, K, V, window):
    from dlbook import attention
    T = Q.shape[0]
    i, j = torch.arange(T)[:, None], torch.arange(T)[None]
    return attention.scaled_dot_product_attention(Q, K, V, mask=(j <= i) & (j > i - window)).output


WRONG = {
    "7.1": {"dlbook.transformer.relative_rotation (blocked)": rotary_by_the_library,
            "omega_i = base^(-i/d)": rotary_misprinted_frequencies, "clockwise": rotary_clockwise,
            "pairs (x_i, x_(i+d/2))": rotary_halves},
    "7.2": {"dlbook.seq2seq.train_task (blocked)": ceiling_by_training, "chance 1/V": ceiling_chance,
            "copy the own symbol": ceiling_copy_own_symbol,
            "independent Poisson counts": ceiling_most_frequent_symbol_share},
    "7.3": {"dlbook.transformer.bert_parameter_count (blocked)": bert_by_the_library,
            "no layer norm after the embeddings": bert_without_embedding_norm,
            "attention without biases": bert_attention_without_biases},
    "7.4": {"dlbook.masked_lm.bert_mask (blocked)": mask_by_the_library,
            "every selected token masked": mask_everything_selected,
            "special tokens selected too": mask_special_tokens_too,
            "random tokens from the whole vocabulary": mask_random_from_whole_vocabulary,
            "the seed ignored": mask_ignoring_seed},
    "7.5": {"dlbook.attention.scaled_dot_product_attention (blocked)": local_attention_by_the_library,
            "a window on both sides": local_attention_two_sided, "one key too many": local_attention_one_too_many},
}

BAD_TYPES = bad_types("raises ValueError", "stub", "returns None", "returns a string", "returns NaN")


# ---------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------



def test_the_two_measurements_of_the_ceiling_agree_with_each_other_and_with_the_formula():
    for T, V in [(3, 2), (4, 3), (5, 3)]:
        brute = transformers_checks._ceiling_by_brute_force(T, V)
        assert math.isclose(float(brute), transformers_checks._ceiling_by_arrangements(T, V), rel_tol=1e-12)
        assert math.isclose(float(brute), sorting_ceiling(T, V), rel_tol=1e-12)


def test_the_ceiling_at_the_chapters_setting_is_what_the_trained_model_approaches():
    """About 0.300 at length 8 over 10 symbols; the chapter's position-blind taggers reach about 0.29."""
    assert 0.29 < transformers_checks._ceiling_by_arrangements(8, 10) < 0.31


def test_the_reference_counts_agree_with_the_chapter():
    assert bert_parameters(30_522, 512, 2, 768, 12, 3_072, True) == transformer.bert_parameter_count() == 109_482_240
