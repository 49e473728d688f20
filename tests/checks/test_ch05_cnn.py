"""Checks of chapter 5's exercises: reference solutions pass, plausible wrong answers fail, bad answers fail cleanly."""
from __future__ import annotations

import math
import time

import numpy as np
import torch
import torch.nn.functional as F

import dlbook.exercises.checks.ch05_cnn as cnn_checks
from dlbook import conv, filters, group_conv
from dlbook.exercises import run_check
from dlbook.exercises.core import machine_load_factor

from exercise_contract import bad_types

IDS = ("5.1", "5.2", "5.3", "5.4")
MIN_CASES = 5


# ---------------------------------------------------------------------------
# Reference solutions (independent of the chapter's modules)
# ---------------------------------------------------------------------------

def receptive_field(kernel_sizes, strides, dilations):
    """r = 1 + sum_l d_l (k_l - 1) prod_{j<l} s_j."""
    field, jump = 1, 1
    for k, s, d in zip(kernel_sizes, strides, dilations):
        field += d * (k - 1) * jump
        jump *= s
    return field


def receptive_field_backwards(kernel_sizes, strides, dilations):
    """From the output down: a window of w pixels needs (w - 1) s + d (k - 1) + 1 below it."""
    width = 1
    for k, s, d in reversed(list(zip(kernel_sizes, strides, dilations))):
        width = (width - 1) * s + d * (k - 1) + 1
    return width


def predicted_operator_norm(weight, size):
    """The largest spectral norm of the C_out x C_in transfer matrices over the size x size frequencies."""
    transfer = torch.fft.fft2(weight, s=(size, size))
    return torch.linalg.matrix_norm(transfer.permute(2, 3, 0, 1), ord=2).max().item()


def predicted_operator_norm_numpy(weight, size):
    """The same with NumPy, the SVD of every frequency's matrix."""
    transfer = np.fft.fft2(np.asarray(weight), s=(size, size))
    return float(np.linalg.svd(np.moveaxis(transfer, (0, 1), (2, 3)), compute_uv=False).max())


def p4m_lifting_conv(x, weight):
    """One conv2d on the bank rot90(flip^m(w), r), ordered (output channel, 4 m + r)."""
    mirrored = [weight, torch.flip(weight, dims=(-1,))]
    bank = torch.stack([torch.rot90(w, r, dims=(-2, -1)) for w in mirrored for r in range(4)], dim=1)
    c_out, c_in, k, _ = weight.shape
    out = F.conv2d(x, bank.reshape(8 * c_out, c_in, k, k), padding=k // 2)
    return out.reshape(len(x), c_out, 8, *out.shape[-2:])


def p4m_lifting_conv_by_loops(x, weight):
    """Eight planar correlations, each filter transformed by hand with index arithmetic."""
    k = weight.shape[-1]
    maps = []
    for m in range(2):
        for r in range(4):
            w = weight
            if m:
                w = w[..., torch.arange(k - 1, -1, -1)]
            for _ in range(r):
                w = w.transpose(-2, -1)[..., torch.arange(k - 1, -1, -1), :]   # one counterclockwise turn
            maps.append(F.conv2d(x, w, padding=k // 2))
    return torch.stack(maps, dim=2)


def steer_second_derivative(gxx, gxy, gyy, theta):
    c, s = math.cos(theta), math.sin(theta)
    return c * c * gxx + 2 * c * s * gxy + s * s * gyy


def steer_second_derivative_double_angle(gxx, gxy, gyy, theta):
    """The same in double-angle form: (gxx + gyy)/2 + cos 2θ (gxx - gyy)/2 + sin 2θ gxy."""
    return (gxx + gyy) / 2 + math.cos(2 * theta) * (gxx - gyy) / 2 + math.sin(2 * theta) * gxy


REFERENCES = {
    "5.1": [receptive_field, receptive_field_backwards],
    "5.2": [predicted_operator_norm, predicted_operator_norm_numpy],
    "5.3": [p4m_lifting_conv, p4m_lifting_conv_by_loops],
    "5.4": [steer_second_derivative, steer_second_derivative_double_angle],
}


# ---------------------------------------------------------------------------
# Plausible wrong answers
# ---------------------------------------------------------------------------

def field_by_the_library(kernel_sizes, strides, dilations):
    return conv.receptive_field(kernel_sizes, strides, dilations)


def field_ignoring_strides(kernel_sizes, strides, dilations):
    return 1 + sum(d * (k - 1) for k, d in zip(kernel_sizes, dilations))


def field_with_own_stride(kernel_sizes, strides, dilations):
    """Multiplies each layer's growth by its own stride too."""
    field, jump = 1, 1
    for k, s, d in zip(kernel_sizes, strides, dilations):
        jump *= s
        field += d * (k - 1) * jump
    return field


def field_ignoring_dilation(kernel_sizes, strides, dilations):
    return receptive_field(kernel_sizes, strides, [1] * len(dilations))


def norm_by_the_library(weight, size):
    return conv.operator_norm_fft(weight, size)


def norm_on_the_kernel_grid(weight, size):
    """The FFT at the kernel's own size: too few frequencies."""
    return predicted_operator_norm(weight, weight.shape[-1])


def norm_by_the_triangle_inequality(weight, size):
    """An upper bound, not the norm: the sum of |weights| per (output, input) pair, then the matrix norm."""
    return torch.linalg.matrix_norm(weight.abs().sum(dim=(-2, -1)), ord=2).item()


def norm_channel_by_channel(weight, size):
    """The largest |transfer| of a single (output, input) pair: ignores the mixing of channels."""
    return torch.fft.fft2(weight, s=(size, size)).abs().max().item()


def norm_from_the_dense_matrix(weight, size):
    """Right, but builds the matrix: at size 64 that is a 16384 x 16384 SVD, minutes on any machine.

    Above size 16 the sleep stands in for those minutes (longer than the stretched limit), and the
    value comes from the kernels, so that only the time can fail the answer.
    """
    if size > 16:
        time.sleep(1.5 * machine_load_factor() + 0.5)
        return predicted_operator_norm(weight, size)
    c_in = weight.shape[1]
    basis = torch.eye(c_in * size * size, dtype=weight.dtype).reshape(-1, c_in, size, size)
    k = weight.shape[-1]
    images = F.conv2d(F.pad(basis, (k // 2, k // 2, weight.shape[-2] // 2, weight.shape[-2] // 2), mode="circular"),
                      weight)
    return torch.linalg.matrix_norm(images.reshape(len(basis), -1), ord=2).item()


def p4m_with_the_library(x, weight):
    """Two p4 lifting layers, one on the flipped filters: right, but the exercise blocks them."""
    return torch.cat([group_conv.lifting_conv(x, weight, padding=weight.shape[-1] // 2),
                      group_conv.lifting_conv(x, torch.flip(weight, dims=(-1,)), padding=weight.shape[-1] // 2)],
                     dim=2)


def p4m_rotate_then_flip(x, weight):
    maps = [F.conv2d(x, torch.flip(torch.rot90(weight, r, dims=(-2, -1)), dims=(-1,)) if m else
                     torch.rot90(weight, r, dims=(-2, -1)), padding=weight.shape[-1] // 2)
            for m in range(2) for r in range(4)]
    return torch.stack(maps, dim=2)


def p4m_flip_upside_down(x, weight):
    maps = [F.conv2d(x, torch.rot90(torch.flip(weight, dims=(-2,)) if m else weight, r, dims=(-2, -1)),
                     padding=weight.shape[-1] // 2) for m in range(2) for r in range(4)]
    return torch.stack(maps, dim=2)


def p4m_rotations_twice(x, weight):
    maps = [F.conv2d(x, torch.rot90(weight, r, dims=(-2, -1)), padding=weight.shape[-1] // 2)
            for _ in range(2) for r in range(4)]
    return torch.stack(maps, dim=2)


def p4m_group_axis_first(x, weight):
    """The enlarged bank ordered (group element, output channel): the channels come out interleaved."""
    mirrored = [weight, torch.flip(weight, dims=(-1,))]
    bank = torch.cat([torch.rot90(w, r, dims=(-2, -1)) for w in mirrored for r in range(4)], dim=0)
    c_out, c_in, k, _ = weight.shape
    out = F.conv2d(x, bank, padding=k // 2)
    return out.reshape(len(x), c_out, 8, *out.shape[-2:])


def steer_with_the_library(gxx, gxy, gyy, theta):
    """The first-derivative rule applied to the second derivatives."""
    return filters.steer(gxx, gyy, theta)


def steer_first_derivative_weights(gxx, gxy, gyy, theta):
    return math.cos(theta) * gxx + math.sin(theta) * gyy


def steer_without_the_two(gxx, gxy, gyy, theta):
    c, s = math.cos(theta), math.sin(theta)
    return c * c * gxx + c * s * gxy + s * s * gyy


def steer_half_angle(gxx, gxy, gyy, theta):
    return steer_second_derivative(gxx, gxy, gyy, theta / 2)


WRONG = {
    "5.1": {"dlbook.conv.receptive_field (blocked)": field_by_the_library,
            "strides ignored": field_ignoring_strides, "each layer's own stride counted": field_with_own_stride,
            "dilations ignored": field_ignoring_dilation},
    "5.2": {"dlbook.conv.operator_norm_fft (blocked)": norm_by_the_library,
            "FFT on the kernel's grid": norm_on_the_kernel_grid,
            "sum of |weights| per channel pair": norm_by_the_triangle_inequality,
            "largest single transfer function": norm_channel_by_channel,
            "right but too slow (dense matrix)": norm_from_the_dense_matrix},
    "5.3": {"two dlbook lifting layers (blocked)": p4m_with_the_library,
            "rotate, then flip": p4m_rotate_then_flip, "flipped upside down": p4m_flip_upside_down,
            "the rotations twice, no flip": p4m_rotations_twice, "group axis outermost": p4m_group_axis_first},
    "5.4": {"dlbook.filters.steer on G_xx and G_yy (blocked)": steer_with_the_library,
            "first-derivative weights": steer_first_derivative_weights,
            "cross term without the 2": steer_without_the_two,
            "half the angle": steer_half_angle},
}

BAD_TYPES = bad_types("raises ValueError", "stub", "returns None", "returns a string", "returns NaN")


# ---------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------



def test_a_dense_matrix_fails_on_time():
    result = run_check("5.2", norm_from_the_dense_matrix)
    assert not result.passed and "took" in result.message and "size=64" in result.message, result.message


def test_expected_values_are_right():
    # The measured receptive fields equal the library's formula, and the measured norms its FFT formula.
    for _, kernels, strides, dilations in cnn_checks._FIELD_CASES:
        assert cnn_checks._measured_field(kernels, strides, dilations) == conv.receptive_field(kernels, strides,
                                                                                                dilations)
    weight = torch.randn(3, 2, 3, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    assert abs(cnn_checks._dense_norm(weight, 8) - conv.operator_norm_fft(weight, 8)) < 1e-10
    assert abs(cnn_checks._power_norm(weight, 8) - conv.operator_norm_fft(weight, 8)) < 1e-6
    # The p4m reference restricted to m = 0 is the library's p4 lifting layer.
    x = torch.randn(2, 2, 7, 7, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    assert torch.allclose(cnn_checks._p4m_reference(x, weight)[:, :, :4], group_conv.lifting_conv(x, weight),
                          atol=1e-12)
    # The closed-form second derivative equals a finite-difference second derivative along theta.
    x_grid, y_grid, g, *_ = cnn_checks._gaussian_second_derivatives(11)
    theta, h = 0.9, 1e-4
    u = np.array([math.cos(theta), math.sin(theta)])

    def gaussian_at(offset):
        return np.exp(-((x_grid + offset * u[0]) ** 2 + (y_grid + offset * u[1]) ** 2))

    finite = (gaussian_at(h) - 2 * gaussian_at(0) + gaussian_at(-h)) / h**2
    assert np.abs(finite - cnn_checks._directional_second_derivative(x_grid, y_grid, g, theta)).max() < 1e-6
