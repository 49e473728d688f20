"""Tests of dlbook.equivariance: exact symmetries give zero, broken ones O(1)."""
import pytest
import torch
import torch.nn.functional as F

from dlbook import equivariance


def _x():
    return torch.randn(2, 1, 12, 12, generator=torch.Generator().manual_seed(0), dtype=torch.float64)


def _circular_conv(x):
    kernel = torch.arange(9, dtype=torch.float64).reshape(1, 1, 3, 3) / 9
    return F.conv2d(F.pad(x, (1, 1, 1, 1), mode="circular"), kernel)


def _shift(x):
    return torch.roll(x, shifts=(3, -5), dims=(2, 3))


def test_circular_convolution_is_exactly_shift_equivariant():
    assert equivariance.equivariance_error(_circular_conv, _shift, _shift, _x()) == 0.0


def test_zero_padding_breaks_it_at_the_border_only():
    def zero_padded(x):
        return F.conv2d(x, torch.ones(1, 1, 3, 3, dtype=torch.float64), padding=1)

    def shift(x):
        return torch.roll(x, shifts=1, dims=3)

    assert equivariance.equivariance_error(zero_padded, shift, shift, _x()) > 0.1
    interior = torch.zeros(12, 12, dtype=torch.bool)
    interior[:, 3:-3] = True
    assert equivariance.equivariance_error(zero_padded, shift, shift, _x(), mask=interior) == 0.0


def test_global_pooling_makes_it_invariant():
    def pooled(x):
        return _circular_conv(x).relu().mean(dim=(2, 3))

    assert equivariance.invariance_error(pooled, _shift, _x()) < 1e-14
    assert equivariance.invariance_error(lambda x: x[..., 0, 0], _shift, _x()) > 0.1


def test_bad_arguments():
    with pytest.raises(TypeError, match="act_in"):
        equivariance.equivariance_error(_circular_conv, None, _shift, _x())
    with pytest.raises(ValueError, match="do not fit"):
        equivariance.equivariance_error(_circular_conv, _shift, lambda y: y[..., :2], _x())
    with pytest.raises(TypeError, match="x must hold floating"):
        equivariance.equivariance_error(_circular_conv, _shift, _shift, torch.ones(1, 1, 4, 4, dtype=torch.int64))
    with pytest.raises(TypeError, match="mask"):
        equivariance.equivariance_error(_circular_conv, _shift, _shift, _x(), mask=torch.ones(12, 12))
