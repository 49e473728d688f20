"""Tests of dlbook.recurrent against torch.nn's RNN, LSTM and GRU (Chapter 6)."""
import pytest
import torch

from dlbook import nets
from dlbook import recurrent as rec

T, B, IN, H = 20, 3, 5, 7
MODULES = {"rnn": torch.nn.RNN, "lstm": torch.nn.LSTM, "gru": torch.nn.GRU}
CELLS = {"rnn": torch.nn.RNNCell, "lstm": torch.nn.LSTMCell, "gru": torch.nn.GRUCell}


def _inputs(dtype, seed=0, shape=(T, B, IN)):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def _module(kind, dtype, seed=0, **kwargs):
    return rec.reinitialize(MODULES[kind](IN, H, **kwargs), seed).to(dtype)


@pytest.mark.parametrize("kind", rec.KINDS)
@pytest.mark.parametrize("dtype, tol", [(torch.float32, 1e-6), (torch.float64, 1e-13)])
def test_unrolled_cells_match_torch_layers(kind, dtype, tol):
    module, X = _module(kind, dtype), _inputs(dtype)
    outputs, state = module(X)
    ours = rec.unroll(kind, X, rec.weights_from_torch(module))
    torch.testing.assert_close(ours.outputs, outputs, rtol=0, atol=tol)
    if kind == "lstm":
        torch.testing.assert_close(ours.state.h, state[0][0], rtol=0, atol=tol)
        torch.testing.assert_close(ours.state.c, state[1][0], rtol=0, atol=tol)
    else:
        torch.testing.assert_close(ours.state, state[0], rtol=0, atol=tol)


def test_relu_elman_cell_and_initial_states_match_torch():
    module, X = _module("rnn", torch.float64, nonlinearity="relu"), _inputs(torch.float64)
    h0 = _inputs(torch.float64, seed=1, shape=(1, B, H))
    outputs, _ = module(X, h0)
    ours = rec.unroll("rnn", X, rec.weights_from_torch(module), h0[0], nonlinearity="relu")
    torch.testing.assert_close(ours.outputs, outputs, rtol=0, atol=1e-13)
    lstm = _module("lstm", torch.float64)
    c0 = _inputs(torch.float64, seed=2, shape=(1, B, H))
    outputs, _ = lstm(X, (h0, c0))
    ours = rec.unroll("lstm", X, rec.weights_from_torch(lstm), rec.LSTMState(h0[0], c0[0]))
    torch.testing.assert_close(ours.outputs, outputs, rtol=0, atol=1e-13)


@pytest.mark.parametrize("kind", rec.KINDS)
def test_single_cells_match_torch_cell_modules(kind):
    cell = rec.reinitialize(CELLS[kind](IN, H), 3).double()
    x, h = _inputs(torch.float64, 4, (B, IN)), _inputs(torch.float64, 5, (B, H))
    weights = rec.weights_from_torch(cell)
    if kind == "lstm":
        c = _inputs(torch.float64, 6, (B, H))
        ours = rec.lstm_cell(x, rec.LSTMState(h, c), weights)
        theirs = cell(x, (h, c))
        torch.testing.assert_close(ours.h, theirs[0], rtol=0, atol=1e-13)
        torch.testing.assert_close(ours.c, theirs[1], rtol=0, atol=1e-13)
    else:
        ours = rec.rnn_cell(x, h, weights) if kind == "rnn" else rec.gru_cell(x, h, weights)
        torch.testing.assert_close(ours, cell(x, h), rtol=0, atol=1e-13)


def test_second_layer_and_bias_free_modules_load():
    X = _inputs(torch.float64)
    deep = rec.reinitialize(torch.nn.GRU(IN, H, num_layers=2), 1).double()
    first = rec.unroll("gru", X, rec.weights_from_torch(deep, 0)).outputs
    second = rec.unroll("gru", first, rec.weights_from_torch(deep, 1)).outputs
    torch.testing.assert_close(second, deep(X)[0], rtol=0, atol=1e-13)
    plain = _module("lstm", torch.float64, bias=False)
    weights = rec.weights_from_torch(plain)
    assert torch.equal(weights.bias_ih, torch.zeros(4 * H, dtype=torch.float64))
    torch.testing.assert_close(rec.unroll("lstm", X, weights).outputs, plain(X)[0], rtol=0, atol=1e-13)


def test_reset_before_the_product_is_a_different_gru():
    module, X = _module("gru", torch.float64), _inputs(torch.float64)
    wrong = rec.unroll("gru", X, rec.weights_from_torch(module), reset="before").outputs
    assert (wrong - module(X)[0]).abs().max() > 0.05


@pytest.mark.parametrize("kind", rec.KINDS)
def test_gradients_through_the_scratch_cells_match_autograd_through_torch(kind):
    module, X = _module(kind, torch.float64), _inputs(torch.float64)
    upstream = _inputs(torch.float64, seed=7, shape=(T, B, H))
    (module(X)[0] * upstream).sum().backward()
    weights = rec.CellWeights(*(t.clone().requires_grad_(True) for t in rec.weights_from_torch(module)))
    (rec.unroll(kind, X, weights).outputs * upstream).sum().backward()
    for ours, name in zip(weights, ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0")):
        torch.testing.assert_close(ours.grad, getattr(module, name).grad, rtol=0, atol=1e-11)


@pytest.mark.parametrize("kind, n, m, expected", [("rnn", 10, 20, 640), ("gru", 10, 20, 1920), ("lstm", 10, 20, 2560),
                                                  ("lstm", 5, 7, 392), ("gru", 5, 7, 294)])
def test_parameter_counts_match_torch(kind, n, m, expected):
    assert rec.parameter_count(kind, n, m) == expected == nets.num_parameters(MODULES[kind](n, m))


def test_random_weights_have_torch_shapes_and_range_and_follow_the_seed():
    weights = rec.random_weights("lstm", IN, H, seed=3)
    assert weights.weight_ih.shape == (4 * H, IN) and weights.weight_hh.shape == (4 * H, H)
    assert weights.weight_ih.dtype == torch.float64
    assert all(t.abs().max() <= H ** -0.5 for t in weights)
    assert torch.equal(weights.weight_hh, rec.random_weights("lstm", IN, H, seed=3).weight_hh)
    assert not torch.equal(weights.weight_hh, rec.random_weights("lstm", IN, H, seed=4).weight_hh)


def test_sequence_classifier_is_seeded_and_shifts_the_forget_gate():
    X = _inputs(torch.float32, shape=(4, 9, 3))
    state = torch.random.get_rng_state()
    a = rec.SequenceClassifier("lstm", 3, 8, 2, seed=1)
    b = rec.SequenceClassifier("lstm", 3, 8, 2, forget_bias=1.0, seed=1)
    assert torch.equal(state, torch.random.get_rng_state())  # the global stream is untouched
    assert torch.equal(a(X), rec.SequenceClassifier("lstm", 3, 8, 2, seed=1)(X))
    shift = b.recurrent.bias_hh_l0 - a.recurrent.bias_hh_l0
    assert torch.allclose(shift, torch.cat([torch.zeros(8), torch.ones(8), torch.zeros(16)]))
    assert a(X).shape == (4, 2)


def test_first_token_task_labels_the_first_symbol():
    data = rec.first_token_task(50, 12, 5, seed=2)
    assert data.X.shape == (50, 12, 5) and torch.equal(data.X.sum(-1), torch.ones(50, 12))
    assert torch.equal(data.X[:, 0].argmax(-1), data.y)
    assert torch.equal(data.y, rec.first_token_task(50, 12, 5, seed=2).y)


def test_antisymmetric_matrix_has_imaginary_eigenvalues_and_the_cell_steps():
    W = torch.randn(12, 12, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    eigenvalues = torch.linalg.eigvals(rec.antisymmetric_matrix(W))
    assert eigenvalues.real.abs().max() < 1e-12
    shifted = torch.linalg.eigvals(rec.antisymmetric_matrix(W, diffusion=0.5))
    torch.testing.assert_close(shifted.real, torch.full((12,), -0.5, dtype=torch.float64))
    h, x = torch.zeros(2, 12, dtype=torch.float64), torch.ones(2, 3, dtype=torch.float64)
    V, b = torch.ones(12, 3, dtype=torch.float64), torch.zeros(12, dtype=torch.float64)
    step = rec.antisymmetric_cell(x, h, W, V, b, step_size=0.5)
    torch.testing.assert_close(step, 0.5 * torch.tanh(torch.full((2, 12), 3.0, dtype=torch.float64)))


def test_bad_arguments_are_named():
    weights = rec.random_weights("gru", IN, H)
    with pytest.raises(ValueError, match="kind"):
        rec.unroll("elman", _inputs(torch.float64), weights)
    with pytest.raises(ValueError, match="weights.weight_ih"):
        rec.unroll("lstm", _inputs(torch.float64), weights)
    with pytest.raises(ValueError, match="X must have 5 features"):
        rec.unroll("gru", _inputs(torch.float64, shape=(T, B, 4)), weights)
    with pytest.raises(TypeError, match="X must hold floating-point"):
        rec.unroll("gru", torch.ones(T, B, IN, dtype=torch.long), weights)
    with pytest.raises(TypeError, match="CellWeights"):
        rec.unroll("gru", _inputs(torch.float64), tuple(weights))
    with pytest.raises(ValueError, match="state"):
        rec.unroll("gru", _inputs(torch.float64), weights, torch.zeros(B, H + 1, dtype=torch.float64))
    with pytest.raises(TypeError, match="module"):
        rec.weights_from_torch(torch.nn.Linear(3, 4))
    with pytest.raises(ValueError, match="layer"):
        rec.weights_from_torch(torch.nn.GRU(3, 4), layer=1)
    with pytest.raises(ValueError, match="reset"):
        rec.gru_cell(torch.zeros(1, IN), torch.zeros(1, H), rec.random_weights("gru", IN, H, dtype=torch.float32),
                     reset="middle")
    with pytest.raises(ValueError, match="num_symbols"):
        rec.first_token_task(4, 4, 1)
    with pytest.raises(ValueError, match="W must be a square"):
        rec.antisymmetric_matrix(torch.zeros(2, 3))
