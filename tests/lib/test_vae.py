"""Tests of dlbook.vae against torch.distributions, Monte Carlo and autograd."""
import math

import pytest
import torch
from torch.distributions import Bernoulli, Normal, kl_divergence

from dlbook import vae


def _tensors(seed=0, shape=(5, 3)):
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=gen, dtype=torch.float64),
            torch.randn(*shape, generator=gen, dtype=torch.float64) * 0.7)


def test_gaussian_kl_matches_torch_distributions():
    mu, logvar = _tensors()
    theirs = kl_divergence(Normal(mu, (0.5 * logvar).exp()), Normal(0.0, 1.0)).sum(-1)
    assert (vae.gaussian_kl(mu, logvar) - theirs).abs().max() < 1e-12
    assert vae.gaussian_kl(torch.zeros(4), torch.zeros(4)).item() == 0.0


def test_gaussian_kl_matches_monte_carlo():
    mu = torch.tensor([0.8, -0.3], dtype=torch.float64)
    logvar = torch.tensor([-0.5, 0.4], dtype=torch.float64)
    eps = torch.randn(100_000, 2, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    z = vae.reparameterize(mu.expand(100_000, 2), logvar.expand(100_000, 2), eps)
    log_ratio = (Normal(mu, (0.5 * logvar).exp()).log_prob(z) - Normal(0.0, 1.0).log_prob(z)).sum(-1)
    assert abs(log_ratio.mean() - vae.gaussian_kl(mu, logvar)) < 3 * log_ratio.std() / 100_000**0.5


def test_bernoulli_log_likelihood_matches_torch_and_is_stable():
    gen = torch.Generator().manual_seed(2)
    logits = 3 * torch.randn(4, 6, generator=gen, dtype=torch.float64)
    x = torch.randint(0, 2, (4, 6), generator=gen).double()
    theirs = Bernoulli(logits=logits).log_prob(x).sum(-1)
    assert (vae.bernoulli_log_likelihood(logits, x) - theirs).abs().max() < 1e-12
    soft = torch.rand(4, 6, generator=gen, dtype=torch.float64)
    bce = torch.nn.functional.binary_cross_entropy_with_logits(logits, soft, reduction="none").sum(-1)
    assert (vae.bernoulli_log_likelihood(logits, soft) + bce).abs().max() < 1e-12
    extreme = vae.bernoulli_log_likelihood(torch.tensor([[200.0, -200.0]]), torch.tensor([[0.0, 1.0]]))
    assert torch.isfinite(extreme).all() and extreme.item() == pytest.approx(-400.0)


def test_vae_loss_by_hand_and_gradcheck():
    mu, logvar = _tensors(3, (4, 2))
    eps = torch.randn(4, 2, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    W = torch.randn(6, 2, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    x = torch.rand(4, 6, generator=torch.Generator().manual_seed(6), dtype=torch.float64)

    def loss(mu, logvar, W):
        z = vae.reparameterize(mu, logvar, eps)
        return vae.vae_loss(x, z @ W.T, mu, logvar, beta=2.0)

    z = mu + (0.5 * logvar).exp() * eps
    p = torch.sigmoid(z @ W.T)
    by_hand = (-(x * p.log() + (1 - x) * (1 - p).log()).sum(1)
               + 2.0 * 0.5 * (mu**2 + logvar.exp() - 1 - logvar).sum(1)).mean()
    assert abs(loss(mu, logvar, W) - by_hand) < 1e-12
    assert torch.autograd.gradcheck(loss, (mu.requires_grad_(), logvar.requires_grad_(), W.requires_grad_()))


def test_vae_forward_is_reproducible_and_differentiable():
    x = torch.rand(7, 64, generator=torch.Generator().manual_seed(0))
    a, b = vae.VAE(64, 3, 16, seed=1), vae.VAE(64, 3, 16, seed=1)
    out_a, out_b = a(x), b(x)
    assert out_a.logits.shape == (7, 64) and out_a.mu.shape == out_a.z.shape == (7, 3)
    assert torch.equal(out_a.z, out_b.z)
    assert not torch.equal(a(x).z, out_a.z)                   # fresh noise on the next call
    vae.vae_objective(1.0)(out_a, x).backward()
    assert all(p.grad is not None for p in a.parameters())


def test_active_units():
    mu = torch.stack([torch.linspace(-1, 1, 50), 0.05 * torch.linspace(-1, 1, 50), torch.zeros(50)], dim=1)
    assert torch.allclose(vae.latent_activity(mu), mu.var(0))
    assert vae.active_units(mu) == 1 and vae.active_units(mu, threshold=1e-4) == 2


def test_both_gradient_estimators_are_unbiased_and_differ_in_variance():
    f = lambda z: (z - 3) ** 2  # noqa: E731
    mu, sigma, exact = 1.0, 0.5, 2 * (1.0 - 3)
    path = vae.gradient_estimates(f, mu, sigma, 10, num_repeats=20000, method="pathwise", seed=0)
    score = vae.gradient_estimates(f, mu, sigma, 10, num_repeats=20000, method="score", seed=0)
    for estimates in (path, score):
        assert abs(estimates.mean() - exact) < 4 * estimates.std() / 20000**0.5
    c = mu - 3
    assert path.var().item() == pytest.approx(4 * sigma**2 / 10, rel=0.05)
    assert score.var().item() == pytest.approx((15 * sigma**2 + 14 * c**2 + c**4 / sigma**2) / 10, rel=0.05)


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="mu and logvar must have the same shape"):
        vae.gaussian_kl(torch.zeros(2, 3), torch.zeros(2, 2))
    with pytest.raises(TypeError, match="mu must hold floating-point"):
        vae.gaussian_kl(torch.zeros(2, dtype=torch.int64), torch.zeros(2))
    with pytest.raises(ValueError, match="beta must be >= 0"):
        vae.vae_loss(torch.zeros(1, 2), torch.zeros(1, 2), torch.zeros(1, 1), torch.zeros(1, 1), beta=-1.0)
    with pytest.raises(ValueError, match="method must be one of"):
        vae.gradient_estimates(math.sin, 0.0, 1.0, 3, method="reinforce")
    with pytest.raises(ValueError, match="sigma must be > 0"):
        vae.gradient_estimates(math.sin, 0.0, 0.0, 3)
    with pytest.raises(ValueError, match="latent_dim must be >= 1"):
        vae.VAE(64, 0)
