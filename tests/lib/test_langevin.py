"""Tests of dlbook.langevin: Langevin chains, the Gibbs law, escape times and replica swaps."""
import math

import numpy as np
import pytest
import torch
from scipy import integrate, stats

from dlbook import langevin as lg


def test_gibbs_cdf_matches_quad():
    for T in (0.3, 1.0):
        Z = integrate.quad(lambda v: math.exp(-(v * v - 1) ** 2 / T), -np.inf, np.inf)[0]
        for x in (-1.2, -0.3, 0.0, 0.8):
            want = integrate.quad(lambda v: math.exp(-(v * v - 1) ** 2 / T), -np.inf, x)[0] / Z
            assert lg.gibbs_cdf(torch.tensor([x]), T).item() == pytest.approx(want, abs=1e-6)   # measured 5e-8
    assert lg.gibbs_cdf(torch.tensor([-5.0, 0.0, 5.0]), 0.5).tolist() == pytest.approx([0.0, 0.5, 1.0], abs=1e-12)


def test_potential_and_gradient_match_autograd():
    x = torch.linspace(-2, 2, 9, dtype=torch.float64, requires_grad=True)
    grad, = torch.autograd.grad(lg.double_well(x).sum(), x)
    torch.testing.assert_close(lg.double_well_grad(x.detach()), grad)
    assert lg.double_well(torch.tensor([0.0])).item() - lg.double_well(torch.tensor([1.0])).item() == \
        lg.DOUBLE_WELL_BARRIER


@pytest.mark.parametrize("T", [0.3, 0.5])
def test_chains_sample_the_gibbs_distribution(T):
    # measured KS 0.014 (T = 0.3) and 0.012 (T = 0.5); at T / 2, the law a chain without the √2 in its
    # noise would sample, the distance is several times larger
    x = lg.langevin_chains(T, step=2e-3, steps=4000, num_chains=2000, seed=0)
    cdf = lambda temperature: lambda v: lg.gibbs_cdf(torch.as_tensor(v), temperature).numpy()  # noqa: E731
    assert stats.kstest(x.numpy(), cdf(T)).statistic < 0.03
    assert stats.kstest(x.numpy(), cdf(T / 2)).statistic > 0.06


def test_step_matches_its_formula_and_chains_are_seeded():
    x, g, xi = torch.tensor([0.5]), torch.tensor([2.0]), torch.tensor([0.3])
    assert lg.langevin_step(x, g, 0.01, 0.2, xi).item() == pytest.approx(0.5 - 0.02 + math.sqrt(0.004) * 0.3)
    a = lg.langevin_chains(0.4, step=1e-2, steps=1500, num_chains=8, seed=1)
    assert torch.equal(a, lg.langevin_chains(0.4, step=1e-2, steps=1500, num_chains=8, seed=1))
    assert not torch.equal(a, lg.langevin_chains(0.4, step=1e-2, steps=1500, num_chains=8, seed=2))
    cold = lg.langevin_chains(1e-6, step=1e-2, steps=2000, num_chains=4, x0=0.3)
    torch.testing.assert_close(cold, torch.ones(4, dtype=torch.float64), atol=1e-3, rtol=0)


def test_escape_times_follow_arrhenius():
    # measured slopes 0.94-0.98 over three seeds (barrier 1); means about 18 / 8 / 5 at T = 0.3 / 0.4 / 0.5
    temperatures = [0.3, 0.4, 0.5]
    runs = [lg.escape_times(T, step=5e-3, num_chains=400, max_steps=20_000, seed=0) for T in temperatures]
    means = [run.times.mean().item() for run in runs]
    assert all(run.escaped.float().mean() > 0.98 for run in runs)
    assert means[0] > means[1] > means[2]
    assert lg.arrhenius_slope(temperatures, means) == pytest.approx(lg.DOUBLE_WELL_BARRIER, rel=0.15)
    capped = lg.escape_times(0.2, step=5e-3, num_chains=50, max_steps=200, seed=0)
    assert not capped.escaped.all() and capped.times.max().item() == pytest.approx(1.0)


def test_arrhenius_slope_recovers_an_exact_law():
    T = torch.tensor([0.2, 0.25, 0.4], dtype=torch.float64)
    assert lg.arrhenius_slope(T, 3.0 * torch.exp(0.7 / T)) == pytest.approx(0.7, rel=1e-10)


def test_replica_swap_satisfies_detailed_balance():
    v = torch.tensor([0.0, 0.3, 1.0, 2.5], dtype=torch.float64)
    T1, T2 = 0.3, 0.8
    v1, v2 = v[:, None], v[None, :]
    forward = torch.exp(-v1 / T1 - v2 / T2) * lg.replica_swap_probability(v1, v2, T1, T2)
    backward = torch.exp(-v2 / T1 - v1 / T2) * lg.replica_swap_probability(v2, v1, T1, T2)
    torch.testing.assert_close(forward, backward, rtol=1e-14, atol=0)
    # handing the higher energy to the hotter replica is always accepted, the reverse only sometimes
    assert lg.replica_swap_probability(torch.tensor([1.0]), torch.tensor([0.0]), T1, T2).item() == 1.0
    assert lg.replica_swap_probability(torch.tensor([0.0]), torch.tensor([1.0]), T1, T2).item() == pytest.approx(
        math.exp(-(1 / T1 - 1 / T2)))


def test_bad_inputs():
    with pytest.raises(ValueError, match="temperature"):
        lg.langevin_chains(0.0)
    with pytest.raises(ValueError, match="step"):
        lg.escape_times(0.3, step=-1.0)
    with pytest.raises(TypeError, match="x"):
        lg.double_well(torch.tensor([1, 2]))
    with pytest.raises(ValueError, match="temperatures"):
        lg.arrhenius_slope([0.3], [1.0])
    with pytest.raises(ValueError, match="temperature2"):
        lg.replica_swap_probability(torch.zeros(1), torch.zeros(1), 0.3, 0.0)
    with pytest.raises(ValueError, match="num_points"):
        lg.gibbs_cdf(torch.zeros(1), 0.3, num_points=2)
