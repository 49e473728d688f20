"""Tests of dlbook.bptt: Jacobian products and BPTT against autograd, clipping against torch (Chapter 6)."""
import math

import pytest
import torch

from dlbook import bptt


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def _recurrence(nonlinearity, n=6, m=3, steps=12, scale=0.8, seed=0):
    g = _gen(seed)
    U = scale * torch.randn(n, n, generator=g, dtype=torch.float64) / math.sqrt(n)
    V = torch.randn(n, m, generator=g, dtype=torch.float64)
    X = torch.randn(steps, m, generator=g, dtype=torch.float64)
    h0 = torch.randn(n, generator=g, dtype=torch.float64)
    return bptt.recurrence(U, V, X, h0, nonlinearity)


def _readout(rec, p=2, seed=1):
    g = _gen(seed)
    return (torch.randn(p, rec.U.shape[0], generator=g, dtype=torch.float64),
            torch.randn(len(rec.X), p, generator=g, dtype=torch.float64))


@pytest.mark.parametrize("nonlinearity", list(bptt.NONLINEARITIES))
def test_step_jacobians_in_closed_form_equal_autograd(nonlinearity):
    rec = _recurrence(nonlinearity)
    closed = bptt.step_jacobians(rec)
    torch.testing.assert_close(closed, bptt.step_jacobians(rec, method="autograd"), rtol=0, atol=1e-14)
    products = bptt.jacobian_products(rec)
    torch.testing.assert_close(products[-1], bptt.end_to_end_jacobian(rec), rtol=1e-12, atol=1e-300)
    torch.testing.assert_close(bptt.jacobian_norms(rec), bptt.state_jacobian_norms(
        lambda h, x: bptt.step(rec, h, x), rec.h0, rec.X), rtol=1e-12, atol=0)


@pytest.mark.parametrize("c", [0.9, 1.0, 1.1])
def test_linear_recurrence_with_scaled_orthogonal_matrix_has_norm_c_to_the_t(c):
    g = _gen(3)
    Q, _ = torch.linalg.qr(torch.randn(16, 16, generator=g, dtype=torch.float64))
    rec = bptt.recurrence(c * Q, torch.eye(16, dtype=torch.float64), torch.randn(30, 16, generator=g,
                                                                                 dtype=torch.float64),
                          nonlinearity="linear")
    torch.testing.assert_close(bptt.jacobian_norms(rec), c ** torch.arange(1, 31, dtype=torch.float64),
                               rtol=1e-13, atol=0)


@pytest.mark.parametrize("nonlinearity", list(bptt.NONLINEARITIES))
def test_bptt_sum_and_backward_sweep_equal_autograd(nonlinearity):
    rec = _recurrence(nonlinearity)
    W, Y = _readout(rec)
    reference = bptt.bptt_by_autograd(rec, W, Y)
    for ours in (bptt.bptt(rec, W, Y), bptt.bptt_by_sum(rec, W, Y)):
        scale = reference.U.abs().max()
        torch.testing.assert_close(ours.U, reference.U, rtol=0, atol=1e-12 * scale)
        torch.testing.assert_close(ours.V, reference.V, rtol=0, atol=1e-12 * reference.V.abs().max())


@pytest.mark.parametrize("dtype, max_norm", [(torch.float32, 0.5), (torch.float64, 0.5), (torch.float64, 1e3)])
def test_clipping_equals_torch(dtype, max_norm):
    g = _gen(4)
    grads = [torch.randn(5, 3, generator=g, dtype=dtype), torch.randn(7, generator=g, dtype=dtype)]
    params = [torch.zeros_like(t, requires_grad=True) for t in grads]
    for p, grad in zip(params, grads):
        p.grad = grad.clone()
    total = torch.nn.utils.clip_grad_norm_(params, max_norm)
    ours = bptt.clip_grad_norm(grads, max_norm)
    assert ours.total_norm == pytest.approx(total.item(), rel=1e-6)
    for mine, p in zip(ours.grads, params):
        torch.testing.assert_close(mine, p.grad, rtol=1e-6, atol=1e-7)
    clipped_norm = bptt.gradient_norm(ours.grads)
    assert clipped_norm <= max_norm and (max_norm < ours.total_norm or clipped_norm == pytest.approx(ours.total_norm))


def test_clipped_optimizer_clips_then_steps_and_records_norms():
    g = _gen(5)
    start = torch.randn(4, generator=g, dtype=torch.float64)
    p = start.clone().requires_grad_(True)
    opt = bptt.ClippedOptimizer(torch.optim.SGD([p], lr=0.1), max_norm=1.0)
    opt.zero_grad()
    (10 * p).sum().backward()  # gradient 10 in every entry, norm 20
    opt.step()
    assert opt.norms == [pytest.approx(20.0)]
    torch.testing.assert_close(p.detach(), start - 0.1 * 0.5 / (1 + 5e-8), rtol=0, atol=1e-9)
    recorder = bptt.ClippedOptimizer(torch.optim.SGD([p], lr=0.1), max_norm=None)
    recorder.zero_grad()
    (10 * p).sum().backward()
    recorder.step()
    assert recorder.norms == [pytest.approx(20.0)]


def test_gates_carry_more_gradient_to_the_first_input_than_elman():
    rnn = bptt.input_gradient_ratio("rnn", 20, hidden_size=16, batch_size=8)
    lstm = bptt.input_gradient_ratio("lstm", 20, hidden_size=16, batch_size=8)
    assert 0 < rnn < lstm
    assert rnn == bptt.input_gradient_ratio("rnn", 20, hidden_size=16, batch_size=8)


def test_bad_arguments_are_named():
    g = _gen(0)
    U, V, X = torch.randn(4, 4, generator=g), torch.randn(4, 2, generator=g), torch.randn(5, 2, generator=g)
    with pytest.raises(ValueError, match="nonlinearity"):
        bptt.recurrence(U, V, X, nonlinearity="relu6")
    with pytest.raises(ValueError, match="U must be a square"):
        bptt.recurrence(U[:3], V, X)
    with pytest.raises(ValueError, match="V must have 4 rows"):
        bptt.recurrence(U, V[:3], X)
    with pytest.raises(ValueError, match="X must have shape"):
        bptt.recurrence(U, V, X[:, :1])
    with pytest.raises(ValueError, match="h0"):
        bptt.recurrence(U, V, X, torch.zeros(3))
    rec = bptt.recurrence(U, V, X)
    with pytest.raises(ValueError, match="Y must have shape"):
        bptt.bptt(rec, torch.zeros(2, 4), torch.zeros(4, 2))
    with pytest.raises(ValueError, match="method"):
        bptt.step_jacobians(rec, method="finite differences")
    with pytest.raises(ValueError, match="max_norm"):
        bptt.clip_grad_norm([torch.ones(3)], 0.0)
    with pytest.raises(TypeError, match="grads"):
        bptt.clip_grad_norm(torch.ones(3), 1.0)
    with pytest.raises(TypeError, match="optimizer"):
        bptt.ClippedOptimizer("adam", 1.0)
    with pytest.raises(TypeError, match="step_fn"):
        bptt.state_jacobian_norms("tanh", torch.zeros(3), torch.zeros(2, 3))
    with pytest.raises(ValueError, match="length"):
        bptt.input_gradient_ratio("gru", 1)
