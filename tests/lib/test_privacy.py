"""Tests of dlbook.privacy: randomized response against its closed-form mean and variance, per-example
gradients (vmap) against a loop, clipping and the noisy clipped gradient."""
import math

import pytest
import torch
from torch import nn

from dlbook import nets, privacy


def _data(n, dim=8, num_classes=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, dim, generator=g, dtype=torch.float64), torch.randint(0, num_classes, (n,), generator=g)


def test_truth_probability():
    assert privacy.truth_probability(1.0) == pytest.approx(math.e / (1 + math.e), rel=1e-15)
    assert privacy.truth_probability(0.0) == 0.5


def test_reports_flip_with_the_right_probability():
    answers = torch.zeros(200_000, dtype=torch.bool)
    reports = privacy.randomized_response(answers, 1.0, seed=1)
    flip = 1 - privacy.truth_probability(1.0)
    se = math.sqrt(flip * (1 - flip) / len(answers))
    assert abs(reports.double().mean().item() - flip) < 4 * se
    assert torch.equal(reports, privacy.randomized_response(answers, 1.0, seed=1))  # seeded


def test_estimator_mean_and_variance_match_the_closed_form():
    """ε = 1, π = 0.3, n = 2000, 4000 repetitions: mean within 3 SE, variance within 5 %."""
    n, repetitions, pi = 2000, 4000, 0.3
    answers = torch.rand(repetitions, n, generator=torch.Generator().manual_seed(3), dtype=torch.float64) < pi
    estimates = privacy.estimate_proportion(privacy.randomized_response(answers, 1.0, seed=2), 1.0)
    variance = privacy.estimate_variance(pi, 1.0, n)
    assert abs(estimates.mean().item() - pi) < 3 * math.sqrt(variance / repetitions)
    assert abs(estimates.var().item() / variance - 1) < 0.05
    # The formula itself: λ = pπ + (1 - p)(1 - π).
    p = privacy.truth_probability(1.0)
    lam = p * pi + (1 - p) * (1 - pi)
    assert variance == pytest.approx(lam * (1 - lam) / (n * (2 * p - 1) ** 2), rel=1e-15)


def test_fixed_answers_vary_only_through_the_flips():
    """With the same 600 of 2000 answers true in every repetition the variance is p(1-p)/(n(2p-1)^2)."""
    n, repetitions = 2000, 4000
    answers = torch.zeros(repetitions, n, dtype=torch.bool)
    answers[:, :600] = True
    estimates = privacy.estimate_proportion(privacy.randomized_response(answers, 1.0, seed=4), 1.0)
    p = privacy.truth_probability(1.0)
    conditional = p * (1 - p) / (n * (2 * p - 1) ** 2)
    assert abs(estimates.var().item() / conditional - 1) < 0.05
    assert estimates.var().item() < 0.9 * privacy.estimate_variance(0.3, 1.0, n)


def test_per_example_gradients_equal_a_loop():
    model = nets.mlp((8, 16, 3), dtype=torch.float64, seed=3)
    X, y = _data(40, seed=4)
    fast = privacy.per_example_gradients(model, X, y)
    slow = privacy.per_example_gradients_loop(model, X, y)
    assert fast.keys() == slow.keys()
    assert max((fast[k] - slow[k]).abs().max().item() for k in fast) < 1e-12
    # Their mean is the gradient of the mean loss.
    full = torch.autograd.grad(nn.functional.cross_entropy(model(X), y), list(model.parameters()))
    assert max((fast[k].mean(0) - g).abs().max().item() for k, g in zip(fast, full)) < 1e-12


def test_clipping_bounds_norms_and_keeps_small_gradients():
    model = nets.mlp((8, 16, 3), dtype=torch.float64, seed=5)
    X, y = _data(50, seed=6)
    grads = privacy.per_example_gradients(model, X, y)
    norms = privacy.per_example_norms(grads)
    C = norms.median().item()
    clipped = privacy.clip_per_example(grads, C)
    new_norms = privacy.per_example_norms(clipped)
    assert new_norms.max().item() <= C * (1 + 1e-12)
    small = norms <= C
    assert torch.allclose(new_norms[~small], torch.full_like(new_norms[~small], C), rtol=1e-12)
    for k in grads:
        assert torch.equal(clipped[k][small], grads[k][small])
        # Directions are kept: clipped = factor * original, factor = C / norm.
        factor = (C / norms[~small]).view(-1, *([1] * (grads[k].dim() - 1)))
        assert (clipped[k][~small] - factor * grads[k][~small]).abs().max().item() < 1e-14


def test_noisy_clipped_gradient():
    model = nets.mlp((8, 16, 3), dtype=torch.float64, seed=7)
    X, y = _data(64, seed=8)
    grads = privacy.per_example_gradients(model, X, y)
    C = 0.5
    clean = privacy.noisy_clipped_gradient(grads, C, 0.0)
    clipped = privacy.clip_per_example(grads, C)
    assert all(torch.allclose(clean[k], clipped[k].mean(0), rtol=0, atol=1e-15) for k in grads)
    sigma = 2.0
    noisy = privacy.noisy_clipped_gradient(grads, C, sigma, seed=9)
    residual = torch.cat([((noisy[k] - clean[k]) * len(X)).reshape(-1) for k in grads])
    # The noise on the sum has standard deviation σC in every coordinate (195 coordinates here).
    assert abs(residual.std().item() / (sigma * C) - 1) < 0.15
    assert abs(residual.mean().item()) < 4 * sigma * C / math.sqrt(len(residual))


def test_private_sgd_step_without_noise_and_clipping_is_plain_sgd():
    model = nets.mlp((8, 16, 3), dtype=torch.float64, seed=10)
    reference = nets.mlp((8, 16, 3), dtype=torch.float64, seed=10)
    X, y = _data(32, seed=11)
    privacy.private_sgd_step(model, X, y, lr=0.1, max_norm=1e6, noise_multiplier=0.0)
    opt = torch.optim.SGD(reference.parameters(), lr=0.1)
    nn.functional.cross_entropy(reference(X), y).backward()
    opt.step()
    assert max((a - b).abs().max().item() for a, b in zip(model.parameters(), reference.parameters())) < 1e-14


def test_private_sgd_without_noise_or_clipping_is_train_fit_with_sgd():
    from dlbook import train

    X, y = _data(70, seed=12)
    model = nets.mlp((8, 16, 3), dtype=torch.float64, seed=13)
    reference = nets.mlp((8, 16, 3), dtype=torch.float64, seed=13)
    privacy.private_sgd(model, X, y, epochs=3, batch_size=16, lr=0.1, max_norm=1e6, noise_multiplier=0.0, seed=4)
    train.fit(reference, nn.functional.cross_entropy, torch.optim.SGD(reference.parameters(), lr=0.1), (X, y),
              epochs=3, batch_size=16, seed=4, progress=False)
    assert max((a - b).abs().max().item() for a, b in zip(model.parameters(), reference.parameters())) < 1e-12
    noisy = privacy.private_sgd(nets.mlp((8, 16, 3), dtype=torch.float64, seed=13), X, y, epochs=1, batch_size=16,
                                lr=0.1, max_norm=0.1, noise_multiplier=1.0, seed=4)
    assert all(torch.isfinite(p).all() for p in noisy.parameters())


def test_bad_inputs():
    with pytest.raises(ValueError, match="epsilon"):
        privacy.truth_probability(-1.0)
    with pytest.raises(TypeError, match="answers"):
        privacy.randomized_response(torch.tensor([0.5, 1.0]), 1.0)
    with pytest.raises(TypeError, match="answers"):
        privacy.randomized_response(torch.tensor([0, 2]), 1.0)
    with pytest.raises(ValueError, match="epsilon"):
        privacy.estimate_proportion(torch.tensor([True, False]), 0.0)
    with pytest.raises(ValueError, match="proportion"):
        privacy.estimate_variance(1.5, 1.0, 10)
    with pytest.raises(ValueError, match="num_respondents"):
        privacy.estimate_variance(0.5, 1.0, 0)
    model = nets.mlp((8, 4, 3), dtype=torch.float64)
    X, y = _data(10)
    with pytest.raises(ValueError, match="X and y"):
        privacy.per_example_gradients(model, X, y[:5])
    with pytest.raises(TypeError, match="model"):
        privacy.per_example_gradients(X, X, y)
    grads = privacy.per_example_gradients(model, X, y)
    with pytest.raises(ValueError, match="max_norm"):
        privacy.clip_per_example(grads, 0.0)
    with pytest.raises(ValueError, match="noise_multiplier"):
        privacy.noisy_clipped_gradient(grads, 1.0, -1.0)
    with pytest.raises(TypeError, match="per_example"):
        privacy.per_example_norms([torch.ones(3)])
    with pytest.raises(ValueError, match="batch_size"):
        privacy.private_sgd(model, X, y, epochs=1, batch_size=0, lr=0.1, max_norm=1.0, noise_multiplier=1.0)
    with pytest.raises(ValueError, match="first"):
        privacy.per_example_norms({"a": torch.ones(3, 2), "b": torch.ones(4)})
