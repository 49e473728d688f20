"""Checks for the exercises of chapter 5 (05_cnn): the receptive field of a stack of layers, the
operator norm of a circular convolution predicted from its kernels, a lifting layer for p4m
(rotations and reflections), and a steerable second derivative of a Gaussian.

Every expected value comes from independent code here: receptive fields and operator norms are
*measured* (the support of a gradient through a stack of F.conv2d layers; the singular values of
the layer's dense matrix, or power iteration with torch.autograd), the p4m layer is computed one
group element at a time with F.conv2d, and the second derivative is evaluated in closed form from
the Hessian of the Gaussian. Nothing calls dlbook.conv, dlbook.group_conv or dlbook.filters, so a
bug there cannot make a wrong answer pass. The student's functions receive and return plain values
only (lists, numbers, tensors).
"""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from ..core import Mismatch, as_array, as_float, as_int, describe, exercise, expect, expect_close

# ---------------------------------------------------------------------------
# Exercise 5.1: the receptive field of a stack of layers
# ---------------------------------------------------------------------------


def _measured_field(kernel_sizes, strides, dilations) -> int:
    """Rows of the input on which one output of the stack depends: the support of a gradient."""
    span, jump = 1, 1
    for k, s, d in zip(kernel_sizes, strides, dilations):      # only to size the input generously
        span, jump = span + d * (k - 1) * jump, jump * s
    size = 2 * span + 4 * jump + 8
    x = torch.zeros(1, 1, size, 1, dtype=torch.float64, requires_grad=True)
    h = x
    for k, s, d in zip(kernel_sizes, strides, dilations):
        h = F.conv2d(h, torch.ones(1, 1, k, 1, dtype=torch.float64), stride=(s, 1), dilation=(d, 1))
    (grad,) = torch.autograd.grad(h[0, 0, h.shape[2] // 2, 0], x)
    rows = torch.nonzero(grad[0, 0, :, 0])[:, 0]
    return int(rows.max() - rows.min() + 1)


_FIELD_CASES = [
    ("three 3 x 3 layers", [3, 3, 3], [1, 1, 1], [1, 1, 1]),
    ("one 1 x 1 layer", [1], [1], [1]),
    ("a 7 x 7 layer with stride 2, then two 3 x 3 layers", [7, 3, 3], [2, 1, 1], [1, 1, 1]),
    ("3 x 3 layers with strides 2, 2, 1", [3, 3, 3], [2, 2, 1], [1, 1, 1]),
    ("dilations 1, 2, 4 (a WaveNet-style stack)", [3, 3, 3], [1, 1, 1], [1, 2, 4]),
    ("a stride on the last layer only", [3, 5], [1, 3], [1, 1]),
    ("strides and dilations mixed", [5, 3, 2, 3], [2, 1, 3, 1], [1, 3, 1, 2]),
    ("kernels of size 2 with stride 2 (patches)", [2, 2, 2, 2], [2, 2, 2, 2], [1, 1, 1, 1]),
]


@exercise("5.1", title="The receptive field of a stack of layers", function="receptive_field",
          kind="derive", difficulty=1, minutes=20, blocked=("dlbook.conv.receptive_field",),
          hint="follow one output back through the stack: a layer with kernel k and dilation d widens the "
               "window by d (k - 1) of its own input pixels, and one pixel of its input is as many input "
               "pixels of the network as the product of the strides of the layers below it.")
def check_receptive_field(receptive_field, cases):
    """Lists of kernel sizes, strides and dilations; compare with the measured support of a gradient."""
    for label, kernels, strides, dilations in _FIELD_CASES:
        with cases.case(f"receptive_field({kernels}, {strides}, {dilations}): {label}"):
            got = as_int(receptive_field(list(kernels), list(strides), list(dilations)), "an integer")
            expected = _measured_field(kernels, strides, dilations)
            if got != expected:
                raise Mismatch(f"{expected} (measured: one output depends on {expected} input pixels per "
                               f"direction)", describe(got))


# ---------------------------------------------------------------------------
# Exercise 5.2: predict the operator norm of a circular convolution layer
# ---------------------------------------------------------------------------


def _circular_layer(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    kh, kw = weight.shape[-2:]
    padded = F.pad(x, (kw // 2, kw // 2, kh // 2, kh // 2), mode="circular")
    return F.conv2d(padded, weight)


def _dense_norm(weight: torch.Tensor, size: int) -> float:
    """Largest singular value of the layer's matrix, built column by column."""
    c_in = weight.shape[1]
    basis = torch.eye(c_in * size * size, dtype=torch.float64).reshape(-1, c_in, size, size)
    matrix = _circular_layer(basis, weight).reshape(len(basis), -1).T
    return float(np.linalg.svd(matrix.numpy(), compute_uv=False)[0])


def _power_norm(weight: torch.Tensor, size: int, steps: int = 400) -> float:
    """Power iteration on AᵀA, the adjoint by autograd: |Av| for a unit v, a lower bound on the norm."""
    v = torch.randn(1, weight.shape[1], size, size, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    for _ in range(steps):
        v = (v / v.norm()).requires_grad_()
        out = _circular_layer(v, weight)
        (v,) = torch.autograd.grad(out, v, out)
    v = v / v.norm()
    return _circular_layer(v, weight).norm().item()


def _kernel(shape, seed: int, *, positive: bool = False) -> torch.Tensor:
    weight = torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return weight.abs() if positive else weight


_NORM_CASES = [
    ("one channel, a 3 x 3 kernel, 8 x 8 images", (1, 1, 3, 3), 8, False),
    ("3 input and 4 output channels, 10 x 10 images", (4, 3, 3, 3), 10, False),
    ("2 input and 5 output channels, 5 x 5 kernels, 7 x 7 images", (5, 2, 5, 5), 7, False),
    ("a non-negative kernel (its norm is the sum of its weights)", (1, 1, 3, 3), 6, True),
    ("4 input and 2 output channels, a 1 x 3 kernel, 9 x 9 images", (2, 4, 1, 3), 9, False),
]


@exercise("5.2", title="Predict the operator norm of a convolution layer", function="predicted_operator_norm",
          kind="predict", difficulty=2, minutes=35,
          blocked=("dlbook.conv.operator_norm", "dlbook.conv.operator_norm_fft", "dlbook.conv.conv_matrix"),
          hint="the 2-D DFT diagonalises every circular convolution: at each frequency of the size x size grid "
               "the layer multiplies the vector of the channels' coefficients by the C_out x C_in matrix of "
               "the kernels' transforms (padded to size x size). What is the norm of a block-diagonal matrix?")
def check_predicted_operator_norm(predicted_operator_norm, cases):
    """Kernels (C_out, C_in, kh, kw), float64, and an image size; compare with a measured norm."""
    for index, (label, shape, size, positive) in enumerate(_NORM_CASES):
        weight = _kernel(shape, 10 + index, positive=positive)
        with cases.case(f"predicted_operator_norm(weight {tuple(shape)}, size={size}): {label}"):
            got = as_float(predicted_operator_norm(weight.clone(), size), "a number")
            expected = _dense_norm(weight, size)
            expect_close(got, expected, rtol=1e-8)
    weight = _kernel((4, 4, 3, 3), 30)
    with cases.case("predicted_operator_norm(weight (4, 4, 3, 3), size=64): a 16384 x 16384 matrix", time_limit=1.0,
                    why="predict the norm from the kernels; do not build or iterate the layer"):
        answer = predicted_operator_norm(weight.clone(), 64)
    with cases.case("the prediction for that layer, against 50 steps of power iteration (a lower bound)"):
        got, measured = as_float(answer, "a number"), _power_norm(weight, 64, steps=50)
        expect(measured * (1 - 1e-9) <= got <= 1.02 * measured,
               f"at least the stretch |Av|/|v| = {measured:.8g} that power iteration measured, and within 2% "
               f"of it", f"{got:.8g}")


# ---------------------------------------------------------------------------
# Exercise 5.3: a lifting layer for p4m
# ---------------------------------------------------------------------------


def _p4m_reference(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """out[:, o, 4 m + r] = x ⋆ rot90(flip^m(weight[o]), r), one F.conv2d per group element."""
    padding = weight.shape[-1] // 2
    maps = []
    for m in range(2):
        mirrored = torch.flip(weight, dims=(-1,)) if m else weight
        for r in range(4):
            maps.append(F.conv2d(x, torch.rot90(mirrored, r, dims=(-2, -1)), padding=padding))
    return torch.stack(maps, dim=2)


_P4M_CASES = [
    ("1 input and 2 output channels, 3 x 3 kernels, 6 x 6 images", (2, 1, 3, 3), (2, 1, 6, 6)),
    ("3 input and 4 output channels, 3 x 3 kernels, 9 x 9 images", (4, 3, 3, 3), (3, 3, 9, 9)),
    ("2 input and 1 output channel, 5 x 5 kernels, 8 x 8 images", (1, 2, 5, 5), (1, 2, 8, 8)),
    ("a kernel that is symmetric under the flip", (2, 2, 3, 3), (2, 2, 7, 7)),
]


@exercise("5.3", title="A lifting layer for p4m: rotations and reflections", function="p4m_lifting_conv",
          kind="extend", difficulty=3, minutes=50,
          blocked=("dlbook.group_conv.lifting_conv", "dlbook.group_conv.lifting_filter_bank",
                   "dlbook.group_conv.lifting_conv_by_sum"),
          hint="build a bank of 8 C_out filters, rot90(flip^m(w), r) for m = 0, 1 and r = 0..3 (flip first, "
               "then rotate), call F.conv2d once with 'same' padding, and reshape the output channels to "
               "(C_out, 8) with the group index 4 m + r.")
def check_p4m_lifting_conv(p4m_lifting_conv, cases):
    """Images (N, C_in, H, H) and kernels (C_out, C_in, k, k), float64; compare with the definition."""
    for index, (label, w_shape, x_shape) in enumerate(_P4M_CASES):
        gen = torch.Generator().manual_seed(40 + index)
        weight = torch.randn(*w_shape, generator=gen, dtype=torch.float64)
        if "symmetric" in label:
            weight = weight + torch.flip(weight, dims=(-1,))
        x = torch.randn(*x_shape, generator=gen, dtype=torch.float64)
        expected = _p4m_reference(x, weight).numpy()
        with cases.case(f"p4m_lifting_conv(x {tuple(x_shape)}, weight {tuple(w_shape)}): {label}"):
            got = as_array(p4m_lifting_conv(x.clone(), weight.clone()), expected.shape)
            error = np.abs(got - expected)
            worst = np.unravel_index(np.argmax(error), error.shape)
            expect(error.max() <= 1e-10,
                   f"the correlation with rot90(flip^m(w), r) in slot 4 m + r; at (n, o, g, i, j) = "
                   f"{tuple(int(i) for i in worst)} {expected[worst]:.6g}", f"{got[worst]:.6g}")
    gen = torch.Generator().manual_seed(50)
    weight = torch.randn(3, 1, 3, 3, generator=gen, dtype=torch.float64)
    x = torch.randn(2, 1, 7, 7, generator=gen, dtype=torch.float64)
    with cases.case("equivariance: flipping the input flips every map and permutes the group axis as "
                    "(m, r) -> (1 - m, -r)"):
        out = torch.as_tensor(as_array(p4m_lifting_conv(x.clone(), weight.clone()), (2, 3, 8, 7, 7)))
        flipped = torch.as_tensor(as_array(p4m_lifting_conv(torch.flip(x, dims=(-1,)), weight.clone()),
                                           (2, 3, 8, 7, 7)))
        order = [4 * (1 - m) + (-r) % 4 for m in range(2) for r in range(4)]
        expected = torch.flip(out, dims=(-1,))[:, :, order]
        expect(bool((flipped - expected).abs().max() <= 1e-10),
               "f(flip x) equal to the flipped, permuted f(x) to 1e-10",
               f"a largest difference of {(flipped - expected).abs().max().item():.3g}")


# ---------------------------------------------------------------------------
# Exercise 5.4: a steerable second derivative
# ---------------------------------------------------------------------------


def _gaussian_second_derivatives(size: int, extent: float = 3.0):
    coords = np.linspace(-extent, extent, size)
    y, x = np.meshgrid(coords, coords, indexing="ij")
    g = np.exp(-(x**2 + y**2))
    return x, y, g, (4 * x**2 - 2) * g, 4 * x * y * g, (4 * y**2 - 2) * g


def _directional_second_derivative(x, y, g, theta: float) -> np.ndarray:
    """u^T H u for u = (cos θ, sin θ): (4 (u·p)² - 2) G, from the Hessian of G = exp(-|p|²)."""
    along = x * math.cos(theta) + y * math.sin(theta)
    return (4 * along**2 - 2) * g


@exercise("5.4", title="A steerable second derivative", function="steer_second_derivative",
          kind="derive", difficulty=2, minutes=25,
          blocked=("dlbook.filters.steer", "dlbook.filters.gaussian_derivative"),
          hint="the second derivative along u = (cos θ, sin θ) is uᵀ H u, with H the matrix of second "
               "derivatives; expand it in the three distinct entries of H.")
def check_steer_second_derivative(steer_second_derivative, cases):
    """Basis filters G_xx, G_xy, G_yy (float64 arrays) and an angle; compare with the closed form."""
    for size, theta in [(31, 0.7), (31, 0.0), (21, math.pi / 2), (15, -2.3), (9, 7.5), (25, math.pi / 4)]:
        x, y, g, gxx, gxy, gyy = _gaussian_second_derivatives(size)
        expected = _directional_second_derivative(x, y, g, theta)
        with cases.case(f"steer_second_derivative(G_xx, G_xy, G_yy, theta={theta:g}) on a {size} x {size} grid"):
            got = as_array(steer_second_derivative(torch.tensor(gxx), torch.tensor(gxy), torch.tensor(gyy), theta),
                           (size, size))
            error = np.abs(got - expected).max()
            expect(error <= 1e-12, "the second derivative along (cos θ, sin θ) to 1e-12",
                   f"a largest difference of {error:.3g}")
    gen = np.random.default_rng(3)
    a, b, c = (gen.normal(size=(4, 5)) for _ in range(3))
    with cases.case("the same combination applied to responses (three random 4 x 5 arrays), theta = 1.1"):
        got = as_array(steer_second_derivative(torch.tensor(a), torch.tensor(b), torch.tensor(c), 1.1), (4, 5))
        expected = math.cos(1.1) ** 2 * a + 2 * math.cos(1.1) * math.sin(1.1) * b + math.sin(1.1) ** 2 * c
        error = np.abs(got - expected).max()
        expect(error <= 1e-12, "a linear combination of the three inputs whose weights depend on theta only",
               f"a largest difference of {error:.3g}")
