"""Tests of dlbook.conv against NumPy and PyTorch: 1-D convolutions, conv2d, pooling, sizes, operator norms."""
import itertools

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from dlbook import conv, nets


def _randn(*shape, seed=0, dtype=torch.float64):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


# ---------------------------------------------------------------------------
# One dimension
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("method", conv.METHODS_1D)
@pytest.mark.parametrize("n, m", [(10, 3), (1, 1), (7, 7), (5, 9), (64, 5)])
def test_three_ways_equal_numpy(method, n, m):
    f, h = _randn(n, seed=n), _randn(m, seed=100 + m)
    expected = np.convolve(f.numpy(), h.numpy(), "full")
    assert np.abs(conv.convolve1d(f, h, method=method).numpy() - expected).max() < 1e-12


def test_toeplitz_matrix_shape_and_entries():
    h = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    H = conv.toeplitz_matrix(h, 10)
    assert H.shape == (12, 10)
    assert torch.equal(H[:, 0], torch.cat([h, torch.zeros(9, dtype=torch.float64)]))
    assert torch.equal(H[2:5, 2], h) and H[1, 2] == 0 and H[5, 2] == 0


def test_fft_longer_than_needed_still_linear_and_too_short_rejected():
    f, h = _randn(10), _randn(3, seed=1)
    expected = np.convolve(f.numpy(), h.numpy())
    assert np.abs(conv.convolve1d(f, h, method="fft", fft_length=64).numpy() - expected).max() < 1e-12
    with pytest.raises(ValueError, match="fft_length"):
        conv.convolve1d(f, h, method="fft", fft_length=11)


def test_circular_convolution_wraps_around():
    f, h = _randn(8), _randn(3, seed=1)
    expected = sum(h[t] * torch.roll(f, t) for t in range(3))
    assert (conv.circular_convolve1d(f, h) - expected).abs().max() < 1e-12


def test_cross_correlation_is_torch_conv1d_and_convolution_with_the_flipped_kernel():
    f, h = _randn(12), _randn(4, seed=1)
    torch_result = F.conv1d(f[None, None], h[None, None])[0, 0]
    assert (conv.cross_correlate1d(f, h) - torch_result).abs().max() < 1e-12
    flipped = conv.convolve1d(f, h.flip(0))[3:12]            # the 'valid' part of f * h̄
    assert (conv.cross_correlate1d(f, h) - flipped).abs().max() < 1e-12


@pytest.mark.parametrize("n", [2, 3, 5, 8])
def test_matrices_commuting_with_the_cyclic_shift_form_an_n_dimensional_space(n):
    assert conv.commutant_dimension(conv.cyclic_shift_matrix(n)) == n
    assert conv.commutant_dimension(torch.eye(n, dtype=torch.float64)) == n * n


def test_one_dimensional_bad_inputs():
    with pytest.raises(TypeError, match="f must hold floating-point"):
        conv.convolve1d(torch.arange(5), torch.ones(2))
    with pytest.raises(ValueError, match="h must have 1 dimension"):
        conv.convolve1d(torch.ones(5), torch.ones(2, 2))
    with pytest.raises(ValueError, match="method"):
        conv.convolve1d(torch.ones(5), torch.ones(2), method="winograd")
    with pytest.raises(TypeError, match="share dtype"):
        conv.convolve1d(torch.ones(5), torch.ones(2, dtype=torch.float64))
    with pytest.raises(ValueError, match="longer"):
        conv.cross_correlate1d(torch.ones(2), torch.ones(3))


# ---------------------------------------------------------------------------
# Output sizes, conv2d, pooling
# ---------------------------------------------------------------------------

def test_output_size_equals_torch_on_a_grid():
    for n, f, p, s, d in itertools.product(range(1, 12), range(1, 6), range(0, 3), range(1, 4), (1, 2)):
        span = d * (f - 1) + 1
        if n + 2 * p < span:
            continue
        x = torch.zeros(1, 1, n, n)
        shape = F.conv2d(x, torch.zeros(1, 1, f, f), stride=s, padding=p, dilation=d).shape[-1]
        assert conv.output_size(n, f, padding=p, stride=s, dilation=d) == shape, (n, f, p, s, d)
        if d == 1 and p == 0:
            assert conv.output_size(n, f, stride=s) == F.max_pool2d(x, f, s).shape[-1]


def test_output_size_of_the_sources_examples():
    # ⌊(n + 2p - f)/s⌋ + 1, not ⌊(n + 2p - f + 1)/s⌋
    assert [conv.output_size(n, f, padding=p, stride=s) for n, f, p, s in [(5, 3, 0, 2), (7, 3, 1, 2), (28, 3, 0, 3)]] \
        == [2, 4, 9]
    with pytest.raises(ValueError, match="no output"):
        conv.output_size(2, 5)


@pytest.mark.parametrize("layers", [[(3, 1, 1)] * 3, [(3, 2, 1), (3, 1, 1)], [(5, 2, 1), (3, 2, 2), (3, 1, 3)],
                                    [(1, 1, 1)], [(2, 3, 1), (4, 1, 1)]])
def test_receptive_field_equals_the_support_of_a_gradient(layers):
    kernels, strides, dilations = zip(*layers)
    x = torch.zeros(1, 1, 80, 80, dtype=torch.float64, requires_grad=True)
    h = x
    for k, s, d in layers:
        h = F.conv2d(h, torch.ones(1, 1, k, k, dtype=torch.float64), stride=s, dilation=d)
    centre = h.shape[-1] // 2
    (grad,) = torch.autograd.grad(h[0, 0, centre, centre], x)
    rows = grad[0, 0].abs().sum(dim=1).nonzero()
    assert conv.receptive_field(kernels, strides, dilations) == rows.max().item() - rows.min().item() + 1
    with pytest.raises(ValueError, match="same length"):
        conv.receptive_field(kernels, strides[:-1] + (1, 1), dilations)


SETTINGS = [dict(), dict(stride=2, padding=1), dict(stride=(2, 1), padding=(2, 0), dilation=(1, 2)),
            dict(padding=3, dilation=3), dict(stride=3)]


@pytest.mark.parametrize("settings", SETTINGS)
@pytest.mark.parametrize("dtype, tolerance", [(torch.float32, 1e-5), (torch.float64, 1e-12)])
def test_conv2d_equals_torch_values_and_gradients(settings, dtype, tolerance):
    x = _randn(2, 3, 11, 9, seed=1, dtype=dtype).requires_grad_()
    w = _randn(4, 3, 3, 2, seed=2, dtype=dtype).requires_grad_()
    b = _randn(4, seed=3, dtype=dtype).requires_grad_()
    ours = conv.conv2d(x, w, b, **settings)
    theirs = F.conv2d(x, w, b, **settings)
    assert ours.shape == theirs.shape
    assert (ours - theirs).abs().max() < tolerance
    weights = _randn(*theirs.shape, seed=4, dtype=dtype)
    ours_grads = torch.autograd.grad((ours * weights).sum(), (x, w, b))
    theirs_grads = torch.autograd.grad((theirs * weights).sum(), (x, w, b))
    for mine, reference in zip(ours_grads, theirs_grads):
        assert (mine - reference).abs().max() < tolerance * 10


@pytest.mark.parametrize("settings", SETTINGS)
def test_the_sum_over_offsets_equals_im2col(settings):
    x, w, b = _randn(2, 3, 11, 9, seed=1), _randn(5, 3, 3, 3, seed=2), _randn(5, seed=3)
    assert (conv.conv2d_by_sum(x, w, b, **settings) - conv.conv2d(x, w, b, **settings)).abs().max() < 1e-12


def test_circular_padding_equals_torch():
    x, w = _randn(2, 2, 8, 8), _randn(3, 2, 3, 3, seed=1)
    layer = torch.nn.Conv2d(2, 3, 3, padding=1, padding_mode="circular", bias=False).double()
    with torch.no_grad():
        layer.weight.copy_(w)
    for fn in (conv.conv2d, conv.conv2d_by_sum):
        assert (fn(x, w, padding=1, padding_mode="circular") - layer(x)).abs().max() < 1e-12


@pytest.mark.parametrize("kernel, stride", [(2, None), (3, 1), (3, 2), ((2, 3), (1, 2))])
def test_max_pool_equals_torch(kernel, stride):
    x = _randn(2, 3, 9, 10)
    assert torch.equal(conv.max_pool2d(x, kernel, stride), F.max_pool2d(x, kernel, stride))


def test_max_pool_of_arange():
    pooled = conv.max_pool2d(torch.arange(16.0).reshape(1, 1, 4, 4), 2)
    assert pooled.tolist() == [[[[5.0, 7.0], [13.0, 15.0]]]]


def test_circular_cross_correlation_by_fft():
    x, k = _randn(3, 16, 16), _randn(3, 3, seed=1)
    direct = conv.conv2d(F.pad(x[:, None], (0, 2, 0, 2), mode="circular"), k[None, None])[:, 0]
    assert (conv.circular_cross_correlate2d(x, k) - direct).abs().max() < 1e-12


def test_conv2d_bad_inputs():
    x, w = torch.ones(1, 2, 5, 5), torch.ones(3, 2, 3, 3)
    with pytest.raises(ValueError, match="input channels"):
        conv.conv2d(x, torch.ones(3, 4, 3, 3))
    with pytest.raises(ValueError, match="x must have 4"):
        conv.conv2d(torch.ones(2, 5, 5), w)
    with pytest.raises(TypeError, match="share dtype"):
        conv.conv2d(x, w.double())
    with pytest.raises(ValueError, match="bias must have shape"):
        conv.conv2d(x, w, torch.ones(2))
    with pytest.raises(ValueError, match="stride must be >= 1"):
        conv.conv2d(x, w, stride=0)
    with pytest.raises(ValueError, match="padding_mode"):
        conv.conv2d(x, w, padding_mode="reflect")
    with pytest.raises(ValueError, match="no output"):
        conv.conv2d(torch.ones(1, 2, 2, 2), w)
    with pytest.raises(TypeError, match="x must hold floating-point"):
        conv.max_pool2d(torch.ones(1, 1, 4, 4, dtype=torch.long), 2)


# ---------------------------------------------------------------------------
# The layer as a matrix, operator norms
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("padding_mode", conv.PADDING_MODES)
def test_conv_matrix_applies_the_layer(padding_mode):
    w, x = _randn(4, 3, 3, 3), _randn(1, 3, 6, 6, seed=1)
    M = conv.conv_matrix(w, 6, padding_mode=padding_mode)
    assert M.shape == (4 * 36, 3 * 36)
    expected = conv.conv2d(x, w, padding=1, padding_mode=padding_mode).reshape(-1)
    assert (M @ x.reshape(-1) - expected).abs().max() < 1e-12


def test_operator_norms_agree():
    w = _randn(4, 3, 3, 3)
    dense = torch.linalg.matrix_norm(conv.conv_matrix(w, 8), ord=2).item()
    assert abs(conv.operator_norm_fft(w, 8) - dense) < 1e-10 * dense
    assert abs(conv.operator_norm(w, 8, steps=300) - dense) < 1e-4 * dense
    zero_padded = torch.linalg.matrix_norm(conv.conv_matrix(w, 8, padding_mode="zeros"), ord=2).item()
    assert abs(conv.operator_norm(w, 8, steps=300, padding_mode="zeros") - zero_padded) < 1e-4 * zero_padded


# ---------------------------------------------------------------------------
# The classifier builder
# ---------------------------------------------------------------------------

def test_cnn_parameter_counts_and_shapes():
    model = conv.cnn((16, 32, 32), pool_after=(1,))
    assert nets.num_parameters(model) == 14_378
    assert model(torch.zeros(5, 1, 16, 16)).shape == (5, 10)
    assert nets.num_parameters(conv.cnn((16, 16, 32), pool_after=(1,), global_pool="mean")) == 7_450


def test_cnn_is_seeded_and_leaves_the_global_stream_alone():
    state = torch.random.get_rng_state()
    a, b, c = conv.cnn((4, 4), seed=1), conv.cnn((4, 4), seed=1), conv.cnn((4, 4), seed=2)
    assert torch.equal(torch.random.get_rng_state(), state)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    assert not torch.equal(a[0].weight, c[0].weight)


def test_cnn_bad_arguments():
    with pytest.raises(ValueError, match="pool_after"):
        conv.cnn((4, 4), pool_after=(2,))
    with pytest.raises(ValueError, match="global_pool"):
        conv.cnn((4,), global_pool="median")
    with pytest.raises(TypeError, match="channels"):
        conv.cnn(16)
