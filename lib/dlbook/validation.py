"""Argument checks shared by every public function of dlbook.

Each helper raises ``TypeError`` or ``ValueError`` with a message that names
the argument, says what was expected and shows what was given, so that a
reader never meets a deep traceback from inside torch. This is the only place
argument checks are written: a module that needs a new kind of check adds it
here.

Wrong kind of value (a string for a number, an int tensor where floats are
needed) raises ``TypeError``; a value of the right kind that is out of range
or of the wrong shape raises ``ValueError``.
"""
from __future__ import annotations

import numbers

import numpy as np
import torch


def describe(value) -> str:
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
        raise TypeError(f"{name} must be an integer, got {describe(value)}")
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
        raise TypeError(f"{name} must be a real number, got {describe(value)}")
    value = float(value)
    if not np.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    if low is not None and (value < low or (low_open and value == low)):
        raise ValueError(f"{name} must be {'>' if low_open else '>='} {low}, got {value}")
    if high is not None and (value > high or (high_open and value == high)):
        raise ValueError(f"{name} must be {'<' if high_open else '<='} {high}, got {value}")
    return value


def check_interval(low, high, *, names: tuple[str, str] = ("low", "high")) -> tuple[float, float]:
    """Return the ends of an interval as finite floats, after checking that low < high."""
    low, high = check_float(names[0], low), check_float(names[1], high)
    if not low < high:
        raise ValueError(f"{names[0]} must be smaller than {names[1]}, got {names[0]}={low}, {names[1]}={high}")
    return low, high


def check_choice(name: str, value, choices):
    """Return ``value`` if it is one of ``choices``."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {list(choices)}, got {value!r}")
    return value


def check_bool(name: str, value) -> bool:
    """Return ``value`` if it is True or False (not 0, 1 or None)."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {describe(value)}")
    return bool(value)


def check_dtype(name: str, dtype) -> torch.dtype:
    """Return ``dtype`` if it is a floating torch.dtype (float16/32/64, bfloat16)."""
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"{name} must be a floating torch.dtype such as torch.float32, got {dtype!r}")
    return dtype


def check_device(name: str, device) -> torch.device:
    """Return ``device`` as a torch.device (accepts 'cpu', 'cuda:0', torch.device)."""
    if isinstance(device, torch.device):
        return device
    try:
        return torch.device(device)
    except (TypeError, RuntimeError) as err:
        raise TypeError(f"{name} must be a torch.device or a string such as 'cpu', "
                        f"got {describe(device)}") from err


def check_ints(name: str, values, *, minimum: int | None = None, min_length: int = 1) -> list[int]:
    """Return a list or tuple of integers (each >= ``minimum``) as a list.

    A single integer is not accepted: write ``(64,)`` for one layer.
    """
    if isinstance(values, (torch.Tensor, np.ndarray)):
        values = values.tolist()
    if not isinstance(values, (list, tuple)):
        raise TypeError(f"{name} must be a list or tuple of integers, got {describe(values)}")
    if len(values) < min_length:
        raise ValueError(f"{name} must have at least {min_length} entries, got {len(values)}")
    return [check_int(f"{name}[{i}]", v, minimum=minimum) for i, v in enumerate(values)]


def check_sequence(name: str, values, check, *, length: int | None = None, **limits) -> list:
    """Check every entry of a non-empty list or tuple with ``check(name[i], entry, **limits)``.

    With ``length`` the sequence must have exactly that many entries.
    """
    if isinstance(values, (str, bytes)) or not isinstance(values, (list, tuple, np.ndarray, range)):
        raise TypeError(f"{name} must be a list or tuple, got {describe(values)}")
    if len(values) == 0:
        raise ValueError(f"{name} must not be empty")
    if length is not None and len(values) != length:
        raise ValueError(f"{name} must have {length} entries, got {len(values)}")
    return [check(f"{name}[{i}]", v, **limits) for i, v in enumerate(values)]


def as_tensor(name: str, value, *, ndim: int | None = None, shape: tuple | None = None,
              floating: bool = False, dtype: torch.dtype | None = None,
              device=None) -> torch.Tensor:
    """Convert an array-like to a tensor, checking its dimensions, shape and dtype.

    Accepts tensors, numpy arrays and nested lists of numbers; keeps the dtype
    of tensors and arrays. ``shape`` may hold None for a free size, e.g.
    ``(None, 3)``. ``floating=True`` rejects integer and bool tensors (which
    would otherwise be silently truncated by later arithmetic).
    """
    if isinstance(value, torch.Tensor):
        tensor = value
    elif isinstance(value, (np.ndarray, list, tuple)):
        try:
            tensor = torch.as_tensor(np.asarray(value))
        except (TypeError, ValueError) as err:
            raise TypeError(f"{name} must be numeric array-like, got {describe(value)}") from err
    else:
        raise TypeError(f"{name} must be a tensor, array or list, got {describe(value)}")
    if tensor.is_complex():
        raise TypeError(f"{name} must hold real numbers, got {describe(value)}")
    if ndim is not None and tensor.dim() != ndim:
        raise ValueError(f"{name} must have {ndim} dimension(s), got {describe(tensor)}")
    if shape is not None and (tensor.dim() != len(shape) or any(
            want is not None and have != want for have, want in zip(tensor.shape, shape))):
        wanted = "(" + ", ".join("any" if s is None else str(s) for s in shape) + ")"
        raise ValueError(f"{name} must have shape {wanted}, got {describe(tensor)}")
    if floating and not tensor.is_floating_point():
        raise TypeError(f"{name} must hold floating-point numbers, got {describe(tensor)}")
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


def check_values_in(name: str, tensor: torch.Tensor, allowed: tuple) -> torch.Tensor:
    """Check that every entry of a tensor is one of ``allowed``, e.g. binary inputs (0, 1) or
    Hopfield states (-1, 1)."""
    inside = torch.zeros(tensor.shape, dtype=torch.bool, device=tensor.device)
    for value in allowed:
        inside |= tensor == value
    if not torch.all(inside):
        bad = tensor[~inside][:3].tolist()
        wanted = ", ".join(f"{value:g}" for value in allowed[:-1]) + f" or {allowed[-1]:g}"
        raise ValueError(f"{name} must contain only {wanted}, found values such as {bad}")
    return tensor


def check_class_indices(name: str, y, num_classes: int) -> torch.Tensor:
    """A vector of integer class indices in 0..num_classes-1 (the targets of a cross-entropy)."""
    y = as_tensor(name, y, ndim=1)
    if y.is_floating_point() or y.dtype == torch.bool:
        raise TypeError(f"{name} must hold integer class indices, got {describe(y)}")
    if len(y) and (y.min() < 0 or y.max() >= num_classes):
        raise ValueError(f"{name} must lie in 0..{num_classes - 1}, got values in "
                         f"{y.min().item()}..{y.max().item()}")
    return y.long()


def check_same_length(name_a: str, a, name_b: str, b) -> None:
    """Check that two tensors have the same first dimension."""
    if len(a) != len(b):
        raise ValueError(f"{name_a} and {name_b} must have the same number of rows, "
                         f"got {len(a)} and {len(b)}")


def check_same_shape(name_a: str, a: torch.Tensor, name_b: str, b: torch.Tensor) -> None:
    """Check that two tensors have the same shape."""
    if tuple(a.shape) != tuple(b.shape):
        raise ValueError(f"{name_a} and {name_b} must have the same shape, "
                         f"got {tuple(a.shape)} and {tuple(b.shape)}")


def check_square(name: str, value, *, symmetric: bool = False, floating: bool = True) -> torch.Tensor:
    """A square matrix as a tensor; with ``symmetric`` it must equal its transpose (to rounding)."""
    A = as_tensor(name, value, ndim=2, floating=floating)
    if A.shape[0] != A.shape[1]:
        raise ValueError(f"{name} must be a square matrix, got {describe(A)}")
    # Symmetric up to rounding: products such as R C R of an ill-conditioned C lose
    # symmetry in their last digits, so allow sqrt(eps) of the largest entry.
    if symmetric and (A - A.T).abs().max() > torch.finfo(A.dtype).eps ** 0.5 * A.abs().max():
        raise ValueError(f"{name} must be symmetric")
    return A


def check_broadcastable(name_a: str, shape_a, name_b: str, shape_b) -> tuple[int, ...]:
    """The broadcast shape of two shapes, or ValueError naming both arguments."""
    try:
        return tuple(torch.broadcast_shapes(tuple(shape_a), tuple(shape_b)))
    except RuntimeError:
        raise ValueError(f"{name_a} of shape {tuple(shape_a)} and {name_b} of shape "
                         f"{tuple(shape_b)} do not broadcast") from None
