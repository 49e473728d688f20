"""One inspector for equivariance and invariance, used from convolutions to graphs (Chapters 5 and 8).

A map f is equivariant to a group action if transforming the input and then
applying f gives the same as applying f and then transforming the output:
f(ρ_in(g) x) = ρ_out(g) f(x). It is invariant when ρ_out is the identity.
The functions here measure how far a map is from either, as a number a
checkpoint can assert (exactly zero for an exact symmetry in exact
arithmetic, rounding-sized in floating point, O(1) when the symmetry fails).
"""
from __future__ import annotations

from typing import Callable

import torch

from .validation import as_tensor, check_bool, describe


def _check_callable(name: str, value) -> Callable:
    if not callable(value):
        raise TypeError(f"{name} must be callable, got {describe(value)}")
    return value


def equivariance_error(f: Callable, act_in: Callable, act_out: Callable, x, *, relative: bool = True,
                       mask=None) -> float:
    """max |f(act_in(x)) - act_out(f(x))|, divided by max |act_out(f(x))| when ``relative`` (Chapter 5).

    ``mask`` (a boolean tensor broadcastable to the output) restricts the
    comparison, e.g. to the interior of an image away from zero-padded borders.
    """
    f, act_in, act_out = (_check_callable(n, v) for n, v in (("f", f), ("act_in", act_in),
                                                             ("act_out", act_out)))
    relative = check_bool("relative", relative)
    x = as_tensor("x", x, floating=True)
    with torch.no_grad():
        transformed_first = f(act_in(x))
        transformed_after = act_out(f(x))
    if transformed_first.shape != transformed_after.shape:
        raise ValueError(f"f(act_in(x)) has shape {tuple(transformed_first.shape)} but act_out(f(x)) has "
                         f"shape {tuple(transformed_after.shape)}: the actions do not fit f")
    difference = (transformed_first - transformed_after).abs()
    scale = transformed_after.abs()
    if mask is not None:
        mask = as_tensor("mask", mask)
        if mask.dtype != torch.bool:
            raise TypeError(f"mask must be a boolean tensor, got {describe(mask)}")
        try:
            mask = torch.broadcast_to(mask, difference.shape)
        except RuntimeError:
            raise ValueError(f"mask of shape {tuple(mask.shape)} does not broadcast to the output shape "
                             f"{tuple(difference.shape)}") from None
        if not mask.any():
            raise ValueError("mask selects no output entries")
        difference, scale = difference[mask], scale[mask]
    error = difference.max().item()
    if not relative:
        return error
    return error / max(scale.max().item(), torch.finfo(difference.dtype).tiny)


def invariance_error(f: Callable, act: Callable, x, *, relative: bool = True) -> float:
    """max |f(act(x)) - f(x)| (relative to max |f(x)|): how far f is from invariant (Chapters 5 and 8)."""
    return equivariance_error(f, act, lambda y: y, x, relative=relative)
