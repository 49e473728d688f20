"""Recurrent cells written out, in PyTorch's layout, so they load torch's weights (Chapter 6).

An Elman cell, an LSTM cell and a GRU cell are pure functions of an input, a
state and a :class:`CellWeights`, whose four tensors have exactly the shapes
and the row order of ``torch.nn.RNN``/``LSTM``/``GRU`` (and their ``Cell``
versions): the gate blocks are stacked by rows in the order (i, f, g, o) for
the LSTM and (r, z, n) for the GRU, and there are two bias vectors, b_ih and
b_hh. :func:`weights_from_torch` copies a module's weights, :func:`unroll`
runs a cell over a sequence, and the tests compare everything with torch.

The module also holds the antisymmetric RNN (a cell whose linearisation
neither grows nor shrinks), the "remember the first token" task and a small
classifier that reads a sequence with any of the cells. Functions that draw
weights default to float64, since their purpose is a comparison to many digits.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import torch

from .runtime import generator
from .validation import as_tensor, check_choice, check_dtype, check_float, check_int, describe

#: Gate blocks stacked in each cell's weight matrices, in torch's row order.
GATES = {"rnn": ("h",), "lstm": ("i", "f", "g", "o"), "gru": ("r", "z", "n")}
#: The cells :func:`unroll` runs (the Elman cell under two nonlinearities).
KINDS = ("rnn", "lstm", "gru")
#: torch's fused layer of each kind.
LAYERS = {"rnn": torch.nn.RNN, "lstm": torch.nn.LSTM, "gru": torch.nn.GRU}


class CellWeights(NamedTuple):
    """The weights of one recurrent layer in torch's layout: (G H, I), (G H, H), (G H,), (G H,)."""

    weight_ih: torch.Tensor
    weight_hh: torch.Tensor
    bias_ih: torch.Tensor
    bias_hh: torch.Tensor

    @property
    def hidden_size(self) -> int:
        return self.weight_hh.shape[1]

    @property
    def input_size(self) -> int:
        return self.weight_ih.shape[1]


class LSTMState(NamedTuple):
    """The two halves of an LSTM's state: the output h and the memory cell c, each (B, H)."""

    h: torch.Tensor
    c: torch.Tensor


class Unrolled(NamedTuple):
    """A cell run over a sequence: every step's output h_t, (T, B, H), and the final state."""

    outputs: torch.Tensor
    state: torch.Tensor | LSTMState


def _check_kind(kind: str) -> str:
    return check_choice("kind", kind, KINDS)


def check_weights(kind: str, weights) -> CellWeights:
    """``weights`` as a CellWeights whose shapes fit a ``kind`` cell (ValueError naming the tensor)."""
    kind = _check_kind(kind)
    if not isinstance(weights, CellWeights):
        raise TypeError(f"weights must be a CellWeights (see recurrent.weights_from_torch), got {describe(weights)}")
    num_gates = len(GATES[kind])
    weight_hh = as_tensor("weights.weight_hh", weights.weight_hh, ndim=2, floating=True)
    hidden = weight_hh.shape[1]
    shapes = {"weight_ih": (num_gates * hidden, None), "weight_hh": (num_gates * hidden, hidden),
              "bias_ih": (num_gates * hidden,), "bias_hh": (num_gates * hidden,)}
    checked = [as_tensor(f"weights.{name}", getattr(weights, name), shape=shape, floating=True)
               for name, shape in shapes.items()]
    if len({t.dtype for t in checked}) > 1:
        raise TypeError(f"the weights of a cell must share one dtype, got {[t.dtype for t in checked]}")
    return CellWeights(*checked)


def weights_from_torch(module: torch.nn.Module, layer: int = 0, *, dtype: torch.dtype | None = None) -> CellWeights:
    """Copy (detached) the weights of ``nn.RNN``/``LSTM``/``GRU`` (layer ``layer``) or of a ``Cell`` (Chapter 6).

    A module built with ``bias=False`` gives zero biases, so the scratch cells need no special case.
    """
    cells = (torch.nn.RNNCell, torch.nn.LSTMCell, torch.nn.GRUCell)
    if isinstance(module, cells):
        suffix = ""
    elif isinstance(module, torch.nn.RNNBase):
        layer = check_int("layer", layer, minimum=0, maximum=module.num_layers - 1)
        if getattr(module, "proj_size", 0):
            raise ValueError("LSTMs with proj_size > 0 are not supported: their h is projected")
        suffix = f"_l{layer}"
    else:
        raise TypeError(f"module must be a torch.nn RNN, LSTM, GRU or one of their Cell classes, "
                        f"got {describe(module)}")
    weight_ih = getattr(module, f"weight_ih{suffix}").detach()
    weight_hh = getattr(module, f"weight_hh{suffix}").detach()
    zeros = torch.zeros(weight_ih.shape[0], dtype=weight_ih.dtype, device=weight_ih.device)
    bias_ih = getattr(module, f"bias_ih{suffix}").detach() if module.bias else zeros
    bias_hh = getattr(module, f"bias_hh{suffix}").detach() if module.bias else zeros
    weights = CellWeights(weight_ih.clone(), weight_hh.clone(), bias_ih.clone(), bias_hh.clone())
    if dtype is not None:
        dtype = check_dtype("dtype", dtype)
        weights = CellWeights(*(t.to(dtype) for t in weights))
    return weights


def random_weights(kind: str, input_size: int, hidden_size: int, *, seed: int = 0,
                   dtype: torch.dtype = torch.float64, device="cpu") -> CellWeights:
    """Weights drawn as torch draws them, uniform in ±1/√H, from a seeded generator (Chapter 6)."""
    kind = _check_kind(kind)
    input_size = check_int("input_size", input_size, minimum=1)
    hidden_size = check_int("hidden_size", hidden_size, minimum=1)
    dtype = check_dtype("dtype", dtype)
    rows, bound, gen = len(GATES[kind]) * hidden_size, 1 / math.sqrt(hidden_size), generator(seed)
    shapes = ((rows, input_size), (rows, hidden_size), (rows,), (rows,))
    return CellWeights(*((2 * torch.rand(shape, generator=gen, dtype=torch.float64) - 1).mul(bound).to(
        dtype=dtype, device=device) for shape in shapes))


def parameter_count(kind: str, input_size: int, hidden_size: int) -> int:
    """Parameters of one torch recurrent layer: G (H I + H² + 2 H), with G = 1, 4, 3 blocks (Chapter 6)."""
    kind = _check_kind(kind)
    input_size = check_int("input_size", input_size, minimum=1)
    hidden_size = check_int("hidden_size", hidden_size, minimum=1)
    return len(GATES[kind]) * (hidden_size * input_size + hidden_size**2 + 2 * hidden_size)


# ---------------------------------------------------------------------------
# The cells: one step each, x of shape (B, I), states of shape (B, H)
# ---------------------------------------------------------------------------

def _affine(x: torch.Tensor, h: torch.Tensor, weights: CellWeights) -> tuple[torch.Tensor, torch.Tensor]:
    """The input and the recurrent contributions, W_ih x + b_ih and W_hh h + b_hh, each (B, G H)."""
    return x @ weights.weight_ih.T + weights.bias_ih, h @ weights.weight_hh.T + weights.bias_hh


def rnn_cell(x: torch.Tensor, h: torch.Tensor, weights: CellWeights, nonlinearity: str = "tanh") -> torch.Tensor:
    """Elman's cell: h' = φ(W_ih x + b_ih + W_hh h + b_hh), with φ = tanh or relu (Chapter 6)."""
    check_choice("nonlinearity", nonlinearity, ("tanh", "relu"))
    from_input, from_state = _affine(x, h, weights)
    return torch.tanh(from_input + from_state) if nonlinearity == "tanh" else torch.relu(from_input + from_state)


def lstm_cell(x: torch.Tensor, state: LSTMState, weights: CellWeights) -> LSTMState:
    """One LSTM step in torch's form: c' = f ⊙ c + i ⊙ g and h' = o ⊙ tanh(c') (Chapter 6)."""
    h, c = state
    from_input, from_state = _affine(x, h, weights)
    i, f, g, o = (from_input + from_state).chunk(4, dim=-1)  # the row blocks (i, f, g, o)
    i, f, g, o = torch.sigmoid(i), torch.sigmoid(f), torch.tanh(g), torch.sigmoid(o)
    c = f * c + i * g  # keep a share f of the memory, write a share i of the candidate g
    return LSTMState(o * torch.tanh(c), c)


def gru_cell(x: torch.Tensor, h: torch.Tensor, weights: CellWeights, reset: str = "after") -> torch.Tensor:
    """One GRU step, h' = (1 - z) ⊙ n + z ⊙ h (Chapter 6).

    ``reset="after"`` is torch's (and Cho et al.'s) candidate
    n = tanh(W_in x + b_in + r ⊙ (W_hn h + b_hn)): the reset gate scales the
    recurrent product. ``reset="before"`` resets the state before the product,
    n = tanh(W_in x + b_in + W_hn (r ⊙ h) + b_hn): a different model with the
    same weights, kept to show that it does not match torch.
    """
    check_choice("reset", reset, ("after", "before"))
    from_input, from_state = _affine(x, h, weights)
    input_r, input_z, input_n = from_input.chunk(3, dim=-1)  # the row blocks (r, z, n)
    state_r, state_z, state_n = from_state.chunk(3, dim=-1)
    r = torch.sigmoid(input_r + state_r)
    z = torch.sigmoid(input_z + state_z)
    if reset == "after":
        n = torch.tanh(input_n + r * state_n)
    else:
        hidden = weights.hidden_size
        n = torch.tanh(input_n + (r * h) @ weights.weight_hh[2 * hidden:].T + weights.bias_hh[2 * hidden:])
    return (1 - z) * n + z * h


def unroll(kind: str, X, weights: CellWeights, state=None, *, nonlinearity: str = "tanh",
           reset: str = "after") -> Unrolled:
    """Run a cell over a sequence X of shape (T, B, I), as ``nn.RNN``/``LSTM``/``GRU`` do (Chapter 6).

    ``state`` is the initial h (B, H), or an LSTMState for the LSTM; zeros if
    None. A plain loop over time: each step needs the previous one.
    """
    kind = _check_kind(kind)
    weights = check_weights(kind, weights)
    X = as_tensor("X", X, ndim=3, floating=True)
    if X.shape[2] != weights.input_size:
        raise ValueError(f"X must have {weights.input_size} features in its last dimension (the weights' "
                         f"input size), got {describe(X)}")
    batch, hidden = X.shape[1], weights.hidden_size
    zeros = torch.zeros(batch, hidden, dtype=X.dtype, device=X.device)
    if kind == "lstm":
        state = LSTMState(zeros, zeros.clone()) if state is None else LSTMState(
            *(as_tensor(f"state.{name}", s, shape=(batch, hidden), floating=True) for name, s in
              zip(("h", "c"), state)))
    else:
        state = zeros if state is None else as_tensor("state", state, shape=(batch, hidden), floating=True)
    outputs = []
    for x in X:
        if kind == "rnn":
            state = rnn_cell(x, state, weights, nonlinearity)
        elif kind == "lstm":
            state = lstm_cell(x, state, weights)
        else:
            state = gru_cell(x, state, weights, reset)
        outputs.append(state.h if kind == "lstm" else state)
    return Unrolled(torch.stack(outputs), state)


# ---------------------------------------------------------------------------
# The antisymmetric RNN
# ---------------------------------------------------------------------------

def antisymmetric_matrix(W, diffusion: float = 0.0) -> torch.Tensor:
    """W - Wᵀ - γ I: purely imaginary eigenvalues, shifted left by the diffusion γ (Chapter 6)."""
    W = as_tensor("W", W, ndim=2, floating=True)
    if W.shape[0] != W.shape[1]:
        raise ValueError(f"W must be a square matrix, got {describe(W)}")
    diffusion = check_float("diffusion", diffusion, low=0.0)
    return W - W.T - diffusion * torch.eye(len(W), dtype=W.dtype, device=W.device)


def antisymmetric_cell(x: torch.Tensor, h: torch.Tensor, W: torch.Tensor, V: torch.Tensor, b: torch.Tensor, *,
                       step_size: float = 0.1, diffusion: float = 0.0) -> torch.Tensor:
    """Chang et al.'s step h' = h + ε tanh((W - Wᵀ - γ I) h + V x + b): forward Euler on a stable ODE (Chapter 6)."""
    step_size = check_float("step_size", step_size, low=0.0, low_open=True)
    A = antisymmetric_matrix(W, diffusion)
    return h + step_size * torch.tanh(h @ A.T + x @ V.T + b)


# ---------------------------------------------------------------------------
# Remembering the first token: a task, and a classifier that reads sequences
# ---------------------------------------------------------------------------

class RecallData(NamedTuple):
    """Sequences of one-hot symbols, (N, T, K), and the symbol each one starts with, (N,)."""

    X: torch.Tensor
    y: torch.Tensor


def first_token_task(num_sequences: int, length: int, num_symbols: int = 4, *, seed: int = 0,
                     dtype: torch.dtype = torch.float32, device="cpu") -> RecallData:
    """Random one-hot sequences whose label is their first symbol; the rest are distractors (Chapter 6)."""
    num_sequences = check_int("num_sequences", num_sequences, minimum=1)
    length = check_int("length", length, minimum=1)
    num_symbols = check_int("num_symbols", num_symbols, minimum=2)
    symbols = torch.randint(num_symbols, (num_sequences, length), generator=generator(seed))
    X = torch.nn.functional.one_hot(symbols, num_symbols).to(dtype=check_dtype("dtype", dtype), device=device)
    return RecallData(X, symbols[:, 0].to(device))


class SequenceClassifier(torch.nn.Module):
    """torch's fused RNN, LSTM or GRU, read out by a linear layer from the last step's h (Chapter 6).

    ``forget_bias`` is added to the forget-gate block of the LSTM's b_hh, so
    the gate's total bias b_ih + b_hh shifts by it (0 keeps torch's initialisation).
    Inputs are batch first, (B, T, I); the output is (B, classes).
    """

    def __init__(self, kind: str, input_size: int, hidden_size: int, num_classes: int, *,
                 forget_bias: float = 0.0, seed: int = 0):
        super().__init__()
        kind = _check_kind(kind)
        sizes = {name: check_int(name, value, minimum=1) for name, value in
                 (("input_size", input_size), ("hidden_size", hidden_size), ("num_classes", num_classes))}
        forget_bias = check_float("forget_bias", forget_bias)
        self.kind = kind
        self.recurrent = uninitialized(LAYERS[kind], sizes["input_size"], sizes["hidden_size"], batch_first=True)
        self.readout = uninitialized(torch.nn.Linear, sizes["hidden_size"], sizes["num_classes"])
        reinitialize(self, seed)
        if kind == "lstm" and forget_bias:
            with torch.no_grad():
                hidden = sizes["hidden_size"]
                self.recurrent.bias_hh_l0[hidden:2 * hidden] += forget_bias  # the rows of the f block

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        outputs, _ = self.recurrent(X)  # (B, T, H)
        return self.readout(outputs[:, -1])


def uninitialized(module_class, *args, **kwargs) -> torch.nn.Module:
    """A torch module built without its default initialisation, which would draw from the global
    random stream; :func:`reinitialize` then fills it from a seed (Chapter 6)."""
    return module_class(*args, **kwargs, device="meta").to_empty(device="cpu")


def reinitialize(module: torch.nn.Module, seed: int) -> torch.nn.Module:
    """Redraw every parameter as torch initialises recurrent and linear layers (uniform in ±1/√fan),
    from a seeded generator instead of the global stream (Chapter 6)."""
    gen = generator(seed)
    with torch.no_grad():
        for submodule in module.modules():
            if isinstance(submodule, (torch.nn.RNNBase, torch.nn.RNNCellBase)):
                bound = 1 / math.sqrt(submodule.hidden_size)
                for p in submodule.parameters(recurse=False):
                    p.copy_((2 * torch.rand(p.shape, generator=gen, dtype=torch.float64) - 1) * bound)
            elif isinstance(submodule, torch.nn.Linear):
                bound = 1 / math.sqrt(submodule.in_features)
                for p in submodule.parameters(recurse=False):
                    p.copy_((2 * torch.rand(p.shape, generator=gen, dtype=torch.float64) - 1) * bound)
            elif isinstance(submodule, torch.nn.Embedding):
                submodule.weight.copy_(torch.randn(submodule.weight.shape, generator=gen, dtype=torch.float64))
    return module
