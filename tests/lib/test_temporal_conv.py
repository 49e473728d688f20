"""Tests of dlbook.temporal_conv: causal dilated convolutions against torch, and their receptive field (Chapter 6)."""
import pytest
import torch
import torch.nn.functional as F
from torch.func import jacrev

from dlbook import temporal_conv as tcn


def _gen(seed):
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize("kernel_size, dilation", [(1, 1), (2, 1), (3, 2), (4, 5)])
def test_causal_convolution_equals_torch_with_left_padding(kernel_size, dilation):
    g = _gen(kernel_size)
    x = torch.randn(2, 3, 17, generator=g, dtype=torch.float64)
    weight = torch.randn(4, 3, kernel_size, generator=g, dtype=torch.float64)
    bias = torch.randn(4, generator=g, dtype=torch.float64)
    expected = F.conv1d(F.pad(x, ((kernel_size - 1) * dilation, 0)), weight, bias, dilation=dilation)
    torch.testing.assert_close(tcn.causal_conv1d(x, weight, bias, dilation=dilation), expected, rtol=0, atol=1e-13)


@pytest.mark.parametrize("num_layers", [1, 3, 4])
def test_a_wavenet_stack_sees_exactly_the_last_two_to_the_L_inputs(num_layers):
    weights = tcn.wavenet_weights(num_layers, 2, seed=num_layers)
    steps = 2 ** num_layers + 8
    x = torch.randn(1, 2, steps, generator=_gen(9), dtype=torch.float64)
    jacobian = jacrev(lambda v: tcn.wavenet_stack(v, weights))(x)  # (1, 2, T, 1, 2, T)
    depends = jacobian.abs().sum(dim=(0, 1, 3, 4)) > 0  # (T_out, T_in)
    t = torch.arange(steps)
    field = tcn.receptive_field(2, [2**layer for layer in range(num_layers)])
    assert field == 2**num_layers
    assert torch.equal(depends, (t[None, :] <= t[:, None]) & (t[None, :] > t[:, None] - field))


def test_receptive_field_formula():
    assert tcn.receptive_field(3, [1, 2, 4]) == 15
    assert tcn.receptive_field(1, [1, 8]) == 1


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="x must have 3 channels"):
        tcn.causal_conv1d(torch.zeros(1, 2, 5), torch.zeros(4, 3, 2))
    with pytest.raises(ValueError, match="dilation"):
        tcn.causal_conv1d(torch.zeros(1, 3, 5), torch.zeros(4, 3, 2), dilation=0)
    with pytest.raises(ValueError, match="bias"):
        tcn.causal_conv1d(torch.zeros(1, 3, 5), torch.zeros(4, 3, 2), torch.zeros(3))
    with pytest.raises(ValueError, match="dilations"):
        tcn.receptive_field(2, [])
    with pytest.raises(TypeError, match="weights"):
        tcn.wavenet_stack(torch.zeros(1, 2, 4), torch.zeros(2, 2, 2))
