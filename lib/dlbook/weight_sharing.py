"""Where weight sharing pays: 8 x 8 digits placed at different offsets on a larger canvas (Chapter 5).

Every digit is pasted into an empty square canvas with its top-left corner at
(row, col). A network trained with the digits at some offsets is tested at
offsets it has seen and at offsets it has never seen. A dense network has a
separate weight for every pixel, so it learns nothing about positions where no
digit ever appeared; a convolutional network applies the same filters
everywhere and, with global pooling at the end, reads a digit the same way
wherever it sits.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from .runtime import generator
from .train import cached
from .validation import as_tensor, check_choice, check_int, describe

#: The two models of the canvas experiment.
CANVAS_MODELS = ("mlp", "cnn")


def place_on_canvas(images, rows, cols, *, size: int = 16) -> torch.Tensor:
    """Paste images (N, h, w) or (N, 1, h, w) into zero canvases (N, 1, size, size) at (rows[i], cols[i]) (Chapter 5).

    ``rows`` and ``cols`` are integers (one offset for all) or integer tensors
    of length N. One indexed assignment places every image: no loop over the batch.
    """
    images = as_tensor("images", images, floating=True)
    if images.dim() == 4 and images.shape[1] == 1:
        images = images[:, 0]
    if images.dim() != 3:
        raise ValueError(f"images must have shape (N, h, w) or (N, 1, h, w), got {describe(images)}")
    size = check_int("size", size, minimum=1)
    n, h, w = images.shape
    offsets = []
    for name, value, side in (("rows", rows, h), ("cols", cols, w)):
        if isinstance(value, torch.Tensor):
            value = as_tensor(name, value, shape=(n,))
            if value.is_floating_point():
                raise TypeError(f"{name} must hold integers, got {describe(value)}")
        else:
            value = torch.full((n,), check_int(name, value))
        value = value.to(images.device).long()
        if n and (value.min() < 0 or value.max() > size - side):
            raise ValueError(f"{name} must lie in 0..{size - side} so that the image fits the canvas, "
                             f"got values in {value.min().item()}..{value.max().item()}")
        offsets.append(value)
    canvas = torch.zeros(n, size, size, dtype=images.dtype, device=images.device)
    row_index = offsets[0][:, None, None] + torch.arange(h, device=images.device)[None, :, None]   # (N, h, 1)
    col_index = offsets[1][:, None, None] + torch.arange(w, device=images.device)[None, None, :]   # (N, 1, w)
    canvas[torch.arange(n, device=images.device)[:, None, None], row_index, col_index] = images
    return canvas[:, None]


def random_offsets(num_images: int, low: int, high: int, *, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Row and column offsets drawn independently and uniformly from low..high (inclusive) (Chapter 5)."""
    num_images = check_int("num_images", num_images, minimum=0)
    low, high = check_int("low", low, minimum=0), check_int("high", high, minimum=0)
    if low > high:
        raise ValueError(f"low must not exceed high, got low={low}, high={high}")
    rng = generator(check_int("seed", seed, minimum=0))
    return (torch.randint(low, high + 1, (num_images,), generator=rng),
            torch.randint(low, high + 1, (num_images,), generator=rng))


def canvas_model(name: str, *, seed: int = 0, device="cpu") -> nn.Sequential:
    """The dense network 256-128-10 (34,186 weights) or the CNN conv16-pool-conv32-conv32-global max
    (14,378 weights) for 16 x 16 canvases, both with He initialisation (Chapter 5)."""
    from .conv import cnn
    from .nets import mlp

    check_choice("name", name, CANVAS_MODELS)
    if name == "mlp":
        return nn.Sequential(nn.Flatten(), *mlp((256, 128, 10), init="he", seed=seed, device=device))
    return cnn((16, 32, 32), pool_after=(0,), global_pool="max", init="he", seed=seed, device=device)


@dataclass(frozen=True)
class CanvasRun:
    """One run of the canvas experiment: the model, the largest training offset, the budget."""

    model: str = "cnn"
    max_train_offset: int = 3
    epochs: int = 8
    seed: int = 0
    device: str = "cpu"


class CanvasResult(NamedTuple):
    """Accuracy at seen offsets (0..max_train_offset), at unseen ones (5..8), and with all test digits
    at (d, d) for d = 0..8 (``by_offset``); and the trained model."""

    seen: float
    unseen: float
    by_offset: list
    model: nn.Module


#: Side of the canvas, and the unseen offsets of the test (a digit 8 wide fits at 0..8).
CANVAS_SIZE = 16
UNSEEN_OFFSETS = (5, 8)


@cached
def canvas_run(config: CanvasRun) -> CanvasResult:
    """Train on the digits at random offsets in 0..max_train_offset (Adam 3e-3, batch 32), then test (Chapter 5)."""
    from . import data, train

    if not isinstance(config, CanvasRun):
        raise TypeError(f"config must be a CanvasRun, got {describe(config)}")
    check_choice("config.model", config.model, CANVAS_MODELS)
    digits = data.load_digits(flatten=False, device=config.device)

    def at_random_offsets(X, low, high, seed):
        rows, cols = random_offsets(len(X), low, high, seed=seed)
        return place_on_canvas(X, rows, cols, size=CANVAS_SIZE)

    X_train = at_random_offsets(digits.X_train, 0, config.max_train_offset, config.seed)
    model = canvas_model(config.model, seed=config.seed, device=config.device)
    train.fit(model, F.cross_entropy, torch.optim.Adam(model.parameters(), lr=3e-3), (X_train, digits.y_train),
              epochs=config.epochs, batch_size=32, seed=config.seed)
    seen = at_random_offsets(digits.X_test, 0, config.max_train_offset, config.seed + 1)
    unseen = at_random_offsets(digits.X_test, *UNSEEN_OFFSETS, config.seed + 2)
    by_offset = [train.evaluate(model, place_on_canvas(digits.X_test, d, d, size=CANVAS_SIZE),
                                digits.y_test)["accuracy"] for d in range(CANVAS_SIZE - 8 + 1)]
    return CanvasResult(train.evaluate(model, seen, digits.y_test)["accuracy"],
                        train.evaluate(model, unseen, digits.y_test)["accuracy"], by_offset, model)
