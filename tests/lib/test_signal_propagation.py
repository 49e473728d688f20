"""Tests of dlbook.signal_propagation: mean-field maps of random deep networks."""
import math

import numpy as np
import pytest
import torch
from scipy import integrate

from dlbook import initialization
from dlbook import signal_propagation as sp
from dlbook.runtime import generator


@pytest.mark.parametrize("scheme,activation", [("he", "relu"), ("lecun", "tanh"), ("xavier", "linear")])
def test_variance_map_without_bias_is_chapter_4s_recursion(scheme, activation):
    want = initialization.predicted_second_moments(6, scheme, activation, 100)
    sigma_w = math.sqrt(100 * initialization.weight_variance(100, 100, scheme))
    q, got = want[0].item(), [want[0].item()]
    for _ in range(5):
        q = sp.variance_map(q, sigma_w, 0.0, activation)
        got.append(q)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-8)   # chapter 4 uses 80 Hermite nodes


@pytest.mark.parametrize("sigma_w,sigma_b,c", [(1.5, 0.3, 0.5), (2.5, 0.3, 0.9), (1.0, 0.05, -0.3)])
def test_tanh_correlation_map_matches_monte_carlo_and_dblquad(sigma_w, sigma_b, c):
    q = sp.fixed_point_variance(sigma_w, sigma_b)
    z = torch.randn(2, 2_000_000, generator=generator(0), dtype=torch.float64)
    u1, u2 = math.sqrt(q) * z[0], math.sqrt(q) * (c * z[0] + math.sqrt(1 - c * c) * z[1])
    monte_carlo = ((sigma_w ** 2 * (u1.tanh() * u2.tanh()).mean() + sigma_b ** 2) / q).item()
    got = sp.correlation_map(c, q, sigma_w, sigma_b)
    assert got == pytest.approx(monte_carlo, abs=2e-3)                   # MC error about 5e-4
    density = lambda a, b: math.exp(-(a * a + b * b) / 2) / (2 * math.pi)  # noqa: E731
    f = lambda a, b: density(a, b) * math.tanh(math.sqrt(q) * a) * math.tanh(  # noqa: E731
        math.sqrt(q) * (c * a + math.sqrt(1 - c * c) * b))
    exact = integrate.dblquad(f, -9, 9, -9, 9, epsabs=1e-11)[0]
    assert got == pytest.approx((sigma_w ** 2 * exact + sigma_b ** 2) / q, abs=1e-8)
    assert sp.correlation_map(1.0, q, sigma_w, sigma_b) == pytest.approx(1.0, abs=1e-10)   # q is the fixed point


def test_relu_and_linear_maps_in_closed_form():
    q, c = 1.7, 0.4
    want = (q / (2 * math.pi) * (math.sqrt(1 - c * c) + (math.pi - math.acos(c)) * c) + 0.04) / q
    assert sp.correlation_map(c, q, 1.0, 0.2, "relu") == pytest.approx(want, rel=1e-14)
    assert sp.correlation_map(c, q, 0.9, 0.1, "linear") == pytest.approx((0.81 * q * c + 0.01) / q, rel=1e-12)
    assert sp.variance_map(2.0, 1.3, 0.5, "relu") == pytest.approx(1.69 + 0.25, rel=1e-12)


def test_chi1_matches_quadrature_and_phases():
    chis = []
    for sigma_w in (1.0, 1.5, 2.5, 4.0):
        q = sp.fixed_point_variance(sigma_w, 0.3)
        integrand = lambda z: math.exp(-z * z / 2) / math.sqrt(2 * math.pi) / math.cosh(math.sqrt(q) * z) ** 4  # noqa
        chis.append(sp.chi1(sigma_w, 0.3))
        assert chis[-1] == pytest.approx(sigma_w ** 2 * integrate.quad(integrand, -12, 12, epsabs=1e-13)[0],
                                         rel=1e-9)
    # measured 0.700 / 1.061 / 1.585 / 2.367: ordered at σ_w = 1, chaotic above the edge
    np.testing.assert_allclose(chis[:3], [0.70, 1.06, 1.59], atol=0.01)
    assert chis[3] == pytest.approx(2.367, abs=1e-3)
    critical = sp.critical_sigma_w(0.3)
    assert sp.chi1(critical, 0.3) == pytest.approx(1.0, abs=1e-9) and 1.0 < critical < 1.5
    # the edge moves down toward σ_w = 1 as σ_b → 0 (measured 1.396, 1.123, 1.042)
    assert critical > sp.critical_sigma_w(0.05) > sp.critical_sigma_w(0.01) > 1.0


def test_ordered_and_chaotic_networks():
    ordered = sp.simulate_correlation(0.5, 60, 300, 1.0, 0.3, seed=0)
    assert ordered.correlations[-1] > 0.99
    np.testing.assert_allclose(ordered.variances[-20:].mean().item(), sp.fixed_point_variance(1.0, 0.3), rtol=0.05)
    # chaotic: single networks fluctuate around the fixed point c* = 0.12 (layers 30-60, three seeds)
    chaotic = torch.stack([sp.simulate_correlation(0.5, 60, 300, 2.5, 0.3, seed=s).correlations[30:]
                           for s in range(3)])
    assert chaotic.mean() < 0.4 and abs(chaotic.mean() - sp.predicted_correlations(0.5, 60, 2.5, 0.3)[-1]) < 0.1
    # no bias and σ_w < 1: the variance itself collapses
    assert sp.simulate_correlation(0.5, 50, 300, 0.8, 0.0, q0=1.0, seed=0).variances[-1].max() < 1e-8


def test_simulation_is_seeded_and_starts_at_c0():
    a = sp.simulate_correlation(0.5, 3, 50, 1.2, 0.1, seed=3)
    b = sp.simulate_correlation(0.5, 3, 50, 1.2, 0.1, seed=3)
    assert torch.equal(a.correlations, b.correlations) and a.variances.shape == (3, 2)
    assert sp.predicted_correlations(0.5, 1, 1.2, 0.1)[0] == pytest.approx(
        sp.correlation_map(0.5, sp.fixed_point_variance(1.2, 0.1), 1.2, 0.1))


def test_bad_inputs():
    with pytest.raises(ValueError, match="activation"):
        sp.variance_map(1.0, 1.0, 0.0, "gelu")
    with pytest.raises(ValueError, match="c"):
        sp.correlation_map(1.5, 1.0, 1.0, 0.0)
    with pytest.raises(ValueError, match="sigma_w"):
        sp.chi1(-1.0, 0.3)
    with pytest.raises(ValueError, match="sigma_b"):
        sp.critical_sigma_w(0.0)
    with pytest.raises(ValueError, match="sign"):
        sp.critical_sigma_w(0.3, low=2.0, high=3.0)
    with pytest.raises(ValueError, match="width"):
        sp.simulate_correlation(0.5, 3, 1, 1.0, 0.0)
    with pytest.raises(TypeError, match="depth"):
        sp.predicted_correlations(0.5, 2.0, 1.0, 0.3)
