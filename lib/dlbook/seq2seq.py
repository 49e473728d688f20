"""Sequence-to-sequence learning on toy tasks: reversing and sorting strings of symbols (Chapter 7).

Four models learn the same tasks: a recurrent encoder-decoder that passes one
fixed vector from encoder to decoder, the same model with additive (Bahdanau)
attention over the encoder's states, an encoder-decoder transformer, and an
encoder-only transformer that labels each position (possible here because
input and output have the same length). The encoder-decoders are trained with
teacher forcing: their input is a (B, 2, T) stack of the source and of the
target shifted right behind a begin symbol, so that :func:`dlbook.train.fit`
trains them like any other model, and they are evaluated by greedy decoding,
which feeds each prediction back in. Training runs are cached by their
configuration (:func:`dlbook.train.cached`).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from . import train
from .attention import AdditiveAttention
from .runtime import generator
from .transformer import POSITIONS, Seq2SeqTransformer, TokenTransformer, initialize
from .validation import as_tensor, check_bool, check_choice, check_device, check_dtype, check_float, check_int, describe

#: The toy tasks: write the input backwards, or in increasing order.
TASKS = ("reverse", "sort")
#: The models :func:`train_task` trains.
MODELS = ("gru", "gru-attention", "transformer", "tagger")


def sequence_task(task: str, num_sequences: int, length: int, num_symbols: int = 10, *, seed: int = 0,
                  device="cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """Random sequences X (N, T) of symbols 0..V-1 and their targets Y (N, T): reversed or sorted (Chapter 7)."""
    check_choice("task", task, TASKS)
    num_sequences = check_int("num_sequences", num_sequences, minimum=1)
    length = check_int("length", length, minimum=1)
    num_symbols = check_int("num_symbols", num_symbols, minimum=1)
    device = check_device("device", device)
    X = torch.randint(0, num_symbols, (num_sequences, length), generator=generator(seed))
    Y = X.flip(1) if task == "reverse" else X.sort(dim=1).values
    return X.to(device), Y.to(device)


def teacher_forcing_pairs(X, Y, begin: int) -> torch.Tensor:
    """(N, 2, T): the source X and the decoder's input, ``begin`` followed by Y without its last symbol (Chapter 7)."""
    X, Y = as_tensor("X", X, ndim=2), as_tensor("Y", Y, ndim=2)
    if X.shape != Y.shape:
        raise ValueError(f"X and Y must have the same shape, got {tuple(X.shape)} and {tuple(Y.shape)}")
    begin = check_int("begin", begin, minimum=0)
    shifted = torch.cat((torch.full_like(Y[:, :1], begin), Y[:, :-1]), dim=1)
    return torch.stack((X, shifted), dim=1)


class RecurrentSeq2Seq(nn.Module):
    """GRU encoder-decoder, with a fixed context vector or with additive attention as well (Chapter 7).

    The encoder is a bidirectional GRU; its annotation h_j is the pair of the two directions'
    states at position j, and the summary c = [last forward state, last backward state] is the one
    fixed-length vector the plain model passes on. The decoder GRU reads the previous symbol and c at
    every step. With ``attention=True`` the decoder's state s_t also scores every annotation,
    α_tj ∝ exp(vᵀ tanh(W_a s_t + U_a h_j)), and the read-out sees the context Σ_j α_tj h_j next to
    s_t (Luong et al.'s arrangement: Bahdanau et al. compute the context from s_{t-1} and feed it into
    the recurrence, which forces a Python loop over the steps). ``encoder="positions"`` replaces the
    GRU encoder by token plus learned position embeddings, so an annotation knows only its own
    symbol and place.
    """

    def __init__(self, num_symbols: int, *, embed_dim: int = 32, hidden_size: int = 32, attention: bool = True,
                 encoder: str = "recurrent", max_length: int = 64, seed: int = 0,
                 dtype: torch.dtype = torch.float32, device="cpu"):
        super().__init__()
        self.num_symbols = check_int("num_symbols", num_symbols, minimum=1)
        E, H = check_int("embed_dim", embed_dim, minimum=1), check_int("hidden_size", hidden_size, minimum=1)
        self.use_attention = check_bool("attention", attention)
        self.encoder_kind = check_choice("encoder", encoder, ("recurrent", "positions"))
        if self.encoder_kind == "positions" and not self.use_attention:
            raise ValueError("encoder='positions' has no summary vector: use it with attention=True")
        max_length = check_int("max_length", max_length, minimum=1)
        dtype, device = check_dtype("dtype", dtype), check_device("device", device)
        kwargs = {"dtype": dtype, "device": device}
        self.source_embedding = nn.Embedding(self.num_symbols, E, **kwargs)
        self.target_embedding = nn.Embedding(self.num_symbols + 1, E, **kwargs)
        if self.encoder_kind == "recurrent":
            self.encoder = nn.GRU(E, H, batch_first=True, bidirectional=True, **kwargs)
        else:
            self.position_embedding = nn.Embedding(max_length, E, **kwargs)
            self.encoder = nn.Linear(E, 2 * H, **kwargs)
        self.bridge = nn.Linear(2 * H, H, **kwargs)
        self.decoder = nn.GRU(E + 2 * H, H, batch_first=True, **kwargs)
        self.attention = AdditiveAttention(H, 2 * H, H, **kwargs) if self.use_attention else None
        self.readout = nn.Linear(H + 2 * H + E, self.num_symbols, **kwargs)
        initialize(self, seed)

    def run(self, pairs, *, forced_weights=None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Logits (B, T, V) and, with attention, the weights α (B, T_out, T_in).

        ``forced_weights`` (B, T_out, T_in) replaces the computed α: an intervention that asks
        how the model does when it must read the annotations where it is told to.
        """
        pairs = as_tensor("pairs", pairs, ndim=3)
        if pairs.shape[1] != 2 or pairs.is_floating_point():
            raise ValueError(f"pairs must be integer tokens of shape (B, 2, T), got {describe(pairs)}")
        source, target_in = pairs[:, 0], pairs[:, 1]
        embedded_source = self.source_embedding(source)                           # (B, T, E)
        if self.encoder_kind == "recurrent":
            annotations, last = self.encoder(embedded_source)                    # (B, T, 2H), (2, B, H)
            summary = torch.cat((last[0], last[1]), dim=-1)                       # (B, 2H): the fixed context
        else:
            places = self.position_embedding(torch.arange(source.shape[1], device=source.device))
            annotations = self.encoder(embedded_source + places)                  # (B, T, 2H)
            summary = annotations.mean(dim=1)
        previous = self.target_embedding(target_in)                               # (B, T, E)
        steps = target_in.shape[1]
        fixed = summary[:, None].expand(-1, steps, -1)                            # (B, T, 2H)
        s0 = torch.tanh(self.bridge(summary))[None]                               # (1, B, H)
        states, _ = self.decoder(torch.cat((previous, fixed), dim=-1), s0)       # (B, T, H): s_1, ..., s_T
        if self.attention is None:
            context, weights = fixed, None
        elif forced_weights is None:
            context, weights = self.attention(states, annotations)               # (B, T, 2H), (B, T, T)
        else:
            weights = as_tensor("forced_weights", forced_weights, shape=(len(source), steps, source.shape[1]),
                                floating=True)
            context = weights @ annotations
        return self.readout(torch.cat((states, context, previous), dim=-1)), weights

    def forward(self, pairs) -> torch.Tensor:
        return self.run(pairs)[0]


@torch.no_grad()
def greedy_decode(model: nn.Module, X, begin: int) -> torch.Tensor:
    """Outputs (N, T) of an encoder-decoder fed its own predictions, one step at a time (Chapter 7).

    ``model(pairs)`` must map (N, 2, T) to (N, T, V) with step t depending only on decoder inputs
    up to t (a causal decoder), so the not-yet-decoded places may hold anything.
    """
    X = as_tensor("X", X, ndim=2)
    begin = check_int("begin", begin, minimum=0)
    was_training = model.training
    model.eval()
    decoder_input = torch.full_like(X, begin)
    outputs = torch.empty_like(X)
    for t in range(X.shape[1]):
        outputs[:, t] = model(torch.stack((X, decoder_input), dim=1))[:, t].argmax(dim=-1)
        if t + 1 < X.shape[1]:
            decoder_input[:, t + 1] = outputs[:, t]
    model.train(was_training)
    return outputs


def token_accuracy(predicted, Y) -> float:
    """Fraction of positions predicted right (Chapter 7)."""
    predicted, Y = as_tensor("predicted", predicted), as_tensor("Y", Y)
    if predicted.shape != Y.shape:
        raise ValueError(f"predicted and Y must have the same shape, got {tuple(predicted.shape)} and {tuple(Y.shape)}")
    return (predicted == Y).double().mean().item()


def sequence_accuracy(predicted, Y) -> float:
    """Fraction of sequences predicted right at every position (Chapter 7)."""
    predicted, Y = as_tensor("predicted", predicted, ndim=2), as_tensor("Y", Y, ndim=2)
    if predicted.shape != Y.shape:
        raise ValueError(f"predicted and Y must have the same shape, got {tuple(predicted.shape)} and {tuple(Y.shape)}")
    return (predicted == Y).all(dim=1).double().mean().item()


def mirror_alignment(weights) -> float:
    """Fraction of decoder steps t whose largest attention weight sits on source position T - 1 - t (Chapter 7).

    For reversal that is the source symbol the step must output; ``weights`` is (B, T, T).
    """
    weights = as_tensor("weights", weights, ndim=3, floating=True)
    T = weights.shape[1]
    if weights.shape[2] != T:
        raise ValueError(f"weights must be (B, T, T), got {describe(weights)}")
    mirrored = torch.arange(T - 1, -1, -1, device=weights.device)
    return (weights.argmax(dim=-1) == mirrored).double().mean().item()


# ---------------------------------------------------------------------------
# Cached training runs
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class TaskRun:
    """One training run on a toy task; every setting that changes the run is a field."""

    model: str                       # one of MODELS
    task: str = "reverse"
    length: int = 8
    num_symbols: int = 10
    positions: str = "sinusoidal"    # the tagger's positions: "none", "sinusoidal" or "learned"
    dim: int = 32                    # transformers: width, feed-forward width, layers, heads
    ff_dim: int = 64
    num_layers: int = 2
    num_heads: int = 4
    hidden_size: int = 32            # GRU models: state size (the embeddings have width ``dim``)
    encoder: str = "recurrent"       # GRU models: "recurrent" or "positions"
    steps: int = 500
    batch_size: int = 64
    epochs: int = 5                  # the steps' batches come from a set of steps * batch_size / epochs sequences
    lr: float = 3e-3
    seed: int = 0
    num_test: int = 1000
    device: str = "cpu"

    def __post_init__(self):
        check_choice("model", self.model, MODELS)
        check_choice("task", self.task, TASKS)
        check_choice("positions", self.positions, POSITIONS)
        check_choice("encoder", self.encoder, ("recurrent", "positions"))
        for name in ("length", "num_symbols", "dim", "ff_dim", "num_layers", "num_heads", "hidden_size", "steps",
                     "batch_size", "epochs", "num_test"):
            check_int(name, getattr(self, name), minimum=1)
        check_int("seed", self.seed, minimum=0)
        check_float("lr", self.lr, low=0.0, low_open=True)
        if (self.steps * self.batch_size) % self.epochs:
            raise ValueError(f"epochs must divide steps * batch_size, got {self.epochs} and "
                             f"{self.steps * self.batch_size}")


class TaskResult(NamedTuple):
    """A trained model, its greedy-decoding accuracy on fresh test sequences, and the run's record."""

    model: nn.Module
    token_accuracy: float
    sequence_accuracy: float
    history: train.History
    seconds: float


def build_model(config: TaskRun) -> nn.Module:
    """The untrained model a :class:`TaskRun` describes (Chapter 7)."""
    if not isinstance(config, TaskRun):
        raise TypeError(f"config must be a TaskRun, got {describe(config)}")
    c = config
    common = {"seed": c.seed, "device": c.device}
    if c.model == "tagger":
        return TokenTransformer(c.num_symbols, c.num_symbols, dim=c.dim, num_heads=c.num_heads, ff_dim=c.ff_dim,
                                num_layers=c.num_layers, max_length=c.length, positions=c.positions, **common)
    if c.model == "transformer":
        return Seq2SeqTransformer(c.num_symbols, dim=c.dim, num_heads=c.num_heads, ff_dim=c.ff_dim,
                                  num_layers=c.num_layers, max_length=c.length, **common)
    return RecurrentSeq2Seq(c.num_symbols, embed_dim=c.dim, hidden_size=c.hidden_size,
                            attention=c.model == "gru-attention", encoder=c.encoder, max_length=c.length, **common)


def predict(model: nn.Module, X, num_symbols: int) -> torch.Tensor:
    """Predicted outputs (N, T): the tagger's arg-max, or an encoder-decoder's greedy decoding (Chapter 7)."""
    if isinstance(model, TokenTransformer):
        with torch.no_grad():
            was_training = model.training
            model.eval()
            outputs = model(X).argmax(dim=-1)
            model.train(was_training)
        return outputs
    return greedy_decode(model, X, num_symbols)


def _sequence_loss(logits: torch.Tensor, Y: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), Y.reshape(-1))


@train.cached
def train_task(config: TaskRun) -> TaskResult:
    """Train the model of ``config`` with Adam on its task; accuracy on fresh sequences (Chapter 7)."""
    c = config
    start = time.perf_counter()
    model = build_model(c)
    num_train = c.steps * c.batch_size // c.epochs
    X, Y = sequence_task(c.task, num_train, c.length, c.num_symbols, seed=c.seed, device=c.device)
    inputs = X if c.model == "tagger" else teacher_forcing_pairs(X, Y, c.num_symbols)
    history = train.fit(model, _sequence_loss, torch.optim.Adam(model.parameters(), lr=c.lr), (inputs, Y),
                        epochs=c.epochs, batch_size=c.batch_size, seed=c.seed)
    X_test, Y_test = sequence_task(c.task, c.num_test, c.length, c.num_symbols, seed=10_000 + c.seed,
                                   device=c.device)
    predicted = predict(model, X_test, c.num_symbols)
    return TaskResult(model.eval(), token_accuracy(predicted, Y_test), sequence_accuracy(predicted, Y_test),
                      history, time.perf_counter() - start)
