"""McCulloch–Pitts threshold units and the Boolean functions they compute (Chapter 1).

A unit with binary inputs x, synapse signs sigma (+1 excitatory, -1 inhibitory,
0 for no synapse) and threshold theta outputs 1{sigma . x >= theta}. Truth tables
list the outputs on the rows of ``data.hypercube(n, encoding="01")`` (00, 01, 10, 11
for two inputs). Outputs keep the floating dtype of the inputs (float32 for integer
inputs); the enumeration works in float64, where every sum is exact.
"""
from __future__ import annotations

import torch

from .data import hypercube
from .validation import as_tensor, check_float, check_int, check_values_in

_NAMES_IN_ORDER = (
    "FALSE", "AND", "x1 AND NOT x2", "x1", "NOT x1 AND x2", "x2", "XOR", "OR",
    "NOR", "XNOR", "NOT x2", "x1 OR NOT x2", "NOT x1", "NOT x1 OR x2", "NAND", "TRUE",
)
#: Names of the 16 two-input Boolean functions, keyed by their truth table
#: (outputs on the inputs 00, 01, 10, 11, the rows of data.hypercube(2)).
#: Function k of the list has the 4-bit binary expansion of k as its table.
NAMES_2D: dict[tuple[int, ...], str] = {
    tuple((k >> (3 - bit)) & 1 for bit in range(4)): name
    for k, name in enumerate(_NAMES_IN_ORDER)
}

#: Largest number of inputs realizable_functions accepts.
MAX_INPUTS = 8
#: Cap on the (weight vectors x thresholds x inputs) table it builds, about 50 MB.
_MAX_TABLE_ENTRIES = 5 * 10**7


def _binary_inputs(name: str, x) -> torch.Tensor:
    x = as_tensor(name, x)
    if x.dim() not in (1, 2):
        raise ValueError(f"{name} must have shape (n,) or (batch, n), got shape {tuple(x.shape)}")
    check_values_in(name, x, (0, 1))         # McCulloch-Pitts inputs are binary
    return x if x.is_floating_point() else x.to(torch.float32)


def mcculloch_pitts(x, signs, threshold: float) -> torch.Tensor:
    """Output 1{signs . x >= threshold} of one McCulloch–Pitts unit for each row of x (Chapter 1).

    x is (n,) or (batch, n) of 0/1; signs holds -1, 0 or +1; returns 0/1 in x's float dtype.
    """
    x = _binary_inputs("x", x)
    signs = as_tensor("signs", signs, ndim=1)
    check_values_in("signs", signs, (-1, 0, 1))   # inhibitory, no synapse, excitatory
    if signs.shape[0] != x.shape[-1]:
        raise ValueError(f"signs must have one entry per input: x has {x.shape[-1]} inputs, "
                         f"signs has {signs.shape[0]}")
    threshold = check_float("threshold", threshold)
    signs = signs.to(dtype=x.dtype, device=x.device)
    return (x @ signs >= threshold).to(x.dtype)


def realizable_functions(n: int, weight_values=(-1, 1)) -> set[tuple[int, ...]]:
    """Truth tables computable by ONE threshold unit with weights from weight_values (Chapter 1).

    Each table lists the outputs on the rows of data.hypercube(n); any real threshold is allowed.
    """
    n = check_int("n", n, minimum=1, maximum=MAX_INPUTS)
    if isinstance(weight_values, (str, bytes)) or not hasattr(weight_values, "__iter__"):
        raise TypeError(f"weight_values must be a sequence of numbers, got {weight_values!r}")
    weight_values = list(weight_values)
    if not weight_values:
        raise ValueError("weight_values must contain at least one value")
    for value in weight_values:
        check_float("weight_values", value)
    values = torch.tensor(sorted(set(weight_values)), dtype=torch.float64)
    if len(values) ** n * (2**n + 1) * 2**n > _MAX_TABLE_ENTRIES:
        raise ValueError(f"n={n} with {len(values)} weight_values is too many to enumerate; "
                         "use fewer inputs or fewer weight values")

    inputs = hypercube(n, encoding="01", dtype=torch.float64)              # (2^n, n)
    weights = torch.cartesian_prod(*[values] * n).reshape(-1, n)            # (k^n, n)
    sums = weights @ inputs.T                                               # (k^n, 2^n)
    # Only thresholds at an attained sum matter (output changes only there),
    # plus one above the largest sum for the all-zero output.
    thresholds = torch.cat([sums, sums.max(dim=1, keepdim=True).values + 1], dim=1)
    tables = (sums[:, None, :] >= thresholds[:, :, None]).reshape(-1, 2**n)
    return {tuple(row) for row in torch.unique(tables.to(torch.int64), dim=0).tolist()}


def xor_network(x) -> torch.Tensor:
    """XOR from two layers of McCulloch–Pitts units: AND(OR(x), NAND(x)) (Chapter 1).

    x is (2,) or (batch, 2) of 0/1; returns 0/1.
    """
    x = _binary_inputs("x", x)
    if x.shape[-1] != 2:
        raise ValueError(f"x must have 2 inputs per row, got shape {tuple(x.shape)}")
    either = mcculloch_pitts(x, [1, 1], 1)        # OR
    not_both = mcculloch_pitts(x, [-1, -1], -1)   # NAND
    hidden = torch.stack([either, not_both], dim=-1)
    return mcculloch_pitts(hidden, [1, 1], 2)     # AND


def function_name(table) -> str:
    """Name of a two-input truth table (a tuple of 4 outputs), e.g. (0, 0, 0, 1) -> 'AND' (Chapter 1)."""
    if isinstance(table, torch.Tensor):
        table = table.tolist()
    if isinstance(table, (str, bytes)) or not hasattr(table, "__iter__"):
        raise TypeError(f"table must be a sequence of 4 outputs, got {table!r}")
    # 0.0/1.0 hash and compare equal to 0/1, so float tables are found too.
    table = tuple(table)
    if table not in NAMES_2D:
        raise ValueError(f"table must be 4 outputs in {{0, 1}} (inputs 00, 01, 10, 11), got {table}")
    return NAMES_2D[table]


__all__ = ["NAMES_2D", "mcculloch_pitts", "realizable_functions",
           "xor_network", "function_name"]
