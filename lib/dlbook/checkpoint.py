"""Checkpoint cells: assert a measured result, print one readable line, keep a record.

Every number a chapter states is measured by a cell and checked here::

    checkpoint.close("Hopfield capacity (alpha_c)", capacity, 0.138, atol=0.025)
    checkpoint.below("perceptron updates / Novikoff bound", updates / bound, 1.0)
    checkpoint.between("test accuracy of the CNN", accuracy, 0.95, 1.0)
    checkpoint.holds("energy never increases", largest_rise <= 1e-12, f"largest rise {largest_rise:.1e}")

A checkpoint is a statement: it returns nothing (so a cell that ends with
one shows only its line). Each call raises ``AssertionError`` (with the same line) when the relation
fails, prints ``✅ label: measured ... (relation)`` when it holds, and appends
a :class:`Record` to :data:`RECORDS`. In a Jupyter kernel the record also
travels in the metadata of an empty display output after the line (key
:data:`METADATA_KEY`; nothing visible), so the executed chapter holds every
result it measured and the book's results appendix is built from those
records, not from the text. With the environment variable ``DLBOOK_CHECKPOINT_LOG`` set to a file
path, each record is also appended to that file as one JSON line. A plain ``assert`` stays right where the check is
about the code, not a result the text reports (a shape, a type, an exact
identity used as a precondition).
"""
from __future__ import annotations

import json
import math
import numbers
import os
from dataclasses import asdict, dataclass

import numpy as np
import torch

from .runtime import in_kernel
from .validation import check_float, describe

#: Environment variable naming a JSON-lines file that collects every record.
LOG_ENV = "DLBOOK_CHECKPOINT_LOG"
#: Key of the record in the metadata of the (empty) output a checkpoint leaves in a Jupyter kernel.
METADATA_KEY = "dlbook_checkpoint"


@dataclass(frozen=True)
class Record:
    """One checkpoint: what was measured, against what, by which relation and tolerance."""

    label: str
    measured: float | bool
    relation: str           # "close", "below", "above", "between" or "holds"
    reference: float | None = None
    low: float | None = None
    high: float | None = None
    rtol: float = 0.0
    atol: float = 0.0
    detail: str = ""
    passed: bool = True

    def line(self) -> str:
        """The one line a checkpoint cell prints."""
        mark = "✅" if self.passed else "❌"
        if self.relation == "holds":
            return f"{mark} {self.label}" + (f": {self.detail}" if self.detail else "")
        text = f"{mark} {self.label}: {format_value(self.measured)}"
        if self.relation == "close":
            tolerance = tolerance_text(self.reference, self.rtol, self.atol)
            text += f" (expected {format_value(self.reference)} {tolerance})"
        elif self.relation == "below":
            text += f" (bound: at most {format_value(self.high)})"
        elif self.relation == "above":
            text += f" (bound: at least {format_value(self.low)})"
        else:
            text += f" (expected between {format_value(self.low)} and {format_value(self.high)})"
        return text + (f"; {self.detail}" if self.detail else "")


#: Every record made in this process, in order.
RECORDS: list[Record] = []


def format_value(value) -> str:
    """A measured or reference value as checkpoint lines and the results appendix show it."""
    if isinstance(value, bool) or value is None:
        return str(value)
    value = float(value)
    if value == 0 or 1e-3 <= abs(value) < 1e5:
        return f"{value:.4g}"
    return f"{value:.3e}"


def tolerance_text(reference, rtol: float, atol: float) -> str:
    """The tolerance of a ``close`` check in words: "± 0.025" or "within 5%"."""
    if atol and rtol:
        return f"± {format_value(atol + rtol * abs(reference))}"
    if rtol:
        return f"within {rtol:.3g} relative" if rtol < 0.01 else f"within {100 * rtol:.3g}%"
    return f"± {format_value(atol)}"


def _number(name: str, value) -> float:
    """A finite real from a Python number, a NumPy scalar or a one-element tensor."""
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            raise ValueError(f"{name} must be one number, got {describe(value)}")
        value = value.detach().cpu().item()
    elif isinstance(value, np.ndarray):
        if value.size != 1:
            raise ValueError(f"{name} must be one number, got {describe(value)}")
        value = value.item()
    elif isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {describe(value)}")
    value = float(value)
    if math.isnan(value):
        raise ValueError(f"{name} is NaN")
    return value


def _check_label(label) -> str:
    if not isinstance(label, str) or not label.strip():
        raise TypeError(f"label must be a non-empty string, got {describe(label)}")
    return label


def _finish(record: Record) -> None:
    RECORDS.append(record)
    path = os.environ.get(LOG_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as log:
            log.write(json.dumps(asdict(record)) + "\n")
    _show(record)
    if not record.passed:
        raise AssertionError(record.line())


def _show(record: Record) -> None:
    """Print the record's line; in a kernel, leave the record itself in an empty output after it."""
    print(record.line(), flush=True)
    if not in_kernel():
        return
    from IPython.display import display

    # JSON has no infinity: an infinite bound travels as the string "inf" (float("inf") reads it back).
    fields = {key: str(value) if isinstance(value, float) and not math.isfinite(value) else value
              for key, value in asdict(record).items()}
    display({"text/html": ""}, metadata={METADATA_KEY: fields}, raw=True)


def close(label: str, measured, expected, *, rtol: float = 0.0, atol: float = 0.0,
          detail: str = "") -> None:
    """|measured - expected| <= atol + rtol·|expected| (give at least one tolerance)."""
    label, measured = _check_label(label), _number("measured", measured)
    expected = _number("expected", expected)
    rtol = check_float("rtol", rtol, low=0.0)
    atol = check_float("atol", atol, low=0.0)
    if rtol == 0 and atol == 0:
        raise ValueError("close needs a tolerance: pass rtol= or atol= (a result measured in "
                         "floating point is never checked for exact equality here)")
    passed = abs(measured - expected) <= atol + rtol * abs(expected)
    _finish(Record(label, measured, "close", reference=expected, rtol=rtol, atol=atol,
                          detail=detail, passed=passed))


def below(label: str, measured, bound, *, detail: str = "") -> None:
    """measured <= bound."""
    label, measured, bound = _check_label(label), _number("measured", measured), _number("bound", bound)
    _finish(Record(label, measured, "below", high=bound, detail=detail, passed=measured <= bound))


def above(label: str, measured, bound, *, detail: str = "") -> None:
    """measured >= bound."""
    label, measured, bound = _check_label(label), _number("measured", measured), _number("bound", bound)
    _finish(Record(label, measured, "above", low=bound, detail=detail, passed=measured >= bound))


def between(label: str, measured, low, high, *, detail: str = "") -> None:
    """low <= measured <= high."""
    label, measured = _check_label(label), _number("measured", measured)
    low, high = _number("low", low), _number("high", high)
    if low > high:
        raise ValueError(f"low must not exceed high, got low={low} and high={high}")
    _finish(Record(label, measured, "between", low=low, high=high, detail=detail,
                          passed=low <= measured <= high))


def holds(label: str, condition, detail: str = "") -> None:
    """A condition that is not one number against a bound (an ordering, an exact identity)."""
    label = _check_label(label)
    if isinstance(condition, torch.Tensor) and condition.numel() == 1:
        condition = bool(condition.item())
    if not isinstance(condition, (bool, np.bool_)):
        raise TypeError(f"condition must be True or False, got {describe(condition)}")
    if not isinstance(detail, str):
        raise TypeError(f"detail must be a string, got {describe(detail)}")
    _finish(Record(label, bool(condition), "holds", detail=detail, passed=bool(condition)))
