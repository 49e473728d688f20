"""Tests of dlbook.filters: the named kernels, the bundled images, steerability of Gaussian derivatives."""
import math

import pytest
import torch
import torch.nn.functional as F

from dlbook import filters


def test_kernels_are_what_their_names_say():
    ramp = torch.arange(5, dtype=torch.float64).repeat(5, 1)          # brightness grows to the right
    assert (filters.filter_image(ramp, filters.named_kernel("sobel_x", dtype=torch.float64)) == 8).all()
    assert (filters.filter_image(ramp, filters.named_kernel("sobel_y", dtype=torch.float64)) == 0).all()
    assert filters.filter_image(ramp, filters.named_kernel("laplacian", dtype=torch.float64)).abs().max() == 0
    for name in ("box", "gaussian"):
        assert filters.named_kernel(name).sum().item() == pytest.approx(1.0)
    assert filters.named_kernel("sharpen").sum().item() == pytest.approx(1.0)


def test_filter_image_equals_torch_with_stride_and_padding():
    image = torch.rand(20, 17, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    kernel = filters.named_kernel("sobel_x", dtype=torch.float64)
    expected = F.conv2d(image[None, None], kernel[None, None], stride=3, padding=2)[0, 0]
    assert torch.allclose(filters.filter_image(image, kernel, stride=3, padding=2), expected, atol=1e-12)


def test_camera_from_the_wheel():
    camera = filters.load_image("camera", size=128)
    assert camera.shape == (128, 128) and camera.dtype == torch.float32
    assert 0 <= camera.min() < camera.max() <= 1
    assert filters.load_image("astronaut", size=64, dtype=torch.float64).shape == (64, 64)


@pytest.mark.parametrize("theta", [0.0, 0.7, 2.0, -1.3])
def test_gaussian_derivatives_are_steerable(theta):
    basis = filters.steerable_basis(size=31)
    steered = filters.steer(basis.g0, basis.g90, theta)
    assert (steered - filters.gaussian_derivative(theta, size=31)).abs().max() < 1e-14


def test_basis_orientation():
    basis = filters.steerable_basis(size=11)
    assert torch.allclose(basis.g0, -basis.g0.flip(1)) and torch.allclose(basis.g90, basis.g0.T)
    assert torch.allclose(filters.gaussian_derivative(math.pi, size=11), -basis.g0)


def test_bad_arguments():
    with pytest.raises(ValueError, match="name"):
        filters.named_kernel("emboss")
    with pytest.raises(ValueError, match="name"):
        filters.load_image("cells3d")
    with pytest.raises(ValueError, match="same shape"):
        filters.steer(torch.zeros(3, 3), torch.zeros(4, 4), 0.1)
    with pytest.raises(ValueError, match="image must have 2"):
        filters.filter_image(torch.zeros(1, 5, 5), torch.zeros(3, 3))
