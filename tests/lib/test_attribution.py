"""Explanations: exact cases of linear and homogeneous models, completeness, regions, Shapley values."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from dlbook import attribution, nets


def _linear(seed=0, d=6, classes=3):
    rng = torch.Generator().manual_seed(seed)
    model = nn.Linear(d, classes).double()
    with torch.no_grad():
        model.weight.copy_(torch.randn(classes, d, generator=rng, dtype=torch.float64))
    X = torch.randn(10, d, generator=rng, dtype=torch.float64)
    return model, X, torch.arange(10) % classes


def test_input_gradient_matches_torch_func_jacobians():
    model = nets.mlp((4, 8, 3), activation="tanh", seed=0, dtype=torch.float64)
    X = torch.randn(5, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    target = torch.tensor([0, 1, 2, 1, 0])
    jacobians = torch.func.vmap(torch.func.jacrev(lambda x: model(x[None])[0]))(X)   # (5, 3, 4)
    assert torch.allclose(attribution.input_gradient(model, X, target), jacobians[torch.arange(5), target],
                          atol=1e-12)


def test_linear_models_have_exact_explanations():
    model, X, target = _linear()
    w = model.weight.detach()[target]
    assert torch.allclose(attribution.saliency(model, X, target), w.abs(), atol=1e-14)
    assert torch.allclose(attribution.integrated_gradients(model, X, target, steps=3), w * X, atol=1e-12)
    assert torch.allclose(attribution.occlusion(model, X, target), w * X, atol=1e-12)
    assert torch.allclose(attribution.smoothgrad(model, X, target, noise=0.5, samples=7), w, atol=1e-12)


def test_bias_free_relu_networks_are_complete_under_gradient_times_input():
    model = nets.mlp((6, 16, 16, 4), seed=1, dtype=torch.float64)
    for module in model:
        if isinstance(module, nn.Linear):
            nn.init.zeros_(module.bias)
    X = torch.randn(20, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    target = torch.arange(20) % 4
    total = attribution.gradient_times_input(model, X, target).sum(dim=1)
    assert torch.allclose(total, attribution.class_scores(model, X, target).detach(), atol=1e-10)


def test_integrated_gradients_converge_to_completeness():
    model = nets.mlp((6, 32, 3), activation="tanh", seed=2, dtype=torch.float64)
    X = torch.randn(8, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    target = torch.arange(8) % 3
    baseline = torch.full((6,), 0.2, dtype=torch.float64)
    gap = (attribution.class_scores(model, X, target) - attribution.class_scores(model, baseline.expand_as(X),
                                                                                   target)).detach()
    errors = [(attribution.integrated_gradients(model, X, target, baseline=baseline, steps=m).sum(1) - gap)
              .abs().max().item() for m in (4, 16, 64)]
    assert errors[2] < errors[1] / 8 < errors[0] / 64


def test_the_linear_region_radius_is_sharp():
    model = nets.mlp((5, 16, 16, 3), seed=3, dtype=torch.float64)
    x = torch.randn(5, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    region = attribution.linear_region_radius(model, x)

    def pattern(inputs):
        with torch.no_grad():
            return torch.cat([(model[:2](inputs) > 0), (model[:4](inputs) > 0)], dim=1)

    rng = torch.Generator().manual_seed(4)
    directions = torch.randn(5000, 5, dtype=torch.float64, generator=rng)
    directions /= directions.norm(dim=1, keepdim=True)
    inside = x + 0.999 * region.radius * torch.rand(5000, 1, dtype=torch.float64, generator=rng) * directions
    assert torch.all(pattern(inside) == pattern(x[None]))
    with torch.no_grad():
        z = (model[:2] if region.layer == 0 else model[:4])(x[None])[0, region.unit]
    step = -torch.sign(z) * 1.001 * region.radius * region.gradient / region.gradient.norm()
    assert not torch.equal(pattern((x + step)[None]), pattern(x[None]))


def test_shapley_values_of_a_linear_function_and_efficiency():
    rng = np.random.default_rng(0)
    w, x, baseline = rng.normal(size=5), rng.normal(size=5), rng.normal(size=5)
    assert np.allclose(attribution.shapley_values(lambda Z: Z @ w, x, baseline), w * (x - baseline), atol=1e-12)

    def f(Z):
        return np.tanh(Z @ w) + Z[:, 0] * Z[:, 3]
    phi = attribution.shapley_values(f, x, baseline)
    assert abs(phi.sum() - (f(x[None])[0] - f(baseline[None])[0])) < 1e-12
    estimate = attribution.shapley_sampling(f, x, baseline, permutations=4000, seed=1)
    assert np.all(np.abs(estimate.values - phi) < 4 * estimate.standard_errors + 1e-12)


def test_bad_arguments_are_named():
    model, X, target = _linear()
    with pytest.raises(TypeError, match="target must hold integer"):
        attribution.saliency(model, X, target.double())
    with pytest.raises(ValueError, match="target must have shape"):
        attribution.saliency(model, X, target[:3])
    with pytest.raises(ValueError, match="steps"):
        attribution.integrated_gradients(model, X, target, steps=0)
    with pytest.raises(ValueError, match="at most 16 features"):
        attribution.shapley_values(lambda Z: Z.sum(1), np.zeros(17), np.zeros(17))
    with pytest.raises(TypeError, match="nn.Sequential"):
        attribution.linear_region_radius(model, X[0])
