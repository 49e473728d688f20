"""Masked language modelling in miniature: BERT's masking rule and a character-level model (Chapter 7).

BERT selects 15 % of the tokens of a sequence as prediction targets; of those,
80 % are replaced by [MASK], 10 % by a random token and 10 % stay as they are, so
that the model cannot tell the targets from the rest by looking for [MASK]
(Devlin et al. 2019). Special tokens such as the [CLS] in front of every
sequence are never selected. :func:`bert_mask` applies the rule; the rest of
the module trains a small :class:`dlbook.transformer.TokenTransformer` to fill
in masked characters of English text that ships with Python (the help topics
of ``pydoc_data``), so nothing is downloaded.
"""
from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F

from . import train
from .runtime import generator
from .transformer import POSITIONS, TokenTransformer
from .validation import as_tensor, check_choice, check_device, check_float, check_int, describe

#: Special tokens, in front of the characters in every vocabulary here.
SPECIAL_TOKENS = ("[CLS]", "[SEP]", "[MASK]")


class MaskedTokens(NamedTuple):
    """The masked inputs and, as boolean (N, T) tensors, what happened where."""

    inputs: torch.Tensor       # token ids after masking
    selected: torch.Tensor     # positions the model must predict (15 %)
    masked: torch.Tensor       # ... replaced by [MASK] (80 % of them)
    randomized: torch.Tensor   # ... replaced by a random token (10 %)

    @property
    def kept(self) -> torch.Tensor:
        """Selected positions left unchanged (the last 10 %)."""
        return self.selected & ~self.masked & ~self.randomized


def bert_mask(tokens, *, vocab_size: int, mask_id: int, special_ids=(), select_prob: float = 0.15,
              mask_prob: float = 0.8, random_prob: float = 0.1, seed: int = 0) -> MaskedTokens:
    """BERT's masking rule on integer tokens (N, T): select, then mask / randomise / keep (Chapter 7).

    Each token that is not special is selected independently with ``select_prob``; a selected
    token becomes ``mask_id`` with ``mask_prob``, a random non-special token with ``random_prob``,
    and stays otherwise. Special tokens are never selected.
    """
    tokens = as_tensor("tokens", tokens, ndim=2)
    if tokens.is_floating_point() or tokens.dtype == torch.bool:
        raise TypeError(f"tokens must hold integer ids, got {describe(tokens)}")
    vocab_size = check_int("vocab_size", vocab_size, minimum=2)
    mask_id = check_int("mask_id", mask_id, minimum=0, maximum=vocab_size - 1)
    special = sorted({check_int("special_ids[i]", i, minimum=0, maximum=vocab_size - 1)
                      for i in (*special_ids, mask_id)})
    if len(special) >= vocab_size:
        raise ValueError("special_ids leave no ordinary token to draw random replacements from")
    if tokens.numel() and (tokens.min() < 0 or tokens.max() >= vocab_size):
        raise ValueError(f"tokens must lie in 0..{vocab_size - 1}, got values in "
                         f"{tokens.min().item()}..{tokens.max().item()}")
    select_prob = check_float("select_prob", select_prob, low=0.0, high=1.0)
    mask_prob = check_float("mask_prob", mask_prob, low=0.0, high=1.0)
    random_prob = check_float("random_prob", random_prob, low=0.0, high=1.0)
    if mask_prob + random_prob > 1:
        raise ValueError(f"mask_prob + random_prob must be at most 1, got {mask_prob} + {random_prob}")
    gen = generator(seed)
    u_select = torch.rand(tokens.shape, generator=gen, dtype=torch.float64).to(tokens.device)
    u_action = torch.rand(tokens.shape, generator=gen, dtype=torch.float64).to(tokens.device)
    ordinary = torch.tensor([i for i in range(vocab_size) if i not in special], device=tokens.device)
    replacement = ordinary[torch.randint(0, len(ordinary), tokens.shape, generator=gen).to(tokens.device)]
    is_special = torch.isin(tokens, torch.tensor(special, device=tokens.device))
    selected = (u_select < select_prob) & ~is_special
    masked = selected & (u_action < mask_prob)
    randomized = selected & (u_action >= mask_prob) & (u_action < mask_prob + random_prob)
    inputs = torch.where(masked, torch.full_like(tokens, mask_id), torch.where(randomized, replacement, tokens))
    return MaskedTokens(inputs, selected, masked, randomized)


# ---------------------------------------------------------------------------
# Characters of the pydoc help topics
# ---------------------------------------------------------------------------

def pydoc_text(num_chars: int | None = None) -> str:
    """The help topics that ship with CPython (pydoc_data.topics), joined in order of their names (Chapter 7).

    Their exact text changes with the Python version; about 465 000 characters in Python 3.11.
    """
    from pydoc_data.topics import topics

    text = "\n".join(topics[name] for name in sorted(topics))
    return text if num_chars is None else text[:check_int("num_chars", num_chars, minimum=1)]


@dataclass(frozen=True)
class CharVocabulary:
    """Token ids: the special tokens first, then the characters in sorted order."""

    symbols: tuple[str, ...]

    @classmethod
    def from_text(cls, text: str) -> CharVocabulary:
        if not isinstance(text, str) or not text:
            raise TypeError(f"text must be a non-empty string, got {describe(text)}")
        return cls(SPECIAL_TOKENS + tuple(sorted(set(text))))

    def __len__(self) -> int:
        return len(self.symbols)

    def id(self, symbol: str) -> int:
        return self.symbols.index(symbol)

    @property
    def special_ids(self) -> tuple[int, ...]:
        return tuple(range(len(SPECIAL_TOKENS)))

    def encode(self, text: str, *, device="cpu") -> torch.Tensor:
        index = {symbol: i for i, symbol in enumerate(self.symbols)}
        unknown = sorted(set(text) - set(index))
        if unknown:
            raise ValueError(f"text holds characters outside the vocabulary, e.g. {unknown[:5]}")
        return torch.tensor([index[c] for c in text], device=check_device("device", device))

    def decode(self, ids) -> str:
        return "".join(self.symbols[i] for i in as_tensor("ids", ids, ndim=1).tolist())


def text_windows(ids, length: int, num_windows: int, *, cls_id: int, seed: int = 0) -> torch.Tensor:
    """(num_windows, length + 1): random windows of ``length`` consecutive ids, each behind a [CLS] (Chapter 7)."""
    ids = as_tensor("ids", ids, ndim=1)
    length = check_int("length", length, minimum=1, maximum=len(ids))
    num_windows = check_int("num_windows", num_windows, minimum=1)
    starts = torch.randint(0, len(ids) - length + 1, (num_windows,), generator=generator(seed)).to(ids.device)
    windows = ids[starts[:, None] + torch.arange(length, device=ids.device)]
    return torch.cat((torch.full_like(windows[:, :1], check_int("cls_id", cls_id, minimum=0)), windows), dim=1)


@dataclass(frozen=True)
class MaskedLMRun:
    """A masked character model trained on the first ``train_chars`` characters, tested on the next ones."""

    length: int = 32
    positions: str = "sinusoidal"
    dim: int = 64
    ff_dim: int = 128
    num_layers: int = 2
    num_heads: int = 4
    steps: int = 300
    batch_size: int = 64
    lr: float = 2e-3
    train_chars: int = 200_000
    test_chars: int = 50_000
    num_test: int = 1000
    seed: int = 0
    device: str = "cpu"

    def __post_init__(self):
        for name in ("length", "dim", "ff_dim", "num_layers", "num_heads", "steps", "batch_size", "train_chars",
                     "test_chars", "num_test"):
            check_int(name, getattr(self, name), minimum=1)
        check_float("lr", self.lr, low=0.0, low_open=True)
        check_choice("positions", self.positions, POSITIONS)


class MaskedLMResult(NamedTuple):
    """Accuracy at the [MASK] positions of held-out text, and that of always guessing the commonest character."""

    model: TokenTransformer
    vocabulary: CharVocabulary
    accuracy: float
    unigram_accuracy: float
    history: train.History
    seconds: float


def masked_lm_loss(logits: torch.Tensor, targets: torch.Tensor, selected: torch.Tensor) -> torch.Tensor:
    """Cross-entropy over the selected positions only (Chapter 7)."""
    return F.cross_entropy(logits[selected], targets[selected])


@train.cached
def train_masked_lm(config: MaskedLMRun) -> MaskedLMResult:
    """Train a character-level masked language model on pydoc text (Chapter 7)."""
    c = config
    start = time.perf_counter()
    text = pydoc_text(c.train_chars + c.test_chars)
    vocabulary = CharVocabulary.from_text(text)
    ids = vocabulary.encode(text, device=c.device)
    cls_id, mask_id = vocabulary.id("[CLS]"), vocabulary.id("[MASK]")
    rule = {"vocab_size": len(vocabulary), "mask_id": mask_id, "special_ids": vocabulary.special_ids}
    train_windows = text_windows(ids[:c.train_chars], c.length, c.steps * c.batch_size, cls_id=cls_id, seed=c.seed)
    masking = bert_mask(train_windows, **rule, seed=c.seed)
    model = TokenTransformer(len(vocabulary), len(vocabulary), dim=c.dim, num_heads=c.num_heads, ff_dim=c.ff_dim,
                             num_layers=c.num_layers, max_length=c.length + 1, positions=c.positions,
                             seed=c.seed, device=c.device)
    history = train.fit(model, masked_lm_loss, torch.optim.Adam(model.parameters(), lr=c.lr),
                        (masking.inputs, train_windows, masking.selected), epochs=1, batch_size=c.batch_size,
                        seed=c.seed)
    test_windows = text_windows(ids[c.train_chars:], c.length, c.num_test, cls_id=cls_id, seed=c.seed + 1)
    test = bert_mask(test_windows, **rule, seed=c.seed + 1)
    with torch.no_grad():
        predicted = model.eval()(test.inputs).argmax(dim=-1)
    accuracy = (predicted[test.masked] == test_windows[test.masked]).double().mean().item()
    commonest = Counter(ids[:c.train_chars].tolist()).most_common(1)[0][0]
    unigram = (test_windows[test.masked] == commonest).double().mean().item()
    return MaskedLMResult(model, vocabulary, accuracy, unigram, history, time.perf_counter() - start)
