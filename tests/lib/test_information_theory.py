"""Tests of dlbook.information_theory: entropies, informations, total correlation, the bottleneck."""
import numpy as np
import pytest
import torch
from scipy import stats

from dlbook import information_theory as it
from dlbook.runtime import generator


def _table(shape, seed=0):
    p = torch.rand(shape, generator=generator(seed), dtype=torch.float64) ** 2
    return p / p.sum()


def test_entropy_and_kl_match_scipy():
    p, q = _table((3, 4), 1), _table((3, 4), 2)
    assert it.entropy(p) == pytest.approx(stats.entropy(p.reshape(-1).numpy()), abs=1e-12)
    assert it.kl_divergence(p, q) == pytest.approx(stats.entropy(p.reshape(-1).numpy(), q.reshape(-1).numpy()),
                                                  abs=1e-12)
    assert it.cross_entropy(p, q) == pytest.approx(it.entropy(p) + it.kl_divergence(p, q), abs=1e-12)
    assert it.entropy(torch.tensor([0.5, 0.5, 0.0], dtype=torch.float64)) == pytest.approx(np.log(2), abs=1e-15)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_identities_between_the_quantities(seed):
    p = _table((3, 4, 2), seed)
    p_xy = p.sum(2)
    h_x, h_y, h_xy = it.entropy(p_xy.sum(1)), it.entropy(p_xy.sum(0)), it.entropy(p_xy)
    assert it.conditional_entropy(p_xy) == pytest.approx(h_xy - h_x, abs=1e-12)
    assert it.mutual_information(p_xy) == pytest.approx(h_x + h_y - h_xy, abs=1e-12)
    assert it.mutual_information(p_xy) == pytest.approx(h_y - it.conditional_entropy(p_xy), abs=1e-12)
    # chain rule: I(X; Y, Z) = I(X; Z) + I(X; Y | Z)
    i_x_yz = it.mutual_information(p.reshape(3, 8))
    i_xz = it.mutual_information(p.sum(1))
    assert i_x_yz == pytest.approx(i_xz + it.conditional_mutual_information(p), abs=1e-12)
    # I(X; Y) = E_x KL(p(y|x) ‖ p(y))
    p_x, p_y = p_xy.sum(1), p_xy.sum(0)
    expected_kl = sum(p_x[i] * it.kl_divergence(p_xy[i] / p_x[i], p_y) for i in range(3))
    assert it.mutual_information(p_xy) == pytest.approx(float(expected_kl), abs=1e-12)
    # total correlation is KL to the product of marginals, and zero for a product
    product = p.sum((1, 2))[:, None, None] * p.sum((0, 2))[None, :, None] * p.sum((0, 1))[None, None, :]
    assert it.total_correlation(p) == pytest.approx(it.kl_divergence(p, product), abs=1e-12)
    assert it.total_correlation(p) > 0 and abs(it.total_correlation(product)) < 1e-12
    torch.testing.assert_close(it.marginal(p, (2, 0)), p.sum(1).T)


def test_data_processing_inequality_on_random_chains():
    gaps = []
    for seed in range(1000):
        p = it.random_markov_chain((3, 4, 3), seed=seed)
        gaps.append(it.mutual_information(p.sum(2)) - it.mutual_information(p.sum(1)))   # I(X;Y) - I(X;Z)
        if seed < 50:
            assert abs(it.conditional_mutual_information(p.permute(0, 2, 1))) < 1e-12    # I(X; Z | Y) = 0
    assert min(gaps) > -1e-12


def test_gaussian_total_correlation():
    assert it.gaussian_total_correlation(torch.diag(torch.tensor([1.0, 4.0, 0.5]))) == pytest.approx(0.0, abs=1e-14)
    rho = 0.6
    cov = torch.tensor([[1.0, rho], [rho, 1.0]], dtype=torch.float64)
    assert it.gaussian_total_correlation(cov) == pytest.approx(-0.5 * np.log(1 - rho ** 2), rel=1e-12)


def _informative(seed):
    p = it.random_markov_chain((4, 5, 3), seed=seed).sum(2) ** 3
    return p / p.sum()


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_bottleneck_bounds_and_its_large_beta_limit(seed):
    p = _informative(seed)
    i_xy = it.mutual_information(p)
    best = 0.0
    for start in range(3):      # the iteration can settle with two similar x merged: restart
        run = it.information_bottleneck(p, 8, 1000.0, iterations=1000, seed=start)
        assert run.info_zy <= min(i_xy, run.info_zx) + 1e-12
        best = max(best, run.info_zy)
    assert abs(best - i_xy) < 1e-3                  # measured gaps 0 to 7.6e-4


def test_bottleneck_path_is_monotone_in_beta():
    p = _informative(2)
    encoder, values = None, []
    for beta in [0.5, 2, 5, 10, 20, 50, 100, 300]:
        run = it.information_bottleneck(p, 4, beta, iterations=300, encoder=encoder, seed=0)
        # warm start from the previous encoder, nudged away from merged clusters
        encoder = 0.9 * run.encoder + 0.1 / 4
        values.append((run.info_zx, run.info_zy))
    zx, zy = np.array(values).T
    assert (np.diff(zy) > -1e-9).all() and (np.diff(zx) > -1e-9).all()
    assert zy[0] < 1e-6 < zy[-1]                    # small beta compresses everything away


def test_jitter_splits_copied_codes_and_only_the_seed_decides_how():
    p = _informative(1)
    copies = torch.full((4, 3), 1 / 3, dtype=torch.float64)       # every code the same distribution
    kept = it.information_bottleneck(p, 3, 50.0, iterations=200, encoder=copies)
    assert kept.info_zy < 1e-12                                   # copies stay copies: nothing learnt
    split = it.information_bottleneck(p, 3, 50.0, iterations=200, encoder=copies, jitter=1e-3, seed=4)
    again = it.information_bottleneck(p, 3, 50.0, iterations=200, encoder=copies, jitter=1e-3, seed=4)
    assert split.info_zy > 0.5 * it.mutual_information(p)
    assert torch.equal(split.encoder, again.encoder)
    with pytest.raises(ValueError, match="jitter"):
        it.information_bottleneck(p, 3, 50.0, encoder=copies, jitter=-0.1)


def test_bad_inputs():
    with pytest.raises(ValueError, match="sum to 1"):
        it.entropy(torch.tensor([0.5, 0.6], dtype=torch.float64))
    with pytest.raises(ValueError, match="non-negative"):
        it.entropy(torch.tensor([1.5, -0.5], dtype=torch.float64))
    with pytest.raises(TypeError, match="p"):
        it.entropy(torch.tensor([1, 0]))
    with pytest.raises(ValueError, match="p_xy"):
        it.mutual_information(_table((2, 2, 2)))
    with pytest.raises(ValueError, match="same shape"):
        it.kl_divergence(_table((2, 3)), _table((3, 2)))
    with pytest.raises(ValueError, match="axes"):
        it.marginal(_table((2, 3)), (0, 0))
    with pytest.raises(ValueError, match="cov"):
        it.gaussian_total_correlation(torch.tensor([[1.0, 2.0], [2.0, 1.0]], dtype=torch.float64))
    with pytest.raises(ValueError, match="beta"):
        it.information_bottleneck(_table((2, 3)), 2, -1.0)
    with pytest.raises(ValueError, match="sizes"):
        it.random_markov_chain((2, 3))
