"""Checks of chapter 6's exercises: reference solutions pass, plausible wrong answers fail."""
from __future__ import annotations

import math

import numpy as np
import torch

from dlbook import bptt, recurrent, scan
from dlbook.exercises.checks import ch06_rnn as checks

from exercise_contract import bad_types

#: Fewest cases each check must run (tests/checks/test_contract.py).
MIN_CASES = 5

IDS = ["6.1", "6.2", "6.3", "6.4"]


# ---------------------------------------------------------------------------
# Reference solutions (independent of the chapter's modules and of the notebook)
# ---------------------------------------------------------------------------

def lstm_step(x, h, c, weight_ih, weight_hh, bias_ih, bias_hh):
    i, f, g, o = (x @ weight_ih.T + bias_ih + h @ weight_hh.T + bias_hh).chunk(4, dim=1)
    c_next = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c_next), c_next


def _gru_parts(x, h, weight_ih, weight_hh, bias_ih, bias_hh):
    in_r, in_z, in_n = (x @ weight_ih.T + bias_ih).chunk(3, dim=1)
    hh_r, hh_z, hh_n = (h @ weight_hh.T + bias_hh).chunk(3, dim=1)
    r, z = torch.sigmoid(in_r + hh_r), torch.sigmoid(in_z + hh_z)
    return r, z, torch.tanh(in_n + r * hh_n), hh_n


def gru_jacobian(x, h, weight_ih, weight_hh, bias_ih, bias_hh, *, variant="right"):
    r, z, n, hh_n = _gru_parts(x, h, weight_ih, weight_hh, bias_ih, bias_hh)
    W_hr, W_hz, W_hn = weight_hh.chunk(3, dim=0)
    through_z = (z * (1 - z))[:, :, None] * W_hz  # dz/dh, (B, H, H)
    if variant == "reset before":  # the derivative of the other GRU, n = tanh(W_in x + b_in + W_hn (r * h) + b_hn)
        hidden = h.shape[1]
        n = torch.tanh((x @ weight_ih.T + bias_ih)[:, 2 * hidden:] + (r * h) @ W_hn.T + bias_hh[2 * hidden:])
        inside = W_hn[None] * r[:, None, :] + (W_hn[None] * (h * r * (1 - r))[:, None, :]) @ W_hr
    elif variant == "no bias in the reset product":
        inside = r[:, :, None] * W_hn + (h @ W_hn.T * r * (1 - r))[:, :, None] * W_hr
    else:
        inside = r[:, :, None] * W_hn + (hh_n * r * (1 - r))[:, :, None] * W_hr
    through_n = (1 - n**2)[:, :, None] * inside
    J = torch.diag_embed(z) + (1 - z)[:, :, None] * through_n
    if variant != "no path through z":
        J = J + (h - n)[:, :, None] * through_z
    return J.transpose(1, 2) if variant == "transposed" else J


def gradient_growth_rate(U):
    return math.log(torch.linalg.eigvals(U).abs().max().item())


def scan_round(A, b, offset, *, order="right", b_after_A=False):
    A_new, b_new = A.clone(), b.clone()
    if offset < len(A):
        earlier_A, earlier_b, later_A = A[:-offset], b[:-offset], A[offset:]
        A_new[offset:] = later_A @ earlier_A if order == "right" else earlier_A @ later_A
        source = A_new[offset:] if b_after_A else later_A  # the wrong one uses the already composed A
        b_new[offset:] = (source @ earlier_b[..., None])[..., 0] + b[offset:]
    return A_new, b_new


REFERENCES = {"6.1": lstm_step, "6.2": gru_jacobian, "6.3": gradient_growth_rate, "6.4": scan_round}


# ---------------------------------------------------------------------------
# Plausible wrong answers
# ---------------------------------------------------------------------------

def _lstm_blocks(x, h, weight_ih, weight_hh, bias_ih, bias_hh):
    return (x @ weight_ih.T + bias_ih + h @ weight_hh.T + bias_hh).chunk(4, dim=1)


def _lstm_order_ifog(x, h, c, *weights):
    i, f, o, g = _lstm_blocks(x, h, *weights)  # misreads torch's order (i, f, g, o)
    c_next = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c_next), c_next


def _lstm_no_tanh_on_output(x, h, c, *weights):
    i, f, g, o = _lstm_blocks(x, h, *weights)
    c_next = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * c_next, c_next


def _lstm_one_bias(x, h, c, weight_ih, weight_hh, bias_ih, bias_hh):
    return lstm_step(x, h, c, weight_ih, weight_hh, bias_ih, torch.zeros_like(bias_hh))


def _lstm_package(x, h, c, weight_ih, weight_hh, bias_ih, bias_hh):
    return tuple(recurrent.lstm_cell(x, recurrent.LSTMState(h, c),
                                     recurrent.CellWeights(weight_ih, weight_hh, bias_ih, bias_hh)))


def _gru_jacobian_by_package(x, h, weight_ih, weight_hh, bias_ih, bias_hh):
    weights = recurrent.CellWeights(weight_ih, weight_hh, bias_ih, bias_hh)
    return torch.func.vmap(torch.func.jacrev(lambda hb, xb: recurrent.gru_cell(xb[None], hb[None], weights)[0]))(h, x)


def _short_horizon_rate(U):
    return math.log(torch.linalg.matrix_norm(torch.linalg.matrix_power(U, 20), ord=2).item()) / 20


def _rate_by_package(U):
    n = U.shape[0]
    rec = bptt.recurrence(U, torch.eye(n, dtype=U.dtype), torch.zeros(2000, n, dtype=U.dtype), nonlinearity="linear")
    return math.log(bptt.jacobian_norms(rec)[-1].item()) / 2000


def _round_by_loop(A, b, offset):
    A, b = A.numpy(), b.numpy()  # NumPy: the fastest plain loop over the positions, and still too slow
    A_new, b_new = A.copy(), b.copy()
    for t in range(offset, len(A)):
        A_new[t] = A[t] @ A[t - offset]
        b_new[t] = A[t] @ b[t - offset] + b[t]
    return torch.tensor(A_new), torch.tensor(b_new)


def _round_elementwise(A, b, offset):
    A_new, b_new = A.clone(), b.clone()
    if offset < len(A):
        composed = scan.combine((A[:-offset], b[:-offset, :, None]), (A[offset:], b[offset:, :, None]))
        A_new[offset:], b_new[offset:] = composed[0], composed[1].sum(-1)
    return A_new, b_new


WRONG = {
    "6.1": {
        "gate order (i, f, o, g)": _lstm_order_ifog,
        "h_next = o * c_next, without tanh": _lstm_no_tanh_on_output,
        "only the input bias": _lstm_one_bias,
        "the package's LSTM cell": _lstm_package,
    },
    "6.2": {
        "no path through the update gate": lambda *a: gru_jacobian(*a, variant="no path through z"),
        "reset gate before the product": lambda *a: gru_jacobian(*a, variant="reset before"),
        "b_hn left out of the reset product": lambda *a: gru_jacobian(*a, variant="no bias in the reset product"),
        "transposed Jacobian": lambda *a: gru_jacobian(*a, variant="transposed"),
        "autograd through the package's GRU cell": _gru_jacobian_by_package,
    },
    "6.3": {
        "the bound: log of the largest singular value": lambda U: math.log(torch.linalg.matrix_norm(U, ord=2).item()),
        "log of the largest diagonal entry": lambda U: math.log(torch.diagonal(U).abs().max().item()),
        "measured over the first 20 steps": _short_horizon_rate,
        "the package's Jacobian norms": _rate_by_package,
    },
    "6.4": {
        "a loop over the positions": _round_by_loop,
        "products in the wrong order": lambda A, b, offset: scan_round(A, b, offset, order="wrong"),
        "b composed with the already updated A": lambda A, b, offset: scan_round(A, b, offset, b_after_A=True),
        "the package's elementwise combine": _round_elementwise,
    },
}


BAD_TYPES = bad_types("raises ValueError", "stub", "returns None", "returns a string", "returns a 3x3 tensor",
                      "returns NaN", "returns a list")


# ---------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------



def test_measured_growth_rate_finds_the_spectral_radius():
    for U in (np.diag([0.3, 0.8]), 1.1 * np.eye(3), np.array([[0.5, 10.0], [0.0, 0.9]])):
        assert abs(checks._measured_growth_rate(U) - math.log(max(abs(np.linalg.eigvals(U))))) < 1e-3


def test_whole_scan_from_rounds_equals_the_loop():
    A, b = checks._contractions(300, 3, 0, 0.9), np.random.default_rng(1).standard_normal((300, 3))
    z0 = np.ones(3)
    np.testing.assert_allclose(checks._scan_with(scan_round, A, b, z0), checks._loop(A, b, z0), atol=1e-12)


def test_reference_gru_jacobian_equals_autograd():
    weights = checks._cell_weights(3, 3, 4, 0)
    x, h = checks._states((2, 3), 1), checks._states((2, 4), 2)
    np.testing.assert_allclose(gru_jacobian(x, h, *weights.values()).numpy(),
                               checks._gru_jacobian_reference(weights, x, h), atol=1e-12)
