"""Tests of dlbook.feature_visualization: gradient ascent raises the target score and leaves the model alone."""
import pytest
import torch
from torch import nn

from dlbook import conv, feature_visualization


def test_activation_maximisation_raises_each_target_score():
    model = conv.cnn((4, 4), seed=0, dtype=torch.float64)
    before = [p.detach().clone() for p in model.parameters()]
    result = feature_visualization.maximize_activation(model, [0, 3, 7], (1, 8, 8), steps=60, seed=0)
    assert result.images.shape == (3, 1, 8, 8)
    assert result.images.min() >= 0 and result.images.max() <= 1
    assert result.target_scores[-1] > result.target_scores[0]
    assert all(torch.equal(p, q) for p, q in zip(before, model.parameters()))


def test_linear_scores_reach_the_closed_form():
    # max over x in [0, 1]^n of w.x - l2 |x|^2 is x = clip(w / (2 l2), 0, 1), coordinate by coordinate
    linear = nn.Linear(16, 2, dtype=torch.float64)
    with torch.no_grad():
        linear.weight.copy_(torch.linspace(-0.05, 0.05, 32, dtype=torch.float64).reshape(2, 16))
    model = nn.Sequential(nn.Flatten(), linear)
    result = feature_visualization.maximize_activation(model, [0, 1], (1, 4, 4), steps=800, lr=0.01, l2=0.05,
                                                       jitter=0)
    expected = (linear.weight / (2 * 0.05)).clamp(0, 1).reshape(2, 1, 4, 4)
    assert (result.images - expected).abs().max() < 1e-3


def test_bad_arguments():
    model = conv.cnn((4,), seed=0)
    with pytest.raises(TypeError, match="model"):
        feature_visualization.maximize_activation(lambda x: x, [0], (1, 8, 8))
    with pytest.raises(ValueError, match="shape must be"):
        feature_visualization.maximize_activation(model, [0], (8, 8, 1, 1))
    with pytest.raises(ValueError, match="lr"):
        feature_visualization.maximize_activation(model, [0], (1, 8, 8), lr=0.0)
    assert isinstance(model, nn.Module)
