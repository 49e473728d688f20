"""Tests of dlbook.random_matrices: the Marchenko-Pastur law."""
import numpy as np
import pytest
import torch
from scipy import integrate, stats

from dlbook import random_matrices as rm


@pytest.mark.parametrize("gamma", [0.1, 0.25, 0.5, 1.0, 2.0, 4.0])
def test_law_has_total_mass_one(gamma):
    low, high = rm.marchenko_pastur_edges(gamma)
    total = rm.marchenko_pastur_cdf(torch.tensor([high + 1.0]), gamma).item()
    assert abs(total - 1.0) < 1e-10
    density = lambda x: rm.marchenko_pastur_density(torch.tensor([x]), gamma).item()  # noqa: E731
    mass, _ = integrate.quad(density, low, high, limit=200)
    assert abs(mass + rm.marchenko_pastur_atom(gamma) - 1.0) < 1e-6


@pytest.mark.parametrize("gamma", [0.25, 0.7, 2.0])
def test_cdf_matches_quadrature_of_density(gamma):
    low, high = rm.marchenko_pastur_edges(gamma)
    xs = np.linspace(low, high, 9)[1:-1]
    got = rm.marchenko_pastur_cdf(torch.tensor(xs), gamma).numpy()
    density = lambda x: rm.marchenko_pastur_density(torch.tensor([x]), gamma).item()  # noqa: E731
    want = [rm.marchenko_pastur_atom(gamma) + integrate.quad(density, low, x, limit=200)[0] for x in xs]
    np.testing.assert_allclose(got, want, atol=1e-9)


def test_edges_atom_and_cdf_outside_support():
    assert rm.marchenko_pastur_edges(0.25) == pytest.approx((0.25, 2.25))
    assert rm.marchenko_pastur_edges(2.0).upper == pytest.approx((1 + 2 ** 0.5) ** 2)
    assert rm.marchenko_pastur_atom(0.5) == 0.0
    assert rm.marchenko_pastur_atom(2.0) == 0.5
    cdf = rm.marchenko_pastur_cdf(torch.tensor([-1.0, 0.0, 0.05, 10.0]), 2.0)
    torch.testing.assert_close(cdf, torch.tensor([0.0, 0.5, 0.5, 1.0], dtype=torch.float64))
    assert rm.marchenko_pastur_density(torch.tensor([0.1, 3.0]), 0.25).tolist() == [0.0, 0.0]


def test_cdf_is_monotone_for_gamma_one():
    cdf = rm.marchenko_pastur_cdf(torch.linspace(0, 4, 401, dtype=torch.float64), 1.0)
    assert torch.all(cdf.diff() >= -1e-15) and abs(cdf[-1].item() - 1) < 1e-10


@pytest.mark.parametrize("num_samples,dim,entries", [(2000, 500, "gaussian"), (500, 1000, "gaussian"),
                                                     (2000, 500, "rademacher")])
def test_sampled_spectrum_follows_the_law(num_samples, dim, entries):
    gamma = dim / num_samples
    eig = rm.sample_covariance_spectrum(num_samples, dim, entries=entries, seed=0)
    zeros = rm.zero_eigenvalues(eig)
    assert zeros.sum().item() == max(0, dim - num_samples)             # rank n exactly
    ks = rm.ks_distance(eig, gamma)
    assert ks < 0.02
    atom = rm.marchenko_pastur_atom(gamma)
    cdf = lambda x: (rm.marchenko_pastur_cdf(torch.as_tensor(x), gamma).numpy() - atom) / (1 - atom)  # noqa: E731
    assert ks == pytest.approx(stats.kstest(eig[~zeros].numpy(), cdf).statistic, abs=1e-12)
    upper = rm.marchenko_pastur_edges(gamma).upper
    assert abs(eig.max().item() / upper - 1) < 0.03


def test_ks_distance_detects_a_wrong_aspect_ratio():
    eig = rm.sample_covariance_spectrum(2000, 500, seed=1)
    assert rm.ks_distance(eig, 0.25) < 0.02
    assert rm.ks_distance(eig, 0.35) > 0.05


def test_spectrum_is_seeded():
    a = rm.sample_covariance_spectrum(50, 20, seed=3)
    assert torch.equal(a, rm.sample_covariance_spectrum(50, 20, seed=3))
    assert not torch.equal(a, rm.sample_covariance_spectrum(50, 20, seed=4))
    assert a.dtype == torch.float64 and a.shape == (20,)


def test_bad_inputs():
    with pytest.raises(ValueError, match="gamma"):
        rm.marchenko_pastur_edges(0.0)
    with pytest.raises(TypeError, match="gamma"):
        rm.marchenko_pastur_density([1.0], "2")
    with pytest.raises(TypeError, match="x"):
        rm.marchenko_pastur_cdf(torch.tensor([1, 2]), 0.5)
    with pytest.raises(ValueError, match="entries"):
        rm.sample_covariance_spectrum(10, 5, entries="uniform")
    with pytest.raises(ValueError, match="num_samples"):
        rm.sample_covariance_spectrum(0, 5)
    with pytest.raises(ValueError, match="eigenvalues"):
        rm.ks_distance(torch.zeros(3, 2, dtype=torch.float64), 0.5)
    with pytest.raises(ValueError, match="rtol"):
        rm.zero_eigenvalues(torch.ones(3, dtype=torch.float64), rtol=1.0)
