"""The two fixed parts of a spatial transformer: an affine sampling grid and a bilinear sampler (Chapter 5).

A spatial transformer (Jaderberg et al., 2015) predicts the six numbers θ of
an affine map from the input itself, maps the regular grid of output pixels
through it, and reads the input at the resulting points by bilinear
interpolation. Coordinates are normalised to [-1, 1] as in PyTorch: with
``align_corners=True`` -1 and 1 are the centres of the corner pixels, with
False they are the outer edges of the corner pixels. Points outside the image
read zeros. Both functions equal ``F.affine_grid`` and ``F.grid_sample``
(bilinear, zero padding) and are differentiable in the image and in θ.
"""
from __future__ import annotations

import torch

from .validation import as_tensor, check_bool, check_ints, describe


def _normalised_coordinates(n: int, align_corners: bool, dtype, device) -> torch.Tensor:
    if align_corners:
        return torch.linspace(-1, 1, n, dtype=dtype, device=device) if n > 1 else torch.zeros(
            1, dtype=dtype, device=device)
    return (2 * torch.arange(n, dtype=dtype, device=device) + 1) / n - 1


def affine_grid(theta, size, *, align_corners: bool = False) -> torch.Tensor:
    """Sampling points θ (x, y, 1)ᵀ for every output pixel: (N, H, W, 2) with x first (Chapter 5).

    ``theta`` is (N, 2, 3) and ``size`` the output's (N, C, H, W), as for F.affine_grid.
    """
    theta = as_tensor("theta", theta, ndim=3, floating=True)
    if theta.shape[1:] != (2, 3):
        raise ValueError(f"theta must have shape (N, 2, 3), got {describe(theta)}")
    n, _, h, w = check_ints("size", size, minimum=1, min_length=4)
    if n != len(theta) or len(size) != 4:
        raise ValueError(f"size must be (N, C, H, W) with N = len(theta) = {len(theta)}, got {tuple(size)}")
    align_corners = check_bool("align_corners", align_corners)
    ys = _normalised_coordinates(h, align_corners, theta.dtype, theta.device)
    xs = _normalised_coordinates(w, align_corners, theta.dtype, theta.device)
    y, x = torch.meshgrid(ys, xs, indexing="ij")
    base = torch.stack([x, y, torch.ones_like(x)], dim=-1)               # (H, W, 3)
    return torch.einsum("hwk,njk->nhwj", base, theta)                    # (N, H, W, 2)


def bilinear_sample(image, grid, *, align_corners: bool = False) -> torch.Tensor:
    """Read ``image`` (N, C, H, W) at the points ``grid`` (N, H', W', 2) by bilinear interpolation, zeros outside.

    V = Σ_{n,m} U[n, m] max(0, 1 - |x - m|) max(0, 1 - |y - n|), with (x, y) the point in
    pixel units; only the four pixels around the point have non-zero weight (Chapter 5).
    """
    image = as_tensor("image", image, ndim=4, floating=True)
    grid = as_tensor("grid", grid, ndim=4, floating=True)
    if grid.shape[-1] != 2 or len(grid) != len(image):
        raise ValueError(f"grid must have shape (N, H', W', 2) with N = {len(image)}, got {describe(grid)}")
    align_corners = check_bool("align_corners", align_corners)
    n, c, h, w = image.shape

    def to_pixels(coordinate, side):
        if align_corners:
            return (coordinate + 1) / 2 * (side - 1)
        return ((coordinate + 1) * side - 1) / 2

    x, y = to_pixels(grid[..., 0], w), to_pixels(grid[..., 1], h)       # (N, H', W') each
    x0, y0 = x.floor(), y.floor()
    flat = image.reshape(n, c, h * w)
    out = 0
    for dy in (0, 1):
        for dx in (0, 1):
            xc, yc = x0 + dx, y0 + dy
            weight = (1 - (x - xc).abs()) * (1 - (y - yc).abs())        # the hat functions, both in [0, 1]
            inside = (xc >= 0) & (xc <= w - 1) & (yc >= 0) & (yc <= h - 1)
            index = (yc.clamp(0, h - 1) * w + xc.clamp(0, w - 1)).long().reshape(n, 1, -1)
            values = flat.gather(2, index.expand(n, c, index.shape[-1])).reshape(n, c, *x.shape[1:])
            out = out + values * (weight * inside)[:, None]
    return out
