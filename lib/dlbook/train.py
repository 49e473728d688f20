"""One small training loop, with per-epoch history and a progress bar.

Every chapter that trains a model calls ``fit``; it stays short on purpose
so that readers can see the whole loop (forward, loss, backward, step).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch
from tqdm.auto import tqdm

from .runtime import generator, in_book_build, in_ci
from .validation import as_tensor, check_int, check_same_length

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


def _check_pair(name: str, data) -> tuple[torch.Tensor, torch.Tensor]:
    if not isinstance(data, (tuple, list)) or len(data) != 2:
        raise TypeError(f"{name} must be a pair (X, y) of tensors, got {type(data).__name__}")
    X, y = as_tensor(f"{name}[0]", data[0]), as_tensor(f"{name}[1]", data[1])
    check_same_length(f"{name}[0]", X, f"{name}[1]", y)
    return X, y


@torch.no_grad()
def evaluate(model: torch.nn.Module, loss_fn, X: torch.Tensor, y: torch.Tensor,
             metrics: dict[str, Metric] | None = None) -> dict[str, float]:
    """Loss and metrics of ``model`` on (X, y) in evaluation mode."""
    was_training = model.training
    model.eval()
    output = model(X)
    results = {"loss": loss_fn(output, y).item()}
    for name, metric in (metrics or {}).items():
        results[name] = metric(output, y)
    model.train(was_training)
    return results


def fit(model: torch.nn.Module, loss_fn, optimizer: torch.optim.Optimizer, train_data, *,
        epochs: int, batch_size: int | None = None, val_data=None,
        metrics: dict[str, Metric] | None = None, seed: int = 0,
        progress: bool | None = None) -> History:
    """Train ``model`` for ``epochs`` passes over ``train_data = (X, y)``.

    Mini-batches are reshuffled each epoch from a seeded generator, so a run
    is reproducible. After every epoch the history records ``train_loss``
    (mean over batches), and, on the full sets in evaluation mode, each metric
    as ``train_<name>`` and, with ``val_data``, ``val_loss``/``val_<name>``.
    The progress bar is off in CI and in the book build unless asked for.
    """
    epochs = check_int("epochs", epochs, minimum=1)
    X, y = _check_pair("train_data", train_data)
    batch_size = len(X) if batch_size is None else check_int("batch_size", batch_size, minimum=1)
    if val_data is not None:
        X_val, y_val = _check_pair("val_data", val_data)
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
            loss = loss_fn(model(X[batch]), y[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            batch_losses.append(loss.item())
        history.log(train_loss=sum(batch_losses) / len(batch_losses))
        if metrics:
            train_scores = evaluate(model, loss_fn, X, y, metrics)
            history.log(**{f"train_{name}": train_scores[name] for name in metrics})
        if val_data is not None:
            scores = evaluate(model, loss_fn, X_val, y_val, metrics)
            history.log(**{f"val_{name}": value for name, value in scores.items()})
    return history
