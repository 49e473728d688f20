"""Text for character-level language models: a corpus on disk, encoding, windows, sampling (Chapter 6).

The corpus is a frozen 200,000-character slice of the help topics CPython
ships in ``pydoc_data`` (corpora/README.md gives its origin and licence), so
every reader trains on the same text whatever their Python version. A model
reads a window of characters and predicts each next one; its loss is the
cross-entropy in nats per character. :func:`sample` generates text one
character at a time from the model's distribution sharpened or flattened by a
temperature.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import torch

from .recurrent import KINDS, LAYERS, reinitialize, uninitialized
from .runtime import generator
from .validation import as_tensor, check_choice, check_float, check_int, describe

#: The frozen slice of the pydoc topics (see corpora/README.md).
CORPUS_PATH = Path(__file__).resolve().parent / "corpora" / "pydoc_topics.txt"
#: Its length in characters.
CORPUS_LENGTH = 200_000


def pydoc_topics_text() -> str:
    """Every help topic of the running Python's ``pydoc_data``, joined in key order (Chapter 6).

    This is what the frozen corpus was cut from; its length and alphabet
    change between Python versions.
    """
    from pydoc_data.topics import topics

    return "".join(topics[key] for key in sorted(topics))


def load_corpus() -> str:
    """The frozen 200,000-character slice of the pydoc topics (Chapter 6).

    If the file is missing (an installation without dlbook's data files), the
    same slice is cut from the running Python's topics, with a warning: the
    text then differs a little from the book's.
    """
    if CORPUS_PATH.exists():
        return CORPUS_PATH.read_text(encoding="utf-8")
    warnings.warn(f"the corpus file {CORPUS_PATH} is missing (install dlbook with its data files); using the first "
                  f"{CORPUS_LENGTH:,} characters of this Python's help topics, which differ between versions",
                  stacklevel=2)
    return pydoc_topics_text()[:CORPUS_LENGTH]


@dataclass(frozen=True)
class Vocabulary:
    """The characters a model knows, in a fixed order: ``encode`` maps text to ids, ``decode`` back."""

    symbols: str

    def __post_init__(self):
        if not isinstance(self.symbols, str) or not self.symbols:
            raise TypeError(f"symbols must be a non-empty string, got {describe(self.symbols)}")
        if len(set(self.symbols)) != len(self.symbols):
            raise ValueError("symbols must not repeat a character")

    def __len__(self) -> int:
        return len(self.symbols)

    def encode(self, text: str, *, device="cpu") -> torch.Tensor:
        """The ids of the characters of ``text``, a LongTensor of its length."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a string, got {describe(text)}")
        index = {ch: i for i, ch in enumerate(self.symbols)}
        unknown = sorted(set(text) - set(index))
        if unknown:
            raise ValueError(f"text contains characters outside the vocabulary: {unknown[:5]}")
        return torch.tensor([index[ch] for ch in text], dtype=torch.long, device=device)

    def decode(self, ids) -> str:
        """The text of a sequence of ids."""
        ids = as_tensor("ids", ids, ndim=1)
        if ids.is_floating_point() or (len(ids) and (ids.min() < 0 or ids.max() >= len(self))):
            raise ValueError(f"ids must be integers in 0..{len(self) - 1}, got {describe(ids)}")
        return "".join(self.symbols[i] for i in ids.tolist())


def vocabulary(text: str) -> Vocabulary:
    """The sorted set of characters of ``text`` (Chapter 6)."""
    if not isinstance(text, str) or not text:
        raise TypeError(f"text must be a non-empty string, got {describe(text)}")
    return Vocabulary("".join(sorted(set(text))))


class Windows(NamedTuple):
    """Inputs X and targets Y, both (N, L): Y is X shifted by one character."""

    X: torch.Tensor
    Y: torch.Tensor


def _check_ids(ids, length: int) -> torch.Tensor:
    ids = as_tensor("ids", ids, ndim=1)
    if ids.is_floating_point():
        raise TypeError(f"ids must be integer character ids, got {describe(ids)}")
    if len(ids) < length + 1:
        raise ValueError(f"ids must be longer than one window (length + 1 = {length + 1}), got {len(ids)}")
    return ids


def random_windows(ids, length: int, num_windows: int, *, seed: int = 0) -> Windows:
    """``num_windows`` windows of ``length`` characters starting at random places, with their next characters."""
    length = check_int("length", length, minimum=1)
    num_windows = check_int("num_windows", num_windows, minimum=1)
    ids = _check_ids(ids, length)
    starts = torch.randint(len(ids) - length, (num_windows,), generator=generator(seed)).to(ids.device)
    offsets = starts[:, None] + torch.arange(length + 1, device=ids.device)  # (N, L + 1)
    chunks = ids[offsets]
    return Windows(chunks[:, :-1], chunks[:, 1:])


def consecutive_windows(ids, length: int) -> Windows:
    """The text cut into non-overlapping windows of ``length`` (the tail that does not fill one is dropped)."""
    length = check_int("length", length, minimum=1)
    ids = _check_ids(ids, length)
    count = (len(ids) - 1) // length
    X = ids[:count * length].reshape(count, length)
    Y = ids[1:count * length + 1].reshape(count, length)
    return Windows(X, Y)


class CharModel(torch.nn.Module):
    """Embedding, a recurrent layer (torch's fused RNN, LSTM or GRU) and a linear readout (Chapter 6).

    ``model(ids)`` maps (B, T) character ids to (B, T, V) logits for the next
    character; ``model.step(ids, state)`` does the same from a carried state
    and returns the new one, for generation.
    """

    def __init__(self, vocab_size: int, *, kind: str = "lstm", embedding_size: int = 32, hidden_size: int = 64,
                 seed: int = 0):
        super().__init__()
        check_choice("kind", kind, KINDS)
        vocab_size = check_int("vocab_size", vocab_size, minimum=2)
        embedding_size = check_int("embedding_size", embedding_size, minimum=1)
        hidden_size = check_int("hidden_size", hidden_size, minimum=1)
        self.kind = kind
        self.embedding = uninitialized(torch.nn.Embedding, vocab_size, embedding_size)
        self.recurrent = uninitialized(LAYERS[kind], embedding_size, hidden_size, batch_first=True)
        self.readout = uninitialized(torch.nn.Linear, hidden_size, vocab_size)
        reinitialize(self, seed)

    def step(self, ids: torch.Tensor, state=None):
        outputs, state = self.recurrent(self.embedding(ids), state)  # (B, T, H)
        return self.readout(outputs), state

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.step(ids)[0]


def sequence_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over every position, in nats per character; logits (B, T, V), targets (B, T)."""
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def temperature_probabilities(logits, temperature: float) -> torch.Tensor:
    """softmax(logits / τ) along the last dimension: τ < 1 sharpens, τ > 1 flattens (Chapter 6)."""
    logits = as_tensor("logits", logits, floating=True)
    temperature = check_float("temperature", temperature, low=0.0, low_open=True)
    return torch.softmax(logits / temperature, dim=-1)


@torch.no_grad()
def sample(model: CharModel, vocab: Vocabulary, prompt: str, length: int, *, temperature: float = 1.0,
           seed: int = 0) -> str:
    """``length`` characters generated after ``prompt``, each drawn from softmax(logits / τ) (Chapter 6).

    The prompt is read once to set the state; then each drawn character is
    fed back in. Draws come from a generator seeded with ``seed``, so a
    sample is reproducible.
    """
    if not isinstance(model, CharModel):
        raise TypeError(f"model must be a text.CharModel, got {describe(model)}")
    if not isinstance(prompt, str) or not prompt:
        raise ValueError(f"prompt must be a non-empty string, got {describe(prompt)}")
    length = check_int("length", length, minimum=0)
    device = next(model.parameters()).device
    gen = generator(seed)
    was_training = model.training
    model.eval()
    logits, state = model.step(vocab.encode(prompt, device=device)[None], None)
    drawn = []
    for _ in range(length):
        probabilities = temperature_probabilities(logits[0, -1].double().cpu(), temperature)
        next_id = torch.multinomial(probabilities, 1, generator=gen)
        drawn.append(next_id.item())
        logits, state = model.step(next_id.to(device)[None], state)
    model.train(was_training)
    return vocab.decode(torch.tensor(drawn, dtype=torch.long))
