"""Tests of dlbook.rendering_mixture: the MAP classifier of the rendering mixture model is a ReLU layer."""
import math

import pytest
import torch
from torch.distributions import MultivariateNormal

from dlbook import rendering_mixture as rmm
from dlbook.runtime import generator


def _means(seed=0, C=3, G=4, D=6, scale=1.5):
    return scale * torch.randn(C, G, D, generator=generator(seed), dtype=torch.float64)


@pytest.mark.parametrize("q", [0.3, 0.7])
def test_relu_layer_makes_the_joint_map_decision_on_every_sample(q):
    means = _means()
    images = rmm.render(means, q, 5000, seed=1).images
    relu = rmm.relu_classifier(images, means, q)
    assert torch.equal(relu, rmm.joint_map_class(images, means, q))
    # the source's bias (no ½) decides differently on a visible fraction of the samples (measured 25 % and 35 %)
    assert (rmm.relu_classifier(images, means, q, half=False) != relu).float().mean() > 0.1


def test_joint_map_matches_torch_distributions():
    means, q = _means(2, C=2, G=3, D=4), 0.4
    images = rmm.render(means, q, 300, seed=3).images
    eye = torch.eye(4, dtype=torch.float64)
    C, G, _ = means.shape
    log_post = torch.empty(300, C, G, 2, dtype=torch.float64)      # uniform class and nuisance priors
    for c in range(C):
        for g in range(G):
            log_post[:, c, g, 1] = MultivariateNormal(means[c, g], eye).log_prob(images) + math.log(q)
            log_post[:, c, g, 0] = MultivariateNormal(torch.zeros(4, dtype=torch.float64), eye).log_prob(
                images) + math.log(1 - q)
    want = log_post.reshape(300, C, -1).amax(-1).argmax(-1)
    assert torch.equal(rmm.joint_map_class(images, means, q), want)


def test_render_is_seeded_and_follows_the_switch():
    means = _means()
    a, b = rmm.render(means, 0.5, 400, seed=4), rmm.render(means, 0.5, 400, seed=4)
    assert torch.equal(a.images, b.images)
    assert 0.4 < a.switches.mean().item() < 0.6
    off = a.switches == 0
    noise = a.images - a.switches[:, None] * means[a.classes, a.nuisances]
    assert abs(noise.var().item() - 1) < 0.1 and torch.equal(a.images[off], noise[off])


def test_bad_inputs():
    means = _means()
    with pytest.raises(ValueError, match="switch_prob"):
        rmm.render(means, 1.0, 10)
    with pytest.raises(ValueError, match="means"):
        rmm.relu_scores(torch.zeros(2, 6, dtype=torch.float64), torch.zeros(3, 6, dtype=torch.float64), 0.5)
    with pytest.raises(ValueError, match="images"):
        rmm.joint_map_class(torch.zeros(2, 5, dtype=torch.float64), means, 0.5)
    with pytest.raises(ValueError, match="num"):
        rmm.render(means, 0.5, 0)
