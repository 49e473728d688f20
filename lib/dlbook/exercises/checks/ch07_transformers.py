"""Checks for the exercises of chapter 7 (07_transformers): rotary position embeddings, the accuracy
ceiling of a position-blind sorter, BERT's parameter count, BERT's masking rule, and local attention.

Expected values are computed here by independent code (complex numbers for rotations, brute force over
strings and over arrangements for the ceiling, PyTorch's own modules built on the meta device for the
counts, a NumPy loop over window offsets for local attention), never by the chapter's modules
attention, transformer and masked_lm, so that a bug there cannot make a wrong answer pass.
"""
from __future__ import annotations

import itertools
import math
from collections import Counter
from fractions import Fraction

import numpy as np
import torch

from ..core import as_array, as_float, as_int, describe, exercise, expect, expect_close

# ---------------------------------------------------------------------------
# Exercise 7.1: rotary position embeddings
# ---------------------------------------------------------------------------


def _rotary_by_complex(X: np.ndarray, positions: np.ndarray, base: float) -> np.ndarray:
    """Pairs as complex numbers x_2i + i x_2i+1, multiplied by exp(i p_t ω_i)."""
    d = X.shape[1]
    omega = base ** (-np.arange(0, d, 2) / d)
    z = (X[:, 0::2] + 1j * X[:, 1::2]) * np.exp(1j * positions[:, None] * omega)
    out = np.empty_like(X)
    out[:, 0::2], out[:, 1::2] = z.real, z.imag
    return out


@exercise("7.1", title="Rotary position embeddings", function="rotary", kind="extend", difficulty=2, minutes=35,
          blocked=("dlbook.transformer.relative_rotation", "dlbook.transformer.frequencies",
                   "dlbook.transformer.sinusoidal_encoding"),
          hint="treat each pair (x_2i, x_2i+1) as a point in the plane and rotate it by positions[t] * omega_i, "
               "with omega_i = base ** (-2i / d) for all rows at once")
def check_rotary(rotary, cases):
    rng = np.random.default_rng(7)
    for T, d, positions, base in [(5, 8, np.arange(5.0), 10_000.0), (4, 2, np.array([0.0, 0.5, -1.25, 3.0]), 100.0),
                                  (6, 16, rng.uniform(-20, 20, 6), 500.0), (1, 4, np.array([2.0]), 10_000.0)]:
        X = rng.normal(size=(T, d))
        with cases.case(f"rotary(X, positions, base={base:g}) for X of shape ({T}, {d})"):
            got = as_array(rotary(torch.tensor(X), torch.tensor(positions), base), (T, d))
            error = np.abs(got - _rotary_by_complex(X, positions, base)).max()
            expect(error <= 1e-10, "each pair rotated counter-clockwise by positions[t] * base**(-2i/d) "
                                   "(max error <= 1e-10)", f"a result off by {error:.3g}")
    q, k = rng.normal(size=(1, 32)), rng.normal(size=(1, 32))
    with cases.case("scores rotary(q, m) . rotary(k, n) for (m, n) = (0, 3), (5, 8), (20.5, 23.5) and (0, 4)"):
        scores = []
        for m, n in [(0.0, 3.0), (5.0, 8.0), (20.5, 23.5), (0.0, 4.0)]:
            rq = as_array(rotary(torch.tensor(q), torch.tensor([m]), 10_000.0), (1, 32))
            rk = as_array(rotary(torch.tensor(k), torch.tensor([n]), 10_000.0), (1, 32))
            scores.append(float((rq * rk).sum()))
        spread = max(scores[:3]) - min(scores[:3])
        expect(spread <= 1e-9, "the same score whenever n - m = 3", f"scores {scores[0]:.6f}, {scores[1]:.6f}, "
               f"{scores[2]:.6f} (spread {spread:.3g})")
        expect(abs(scores[3] - scores[0]) > 1e-6, "a different score for n - m = 4",
               f"{scores[3]:.6f}, the same as for n - m = 3")
    T, d = 100_000, 16
    X, positions = rng.normal(size=(T, d)), np.arange(T, dtype=float)
    rows = rng.choice(T, 50, replace=False)
    expected = _rotary_by_complex(X[rows], positions[rows], 10_000.0)
    with cases.case(f"rotary(X, positions, 10000.0) for X of shape ({T:,}, {d})", time_limit=1.5,
                    why="the task asks for all rows at once, without a Python loop over them"):
        got = as_array(rotary(torch.tensor(X), torch.tensor(positions), 10_000.0), (T, d))
    with cases.case(f"the rows of rotary(X, positions, 10000.0) for X of shape ({T:,}, {d})"):
        error = np.abs(got[rows] - expected).max()
        expect(error <= 1e-8, "the rotated rows (max error <= 1e-8)", f"a result off by {error:.3g}")


# ---------------------------------------------------------------------------
# Exercise 7.2: the best token accuracy of a permutation-equivariant sorter
# ---------------------------------------------------------------------------

def _ceiling_by_brute_force(T: int, V: int) -> Fraction:
    """Over all V^T strings: an equivariant model labels every copy of v in a string with multiset M the same,
    so for each (M, v) the best label is the one most often right over the strings with multiset M."""
    counts: dict[tuple, Counter] = {}
    for x in itertools.product(range(V), repeat=T):
        target = sorted(x)
        multiset = tuple(target)
        for v, o in zip(x, target):
            counts.setdefault((multiset, v), Counter())[o] += 1
    correct = sum(max(counter.values()) for counter in counts.values())
    return Fraction(correct, V**T * T)


def _partitions(n: int, largest: int | None = None):
    largest = n if largest is None else largest
    if n == 0:
        yield ()
        return
    for part in range(min(n, largest), 0, -1):
        for rest in _partitions(n - part, part):
            yield (part,) + rest


def _ceiling_by_arrangements(T: int, V: int) -> float:
    """The same quantity by types of multisets: for each partition of T into at most V multiplicities, average
    over all T! orderings of one representative string, weighted by the probability of the type."""
    orderings = np.array(list(itertools.permutations(range(T))))                   # (T!, T)
    total = 0.0
    for multiplicities in _partitions(T):
        if len(multiplicities) > V:
            continue
        representative = np.repeat(np.arange(len(multiplicities)), multiplicities)  # sorted already
        strings = representative[orderings]                                           # (T!, T)
        correct = 0.0
        for v in range(len(multiplicities)):
            # How often, over all orderings, a copy of v sits where the sorted string holds o, for each o.
            per_position = (strings == v).sum(0)                                      # (T,)
            per_label = np.bincount(representative, weights=per_position, minlength=len(multiplicities))
            correct += per_label.max() / len(orderings)
        # Probability of the type: choose which symbols get which multiplicity, then arrange.
        labelings = math.perm(V, len(multiplicities))
        for repeat in Counter(multiplicities).values():
            labelings //= math.factorial(repeat)
        arrangements = math.factorial(T) // math.prod(math.factorial(m) for m in multiplicities)
        total += labelings * arrangements / V**T * correct / T
    return total


def _expected_max_count_by_simulation(T: int, V: int, num: int, seed: int) -> float:
    rng = np.random.default_rng(seed)
    strings = rng.integers(0, V, size=(num, T))
    counts = np.stack([(strings == v).sum(1) for v in range(V)], axis=1)
    return counts.max(1).mean()


@exercise("7.2", title="How well can a position-blind model sort?", function="sorting_ceiling", kind="predict",
          difficulty=3, minutes=40, blocked=("dlbook.seq2seq.train_task", "dlbook.seq2seq.build_model"),
          hint="an equivariant model gives every copy of a symbol the same label, and that label may depend only "
               "on the symbol and the multiset; given the multiset, where the copies sit is uniformly random")
def check_sorting_ceiling(sorting_ceiling, cases):
    for T, V in [(1, 3), (2, 2), (3, 2), (3, 3), (4, 3), (5, 2), (6, 3)]:
        with cases.case(f"sorting_ceiling({T}, {V}), measured by brute force over all {V}^{T} strings"):
            expected = _ceiling_by_brute_force(T, V)
            expect_close(as_float(sorting_ceiling(T, V)), float(expected), rtol=1e-9)
    with cases.case("sorting_ceiling(8, 10), the setting of Section 7.7, measured over all orderings of each type"):
        expect_close(as_float(sorting_ceiling(8, 10)), _ceiling_by_arrangements(8, 10), rtol=1e-9)
    estimate = _expected_max_count_by_simulation(30, 10, 200_000, seed=7) / 30
    with cases.case("sorting_ceiling(30, 10), compared with a simulation of 200,000 strings", time_limit=1.0,
                    why="the task asks for a prediction from a formula, not an enumeration"):
        got = as_float(sorting_ceiling(30, 10))
        expect(abs(got - estimate) <= 0.002, f"about {estimate:.4f} (within 0.002 of the simulation)",
               f"{got:.6g}")


# ---------------------------------------------------------------------------
# Exercise 7.3: BERT's parameter count
# ---------------------------------------------------------------------------

def _bert_on_meta(vocab_size, max_positions, num_segments, dim, num_layers, ff_dim, pooler) -> int:
    heads = 2 if dim % 2 == 0 else 1
    with torch.device("meta"):
        parts = [torch.nn.Embedding(vocab_size, dim), torch.nn.Embedding(max_positions, dim),
                 torch.nn.Embedding(num_segments, dim), torch.nn.LayerNorm(dim)]
        parts += [torch.nn.TransformerEncoderLayer(dim, heads, ff_dim) for _ in range(num_layers)]
        if pooler:
            parts.append(torch.nn.Linear(dim, dim))
        return sum(p.numel() for part in parts for p in part.parameters())


@exercise("7.3", title="BERT's parameters for any size", function="bert_parameters", kind="derive", difficulty=2,
          minutes=25, blocked=("dlbook.transformer.bert_parameter_count", "dlbook.transformer.build_bert",
                               "dlbook.transformer.encoder_layer_parameter_count",
                               "dlbook.attention.attention_parameter_count", "dlbook.nets.num_parameters"),
          hint="add up the embeddings, the layer norm after them, num_layers times one encoder layer "
               "(attention with biases, two linear layers, two layer norms) and the pooler")
def check_bert_parameters(bert_parameters, cases):
    sizes = [(100, 16, 2, 8, 2, 12, True), (100, 16, 2, 8, 2, 12, False), (7, 3, 1, 6, 1, 5, True),
             (50, 8, 3, 10, 0, 20, True), (30_522, 512, 2, 768, 12, 3_072, True),
             (30_522, 512, 2, 1_024, 24, 4_096, True)]
    for args in sizes:
        label = ("bert_parameters(vocab_size={}, max_positions={}, num_segments={}, dim={}, num_layers={}, "
                 "ff_dim={}, pooler={})").format(*args)
        with cases.case(label):
            expect_equal_int(as_int(bert_parameters(*args)), _bert_on_meta(*args))
    huge = (30_522, 512, 2, 64, 2_000, 256, True)
    zero, one = _bert_on_meta(*huge[:4], 0, *huge[5:]), _bert_on_meta(*huge[:4], 1, *huge[5:])
    with cases.case("bert_parameters with 2,000 layers", time_limit=0.5,
                    why="the task asks for a closed form, not a model built and counted"):
        expect_equal_int(as_int(bert_parameters(*huge)), zero + 2_000 * (one - zero))


def expect_equal_int(got: int, expected: int) -> None:
    expect(got == expected, f"{expected:,}", f"{got:,}")


# ---------------------------------------------------------------------------
# Exercise 7.4: BERT's masking rule
# ---------------------------------------------------------------------------

def _within(count: int, n: int, p: float, sigmas: float = 4.0) -> bool:
    return abs(count - n * p) <= sigmas * math.sqrt(n * p * (1 - p)) + 1


@exercise("7.4", title="BERT's masking rule", function="mask_tokens", kind="transcribe", difficulty=1, minutes=20,
          blocked=("dlbook.masked_lm.bert_mask",),
          hint="draw one uniform number per token to select it (< 0.15) and another to choose among [MASK] (< 0.8), "
               "a random ordinary token (< 0.9) and no change; special tokens are never selected")
def check_mask_tokens(mask_tokens, cases):
    vocab_size, mask_id, special = 40, 2, [0, 1]
    rng = np.random.default_rng(11)
    tokens = rng.integers(3, vocab_size, size=(500, 400))
    tokens[:, 0] = 0                                                     # a [CLS] in front of every row
    tokens[rng.random(tokens.shape) < 0.05] = 1                          # and separators here and there
    is_special = np.isin(tokens, special)
    with cases.case("mask_tokens(tokens of shape (500, 400), 40, 2, [0, 1], seed=3) returns (inputs, selected)"):
        result = mask_tokens(torch.tensor(tokens), vocab_size, mask_id, list(special), 3)
        expect(isinstance(result, (tuple, list)) and len(result) == 2, "a pair (inputs, selected)", describe(result))
        inputs = as_array(result[0], tokens.shape).astype(np.int64)
        selected = as_array(result[1], tokens.shape) != 0
    with cases.case("special tokens are never selected or changed"):
        expect(not selected[is_special].any(), "no special token selected",
               f"{int(selected[is_special].sum())} selected")
        expect((inputs[is_special] == tokens[is_special]).all(), "special tokens unchanged",
               f"{int((inputs[is_special] != tokens[is_special]).sum())} changed")
    with cases.case("tokens that are not selected stay as they are"):
        changed = int((inputs[~selected] != tokens[~selected]).sum())
        expect(changed == 0, "no change outside the selection", f"{changed} changed")
    ordinary = ~is_special
    n_ordinary, n_selected = int(ordinary.sum()), int(selected.sum())
    with cases.case(f"about 15 % of the {n_ordinary:,} ordinary tokens are selected"):
        expect(_within(n_selected, n_ordinary, 0.15), f"about {0.15 * n_ordinary:,.0f} (within 4 sigma)",
               f"{n_selected:,}")
    choices = vocab_size - len(special) - 1
    masked = selected & (inputs == mask_id)
    replaced = selected & (inputs != mask_id) & (inputs != tokens)
    with cases.case("of the selected tokens, 80 % become [MASK] and 10 % a random other token"):
        expect(_within(int(masked.sum()), n_selected, 0.8), f"about {0.8 * n_selected:,.0f} masked",
               f"{int(masked.sum()):,}")
        p_other = 0.1 * (1 - 1 / choices)                                # a random draw may hit the same token
        expect(_within(int(replaced.sum()), n_selected, p_other), f"about {p_other * n_selected:,.0f} replaced",
               f"{int(replaced.sum()):,}")
    with cases.case("random replacements are ordinary tokens, every one of them possible"):
        drawn = inputs[replaced]
        expect(not np.isin(drawn, special + [mask_id]).any(), "no special token and no [MASK] among them",
               f"{int(np.isin(drawn, special + [mask_id]).sum())} special")
        seen = set(drawn.tolist())
        expect(len(seen) == choices, f"all {choices} ordinary ids among the replacements", f"{len(seen)} of them")
    with cases.case("the same seed gives the same masks, another seed other masks"):
        again = mask_tokens(torch.tensor(tokens), vocab_size, mask_id, list(special), 3)
        other = mask_tokens(torch.tensor(tokens), vocab_size, mask_id, list(special), 4)
        same = np.array_equal(as_array(again[0], tokens.shape), inputs)
        expect(same, "identical inputs for seed 3 twice", "different inputs")
        expect(not np.array_equal(as_array(other[1], tokens.shape) != 0, selected), "a different selection for seed 4",
               "the same selection")


# ---------------------------------------------------------------------------
# Exercise 7.5: local attention
# ---------------------------------------------------------------------------

def _local_attention_reference(Q: np.ndarray, K: np.ndarray, V: np.ndarray, window: int) -> np.ndarray:
    """A loop over the window's offsets: offset s pairs query i with key i - s."""
    T, d_k = Q.shape
    width = min(window, T)
    scores = np.full((T, width), -np.inf)
    for s in range(width):
        scores[s:, s] = (Q[s:] * K[:T - s]).sum(1) / math.sqrt(d_k)
    weights = np.exp(scores - scores.max(1, keepdims=True))
    weights /= weights.sum(1, keepdims=True)
    out = np.zeros((T, V.shape[1]))
    for s in range(width):
        out[s:] += weights[s:, s:s + 1] * V[:T - s]
    return out


@exercise("7.5", title="Local attention in linear memory", function="local_attention", kind="extend",
          difficulty=3, minutes=40,
          blocked=("dlbook.attention.scaled_dot_product_attention", "dlbook.attention.masked_softmax",
                   "dlbook.attention.causal_mask"),
          hint="for each query, gather only the window of keys before it (pad the front so every window has the "
               "same length, and give the padded keys weight zero)")
def check_local_attention(local_attention, cases):
    rng = np.random.default_rng(5)
    for T, d_k, d_v, window in [(7, 3, 2, 3), (7, 3, 2, 1), (6, 4, 5, 6), (5, 2, 3, 50), (1, 3, 3, 4), (9, 5, 1, 2)]:
        Q, K, V = rng.normal(size=(T, d_k)), rng.normal(size=(T, d_k)), rng.normal(size=(T, d_v))
        with cases.case(f"local_attention(Q, K, V, window={window}) with T = {T}, d_k = {d_k}, d_v = {d_v}"):
            got = as_array(local_attention(torch.tensor(Q), torch.tensor(K), torch.tensor(V), window), (T, d_v))
            error = np.abs(got - _local_attention_reference(Q, K, V, window)).max()
            expect(error <= 1e-10, "the outputs of causal attention restricted to the window (max error <= 1e-10)",
                   f"a result off by {error:.3g}")
    T, d_k, d_v, window = 64_000, 8, 4, 8
    Q, K, V = rng.normal(size=(T, d_k)), rng.normal(size=(T, d_k)), rng.normal(size=(T, d_v))
    expected = _local_attention_reference(Q, K, V, window)
    with cases.case(f"local_attention with T = {T:,}, window = {window}", time_limit=1.0,
                    why="the task asks for O(T window) work and memory, with no loop over the queries; "
                        "a T x T matrix would have 4 billion entries"):
        got = as_array(local_attention(torch.tensor(Q), torch.tensor(K), torch.tensor(V), window), (T, d_v))
    with cases.case(f"the outputs of local_attention with T = {T:,}, window = {window}"):
        error = np.abs(got - expected).max()
        expect(error <= 1e-9, "the windowed outputs (max error <= 1e-9)", f"a result off by {error:.3g}")
