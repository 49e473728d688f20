import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

from dlbook import plot


def test_style_sets_palette():
    plot.use_style()
    colors = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]
    assert colors[:3] == plot.PALETTE[:3]


def test_to_numpy_accepts_tensors_and_arrays():
    assert isinstance(plot.to_numpy(torch.ones(2, requires_grad=True)), np.ndarray)
    assert plot.to_numpy([1, 2]).tolist() == [1, 2]


def test_helpers_draw_and_render_png():
    fig, ax = plt.subplots()
    X = torch.tensor([[0.0, 0.0], [1.0, 1.0]])
    plot.scatter_classes(ax, X, torch.tensor([-1.0, 1.0]))
    ax.set_xlim(-1, 2)
    ax.set_ylim(-1, 2)
    plot.draw_line(ax, torch.tensor([1.0, 1.0]), -1.0)
    plot.draw_line(ax, torch.tensor([1.0, 0.0]), -0.5)
    assert len(ax.lines) == 2 and len(ax.collections) == 2
    png = plot.figure_to_png(fig)
    assert png.startswith(b"\x89PNG")
    assert not plt.fignum_exists(fig.number)


def test_evenly_spaced_keeps_ends_and_count():
    assert plot.evenly_spaced(range(3), 5) == [0, 1, 2]
    picked = plot.evenly_spaced(range(101), 5)
    assert picked == [0, 25, 50, 75, 100]


def test_named_sizes_and_history_curves():
    from dlbook import train

    assert plot.STYLE["figure.figsize"] == plot.SINGLE
    assert set(plot.FIGSIZES.values()) == {plot.SINGLE, plot.WIDE, plot.TRIPLE, plot.SQUARE, plot.TALL}
    history = train.History()
    for loss in (1.0, 0.5, 0.25):
        history.log(train_accuracy=1 - loss, val_accuracy=0.9 - loss)
    fig, ax = plt.subplots(figsize=plot.WIDE)
    plot.history(ax, history, "accuracy", label="wd 0")
    assert [line.get_label() for line in ax.lines] == ["wd 0: train", "wd 0: test"]
    assert list(ax.lines[1].get_ydata()) == pytest.approx([-0.1, 0.4, 0.65])
    with pytest.raises(ValueError, match="loss"):
        plot.history(ax, history, "loss")
    with pytest.raises(TypeError, match="History"):
        plot.history(ax, {"train_loss": [1.0]})
    plt.close(fig)
