"""Tests of dlbook.spatial_transformer against F.affine_grid and F.grid_sample, and its gradient in θ."""
import pytest
import torch
import torch.nn.functional as F

from dlbook import spatial_transformer as st


def _randn(*shape, seed=0, dtype=torch.float64):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


@pytest.mark.parametrize("align_corners", [True, False])
@pytest.mark.parametrize("dtype, tolerance", [(torch.float32, 1e-5), (torch.float64, 1e-12)])
def test_grid_and_sampler_equal_torch(align_corners, dtype, tolerance):
    theta = 0.8 * _randn(3, 2, 3, seed=1, dtype=dtype)
    image = _randn(3, 2, 7, 9, seed=2, dtype=dtype)
    ours = st.affine_grid(theta, (3, 2, 5, 6), align_corners=align_corners)
    theirs = F.affine_grid(theta, (3, 2, 5, 6), align_corners=align_corners)
    assert (ours - theirs).abs().max() < tolerance
    sampled = st.bilinear_sample(image, ours, align_corners=align_corners)
    expected = F.grid_sample(image, theirs, mode="bilinear", padding_mode="zeros", align_corners=align_corners)
    assert (sampled - expected).abs().max() < tolerance


@pytest.mark.parametrize("align_corners", [True, False])
def test_gradients_in_theta_and_image(align_corners):
    theta = (0.6 * _randn(2, 2, 3, seed=3)).requires_grad_()
    image = _randn(2, 1, 6, 6, seed=4).requires_grad_()

    def warp(theta, image):
        return st.bilinear_sample(image, st.affine_grid(theta, (2, 1, 5, 5), align_corners=align_corners),
                                  align_corners=align_corners)

    assert torch.autograd.gradcheck(warp, (theta, image))
    weights = _randn(2, 1, 5, 5, seed=5)
    ours = torch.autograd.grad((warp(theta, image) * weights).sum(), (theta, image))
    grid = F.affine_grid(theta, (2, 1, 5, 5), align_corners=align_corners)
    theirs = torch.autograd.grad((F.grid_sample(image, grid, align_corners=align_corners) * weights).sum(),
                                 (theta, image))
    for mine, reference in zip(ours, theirs):
        assert (mine - reference).abs().max() < 1e-12


def test_special_transformations():
    x = _randn(1, 1, 16, 16, dtype=torch.float32)

    def warp(theta, align_corners=True):
        theta = torch.tensor([theta], dtype=torch.float32)
        return st.bilinear_sample(x, st.affine_grid(theta, x.shape, align_corners=align_corners),
                                  align_corners=align_corners)

    for align_corners in (True, False):
        assert (warp([[1, 0, 0], [0, 1, 0]], align_corners) - x).abs().max() < 1e-5
    assert (warp([[0, -1, 0], [1, 0, 0]]) - torch.rot90(x, 1, dims=(2, 3))).abs().max() < 1e-5
    assert (warp([[0, 1, 0], [-1, 0, 0]]) - torch.rot90(x, -1, dims=(2, 3))).abs().max() < 1e-5
    shifted = warp([[1, 0, 2 * 3 / 15], [0, 1, 0]])          # read 3 pixels to the right
    assert (shifted[..., :13] - x[..., 3:]).abs().max() < 1e-5 and shifted[..., 13:].abs().max() < 1e-5


def test_bad_arguments():
    with pytest.raises(ValueError, match="theta must have shape"):
        st.affine_grid(torch.zeros(1, 3, 3), (1, 1, 4, 4))
    with pytest.raises(ValueError, match="size must be"):
        st.affine_grid(torch.zeros(2, 2, 3), (1, 1, 4, 4))
    with pytest.raises(ValueError, match="grid must have shape"):
        st.bilinear_sample(torch.zeros(1, 1, 4, 4), torch.zeros(1, 4, 4, 3))
    with pytest.raises(TypeError, match="align_corners"):
        st.bilinear_sample(torch.zeros(1, 1, 4, 4), torch.zeros(1, 4, 4, 2), align_corners=1)
