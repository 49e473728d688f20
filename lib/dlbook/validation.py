"""Argument checks shared by every public function of dlbook.

Each helper raises ``TypeError`` or ``ValueError`` with a message that names
the argument, says what was expected and shows what was given, so that a
reader never meets a deep traceback from inside torch.
"""
from __future__ import annotations

import numbers

import numpy as np
import torch


def _describe(value) -> str:
    """Short description of a value for error messages."""
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)} and dtype {value.dtype}"
    if isinstance(value, np.ndarray):
        return f"an array of shape {value.shape} and dtype {value.dtype}"
    text = repr(value)
    return f"{text[:60]}{'...' if len(text) > 60 else ''} ({type(value).__name__})"


def check_int(name: str, value, *, minimum: int | None = None,
              maximum: int | None = None) -> int:
    """Return ``value`` as an int after checking its type and bounds."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {_describe(value)}")
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {value}")
    return value


def check_float(name: str, value, *, low: float | None = None,
                high: float | None = None, low_open: bool = False,
                high_open: bool = False) -> float:
    """Return ``value`` as a finite float inside the given (half-)open range."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {_describe(value)}")
    value = float(value)
    if not np.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    if low is not None and (value < low or (low_open and value == low)):
        raise ValueError(f"{name} must be {'>' if low_open else '>='} {low}, got {value}")
    if high is not None and (value > high or (high_open and value == high)):
        raise ValueError(f"{name} must be {'<' if high_open else '<='} {high}, got {value}")
    return value


def check_choice(name: str, value, choices):
    """Return ``value`` if it is one of ``choices``."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {list(choices)}, got {value!r}")
    return value


def as_tensor(name: str, value, *, ndim: int | None = None,
              dtype: torch.dtype | None = None, device=None) -> torch.Tensor:
    """Convert an array-like to a tensor, checking its number of dimensions.

    Accepts tensors, numpy arrays and nested lists of numbers. Floating dtype
    defaults to float32 for lists and keeps the dtype of tensors and arrays.
    """
    if isinstance(value, torch.Tensor):
        tensor = value
    elif isinstance(value, (np.ndarray, list, tuple)):
        try:
            tensor = torch.as_tensor(np.asarray(value))
        except (TypeError, ValueError) as err:
            raise TypeError(f"{name} must be numeric array-like, got {_describe(value)}") from err
    else:
        raise TypeError(f"{name} must be a tensor, array or list, got {_describe(value)}")
    if tensor.is_complex():
        raise TypeError(f"{name} must hold real numbers, got {_describe(value)}")
    if ndim is not None and tensor.dim() != ndim:
        raise ValueError(f"{name} must have {ndim} dimension(s), got {_describe(tensor)}")
    if dtype is not None or device is not None:
        tensor = tensor.to(dtype=dtype or tensor.dtype, device=device or tensor.device)
    return tensor


def check_finite(name: str, tensor: torch.Tensor) -> torch.Tensor:
    """Raise if a tensor holds NaN or infinity."""
    if tensor.is_floating_point() and not torch.isfinite(tensor).all():
        raise ValueError(f"{name} must be finite, but it contains NaN or infinity")
    return tensor


def check_labels_pm1(name: str, y: torch.Tensor) -> torch.Tensor:
    """Check that a label vector holds only -1 and +1."""
    if not torch.all((y == 1) | (y == -1)):
        bad = y[(y != 1) & (y != -1)][:3].tolist()
        raise ValueError(f"{name} must contain only -1 and +1, found values such as {bad}")
    return y


def check_same_length(name_a: str, a, name_b: str, b) -> None:
    """Check that two tensors have the same first dimension."""
    if len(a) != len(b):
        raise ValueError(f"{name_a} and {name_b} must have the same number of rows, "
                         f"got {len(a)} and {len(b)}")
