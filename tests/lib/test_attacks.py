"""Attacks: the closed form of a linear model, the allowed sets, targeted steps, adversarial training."""
from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from dlbook import attacks, linear_robustness, nets


def _two_class_linear(seed=0, d=6):
    rng = torch.Generator().manual_seed(seed)
    model = nn.Linear(d, 2).double()
    with torch.no_grad():
        model.weight.copy_(torch.randn(2, d, generator=rng, dtype=torch.float64))
        model.bias.copy_(torch.randn(2, generator=rng, dtype=torch.float64))
    X = torch.randn(30, d, generator=rng, dtype=torch.float64)
    y = torch.randint(0, 2, (30,), generator=rng)
    return model, X, y


def _closed_form(model, X, y, eps):
    """Cross-entropy of two classes is softplus(-(z_y - z_other)): the binary closed form with theta = w_1 - w_0."""
    theta = model.weight[1] - model.weight[0]
    shift = (model.bias[1] - model.bias[0]) * (2 * y - 1)
    return linear_robustness.binary_worst_case_loss(theta, X, (2 * y - 1).double(), eps,
                                                    loss=lambda m: linear_robustness.logistic_loss(m - shift))


@pytest.mark.parametrize("eps", [0.0, 0.05, 0.3])
def test_fgsm_attains_the_worst_case_loss_of_a_linear_model(eps):
    model, X, y = _two_class_linear()
    with torch.no_grad():
        got = F.cross_entropy(model(attacks.fgsm(model, X, y, eps, low=None, high=None)), y, reduction="none")
        assert torch.allclose(got, _closed_form(model, X, y, eps), atol=1e-10, rtol=0)


def test_pgd_never_exceeds_the_closed_form():
    model, X, y = _two_class_linear(seed=1)
    with torch.no_grad():
        for norm in ("linf",):
            X_adv = attacks.pgd(model, X, y, 0.2, steps=30, norm=norm, low=None, high=None)
            loss = F.cross_entropy(model(X_adv), y, reduction="none")
            assert torch.all(loss <= _closed_form(model, X, y, 0.2) + 1e-12)
            assert torch.allclose(loss, _closed_form(model, X, y, 0.2), atol=1e-8)


@pytest.mark.parametrize("norm", ["linf", "l2"])
def test_pgd_stays_in_the_ball_and_the_box(norm):
    model = nets.mlp((8, 16, 3), seed=0, dtype=torch.float64)
    X = torch.rand(40, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    y = torch.arange(40) % 3
    X_adv, path = attacks.pgd(model, X, y, 0.3, steps=10, norm=norm, return_path=True)
    assert path.shape == (11, 40, 8)
    p = float("inf") if norm == "linf" else 2
    assert torch.all((path - X).norm(p=p, dim=2) <= 0.3 + 1e-12)
    assert torch.all((path >= 0) & (path <= 1))
    with torch.no_grad():
        clean = F.cross_entropy(model(X), y)
        assert F.cross_entropy(model(X_adv), y) > clean


def test_the_ell_two_start_is_uniform_in_the_ball():
    X = torch.zeros(20000, 2, dtype=torch.float64)
    radius = attacks._random_start(X, 1.0, "l2", seed=3).norm(dim=1)
    # In the unit disc the radius has P(r <= 1/2) = 1/4.
    assert abs((radius <= 0.5).double().mean().item() - 0.25) < 0.01
    assert radius.max() <= 1.0


def test_targeted_pgd_raises_the_target_logit_difference():
    model = nets.mlp((5, 12, 4), seed=2, dtype=torch.float64)
    X = torch.randn(25, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    y, target = torch.zeros(25, dtype=torch.long), torch.full((25,), 3)
    with torch.no_grad():
        before = model(X)[:, 3] - model(X)[:, 0]
        X_adv = attacks.pgd(model, X, y, 0.5, steps=20, target=target, low=None, high=None)
        after = model(X_adv)[:, 3] - model(X_adv)[:, 0]
    assert torch.all(after > before)


def test_adversarial_training_lowers_the_adversarial_loss():
    rng = torch.Generator().manual_seed(0)
    X = torch.randn(200, 2, generator=rng)
    y = (X[:, 0] > 0).long()
    model = nets.mlp((2, 16, 2), seed=0)
    losses = attacks.adversarial_training(model, torch.optim.Adam(model.parameters(), lr=0.02), X, y,
                                          eps=0.1, epochs=30, steps=3)
    assert len(losses) == 30 and losses[-1] < 0.5 * losses[0]


def test_bad_arguments_are_named():
    model, X, y = _two_class_linear()
    with pytest.raises(TypeError, match="model"):
        attacks.fgsm("net", X, y, 0.1)
    with pytest.raises(ValueError, match="eps"):
        attacks.fgsm(model, X, y, -0.1)
    with pytest.raises(TypeError, match="y must hold integer"):
        attacks.fgsm(model, X, y.double(), 0.1)
    with pytest.raises(ValueError, match="norm"):
        attacks.pgd(model, X, y, 0.1, norm="l1")
    with pytest.raises(ValueError, match="low and high"):
        attacks.pgd(model, X, y, 0.1, low=None)
    with pytest.raises(ValueError, match="steps"):
        attacks.pgd(model, X, y, 0.1, steps=0)


def test_the_noisy_defence_averages_probabilities():
    model = nets.mlp((5, 8, 3), seed=0, dtype=torch.float64)
    X = torch.randn(7, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.allclose(attacks.NoisyDefence(model, 0.0, 4)(X), F.log_softmax(model(X), dim=1), atol=1e-12)
        out = attacks.NoisyDefence(model, 0.5, 10, seed=3)(X)
        assert torch.allclose(out.exp().sum(dim=1), torch.ones(7, dtype=torch.float64), atol=1e-12)
        assert torch.equal(out, attacks.NoisyDefence(model, 0.5, 10, seed=3)(X))
        noise = torch.randn(1, 7, 5, generator=attacks.generator(3), dtype=torch.float64)
        single = attacks.NoisyDefence(model, 0.5, 1, seed=3)(X)
        assert torch.allclose(single, F.log_softmax(model(X + 0.5 * noise[0]), dim=1))
    with pytest.raises(ValueError, match="samples"):
        attacks.NoisyDefence(model, 0.1, 0)
    with pytest.raises(ValueError, match="sigma"):
        attacks.NoisyDefence(model, -0.1)
