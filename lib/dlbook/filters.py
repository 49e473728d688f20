"""Hand-made image filters, steerable Gaussian derivatives, and the bundled test images (Chapter 5).

The kernels are the classical ones a convolutional network's first layer
tends to rediscover: derivatives (Sobel), smoothing (box, Gaussian), the
Laplacian and sharpening. The first derivatives of a Gaussian are *steerable*
(Freeman and Adelson, 1991): the derivative in any direction θ is
cos θ G_x + sin θ G_y, so two filterings give the response at every angle.
Images come from inside the scikit-image wheel (never the functions of
``skimage.data`` that download).
"""
from __future__ import annotations

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F

from .validation import as_tensor, check_choice, check_device, check_dtype, check_float, check_int

#: 3 x 3 kernels by name (cross-correlation orientation: rows top to bottom, columns left to right).
KERNELS = {
    "sobel_x": [[-1, 0, 1], [-2, 0, 2], [-1, 0, 1]],
    "sobel_y": [[-1, -2, -1], [0, 0, 0], [1, 2, 1]],
    "box": [[1 / 9] * 3] * 3,
    "gaussian": [[1 / 16, 2 / 16, 1 / 16], [2 / 16, 4 / 16, 2 / 16], [1 / 16, 2 / 16, 1 / 16]],
    "laplacian": [[0, 1, 0], [1, -4, 1], [0, 1, 0]],
    "sharpen": [[0, -1, 0], [-1, 5, -1], [0, -1, 0]],
}
#: Images shipped inside the scikit-image wheel that the book uses (grey scale or converted to it).
IMAGES = ("camera", "astronaut", "coins", "moon", "text")


def named_kernel(name: str, *, dtype: torch.dtype = torch.float32, device="cpu") -> torch.Tensor:
    """One of :data:`KERNELS` as a (3, 3) tensor (Chapter 5)."""
    check_choice("name", name, KERNELS)
    dtype, device = check_dtype("dtype", dtype), check_device("device", device)
    return torch.tensor(KERNELS[name], dtype=dtype, device=device)


def load_image(name: str = "camera", *, size: int = 128, dtype: torch.dtype = torch.float32,
               device="cpu") -> torch.Tensor:
    """A grey-scale image from the scikit-image wheel, area-averaged to (size, size), values in [0, 1] (Chapter 5)."""
    import numpy as np
    from skimage import data as skdata

    check_choice("name", name, IMAGES)
    size = check_int("size", size, minimum=1, maximum=512)
    dtype, device = check_dtype("dtype", dtype), check_device("device", device)
    pixels = np.asarray(getattr(skdata, name)(), dtype=np.float64)
    if pixels.ndim == 3:                       # RGB: ITU-R 601 luma
        pixels = pixels[..., :3] @ np.array([0.299, 0.587, 0.114])
    image = torch.tensor(pixels / 255.0)[None, None]
    image = F.interpolate(image, size=(size, size), mode="area")[0, 0]
    return image.clamp(0, 1).to(dtype=dtype, device=device)


class SteerableBasis(NamedTuple):
    """The two basis filters G_x = ∂G/∂x and G_y = ∂G/∂y of G = exp(-(x² + y²)) on a square grid."""

    g0: torch.Tensor
    g90: torch.Tensor


def _grid(size: int, extent: float, dtype, device):
    coords = torch.linspace(-extent, extent, size, dtype=dtype, device=device)
    y, x = torch.meshgrid(coords, coords, indexing="ij")     # x along columns, y along rows
    return x, y


def gaussian_derivative(theta: float, *, size: int = 31, extent: float = 3.0,
                        dtype: torch.dtype = torch.float64, device="cpu") -> torch.Tensor:
    """The derivative of G = exp(-(x² + y²)) in the direction (cos θ, sin θ), sampled on size x size
    points of [-extent, extent]²: -2 (x cos θ + y sin θ) G (Chapter 5)."""
    theta = check_float("theta", theta)
    size = check_int("size", size, minimum=1)
    extent = check_float("extent", extent, low=0.0, low_open=True)
    x, y = _grid(size, extent, check_dtype("dtype", dtype), check_device("device", device))
    return -2 * (x * math.cos(theta) + y * math.sin(theta)) * torch.exp(-(x**2 + y**2))


def steerable_basis(*, size: int = 31, extent: float = 3.0, dtype: torch.dtype = torch.float64,
                    device="cpu") -> SteerableBasis:
    """G_1^0 = -2x G and G_1^90 = -2y G on the grid of :func:`gaussian_derivative` (Chapter 5)."""
    return SteerableBasis(gaussian_derivative(0.0, size=size, extent=extent, dtype=dtype, device=device),
                          gaussian_derivative(math.pi / 2, size=size, extent=extent, dtype=dtype, device=device))


def steer(basis0, basis90, theta: float) -> torch.Tensor:
    """cos θ · basis0 + sin θ · basis90: a filter, or a response, steered to angle θ (Chapter 5)."""
    basis0 = as_tensor("basis0", basis0, floating=True)
    basis90 = as_tensor("basis90", basis90, floating=True)
    if basis0.shape != basis90.shape:
        raise ValueError(f"basis0 and basis90 must have the same shape, got {tuple(basis0.shape)} "
                         f"and {tuple(basis90.shape)}")
    theta = check_float("theta", theta)
    return math.cos(theta) * basis0 + math.sin(theta) * basis90


def filter_image(image, kernel, *, stride: int = 1, padding: int = 0) -> torch.Tensor:
    """Cross-correlate a grey image (H, W) with a kernel (kh, kw), zero padding, by :func:`dlbook.conv.conv2d`
    (Chapter 5)."""
    from .conv import conv2d

    image = as_tensor("image", image, ndim=2, floating=True)
    kernel = as_tensor("kernel", kernel, ndim=2, floating=True).to(image.dtype)
    return conv2d(image[None, None], kernel[None, None], stride=stride, padding=padding)[0, 0]
