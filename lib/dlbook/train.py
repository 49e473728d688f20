"""One small training loop, with per-epoch history and a progress bar, and a cache of trained runs.

Every chapter that trains a model calls ``fit``; it stays short on purpose
so that readers can see the whole loop (forward, loss, backward, step).
``evaluate`` measures a model in evaluation mode. A chapter that trains the
same configuration more than once (a figure and a checkpoint, a widget that
revisits a setting) wraps its training function in ``cached``, keyed by a
frozen dataclass config.
"""
from __future__ import annotations

import copy
import dataclasses
import functools
from dataclasses import dataclass, field
from typing import Callable

import torch
from tqdm.auto import tqdm

from .runtime import generator, in_book_build, in_ci
from .validation import as_tensor, check_int, check_same_length, describe

Metric = Callable[[torch.Tensor, torch.Tensor], float]


@dataclass
class History:
    """Per-epoch record of losses and metrics: ``history["train_loss"][-1]``."""

    values: dict[str, list[float]] = field(default_factory=dict)

    def log(self, **scalars: float) -> None:
        for name, value in scalars.items():
            self.values.setdefault(name, []).append(float(value))

    def __getitem__(self, name: str) -> list[float]:
        if name not in self.values:
            raise KeyError(f"no metric {name!r} in history; have {sorted(self.values)}")
        return self.values[name]

    def __contains__(self, name: str) -> bool:
        return name in self.values

    @property
    def num_epochs(self) -> int:
        return len(next(iter(self.values.values()), []))


def accuracy(logits: torch.Tensor, y: torch.Tensor) -> float:
    """Fraction of rows whose arg-max (or sign, for one output) matches y."""
    if logits.dim() == 1 or logits.shape[-1] == 1:
        predicted = (logits.reshape(-1) > 0).long()
        return (predicted == (y.reshape(-1) > 0).long()).float().mean().item()
    return (logits.argmax(dim=-1) == y).float().mean().item()


def _check_data(name: str, data) -> tuple[torch.Tensor, ...]:
    """A tuple (X, y, *extra) of tensors with the same number of rows."""
    if not isinstance(data, (tuple, list)) or len(data) < 2:
        raise TypeError(f"{name} must be a tuple (X, y) or (X, y, *extra) of tensors, "
                        f"got {describe(data)}")
    tensors = tuple(as_tensor(f"{name}[{i}]", t) for i, t in enumerate(data))
    for i, t in enumerate(tensors[1:], start=1):
        check_same_length(f"{name}[0]", tensors[0], f"{name}[{i}]", t)
    return tensors


@torch.no_grad()
def evaluate(model: torch.nn.Module, X: torch.Tensor, y: torch.Tensor, *extra: torch.Tensor,
             loss_fn=None, metrics: dict[str, Metric] | None = None) -> dict[str, float]:
    """Metrics (and, with ``loss_fn``, the loss) of ``model`` on (X, y) in evaluation mode.

    Returns a dict from name to value: "loss" if ``loss_fn`` is given, then
    each metric; with neither, {"accuracy": ...}. ``loss_fn`` is called as
    ``loss_fn(model(X), y, *extra)``. The model's train/eval mode is restored.
    """
    X, y, *extra = _check_data("(X, y)", (X, y, *extra))
    if metrics is None and loss_fn is None:
        metrics = {"accuracy": accuracy}
    was_training = model.training
    model.eval()
    output = model(X)
    results = {} if loss_fn is None else {"loss": loss_fn(output, y, *extra).item()}
    for name, metric in (metrics or {}).items():
        results[name] = metric(output, y)
    model.train(was_training)
    return results


def fit(model: torch.nn.Module, loss_fn, optimizer: torch.optim.Optimizer, train_data, *,
        epochs: int, batch_size: int | None = None, val_data=None,
        metrics: dict[str, Metric] | None = None, seed: int = 0,
        progress: bool | None = None) -> History:
    """Train ``model`` for ``epochs`` passes over ``train_data = (X, y)`` or ``(X, y, *extra)``.

    Each step computes ``loss_fn(model(X[b]), y[b], *(t[b] for t in extra))``
    on a mini-batch b, so a loss that needs more than the labels (a teacher's
    logits for distillation, per-example weights) gets its rows of the batch.
    Mini-batches are reshuffled each epoch from a seeded generator, so a run
    is reproducible. After every epoch the history records ``train_loss``
    (mean over batches), and, on the full sets in evaluation mode, each metric
    as ``train_<name>`` and, with ``val_data``, ``val_loss``/``val_<name>``.
    The progress bar is off in CI and in the book build unless asked for.
    """
    epochs = check_int("epochs", epochs, minimum=1)
    X, y, *extra = _check_data("train_data", train_data)
    batch_size = len(X) if batch_size is None else check_int("batch_size", batch_size, minimum=1)
    if val_data is not None:
        val_data = _check_data("val_data", val_data)
    if progress is None:
        progress = not (in_ci() or in_book_build())
    shuffler = generator(seed)
    history = History()
    for _ in tqdm(range(epochs), desc="epochs", disable=not progress, leave=False):
        model.train()
        order = torch.randperm(len(X), generator=shuffler).to(X.device)
        batch_losses = []
        for start in range(0, len(X), batch_size):
            batch = order[start:start + batch_size]
            loss = loss_fn(model(X[batch]), y[batch], *(t[batch] for t in extra))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            batch_losses.append(loss.item())
        history.log(train_loss=sum(batch_losses) / len(batch_losses))
        if metrics:
            train_scores = evaluate(model, X, y, metrics=metrics)
            history.log(**{f"train_{name}": train_scores[name] for name in metrics})
        if val_data is not None:
            scores = evaluate(model, *val_data, loss_fn=loss_fn, metrics=metrics or {})
            history.log(**{f"val_{name}": value for name, value in scores.items()})
    return history


# ---------------------------------------------------------------------------
# The cache of trained runs
# ---------------------------------------------------------------------------

#: Results of cached training functions, by (function, config). Lives as long as the kernel.
RUNS: dict[tuple[str, object], object] = {}


def cached(train_fn: Callable) -> Callable:
    """Cache a training function of one frozen-dataclass config: ``train_fn(config) -> result``.

    The first call with a config trains; later calls with an equal config
    return a deep copy of the stored result, so callers may modify what they
    get. A frozen dataclass makes the key explicit and hashable: every
    setting that changes the run must be one of its fields.
    """
    name = f"{train_fn.__module__}.{train_fn.__qualname__}"

    @functools.wraps(train_fn)
    def run(config):
        if not (dataclasses.is_dataclass(config) and config.__dataclass_params__.frozen):
            raise TypeError(f"{train_fn.__name__} takes a frozen dataclass config, got {describe(config)}")
        key = (name, config)
        if key not in RUNS:
            RUNS[key] = train_fn(config)
        return copy.deepcopy(RUNS[key])

    return run


def clear_cache() -> None:
    """Forget every cached run."""
    RUNS.clear()
