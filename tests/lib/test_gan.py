"""Tests of dlbook.gan: the game on known densities, the losses against PyTorch, the gradient
penalty, stacks of independent networks, the ring of Gaussians and the training runs."""
import math

import numpy as np
import pytest
import torch
from sklearn.linear_model import LogisticRegression
from torch.nn import functional as F

from dlbook import divergences, gan, nets


def _distribution(n, seed):
    p = torch.rand(n, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return p / p.sum()


# ---------------------------------------------------------------------------
# The game on known distributions
# ---------------------------------------------------------------------------

def test_value_at_the_optimal_discriminator_is_minus_log4_plus_2js():
    for seed in range(10):
        p, q = _distribution(50, seed), _distribution(50, 100 + seed)
        D_star = gan.optimal_discriminator(p, q)
        value = gan.game_value(D_star, p, q).item()
        assert value == pytest.approx(-math.log(4) + 2 * divergences.js_divergence(p, q).item(), abs=1e-12)
        # no other discriminator does better
        D = torch.rand(50, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
        assert gan.game_value(D, p, q).item() < value


def test_equal_distributions_and_empty_points():
    p = _distribution(20, 0)
    assert torch.equal(gan.optimal_discriminator(p, p), torch.full_like(p, 0.5))
    assert gan.game_value(gan.optimal_discriminator(p, p), p, p).item() == pytest.approx(-math.log(4), abs=1e-15)
    p = torch.tensor([0.5, 0.5, 0.0]), torch.tensor([0.0, 0.5, 0.5])
    D_star = gan.optimal_discriminator(torch.tensor([0.5, 0.0, 0.0]), torch.tensor([0.0, 0.5, 0.0]))
    assert D_star.tolist() == [1.0, 0.0, 0.5]
    # D = 1 where only data lives and 0 where only the model does costs nothing (0 log 0 = 0)
    assert gan.game_value(D_star, torch.tensor([1.0, 0.0, 0.0]), torch.tensor([0.0, 1.0, 0.0])).item() == 0.0


def test_logistic_discriminator_matches_sklearn_and_recovers_the_log_odds():
    gen = torch.Generator().manual_seed(0)
    real = torch.randn(2000, generator=gen, dtype=torch.float64)
    fake = 2 + 1.5 * torch.randn(2000, generator=gen, dtype=torch.float64)
    fit = gan.fit_logistic_discriminator(real, fake)
    x = torch.cat([real, fake]).numpy()
    y = np.r_[np.ones(2000), np.zeros(2000)]
    sk = LogisticRegression(C=np.inf, tol=1e-12, max_iter=10_000).fit(np.c_[x, x**2], y)
    assert fit.coefficients.numpy() == pytest.approx(np.r_[sk.intercept_, sk.coef_[0]], rel=1e-4)
    # with many samples the fit approaches the exact log-odds of the two Gaussians
    real = torch.randn(100_000, generator=gen, dtype=torch.float64)
    fake = 2 + 1.5 * torch.randn(100_000, generator=gen, dtype=torch.float64)
    exact = [4 / 4.5 + math.log(1.5), -4 / 4.5, -0.5 + 1 / 4.5]
    assert gan.fit_logistic_discriminator(real, fake).coefficients.numpy() == pytest.approx(exact, rel=0.05)


# ---------------------------------------------------------------------------
# Losses
# ---------------------------------------------------------------------------

def test_losses_against_torch_binary_cross_entropy():
    gen = torch.Generator().manual_seed(3)
    real, fake = torch.randn(64, 1, generator=gen), torch.randn(64, 1, generator=gen) - 1
    bce = (F.binary_cross_entropy_with_logits(real, torch.ones_like(real))
           + F.binary_cross_entropy_with_logits(fake, torch.zeros_like(fake)))
    assert gan.discriminator_loss(real, fake).item() == pytest.approx(bce.item(), rel=1e-6)
    assert gan.generator_loss(fake, "non_saturating").item() == pytest.approx(
        F.binary_cross_entropy_with_logits(fake, torch.ones_like(fake)).item(), rel=1e-6)
    assert gan.generator_loss(fake, "saturating").item() == pytest.approx(
        torch.log(1 - torch.sigmoid(fake)).mean().item(), rel=1e-6)
    assert gan.generator_loss(fake, "wasserstein").item() == pytest.approx(-fake.mean().item(), rel=1e-6)
    assert gan.wasserstein_estimate(real, fake).item() == pytest.approx((real.mean() - fake.mean()).item(), rel=1e-6)
    # stacks: one value per member
    assert gan.generator_loss(torch.randn(3, 10, 1, generator=gen)).shape == (3,)
    assert gan.value_estimate(torch.zeros(4, 7), torch.zeros(4, 7)).tolist() == pytest.approx([-math.log(4)] * 4)


def test_non_saturating_gradient_is_larger_where_the_discriminator_rejects():
    D = 1e-3
    logit = torch.tensor([[math.log(D / (1 - D))]], dtype=torch.float64, requires_grad=True)
    (sat,) = torch.autograd.grad(gan.generator_loss(logit, "saturating"), logit)
    (non_sat,) = torch.autograd.grad(gan.generator_loss(logit, "non_saturating"), logit)
    assert (non_sat / sat).item() == pytest.approx((1 - D) / D, rel=1e-10)


def test_gradient_penalty_exact_cases():
    gen = torch.Generator().manual_seed(4)
    a = torch.tensor([0.3, -2.0, 0.5], dtype=torch.float64)
    real = torch.randn(50, 3, generator=gen, dtype=torch.float64)
    fake = torch.randn(50, 3, generator=gen, dtype=torch.float64)
    penalty = gan.gradient_penalty(lambda x: x @ a, real, fake, weight=7.0, generator=gen)
    assert penalty.item() == pytest.approx(7.0 * (a.norm().item() - 1) ** 2, rel=1e-12)
    far = lambda n: torch.rand(n, 3, generator=gen, dtype=torch.float64) + 5.0  # noqa: E731
    assert gan.gradient_penalty(lambda x: x.norm(dim=-1), far(40), far(40)).item() == pytest.approx(0, abs=1e-24)


def test_gradient_penalty_gradcheck_with_respect_to_critic_parameters():
    gen = torch.Generator().manual_seed(5)
    real = torch.randn(6, 2, generator=gen, dtype=torch.float64)
    fake = torch.randn(6, 2, generator=gen, dtype=torch.float64)
    params = [t.requires_grad_() for layer in nets.random_layers((2, 5, 1), seed=1) for t in layer]

    def penalty(W1, b1, W2, b2):
        critic = lambda x: torch.tanh(x @ W1.T + b1) @ W2.T + b2  # noqa: E731
        return gan.gradient_penalty(critic, real, fake, generator=torch.Generator().manual_seed(0))

    assert torch.autograd.gradcheck(penalty, params)


def test_gradient_penalty_of_a_stack_is_each_members_penalty():
    stack = gan.MLPStack((2, 8, 1), (0, 1), dtype=torch.float64)
    gen = torch.Generator().manual_seed(6)
    real, fake = torch.randn(2, 10, 2, generator=gen, dtype=torch.float64), torch.randn(2, 10, 2, generator=gen,
                                                                                       dtype=torch.float64)
    together = gan.gradient_penalty(stack, real, fake, generator=torch.Generator().manual_seed(1))
    mix = torch.rand(2, 10, 1, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    for s in range(2):
        x_hat = (mix[s] * real[s] + (1 - mix[s]) * fake[s]).requires_grad_()
        (grad,) = torch.autograd.grad(stack.member(s)(x_hat).sum(), x_hat)
        alone = 10 * ((grad.norm(dim=1) - 1) ** 2).mean()
        assert together[s].item() == pytest.approx(alone.item(), rel=1e-12)


def test_clip_weights():
    model = nets.mlp((2, 4, 1), seed=0)
    gan.clip_weights_(model, 0.05)
    assert all(p.abs().max() <= 0.05 for p in model.parameters())


# ---------------------------------------------------------------------------
# Stacks of networks
# ---------------------------------------------------------------------------

def test_stack_members_are_the_shared_mlps():
    stack = gan.MLPStack((2, 16, 16, 3), (4, 9))
    x = torch.randn(2, 7, 2, generator=torch.Generator().manual_seed(0))
    out = stack(x)
    assert out.shape == (2, 7, 3)
    for index, seed in enumerate((4, 9)):
        assert torch.allclose(out[index], nets.mlp((2, 16, 16, 3), seed=seed)(x[index]), atol=1e-6)
        assert torch.allclose(stack.member(index)(x[index]), out[index], atol=1e-6)
    assert stack(x[0]).shape == (2, 7, 3)  # a shared input


def _train_steps(model, X, y, lr, steps=5, optimizer=torch.optim.Adam):
    opt = optimizer(model.parameters(), lr=lr)
    for _ in range(steps):
        loss = ((model(X) - y) ** 2).mean(dim=(-2, -1)).sum()
        opt.zero_grad()
        loss.backward()
        model.step(opt) if isinstance(model, gan.MLPStack) else opt.step()


def test_training_a_stack_trains_each_member_alone():
    gen = torch.Generator().manual_seed(1)
    X, y = torch.randn(3, 20, 2, generator=gen, dtype=torch.float64), torch.randn(3, 20, 1, generator=gen,
                                                                                  dtype=torch.float64)
    for optimizer in (torch.optim.Adam, torch.optim.RMSprop, torch.optim.SGD):
        stack = gan.MLPStack((2, 8, 1), (0, 1, 2), dtype=torch.float64, lr_scales=(1.0, 2.0, 0.5))
        _train_steps(stack, X, y, lr=1e-2, optimizer=optimizer)
        for index, (seed, scale) in enumerate([(0, 1.0), (1, 2.0), (2, 0.5)]):
            alone = nets.mlp((2, 8, 1), seed=seed, dtype=torch.float64)
            _train_steps(alone, X[index], y[index], lr=1e-2 * scale, optimizer=optimizer)
            assert torch.allclose(stack.member(index)(X[index]), alone(X[index]), rtol=1e-12, atol=1e-12)


def test_the_one_pass_critic_loss_equals_gap_plus_penalty():
    stack = gan.MLPStack((2, 16, 16, 1), (0, 1, 2), dtype=torch.float64)
    gen = torch.Generator().manual_seed(8)
    real = torch.randn(3, 20, 2, generator=gen, dtype=torch.float64)
    fake = torch.randn(3, 20, 2, generator=gen, dtype=torch.float64) + 1
    fused = gan.penalised_critic_loss(stack, real, fake, weight=7.0, generator=torch.Generator().manual_seed(3))
    separate = (-gan.wasserstein_estimate(stack(real), stack(fake))
                + gan.gradient_penalty(stack, real, fake, weight=7.0, generator=torch.Generator().manual_seed(3)))
    assert torch.allclose(fused, separate, rtol=1e-12, atol=1e-12)
    grads = [torch.autograd.grad(loss.sum(), list(stack.parameters())) for loss in (fused, separate)]
    assert all(torch.allclose(a, b, rtol=1e-10, atol=1e-12) for a, b in zip(*grads))


def test_zero_output_and_bad_input():
    stack = gan.MLPStack((1, 4, 1), (0, 1)).zero_output_()
    assert torch.equal(stack(torch.randn(2, 5, 1)), torch.zeros(2, 5, 1))
    with pytest.raises(ValueError, match=r"x must have shape \(2, batch, 1\)"):
        stack(torch.zeros(3, 5, 1))
    with pytest.raises(ValueError, match="lr_scales must have 2 entries"):
        gan.MLPStack((1, 4, 1), (0, 1), lr_scales=(1.0,))


# ---------------------------------------------------------------------------
# The ring and mode coverage
# ---------------------------------------------------------------------------

def test_ring_of_gaussians():
    centres = gan.ring_centres(8, 2.0)
    assert torch.allclose(centres.norm(dim=1), torch.full((8,), 2.0))
    points = gan.ring_of_gaussians((3, 500), std=0.05, generator=torch.Generator().manual_seed(0))
    assert points.X.shape == (3, 500, 2) and points.y.shape == (3, 500)
    assert (points.X - centres[points.y]).norm(dim=-1).max() < 0.05 * 6
    again = gan.ring_of_gaussians((3, 500), std=0.05, generator=torch.Generator().manual_seed(0))
    assert torch.equal(points.X, again.X)
    assert set(points.y.unique().tolist()) == set(range(8))


def test_mode_coverage_on_known_sets():
    centres = gan.ring_centres(8, 2.0, dtype=torch.float64)
    gen = torch.Generator().manual_seed(0)
    five = centres[torch.arange(500) % 5] + 0.01 * torch.randn(500, 2, generator=gen, dtype=torch.float64)
    cover = gan.mode_coverage(five, centres, 0.05)
    assert cover.modes.item() == 5 and cover.quality.item() == 1.0 and cover.counts.tolist() == [100] * 5 + [0] * 3
    far = torch.zeros(100, 2, dtype=torch.float64)  # the centre of the ring is 2 away from every mode
    assert gan.mode_coverage(far, centres, 0.05).modes.item() == 0
    # one point in a mode is below 1 % of 1000 samples; ten points are not
    mixed = torch.cat([centres[:1].repeat(989, 1), centres[1:2].repeat(10, 1), centres[2:3]])
    assert gan.mode_coverage(mixed, centres, 0.05).modes.item() == 2
    stacked = gan.mode_coverage(torch.stack([five[:100], far]), centres, 0.05)
    assert stacked.modes.tolist() == [5, 0] and stacked.counts.shape == (2, 8)


# ---------------------------------------------------------------------------
# Training runs (short)
# ---------------------------------------------------------------------------

def test_ring_gan_run_shapes_and_members():
    config = gan.RingRun(losses=("saturating", "non_saturating"), lrs=(1e-3, 2e-3), seeds=(0, 1), steps=4,
                         snapshot_every=2, num_samples=64, num_eval_points=32)
    result = gan.train_ring_gan(config)
    assert len(result.members) == 8 and result.steps == [0, 2, 4]
    assert result.samples.shape == (3, 8, 64, 2) and result.critic_gap.shape == (3, 8)
    assert result.real.shape == (8, 32, 2)
    assert result.select("non_saturating", 2e-3) == [6, 7]
    # members with the same seed start from the same generator, whatever their loss and lr
    assert torch.equal(result.samples[0, 0], result.samples[0, 6])
    conditional = gan.train_ring_gan(gan.RingRun(losses=("wgan_gp",), seeds=(0,), steps=2, critic_steps=2,
                                                 conditional=True, snapshot_every=1, num_samples=16,
                                                 num_eval_points=16))
    assert conditional.labels.tolist() == [k % 8 for k in range(16)]


def test_ring_gan_rejects_bad_configs():
    with pytest.raises(ValueError, match="one Wasserstein loss"):
        gan.train_ring_gan(gan.RingRun(losses=("non_saturating", "wgan_gp")))
    with pytest.raises(ValueError, match="losses\\[0\\] must be one of"):
        gan.train_ring_gan(gan.RingRun(losses=("minimax",)))
    with pytest.raises(TypeError, match="config must be a RingRun"):
        gan.train_ring_gan({"steps": 3})


def test_critics_and_shift_gradients():
    config = gan.CriticRun(kind="gp", setting="lines", thetas=(-1.0, 1.0), steps=3, num_eval=100)
    result = gan.train_critic(config)
    assert result.estimate.shape == (2,)
    for kind in gan.GENERATOR_LOSSES:
        assert gan.shift_gradient(result.critic, config, kind, num_points=50).shape == (2,)
    real, fake = gan.shifted_pair("normal", (0.5, 2.0), 10, generator=torch.Generator().manual_seed(0))
    assert real.shape == fake.shape == (2, 10, 1)
    with pytest.raises(ValueError, match="setting must be one of"):
        gan.shifted_pair("circle", (1.0,), 10)
    with pytest.raises(ValueError, match="kind must be one of"):
        gan.train_critic(gan.CriticRun(kind="hinge"))
