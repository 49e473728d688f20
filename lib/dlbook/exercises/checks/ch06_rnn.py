"""Checks for the exercises of chapter 6 (06_rnn): an LSTM step in torch's layout, the Jacobian of
a GRU step, the long-run growth rate of a linear recurrence's gradient, and a parallel scan for
recurrences with matrix coefficients.

Expected values come from independent code: torch's own LSTMCell and GRUCell (built without their
random initialisation, then given the case's weights) differentiated with torch.autograd, NumPy loops
and repeated squaring in float64. Nothing calls dlbook.recurrent, dlbook.bptt or dlbook.scan, so a
bug there cannot make a wrong answer pass. The student's functions receive tensors only.
"""
from __future__ import annotations

import math

import numpy as np
import torch
from torch.autograd.functional import jacobian

from ..core import Mismatch, as_array, as_float, describe, exercise, expect


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _cell_weights(gates: int, num_inputs: int, hidden: int, seed: int, *, scale: float = 1.0,
                  dtype=torch.float64) -> dict[str, torch.Tensor]:
    """Weights in torch's layout, uniform in ±scale/√H, from a seeded generator."""
    gen, bound = _generator(seed), scale / math.sqrt(hidden)
    shapes = {"weight_ih": (gates * hidden, num_inputs), "weight_hh": (gates * hidden, hidden),
              "bias_ih": (gates * hidden,), "bias_hh": (gates * hidden,)}
    return {name: ((2 * torch.rand(shape, generator=gen, dtype=torch.float64) - 1) * bound).to(dtype)
            for name, shape in shapes.items()}


def _torch_cell(cell_class, weights: dict[str, torch.Tensor]) -> torch.nn.Module:
    """A torch cell holding ``weights`` (built on the meta device: no draw from the global stream)."""
    hidden, num_inputs = weights["weight_hh"].shape[1], weights["weight_ih"].shape[1]
    dtype = weights["weight_ih"].dtype
    cell = cell_class(num_inputs, hidden, device="meta", dtype=dtype).to_empty(device="cpu")
    with torch.no_grad():
        for name, value in weights.items():
            getattr(cell, name).copy_(value)
    return cell


def _states(shape, seed: int, *, scale: float = 1.0, dtype=torch.float64) -> torch.Tensor:
    return (scale * torch.randn(shape, generator=_generator(seed), dtype=torch.float64)).to(dtype)


def _pair(answer, shape) -> tuple[np.ndarray, np.ndarray]:
    if (not isinstance(answer, (tuple, list)) or len(answer) != 2
            or not all(isinstance(part, (torch.Tensor, np.ndarray, list, tuple)) for part in answer)):
        raise Mismatch("a pair (h_next, c_next) of tensors", describe(answer))
    return (as_array(answer[0], shape, f"h_next of shape {shape}"),
            as_array(answer[1], shape, f"c_next of shape {shape}"))


def _expect_close(name: str, got: np.ndarray, expected: np.ndarray, tolerance: float) -> None:
    """Largest error relative to 1 + |expected| below the tolerance; the message shows the worst entry."""
    error = np.abs(got - expected) / (1 + np.abs(expected))
    worst = np.unravel_index(np.argmax(error), error.shape)
    expect(error.max() <= tolerance,
           f"{name} within {tolerance:g} of torch's; at index {tuple(int(i) for i in worst)} "
           f"{expected[worst]:.10g}", f"{got[worst]:.10g}")


# ---------------------------------------------------------------------------
# Exercise 6.1: one LSTM step in torch's layout
# ---------------------------------------------------------------------------

def _lstm_cases():
    """(label, batch, inputs, hidden, weights, x, h, c, tolerance)."""
    cases = []
    for label, (batch, num_inputs, hidden), seed, scale, dtype, tolerance in (
            ("B = 3, I = 5, H = 7, float64", (3, 5, 7), 1, 1.0, torch.float64, 1e-12),
            ("B = 1, I = 1, H = 1", (1, 1, 1), 2, 1.0, torch.float64, 1e-12),
            ("B = 4, I = 2, H = 16, large weights and inputs (saturated gates)", (4, 2, 16), 3, 8.0, torch.float64,
             1e-12),
            ("B = 5, I = 3, H = 6, float32", (5, 3, 6), 4, 1.0, torch.float32, 1e-5)):
        weights = _cell_weights(4, num_inputs, hidden, seed, scale=scale, dtype=dtype)
        x = _states((batch, num_inputs), seed + 10, scale=scale, dtype=dtype)
        h, c = _states((batch, hidden), seed + 20, dtype=dtype), _states((batch, hidden), seed + 30, dtype=dtype)
        cases.append((label, batch, hidden, weights, x, h, c, tolerance))
    zero = {name: torch.zeros_like(value) for name, value in _cell_weights(4, 3, 4, 5).items()}
    cases.append(("all weights and biases zero (every gate 1/2, candidate 0)", 2, 4, zero, _states((2, 3), 6),
                  _states((2, 4), 7), _states((2, 4), 8), 1e-12))
    split = _cell_weights(4, 3, 4, 9)
    split["bias_ih"] = torch.zeros_like(split["bias_ih"])
    split["bias_hh"] = 3 * split["bias_hh"]
    cases.append(("bias_ih zero and a large bias_hh (both biases count)", 2, 4, split, _states((2, 3), 10),
                  _states((2, 4), 11), _states((2, 4), 12), 1e-12))
    return cases


@exercise("6.1", title="One LSTM step in PyTorch's layout", function="lstm_step", kind="transcribe",
          difficulty=1, minutes=15, blocked=("dlbook.recurrent.lstm_cell", "dlbook.recurrent.unroll"),
          hint="compute all four blocks with one product each of x and h, split them in the order (i, f, g, o), "
               "then c_next = f * c + i * g and h_next = o * tanh(c_next).")
def check_lstm_step(lstm_step, cases):
    """Against torch.nn.LSTMCell with the same weights, on shapes, saturation, zero weights and split biases."""
    for label, batch, hidden, weights, x, h, c, tolerance in _lstm_cases():
        with cases.case(f"lstm_step(x, h, c, ...) with {label}"):
            cell = _torch_cell(torch.nn.LSTMCell, weights)
            with torch.no_grad():
                expected_h, expected_c = cell(x, (h, c))
            answer = lstm_step(x.clone(), h.clone(), c.clone(), *(w.clone() for w in weights.values()))
            got_h, got_c = _pair(answer, (batch, hidden))
            _expect_close("c_next", got_c, expected_c.double().numpy(), tolerance)
            _expect_close("h_next", got_h, expected_h.double().numpy(), tolerance)


# ---------------------------------------------------------------------------
# Exercise 6.2: the Jacobian of one GRU step
# ---------------------------------------------------------------------------

def _gru_jacobian_reference(weights, x, h) -> np.ndarray:
    """∂h'/∂h of torch.nn.GRUCell for every batch row, by torch.autograd: (B, H, H)."""
    cell = _torch_cell(torch.nn.GRUCell, weights)
    rows = [jacobian(lambda h_row: cell(x_row[None], h_row[None])[0], h_row) for x_row, h_row in zip(x, h)]
    return torch.stack(rows).detach().numpy()


def _gru_cases():
    cases = []
    for label, (batch, num_inputs, hidden), seed, scale in (
            ("B = 3, I = 4, H = 5", (3, 4, 5), 1, 1.0),
            ("B = 1, I = 1, H = 1", (1, 1, 1), 2, 1.0),
            ("B = 2, I = 3, H = 8, large weights (saturated gates)", (2, 3, 8), 3, 6.0)):
        weights = _cell_weights(3, num_inputs, hidden, seed, scale=scale)
        cases.append((label, weights, _states((batch, num_inputs), seed + 10, scale=scale),
                      _states((batch, hidden), seed + 20)))
    copying = _cell_weights(3, 2, 4, 4)
    copying["bias_hh"][4:8] += 20.0  # update gate z ≈ 1: the state is copied
    cases.append(("the update gate biased by +20 (the state is copied)", copying, _states((3, 2), 14),
                  _states((3, 4), 24)))
    closed = _cell_weights(3, 2, 4, 5)
    closed["bias_ih"][0:4] -= 20.0  # reset gate r ≈ 0: the candidate ignores the state
    cases.append(("the reset gate biased by -20 (the candidate ignores the state)", closed, _states((3, 2), 15),
                  _states((3, 4), 25)))
    return cases


@exercise("6.2", title="The Jacobian of a GRU step", function="gru_jacobian", kind="derive",
          difficulty=3, minutes=45, blocked=("dlbook.recurrent.gru_cell", "dlbook.recurrent.unroll",
                                              "dlbook.bptt.state_jacobian_norms"),
          hint="differentiate h' = (1 - z) n + z h by the product rule: three terms, through z, through n "
               "(and inside n through r and the product W_hn h + b_hn), and the direct one, diag(z).")
def check_gru_jacobian(gru_jacobian, cases):
    """Against torch.autograd through torch.nn.GRUCell, including open, closed and saturated gates."""
    for label, weights, x, h in _gru_cases():
        batch, hidden = h.shape
        with cases.case(f"gru_jacobian(x, h, ...) with {label}"):
            expected = _gru_jacobian_reference(weights, x, h)
            got = as_array(gru_jacobian(x.clone(), h.clone(), *(w.clone() for w in weights.values())),
                           (batch, hidden, hidden), f"an array of shape ({batch}, {hidden}, {hidden})")
            _expect_close("dh'/dh", got, expected, 1e-10)


# ---------------------------------------------------------------------------
# Exercise 6.3: the long-run growth rate of the gradient of a linear recurrence (predict)
# ---------------------------------------------------------------------------

def _measured_growth_rate(U: np.ndarray, doublings: int = 13) -> float:
    """(ln‖U^(2^k)‖ - ln‖U^(2^(k-1))‖) / 2^(k-1), by repeated squaring with rescaling, k = doublings."""
    M, log_scale, logs = U.copy(), 0.0, []
    for _ in range(doublings):
        M = M @ M
        log_scale *= 2
        size = np.linalg.norm(M, 2)
        M, log_scale = M / size, log_scale + math.log(size)
        logs.append(log_scale)  # ln‖U^(2^k)‖ for k = 1..doublings
    return (logs[-1] - logs[-2]) / 2 ** (doublings - 1)


def _growth_cases():
    gen = np.random.default_rng(6)
    rotation = 1.02 * np.array([[math.cos(1.0), -math.sin(1.0)], [math.sin(1.0), math.cos(1.0)]])
    return [
        ("a Gaussian 8 x 8 matrix scaled by 0.5 / sqrt(8)", 0.5 * gen.standard_normal((8, 8)) / math.sqrt(8)),
        ("a non-normal triangular matrix, diagonal (0.9, 0.5, 0.7), off-diagonal 4",
         np.array([[0.9, 4.0, 0.0], [0.0, 0.5, 4.0], [0.0, 0.0, 0.7]])),
        ("a rotation by 1 radian scaled by 1.02", rotation),
        ("the Jordan block [[1, 1], [0, 1]]", np.array([[1.0, 1.0], [0.0, 1.0]])),
        ("diag(0, 1.2) in a rotated basis", _rotated(np.diag([0.0, 1.2]), 0.3)),
        ("a Gaussian 6 x 6 matrix scaled by 2 / sqrt(6)", 2.0 * gen.standard_normal((6, 6)) / math.sqrt(6)),
    ]


def _rotated(D: np.ndarray, angle: float) -> np.ndarray:
    R = np.array([[math.cos(angle), -math.sin(angle)], [math.sin(angle), math.cos(angle)]])
    return R @ D @ R.T


@exercise("6.3", title="Predict how fast the gradient of a linear recurrence grows", function="gradient_growth_rate",
          kind="predict", difficulty=2, minutes=25,
          blocked=("dlbook.bptt.jacobian_norms", "dlbook.bptt.jacobian_products", "dlbook.bptt.step_jacobians",
                   "dlbook.bptt.state_jacobian_norms"),
          hint="∂h_t/∂h_0 = U^t; which property of U decides how ‖U^t‖ behaves for very large t, "
               "whatever happens in the first steps?")
def check_gradient_growth_rate(gradient_growth_rate, cases):
    """Against ln‖U^8192‖ - ln‖U^4096‖ over 4096, measured here by repeated squaring in float64."""
    for label, U in _growth_cases():
        with cases.case(f"gradient_growth_rate(U) for {label}"):
            measured = _measured_growth_rate(U)
            got = as_float(gradient_growth_rate(torch.tensor(U)))
            expect(abs(got - measured) <= 3e-3, f"{measured:.5f} (measured over steps 4096 to 8192, "
                                                  f"within 3e-3)", f"{got:.5f}")


# ---------------------------------------------------------------------------
# Exercise 6.4: one round of a parallel scan for matrix coefficients (extend)
# ---------------------------------------------------------------------------

def _contractions(steps: int, n: int, seed: int, norm: float) -> np.ndarray:
    """Random (steps, n, n) matrices rescaled to spectral norm ``norm``: they do not commute."""
    A = np.random.default_rng(seed).standard_normal((steps, n, n))
    return A * (norm / np.linalg.norm(A, ord=2, axis=(1, 2)))[:, None, None]


def _loop(A: np.ndarray, b: np.ndarray, z0: np.ndarray) -> np.ndarray:
    """z_t = A_t z_{t-1} + b_t, t = 1..T, one step at a time."""
    z, out = z0, []
    for A_t, b_t in zip(A, b):
        z = A_t @ z + b_t
        out.append(z)
    return np.array(out)


def _round_answer(answer, steps: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    if (not isinstance(answer, (tuple, list)) or len(answer) != 2
            or not all(isinstance(part, (torch.Tensor, np.ndarray, list, tuple)) for part in answer)):
        raise Mismatch("a pair (A, b) of tensors", describe(answer))
    return (as_array(answer[0], (steps, n, n), f"A of shape ({steps}, {n}, {n})"),
            as_array(answer[1], (steps, n), f"b of shape ({steps}, {n})"))


def _expected_round(A: np.ndarray, b: np.ndarray, offset: int, positions) -> tuple[np.ndarray, np.ndarray]:
    """The composed pairs at ``positions``: first the map at t - offset, then the map at t."""
    A_out, b_out = [], []
    for t in positions:
        if t < offset:
            A_out.append(A[t])
            b_out.append(b[t])
        else:  # z -> A_t (A_s z + b_s) + b_t with s = t - offset
            A_out.append(A[t] @ A[t - offset])
            b_out.append(A[t] @ b[t - offset] + b[t])
    return np.array(A_out), np.array(b_out)


def _scan_with(scan_round, A: np.ndarray, b: np.ndarray, z0: np.ndarray) -> np.ndarray:
    """z_1..z_T from the student's rounds with offsets 1, 2, 4, ... (z0 folded into the first step)."""
    b = b.copy()
    b[0] = A[0] @ z0 + b[0]
    A_t, b_t, offset = torch.tensor(A), torch.tensor(b), 1
    while offset < len(A):
        A_np, b_np = _round_answer(scan_round(A_t.clone(), b_t.clone(), offset), *b.shape)
        A_t, b_t, offset = torch.tensor(A_np), torch.tensor(b_np), 2 * offset
    return b_t.numpy()


def _scan_cases():
    rng = np.random.default_rng(7)
    cases = []
    for label, steps, n, seed, norm in (("T = 1000, n = 4, non-commuting contractions", 1000, 4, 3, 0.95),
                                        ("T = 100, n = 2, expanding matrices (norm 1.05)", 100, 2, 4, 1.05),
                                        ("T = 5, n = 3", 5, 3, 2, 0.9)):
        cases.append((label, _contractions(steps, n, seed, norm), rng.standard_normal((steps, n)),
                      rng.standard_normal(n)))
    angles = rng.uniform(0, 2 * math.pi, 64)
    rotations = np.stack([[np.cos(angles), -np.sin(angles)], [np.sin(angles), np.cos(angles)]]).transpose(2, 0, 1)
    cases.append(("T = 64 rotations of the plane, no inputs, z0 = (1, 0)", rotations, np.zeros((64, 2)),
                  np.array([1.0, 0.0])))
    return cases


@exercise("6.4", title="A parallel scan for matrix recurrences", function="scan_round", kind="extend",
          difficulty=2, minutes=40,
          blocked=("dlbook.scan.parallel_scan", "dlbook.scan.linear_recurrence", "dlbook.scan.combine",
                   "dlbook.scan.min_gru", "dlbook.scan.real_block_recurrence"),
          hint="write 'first z -> A1 z + b1, then z -> A2 z + b2' as one map z -> A z + b; matrices do not "
               "commute, so the order of the product matters. Then apply it to all positions t >= offset at once.")
def check_scan_round(scan_round, cases):
    """Single rounds against compositions written out here; whole scans built from the student's rounds
    against a NumPy loop; one round over 2^18 positions under a time limit."""
    rng = np.random.default_rng(10)
    for steps, n, offset in ((7, 3, 1), (10, 2, 4), (6, 2, 8)):
        A, b = _contractions(steps, n, steps, 0.9), rng.standard_normal((steps, n))
        label = (f"scan_round(A, b, offset={offset}) with T = {steps}, n = {n}"
                 + (" (offset beyond the end: nothing changes)" if offset >= steps else ""))
        with cases.case(label):
            got_A, got_b = _round_answer(scan_round(torch.tensor(A), torch.tensor(b), offset), steps, n)
            expected_A, expected_b = _expected_round(A, b, offset, range(steps))
            _expect_close("A", got_A, expected_A, 1e-12)
            _expect_close("b", got_b, expected_b, 1e-12)
    for label, A, b, z0 in _scan_cases():
        with cases.case(f"a whole scan of rounds with offsets 1, 2, 4, ... for {label}, against the loop"):
            _expect_close("z_t", _scan_with(scan_round, A, b, z0), _loop(A, b, z0), 1e-9)
    steps = 2**18
    A, b = _contractions(steps, 2, 5, 0.9), rng.standard_normal((steps, 2))
    A_big, b_big = torch.tensor(A), torch.tensor(b)
    with cases.case(f"scan_round(A, b, offset=1) over T = 2^18 = {steps:,} positions", time_limit=0.5,
                    why="the task asks for all positions at once, not a loop over them"):
        got_A, got_b = _round_answer(scan_round(A_big, b_big, 1), steps, 2)
        sampled = np.sort(rng.choice(steps, size=200, replace=False))
        expected_A, expected_b = _expected_round(A, b, 1, sampled)
        _expect_close("A at 200 sampled positions", got_A[sampled], expected_A, 1e-12)
        _expect_close("b at 200 sampled positions", got_b[sampled], expected_b, 1e-12)
