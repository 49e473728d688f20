"""Tests of dlbook.weight_sharing: digits placed on a canvas, and the two models' sizes."""
import pytest
import torch

from dlbook import nets, weight_sharing


def test_place_on_canvas_puts_each_image_at_its_offset():
    images = torch.arange(2 * 3 * 2, dtype=torch.float32).reshape(2, 3, 2) + 1
    canvas = weight_sharing.place_on_canvas(images, torch.tensor([0, 4]), torch.tensor([5, 1]), size=7)
    assert canvas.shape == (2, 1, 7, 7)
    assert torch.equal(canvas[0, 0, 0:3, 5:7], images[0]) and torch.equal(canvas[1, 0, 4:7, 1:3], images[1])
    assert canvas.sum() == images.sum()


def test_place_on_canvas_with_one_offset_for_all_and_channel_dimension():
    images = torch.ones(4, 1, 8, 8)
    canvas = weight_sharing.place_on_canvas(images, 8, 0)
    assert canvas.shape == (4, 1, 16, 16) and canvas[:, :, 8:, :8].sum() == 4 * 64 and canvas.sum() == 4 * 64


def test_random_offsets_are_seeded_and_in_range():
    rows, cols = weight_sharing.random_offsets(500, 5, 8, seed=1)
    again = weight_sharing.random_offsets(500, 5, 8, seed=1)
    assert torch.equal(rows, again[0]) and torch.equal(cols, again[1])
    assert set(rows.tolist()) == set(cols.tolist()) == {5, 6, 7, 8}


def test_the_two_models():
    assert nets.num_parameters(weight_sharing.canvas_model("mlp")) == 34_186
    assert nets.num_parameters(weight_sharing.canvas_model("cnn")) == 14_378
    x = torch.zeros(3, 1, 16, 16)
    assert weight_sharing.canvas_model("mlp")(x).shape == weight_sharing.canvas_model("cnn")(x).shape == (3, 10)


def test_bad_arguments():
    with pytest.raises(ValueError, match="rows must lie in 0..8"):
        weight_sharing.place_on_canvas(torch.ones(2, 8, 8), 9, 0)
    with pytest.raises(TypeError, match="cols must hold integers"):
        weight_sharing.place_on_canvas(torch.ones(2, 8, 8), 0, torch.tensor([0.0, 1.0]))
    with pytest.raises(ValueError, match="images must have shape"):
        weight_sharing.place_on_canvas(torch.ones(8, 8), 0, 0)
    with pytest.raises(ValueError, match="low must not exceed high"):
        weight_sharing.random_offsets(3, 4, 2)
    with pytest.raises(ValueError, match="name"):
        weight_sharing.canvas_model("vit")
