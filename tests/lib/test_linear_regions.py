"""Tests of dlbook.linear_regions: exact region counts on the line and the plane, and their bounds."""

import numpy as np
import pytest
import torch
from torch import nn

from dlbook import approximation, nets
from dlbook import linear_regions as lr


def _relu_net(hidden, *, in_dim=2, bias_std=1.0, seed=0):
    """The chapter's random ReLU nets: He-normal weights, N(0, bias_std²) biases, one output, float64."""
    return nets.mlp((in_dim, *hidden, 1), init="he", bias_std=bias_std, seed=seed, dtype=torch.float64)


def _one_layer(W, b):
    return [(torch.tensor(W, dtype=torch.float64), torch.tensor(b, dtype=torch.float64))]


def test_bounds_spot_values():
    assert [lr.zaslavsky_bound(m, 2) for m in (0, 1, 2, 3, 10, 40)] == [1, 2, 4, 7, 56, 821]
    assert lr.zaslavsky_bound(3, 5) == 8                     # m <= n: every pattern occurs
    assert lr.zaslavsky_bound(5, 1) == 6
    assert lr.deep_upper_bound([10], 2) == 56
    assert lr.deep_upper_bound([10, 10], 2) == 56 * 56
    assert lr.deep_upper_bound([1, 10], 2) == 2 * 11         # a width-1 layer leaves a 1-D map
    assert lr.montufar_lower_bound(10, 3, 2) == 56 * 5**4
    assert lr.montufar_lower_bound(2, 4, 1) == 3 * 2**3


def test_one_layer_in_general_position_meets_zaslavsky_exactly():
    for width in (1, 2, 3, 7, 15, 30):
        net = _relu_net((width,), seed=width)
        assert lr.count_regions_2d(net) == lr.zaslavsky_bound(width, 2)


def test_degenerate_arrangements_have_fewer_regions():
    parallel = _one_layer([[1.0, 2.0]] * 4, [0.0, 1.0, 2.0, -5.0])
    assert lr.count_regions_2d(parallel) == 5
    concurrent = _one_layer([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [1.0, -2.0]], [0.0] * 4)
    assert lr.count_regions_2d(concurrent) == 8               # 2m for m lines through one point
    grid = _one_layer([[1.0, 0.0]] * 3 + [[0.0, 1.0]] * 3, [-1.0, 0.0, 1.0] * 2)
    assert lr.count_regions_2d(grid) == 16


def test_regions_in_a_box_tile_the_box():
    net = _relu_net((8, 8, 8), seed=3)
    box = (-3.0, 2.0, -1.0, 4.0)
    regions = lr.activation_regions_2d(net, box=box)
    areas = []
    for region in regions:
        x, y = region.vertices[:, 0], region.vertices[:, 1]
        areas.append(0.5 * (x @ np.roll(y, -1) - y @ np.roll(x, -1)))
    assert min(areas) > 0                                     # convex, counter-clockwise, non-empty
    assert sum(areas) == pytest.approx(25.0, abs=1e-9)
    assert len({r.pattern for r in regions}) == len(regions)  # one convex piece per pattern in a box


def test_region_patterns_agree_with_the_forward_pass():
    net = _relu_net((6, 5), seed=4)
    regions = lr.activation_regions_2d(net, box=(-4.0, 4.0, -4.0, 4.0))
    centroids = torch.tensor(np.array([r.vertices.mean(axis=0) for r in regions]))
    forward = lr.activation_patterns(net, centroids).int().tolist()
    assert forward == [list(r.pattern) for r in regions]


def test_grid_never_finds_more_than_the_exact_count_and_finds_a_subset():
    net = _relu_net((10, 10), seed=5)
    box = (-5.0, 5.0, -5.0, 5.0)
    exact = {r.pattern for r in lr.activation_regions_2d(net, box=box)}
    side = torch.linspace(-5, 5, 300, dtype=torch.float64)
    seen = {tuple(p) for p in lr.activation_patterns(net, torch.cartesian_prod(side, side)).int().tolist()}
    assert seen <= exact
    assert lr.count_regions_on_grid(net, box, 300) == len(seen) < len(exact)
    assert len(exact) <= lr.count_regions_2d(net) <= lr.deep_upper_bound([10, 10], 2)


def test_deep_counts_respect_the_upper_bound():
    for widths in [(4, 4), (6, 3, 6), (3, 3, 3, 3)]:
        net = _relu_net(widths, seed=6)
        assert lr.count_regions_2d(net) <= lr.deep_upper_bound(list(widths), 2)


def test_pieces_reproduce_the_network_exactly():
    net = _relu_net((7, 7, 7), in_dim=1, seed=7)
    pieces = lr.linear_pieces_1d(net, -2.0, 2.0)
    assert pieces.breakpoints[0] == -2.0 and pieces.breakpoints[-1] == 2.0
    x = torch.linspace(-2, 2, 5001, dtype=torch.float64)
    index = np.clip(np.searchsorted(pieces.breakpoints, x.numpy(), side="right") - 1, 0, len(pieces.slopes) - 1)
    from_pieces = pieces.slopes[index] * x.numpy() + pieces.intercepts[index]
    with torch.no_grad():
        from_torch = net(x[:, None])[:, 0].numpy()
    assert np.abs(from_pieces - from_torch).max() < 1e-10
    assert len(pieces.slopes) <= lr.activation_regions_1d(net, -2.0, 2.0)


def test_one_d_count_matches_pattern_changes_on_a_fine_grid():
    net = _relu_net((8, 8), in_dim=1, bias_std=0.5, seed=8)
    x = torch.linspace(-3, 3, 200_001, dtype=torch.float64)[:, None]
    patterns = lr.activation_patterns(net, x)
    changes = int((patterns[1:] != patterns[:-1]).any(dim=1).sum())
    assert lr.activation_regions_1d(net, -3.0, 3.0) == changes + 1


def test_sawtooth_pieces_are_powers_of_two():
    for depth in range(1, 9):
        net = approximation.sawtooth_network(depth)
        assert len(lr.linear_pieces_1d(net, 0.0, 1.0).slopes) == 2**depth
        assert lr.activation_regions_1d(net, 0.0, 1.0) == 2**depth


def test_dead_units_merge_activation_regions_into_one_piece():
    # Two units with the same kink but output weights that cancel: two regions, one piece.
    model = nets.from_layers([(torch.tensor([[1.0], [1.0]], dtype=torch.float64), torch.zeros(2, dtype=torch.float64)),
                              (torch.tensor([[1.0, -1.0]], dtype=torch.float64), torch.zeros(1, dtype=torch.float64))])
    assert lr.activation_regions_1d(model, -1.0, 1.0) == 2
    assert len(lr.linear_pieces_1d(model, -1.0, 1.0).slopes) == 1


def test_model_formats_agree():
    net = _relu_net((5, 4), seed=9)
    pairs = [(net[0].weight, net[0].bias), (net[2].weight, net[2].bias)]
    assert lr.count_regions_2d(pairs) == lr.count_regions_2d(net)
    layers = lr.hidden_layers(net)
    assert len(layers) == 2 and layers[0][0].shape == (5, 2) and layers[1][0].dtype == np.float64


def test_pattern_codes_identify_equal_rows():
    patterns = torch.rand(500, 130, generator=torch.Generator().manual_seed(0)) > 0.5
    patterns[7] = patterns[3]
    codes = lr.pattern_codes(patterns)
    assert codes.shape == (500, 3)
    assert torch.equal(codes[7], codes[3])
    assert torch.unique(codes, dim=0).shape[0] == torch.unique(patterns, dim=0).shape[0] == 499
    assert lr.count_distinct_patterns(patterns) == 499
    assert lr.count_distinct_patterns(patterns[:, :52]) == torch.unique(patterns[:, :52], dim=0).shape[0]
    single = torch.tensor([[True] * 52, [True] * 51 + [False]])
    assert lr.pattern_codes(single).tolist() == [[2**52 - 1], [2**51 - 1]]


@pytest.mark.parametrize("call, error, match", [
    (lambda: lr.zaslavsky_bound(-1, 2), ValueError, "num_hyperplanes"),
    (lambda: lr.zaslavsky_bound(3, 0), ValueError, "dim"),
    (lambda: lr.deep_upper_bound(5, 2), TypeError, "widths"),
    (lambda: lr.montufar_lower_bound(1, 2, 2), ValueError, "width"),
    (lambda: lr.deep_upper_bound([3, 0], 2), ValueError, "hidden_widths"),
    (lambda: lr.count_regions_2d("net"), TypeError, "model"),
    (lambda: lr.count_regions_2d(nn.Sequential(nn.ReLU())), ValueError, "model"),
    (lambda: lr.count_regions_2d(nn.Sequential(nn.Linear(2, 3), nn.Linear(3, 1))), ValueError, "model"),
    (lambda: lr.count_regions_2d(_relu_net((3,), in_dim=3)), ValueError, "model"),
    (lambda: lr.count_regions_2d(_relu_net((3,)), box=(1, 0, 0, 1)), ValueError, "box x_min"),
    (lambda: lr.count_regions_2d(_relu_net((3,)), box=(0, 1, 2, 1)), ValueError, "box y_min"),
    (lambda: lr.count_regions_2d(_relu_net((3,)), box=(0, "1", 0, 1)), TypeError, "box x_max"),
    (lambda: lr.count_regions_2d(_relu_net((3,)), box=[0, 1]), TypeError, "box"),
    (lambda: lr.count_regions_on_grid(_relu_net((3,)), (0, 1, 0, 1), 1), ValueError, "resolution"),
    (lambda: lr.linear_pieces_1d(_relu_net((3,), in_dim=1), 1.0, 0.0), ValueError, "low"),
    (lambda: lr.activation_regions_1d(_relu_net((3,), in_dim=1), 0.0, float("nan")), ValueError, "high"),
    (lambda: lr.activation_regions_1d(_relu_net((3,)), 0.0, 1.0), ValueError, "1-D"),
    (lambda: lr.linear_pieces_1d([(torch.ones(2, 1), torch.zeros(2))], 0.0, 1.0), ValueError, "model"),
    (lambda: lr.activation_patterns(_relu_net((3,)), torch.zeros(4, 3)), ValueError, "X"),
    (lambda: lr.count_regions_2d([(torch.ones(3, 2), torch.zeros(2))]), ValueError, "bias"),
    (lambda: lr.count_regions_2d([(torch.ones(3, 2), torch.zeros(3)), (torch.ones(2, 4), torch.zeros(2))]),
     ValueError, "layer 1"),
    (lambda: lr.count_regions_2d([(torch.full((3, 2), float("inf")), torch.zeros(3))]), ValueError, "NaN"),
    (lambda: lr.pattern_codes(torch.zeros(3, 4)), TypeError, "patterns"),
])
def test_bad_arguments_raise_clear_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_grid_count_on_cuda_matches_cpu():
    net = _relu_net((10,), seed=2)
    assert lr.count_regions_on_grid(net.cuda(), (-5, 5, -5, 5), 200) == \
        lr.count_regions_on_grid(net, (-5, 5, -5, 5), 200)
