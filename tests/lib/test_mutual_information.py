"""Tests of dlbook.mutual_information: the DV bound, the Gaussian optimal critic, MINE."""
import math

import pytest
import torch

from dlbook import mutual_information as mi


def test_gaussian_mutual_information():
    assert mi.gaussian_mutual_information(0.0) == 0.0
    assert mi.gaussian_mutual_information(0.9) == pytest.approx(-0.5 * math.log(0.19))


def test_pairs_have_the_right_correlation_and_shuffling_removes_it():
    pairs = mi.gaussian_pairs(200_000, 0.7, seed=0)
    assert torch.corrcoef(pairs.T)[0, 1].item() == pytest.approx(0.7, abs=0.01)
    assert pairs.std(0).tolist() == pytest.approx([1.0, 1.0], abs=0.01)
    shuffled = mi.shuffle_pairs(pairs, seed=1)
    assert abs(torch.corrcoef(shuffled.T)[0, 1].item()) < 0.01
    assert torch.equal(shuffled[:, 0], pairs[:, 0]) and torch.equal(shuffled[:, 1].sort()[0], pairs[:, 1].sort()[0])


def test_optimal_critic_is_the_log_density_ratio():
    pairs = mi.gaussian_pairs(5, 0.6, seed=2)
    joint = torch.distributions.MultivariateNormal(torch.zeros(2, dtype=torch.float64),
                                                   torch.tensor([[1, 0.6], [0.6, 1]], dtype=torch.float64))
    product = torch.distributions.Normal(0.0, 1.0).log_prob(pairs).sum(1)
    assert (mi.gaussian_optimal_critic(pairs, 0.6) - (joint.log_prob(pairs) - product)).abs().max() < 1e-12


def test_dv_at_the_optimal_critic_is_the_mutual_information():
    pairs = mi.gaussian_pairs(400_000, 0.9, seed=3)
    shuffled = mi.shuffle_pairs(pairs, seed=4)
    bound = mi.donsker_varadhan(mi.gaussian_optimal_critic(pairs, 0.9), mi.gaussian_optimal_critic(shuffled, 0.9))
    assert abs(bound.item() - mi.gaussian_mutual_information(0.9)) < 0.01
    # Any other critic gives less (in the limit): a scaled copy of the optimal one, for instance.
    worse = mi.donsker_varadhan(0.5 * mi.gaussian_optimal_critic(pairs, 0.9),
                                0.5 * mi.gaussian_optimal_critic(shuffled, 0.9))
    assert worse < bound


def test_donsker_varadhan_is_stable_and_matches_the_formula():
    joint, marginal = torch.tensor([1.0, 2.0]), torch.tensor([0.0, 800.0])
    assert mi.donsker_varadhan(joint, marginal).item() == pytest.approx(1.5 - (800 - math.log(2)))
    small = torch.tensor([0.1, -0.2, 0.3], dtype=torch.float64)
    assert mi.donsker_varadhan(small, small).item() == pytest.approx(small.mean() - small.exp().mean().log())


def test_mine_learns_a_positive_bound_below_the_truth():
    result = mi.mine(mi.MineRun(rho=0.8, steps=300, batch_size=128, width=16, seed=0))
    assert result.estimates.shape == (300,)
    assert 0.2 < result.final_estimate < result.true_value + 0.05


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="rho must be < 1"):
        mi.gaussian_mutual_information(1.0)
    with pytest.raises(ValueError, match=r"pairs must have shape \(any, 2\)"):
        mi.shuffle_pairs(torch.zeros(3, 3))
    with pytest.raises(ValueError, match="critic_joint and critic_marginal must not be empty"):
        mi.donsker_varadhan(torch.zeros(0), torch.zeros(2))
    with pytest.raises(TypeError, match="takes a frozen dataclass"):
        mi.mine({"rho": 0.5})
