"""Weight quantization: uniform symmetric b-bit rounding, binary and ternary weights (Chapter 15).

A uniform quantizer with step ``scale`` (Δ) maps x to Δ·clamp(round(x/Δ), q_min, q_max), so
each value moves by at most Δ/2 unless it is clipped, and for values spread over many steps
the rounding error is close to uniform on [-Δ/2, Δ/2], with mean square Δ²/12. The
symmetric quantizer has zero point 0 and the restricted integer range
[-(2^(b-1) - 1), 2^(b-1) - 1], so +x and -x are represented alike. Binary weights
(BinaryConnect/BWN) keep only a·sign(w); ternary weights (TWN) also allow 0. The functions
keep the dtype of their input; the tests compare them in float64.
"""
from __future__ import annotations

from typing import NamedTuple

import torch

from .nets import linear_layers
from .validation import as_tensor, check_finite, check_float, check_int, check_same_shape, describe


class ScaledSigns(NamedTuple):
    """Weights approximated as ``scale * codes`` with codes in {-1, 1} or {-1, 0, 1} (Chapter 15)."""
    scale: torch.Tensor       # 0-dim, the factor a
    codes: torch.Tensor       # same shape as the weights
    threshold: torch.Tensor   # 0-dim; 0 for binary weights

    def weights(self) -> torch.Tensor:
        """The quantized weights a · codes."""
        return self.scale * self.codes


def _weights(name: str, w) -> torch.Tensor:
    w = check_finite(name, as_tensor(name, w, floating=True))
    if w.numel() == 0:
        raise ValueError(f"{name} must not be empty")
    return w


def integer_range(num_bits: int) -> tuple[int, int]:
    """The restricted symmetric range (-(2^(b-1) - 1), 2^(b-1) - 1) of a b-bit quantizer (Chapter 15)."""
    num_bits = check_int("num_bits", num_bits, minimum=2, maximum=16)
    top = 2 ** (num_bits - 1) - 1
    return -top, top


def symmetric_scale(w, num_bits: int) -> float:
    """The step Δ = max|w| / (2^(b-1) - 1) that maps the largest weight onto the top level (Chapter 15)."""
    w = _weights("w", w)
    _, top = integer_range(num_bits)
    largest = float(w.abs().max())
    if largest == 0.0:
        raise ValueError("w must have a nonzero entry to set a quantization scale")
    return largest / top


def quantize_uniform(w, num_bits: int, scale: float | None = None) -> torch.Tensor:
    """Uniform symmetric b-bit quantization Δ·clamp(round(w/Δ), -(2^(b-1)-1), 2^(b-1)-1) (Chapter 15).

    ``scale`` defaults to :func:`symmetric_scale`, which clips nothing; a smaller scale clips
    the largest weights. Rounding is half to even, and w/Δ is computed as w·(1/Δ), both as
    ``torch.fake_quantize_per_tensor_affine`` does: the two agree exactly in float32 (torch
    multiplies back in float32 even for float64 input, so there only the levels agree).
    """
    w = _weights("w", w)
    scale = symmetric_scale(w, num_bits) if scale is None else check_float("scale", scale, low=0.0, low_open=True)
    return quantization_codes(w, num_bits, scale) * scale


def quantization_codes(w, num_bits: int, scale: float) -> torch.Tensor:
    """The integer levels clamp(round(w/Δ), -(2^(b-1)-1), 2^(b-1)-1), stored in w's dtype (Chapter 15)."""
    w = _weights("w", w)
    low, high = integer_range(num_bits)
    scale = check_float("scale", scale, low=0.0, low_open=True)
    return torch.clamp(torch.round(w * (1.0 / scale)), low, high)


def uniform_noise_mse(scale: float) -> float:
    """Mean square rounding error Δ²/12 of a uniform quantizer without clipping (Chapter 15)."""
    scale = check_float("scale", scale, low=0.0, low_open=True)
    return scale ** 2 / 12


def binary_weights(w, importance=None) -> ScaledSigns:
    """Binary weights a·sign(w) with the optimal a = Σ d_i|w_i| / Σ d_i (Chapter 15).

    The factor minimises Σ d_i (w_i - a·b_i)² over a for b = sign(w) (sign(0) taken as +1);
    without ``importance`` (d_i = 1) it is the BWN factor ‖w‖₁/n.
    """
    w = _weights("w", w)
    if importance is None:
        d = torch.ones_like(w)
    else:
        d = check_finite("importance", as_tensor("importance", importance, floating=True)).to(w)
        check_same_shape("importance", d, "w", w)
        if (d < 0).any() or d.sum() <= 0:
            raise ValueError("importance must be nonnegative with a positive sum")
    codes = torch.where(w >= 0, 1.0, -1.0).to(w)
    scale = (d * w.abs()).sum() / d.sum()
    return ScaledSigns(scale, codes, torch.zeros((), dtype=w.dtype, device=w.device))


def ternary_weights(w, threshold_factor: float = 0.7) -> ScaledSigns:
    """Ternary weights (TWN): codes sign(w)·[|w| > t] with t = threshold_factor·mean|w| (Chapter 15).

    The scale is the mean |w_i| over the entries above the threshold, the least-squares
    factor for those codes; 0.7·E|w| is TWN's approximation of the optimal threshold.
    """
    w = _weights("w", w)
    threshold_factor = check_float("threshold_factor", threshold_factor, low=0.0)
    threshold = threshold_factor * w.abs().mean()
    kept = w.abs() > threshold
    if not kept.any():
        raise ValueError(f"threshold_factor={threshold_factor} leaves no weight above the threshold")
    codes = torch.sign(w) * kept
    scale = w.abs()[kept].mean()
    return ScaledSigns(scale, codes.to(w), threshold)


def quantize_model(model: torch.nn.Module, num_bits: int) -> torch.nn.Module:
    """Quantize every nn.Linear weight of ``model`` in place, each with its own symmetric scale (Chapter 15).

    Biases stay in full precision, as in most integer kernels. Returns the model.
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {describe(model)}")
    integer_range(num_bits)
    with torch.no_grad():
        for linear in linear_layers(model):
            linear.weight.copy_(quantize_uniform(linear.weight, num_bits))
    return model
