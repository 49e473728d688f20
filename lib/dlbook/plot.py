"""One consistent plotting style and the few helpers chapters share.

Figures take one of the named sizes below (``plt.subplots(1, 2, figsize=plot.WIDE)``),
so pages look alike; training curves are drawn by :func:`history`.
"""
from __future__ import annotations

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import torch

#: The book's palette: colour-blind safe (Okabe-Ito), in the order plots use it.
PALETTE = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000"]
#: Colours for the two classes of a binary problem (label -1/0 and +1).
CLASS_COLORS = (PALETTE[1], PALETTE[0])

#: Named figure sizes (inches), the only ones chapters use.
SINGLE = (6.4, 3.4)    # one panel across the text column
WIDE = (8.6, 3.6)      # two panels side by side
TRIPLE = (10.0, 3.2)   # three panels side by side
SQUARE = (4.4, 4.4)    # one panel with equal axes (a plane, a matrix)
TALL = (8.6, 5.6)      # a 2 x 2 grid of panels
FIGSIZES = {"single": SINGLE, "wide": WIDE, "triple": TRIPLE, "square": SQUARE, "tall": TALL}

STYLE = {
    "figure.figsize": SINGLE,
    "figure.dpi": 96,
    "savefig.dpi": 96,
    "figure.constrained_layout.use": True,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.25,
    "axes.prop_cycle": matplotlib.cycler(color=PALETTE),
    "axes.titlesize": 11,
    "axes.labelsize": 10,
    "legend.fontsize": 9,
    "legend.frameon": False,
    "xtick.labelsize": 9,
    "ytick.labelsize": 9,
    "lines.linewidth": 1.8,
    "image.cmap": "viridis",
}


def use_style() -> None:
    """Apply the book's matplotlib style."""
    plt.rcParams.update(STYLE)


def to_numpy(values) -> np.ndarray:
    """Detach a tensor (on any device) or pass an array through, as numpy."""
    if isinstance(values, torch.Tensor):
        return values.detach().to("cpu").numpy()
    return np.asarray(values)


def scatter_classes(ax, X, y, *, size: float = 18, labels=("y = -1", "y = +1")) -> None:
    """Scatter 2-D points coloured by a binary label (-1/0 versus +1)."""
    X, y = to_numpy(X), to_numpy(y)
    negative = y <= 0
    ax.scatter(X[negative, 0], X[negative, 1], s=size, c=CLASS_COLORS[0], marker="o",
               edgecolors="white", linewidths=0.4, label=labels[0])
    ax.scatter(X[~negative, 0], X[~negative, 1], s=size, c=CLASS_COLORS[1], marker="s",
               edgecolors="white", linewidths=0.4, label=labels[1])


def draw_line(ax, w, b: float, *, limits=None, **style) -> None:
    """Draw the line w[0] x + w[1] y + b = 0 across the axes' current limits."""
    w = to_numpy(w).astype(float)
    b = float(to_numpy(b))
    xlim = limits or ax.get_xlim()
    ylim = ax.get_ylim()
    if abs(w[1]) > abs(w[0]):
        xs = np.array(xlim)
        ys = -(w[0] * xs + b) / w[1]
    else:
        ys = np.array(ylim)
        xs = -(w[1] * ys + b) / (w[0] if w[0] != 0 else 1e-12)
    ax.plot(xs, ys, **{"color": "black", "lw": 1.5, **style})
    ax.set_xlim(xlim)
    ax.set_ylim(ylim)


def evenly_spaced(items, count: int) -> list:
    """At most ``count`` items, evenly spaced, keeping the first and the last."""
    items = list(items)
    if len(items) <= count:
        return items
    positions = np.linspace(0, len(items) - 1, count).round().astype(int)
    return [items[i] for i in positions]


def figure_to_png(fig, *, dpi: int | None = None) -> bytes:
    """Render a figure to PNG bytes and close it."""
    import io

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi or fig.dpi)
    plt.close(fig)
    return buffer.getvalue()


def history(ax, history, metric: str = "loss", *, label: str = "", color=None, log: bool = False) -> None:
    """Draw the train and validation curves of ``metric`` from a train.History (Chapter 4).

    The training curve is solid, the validation curve dashed, both in one colour.
    """
    from .train import History

    if not isinstance(history, History):
        raise TypeError(f"history must be a dlbook.train.History, got {type(history).__name__}")
    color = color or PALETTE[0]
    prefix = f"{label}: " if label else ""
    drawn = False
    for split, style in (("train", "-"), ("val", "--")):
        name = f"{split}_{metric}"
        if name in history:
            values = history[name]
            ax.plot(range(1, len(values) + 1), values, ls=style, color=color,
                    label=f"{prefix}{'train' if split == 'train' else 'test'}")
            drawn = True
    if not drawn:
        raise ValueError(f"metric {metric!r} is not in the history; it has {sorted(history.values)}")
    ax.set(xlabel="epoch", ylabel=metric, yscale="log" if log else "linear")
