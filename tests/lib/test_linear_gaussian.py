"""Tests of dlbook.linear_gaussian: exact likelihood, posterior, ELBO and its gap, pPCA, the linear VAE."""
import math

import pytest
import torch

from dlbook import linear_gaussian as lg
from dlbook import pca, train


@pytest.fixture(scope="module")
def model():
    gen = torch.Generator().manual_seed(0)
    W = torch.randn(5, 2, generator=gen, dtype=torch.float64)
    return lg.linear_gaussian(W, torch.randn(5, generator=gen, dtype=torch.float64), 0.3)


def test_log_likelihood_matches_the_density_formula(model):
    x = lg.sample(model, 4, seed=1)
    C = model.W @ model.W.T + 0.3 * torch.eye(5, dtype=torch.float64)
    d = x - model.b
    by_hand = -0.5 * (5 * math.log(2 * math.pi) + torch.logdet(C) + (d * torch.linalg.solve(C, d.T).T).sum(1))
    assert (lg.log_likelihood(model, x) - by_hand).abs().max() < 1e-12


def test_posterior_matches_gaussian_conditioning(model):
    x = lg.sample(model, 3, seed=2)
    post = lg.posterior(model, x)
    # Joint of (z, x): cov(z, x) = W^T, cov(x) = W W^T + sigma^2 I.
    C = model.W @ model.W.T + 0.3 * torch.eye(5, dtype=torch.float64)
    gain = model.W.T @ torch.linalg.inv(C)
    assert (post.mean - (x - model.b) @ gain.T).abs().max() < 1e-12
    assert (post.cov - (torch.eye(2, dtype=torch.float64) - gain @ model.W)).abs().max() < 1e-12


def test_elbo_is_below_the_likelihood_with_the_kl_gap(model):
    x = lg.sample(model, 6, seed=3)
    log_p = lg.log_likelihood(model, x)
    post = lg.posterior(model, x)
    assert (lg.elbo(model, x, post.mean, post.cov) - log_p).abs().max() < 1e-10
    gen = torch.Generator().manual_seed(4)
    for _ in range(5):
        q_mean = post.mean + torch.randn(6, 2, generator=gen, dtype=torch.float64)
        A = torch.randn(2, 2, generator=gen, dtype=torch.float64)
        q_cov = A @ A.T + 0.1 * torch.eye(2, dtype=torch.float64)
        bound = lg.elbo(model, x, q_mean, q_cov)
        gap = lg.gaussian_kl(q_mean, q_cov, post.mean, post.cov)
        assert (bound <= log_p).all()
        assert (log_p - bound - gap).abs().max() < 1e-10


def test_elbo_matches_monte_carlo(model):
    x = lg.sample(model, 1, seed=5)
    q_mean, q_cov = torch.tensor([[0.3, -0.2]], dtype=torch.float64), torch.diag(torch.tensor([0.5, 0.2],
                                                                                                dtype=torch.float64))
    q = torch.distributions.MultivariateNormal(q_mean[0], q_cov)
    z = q_mean[0] + torch.randn(
        200_000, 2, generator=torch.Generator().manual_seed(6), dtype=torch.float64) @ q_cov.sqrt()
    lik = torch.distributions.Normal(z @ model.W.T + model.b, math.sqrt(0.3)).log_prob(x).sum(-1)
    prior = torch.distributions.Normal(0.0, 1.0).log_prob(z).sum(-1)
    terms = lik + prior - q.log_prob(z)
    assert abs(terms.mean() - lg.elbo(model, x, q_mean, q_cov)) < 4 * terms.std() / 200_000**0.5


def test_gaussian_kl_matches_torch():
    gen = torch.Generator().manual_seed(7)
    A, B = (torch.randn(3, 3, generator=gen, dtype=torch.float64) for _ in range(2))
    S0, S1 = A @ A.T + 0.2 * torch.eye(3, dtype=torch.float64), B @ B.T + 0.3 * torch.eye(3, dtype=torch.float64)
    m0, m1 = (torch.randn(3, generator=gen, dtype=torch.float64) for _ in range(2))
    MVN = torch.distributions.MultivariateNormal
    assert abs(lg.gaussian_kl(m0, S0, m1, S1) - torch.distributions.kl_divergence(MVN(m0, S0), MVN(m1, S1))) < 1e-12


def test_ppca_maximises_the_likelihood():
    X = lg.sample(lg.linear_gaussian(torch.diag(torch.tensor([3.0, 2.0, 0, 0], dtype=torch.float64))[:, :2],
                                     torch.zeros(4, dtype=torch.float64), 0.5), 500, seed=8)
    fitted = lg.ppca(X, 2)
    eigenvalues = pca.pca_eigh(X).eigenvalues
    assert fitted.noise_var == pytest.approx(eigenvalues[2:].mean().item(), rel=1e-12)
    best = lg.log_likelihood(fitted, X).sum()
    gen = torch.Generator().manual_seed(9)
    for _ in range(5):   # perturbations of the optimum never do better
        W = fitted.W + 0.05 * torch.randn(4, 2, generator=gen, dtype=torch.float64)
        assert lg.log_likelihood(lg.linear_gaussian(W, fitted.b, fitted.noise_var * 1.02), X).sum() < best
    rotation = torch.tensor([[0.6, -0.8], [0.8, 0.6]], dtype=torch.float64)
    rotated = lg.linear_gaussian(fitted.W @ rotation, fitted.b, fitted.noise_var)
    assert abs(lg.log_likelihood(rotated, X).sum() - best) < 1e-8


def test_linear_vae_learns_ppca():
    X = lg.sample(lg.linear_gaussian(torch.diag(torch.tensor([3.0, 2.0, 0, 0, 0], dtype=torch.float64))[:, :2],
                                     torch.ones(5, dtype=torch.float64), 0.25), 400, seed=10)
    model = lg.LinearVAE(5, 2, seed=0)
    train.fit(model, lambda elbos, x: -elbos.mean(), torch.optim.Adam(model.parameters(), lr=0.03), (X, X),
              epochs=400)
    learned, reference = model.model(), lg.ppca(X, 2)
    assert abs(learned.noise_var / reference.noise_var - 1) < 0.01
    assert pca.principal_angles(learned.W, reference.W).max() < 0.01
    assert abs(model(X).mean() - lg.log_likelihood(learned, X).mean()) < 1e-2


def test_fixed_noise_keeps_its_value():
    model = lg.LinearVAE(3, 1, noise_var=2.0, learn_noise=False)
    assert "log_noise_var" not in dict(model.named_parameters()) and model.model().noise_var == pytest.approx(2.0)


def test_bad_arguments_are_named(model):
    with pytest.raises(ValueError, match="noise_var must be > 0"):
        lg.linear_gaussian(torch.zeros(3, 1), torch.zeros(3), 0.0)
    with pytest.raises(ValueError, match=r"b must have shape \(3\)"):
        lg.linear_gaussian(torch.zeros(3, 1), torch.zeros(2), 1.0)
    with pytest.raises(ValueError, match=r"x must have shape \(any, 5\)"):
        lg.log_likelihood(model, torch.zeros(2, 4))
    with pytest.raises(ValueError, match="q_cov must be symmetric"):
        lg.elbo(model, torch.zeros(1, 5), torch.zeros(1, 2), torch.tensor([[1.0, 0.5], [0.0, 1.0]]))
    with pytest.raises(TypeError, match="model must be a dlbook.linear_gaussian.LinearGaussian"):
        lg.posterior((1, 2, 3), torch.zeros(1, 5))
    with pytest.raises(ValueError, match="k must be <= 4"):
        lg.ppca(torch.zeros(10, 5), 5)
