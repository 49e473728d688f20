"""Tests of dlbook.symmetry: the function-preserving symmetries, group orders, orbits, Φ and pre-pruning."""
import itertools
import math

import pytest
import torch

from dlbook import nets, symmetry

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA device"))]


def _inputs(n, dim, seed=0, dtype=torch.float64, device="cpu"):
    return torch.randn(n, dim, generator=torch.Generator().manual_seed(seed), dtype=dtype).to(device)


def _max_gap(net_a, net_b, X, activation):
    return (nets.forward(net_a, X, activation) - nets.forward(net_b, X, activation)).abs().max().item()


def test_random_layers_are_torch_default_draws_from_a_generator():
    """U(±1/sqrt(fan_in)) for W, then for b, layer by layer, from one seeded generator."""
    layers = nets.random_layers([3, 4, 2], seed=5)
    rng = torch.Generator().manual_seed(5)
    for (W, b), (fan_in, fan_out) in zip(layers, [(3, 4), (4, 2)]):
        bound = 1 / math.sqrt(fan_in)
        assert torch.equal(W, (2 * torch.rand(fan_out, fan_in, generator=rng, dtype=torch.float64) - 1) * bound)
        assert torch.equal(b, (2 * torch.rand(fan_out, generator=rng, dtype=torch.float64) - 1) * bound)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("activation", ["relu", "tanh"])
def test_permutation_keeps_function_float64(activation, device):
    params = nets.random_layers([20, 64, 32, 3], seed=1, device=device)
    permuted = symmetry.permute_hidden(params, symmetry.random_permutations(params, seed=2))
    assert _max_gap(params, permuted, _inputs(1000, 20, device=device), activation) < 1e-12
    # ... while the parameters themselves moved a lot.
    assert (symmetry.flatten(params) - symmetry.flatten(permuted)).norm() > 0.5 * symmetry.flatten(params).norm()


def test_permutation_keeps_function_float32():
    params = nets.random_layers([20, 64, 64, 3], seed=1, dtype=torch.float32)
    permuted = symmetry.permute_hidden(params, symmetry.random_permutations(params, seed=2))
    assert _max_gap(params, permuted, _inputs(1000, 20, dtype=torch.float32), "relu") < 1e-5


def test_permutation_matches_explicit_matrices():
    params = nets.random_layers([4, 3, 2], seed=0)
    perm = torch.tensor([2, 0, 1])
    P = torch.eye(3, dtype=torch.float64)[perm]  # (P W)[i] = W[perm[i]]
    (W1, b1), (W2, b2) = symmetry.permute_hidden(params, [perm])
    assert torch.equal(W1, P @ params[0].W) and torch.equal(b1, P @ params[0].b)
    assert torch.allclose(W2, params[1].W @ P.T) and torch.equal(b2, params[1].b)


def test_permute_inverse_restores_and_input_untouched():
    params = nets.random_layers([5, 6, 7, 2], seed=3)
    perms = symmetry.random_permutations(params, seed=4)
    back = symmetry.permute_hidden(symmetry.permute_hidden(params, perms), [torch.argsort(p) for p in perms])
    assert all(torch.equal(W, V) and torch.equal(b, c) for (W, b), (V, c) in zip(params, back))


def test_sign_flip_keeps_tanh_not_relu():
    params = nets.random_layers([10, 16, 8, 4], seed=5)
    flipped = symmetry.flip_signs(params, 1, torch.tensor([1.0, -1.0] * 8, dtype=torch.float64))
    X = _inputs(500, 10)
    assert _max_gap(params, flipped, X, "tanh") < 1e-12
    assert _max_gap(params, flipped, X, "relu") > 1e-3


def test_relu_rescale_keeps_relu_not_tanh():
    params = nets.random_layers([10, 16, 8, 4], seed=6)
    rescaled = symmetry.rescale_relu(params, 2, torch.exp(_inputs(8, 1, seed=7)[:, 0]))
    X = _inputs(500, 10)
    assert _max_gap(params, rescaled, X, "relu") < 1e-12
    assert _max_gap(params, rescaled, X, "tanh") > 1e-4


def test_log10_group_order_values():
    assert symmetry.log10_group_order([120, 80, 10]) == pytest.approx(324.24, abs=0.01)
    assert symmetry.log10_group_order([120, 84]) == pytest.approx(325.35, abs=0.01)
    assert symmetry.log10_group_order([6, 16, 120, 84]) == pytest.approx(341.52, abs=0.01)
    assert symmetry.log10_group_order([6, 16, 120, 84], sign_flips=True) == pytest.approx(409.56, abs=0.01)
    assert symmetry.log10_group_order((3, 2)) == pytest.approx(math.log10(12))
    assert symmetry.log10_group_order([]) == 0.0


def test_orbit_sizes_by_brute_force():
    params = nets.random_layers([2, 3, 2, 1], seed=9)
    assert symmetry.orbit_size_bruteforce(params) == 12
    assert symmetry.orbit_size_bruteforce(params, sign_flips=True) == 384
    (W1, b1), (W2, b2), last = params
    W1, b1, W2 = W1.clone(), b1.clone(), W2.clone()
    W1[1], b1[1], W2[:, 1] = W1[0], b1[0], W2[:, 0]  # units 0 and 1 of layer 1 identical
    assert symmetry.orbit_size_bruteforce([(W1, b1), (W2, b2), last]) == 6


def test_dead_units_do_not_shrink_the_orbit():
    """A unit that never fires (negative bias, non-negative inputs) still has its own weights."""
    (W1, b1), last = nets.random_layers([2, 3, 1], seed=10)
    b1 = b1.clone()
    b1[:2] = -10.0  # units 0 and 1 are dead on inputs in [0, 1]^2, but their weights differ
    assert symmetry.orbit_size_bruteforce([(W1, b1), last]) == 6


def _brute_force_table_symmetries(inputs_of, num_inputs):
    table = {(j, i) for j, maps in enumerate(inputs_of) for i in maps}
    return sum({(tau[j], sigma[i]) for j, i in table} == table
               for sigma in itertools.permutations(range(num_inputs))
               for tau in itertools.permutations(range(len(inputs_of))))


def test_connection_table_symmetries_match_brute_force():
    rng = torch.Generator().manual_seed(0)
    for trial in range(20):
        num_inputs, num_outputs = 3 + trial % 2, 4 + trial % 3
        table = (torch.rand(num_outputs, num_inputs, generator=rng) < 0.5).tolist()
        inputs_of = [[i for i, on in enumerate(row) if on] for row in table]
        assert symmetry.connection_table_symmetries(inputs_of, num_inputs) == \
            _brute_force_table_symmetries(inputs_of, num_inputs)


def test_lenet5_connection_table():
    assert len(symmetry.LENET5_C3_INPUTS) == 16
    # Every S2 map feeds 10 of the 16 C3 maps (LeCun et al. 1998, Table I).
    assert [sum(i in maps for maps in symmetry.LENET5_C3_INPUTS) for i in range(6)] == [10] * 6
    # Only the rotations and reflections of the six S2 maps around their cycle survive.
    assert symmetry.connection_table_symmetries(symmetry.LENET5_C3_INPUTS, 6) == 12
    full = [list(range(6))] * 16
    assert symmetry.connection_table_symmetries(full, 6) == math.factorial(6) * math.factorial(16)


def test_phi_distance():
    gen = torch.Generator().manual_seed(0)
    W = torch.randn(256, 256, generator=gen, dtype=torch.float64)
    assert symmetry.phi_distance(W, W) == 0.0
    independent = torch.randn(256, 256, generator=gen, dtype=torch.float64)
    assert symmetry.phi_distance(W, independent) == pytest.approx(1, abs=0.1)
    assert symmetry.phi_distance(W, W[torch.randperm(256, generator=gen)]) == pytest.approx(1, abs=0.1)
    with pytest.raises(ValueError, match="undefined"):
        symmetry.phi_distance(W, -W)
    with pytest.raises(ValueError, match="same shape"):
        symmetry.phi_distance(W, W[:3])


def test_mask_collisions_match_formula():
    n, m, rho, trials = 16, 8, 0.5, 2000
    masks = (torch.rand(trials, n, m, generator=torch.Generator().manual_seed(1)) >= rho).float()
    counts = symmetry.identical_mask_pairs(masks).double()
    expected = symmetry.expected_identical_mask_pairs(n, m, rho)
    assert expected == pytest.approx(math.comb(16, 2) / 256)
    assert abs(counts.mean() - expected) < 3 * counts.std() / math.sqrt(trials)
    assert symmetry.identical_mask_pairs(torch.ones(4, 3)) == 6


def test_mask_preserving_permutations_count_units_with_equal_signatures():
    # A hidden unit is pinned down by its in-mask row and its out-mask column; units with the
    # same pair can be swapped, so the count is the product of the factorials of the multiplicities.
    distinct_seen = False
    for seed in range(12):
        masks = symmetry.prepruning_masks([5, 6, 3], 0.5, seed=seed)
        signatures = torch.cat([masks[0], masks[1].T], dim=1)  # (6 units, 5 + 3)
        multiplicities = torch.unique(signatures, dim=0, return_counts=True)[1]
        expected = math.prod(math.factorial(k) for k in multiplicities.tolist())
        assert symmetry.mask_preserving_permutations(masks) == expected
        distinct_seen |= expected == 1
    assert distinct_seen
    dense = [torch.ones(6, 5), torch.ones(3, 6)]
    assert symmetry.mask_preserving_permutations(dense) == math.factorial(6)


def test_prepruning_masks_rate_dtype_and_seed():
    masks = symmetry.prepruning_masks([200, 300, 10], 0.25, seed=2, dtype=torch.float64)
    assert [m.shape for m in masks] == [(300, 200), (10, 300)] and masks[0].dtype == torch.float64
    assert abs((masks[0] == 0).double().mean().item() - 0.25) < 0.01
    assert all(torch.equal(a, b) for a, b in zip(masks, symmetry.prepruning_masks([200, 300, 10], 0.25, seed=2,
                                                                                   dtype=torch.float64)))


def test_apply_prepruning_keeps_pruned_weights_zero():
    model = nets.mlp([4, 8, 2], seed=0)
    masks = symmetry.prepruning_masks([4, 8, 2], 0.5, seed=1)
    symmetry.apply_prepruning(model, masks)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    X = torch.randn(32, 4, generator=torch.Generator().manual_seed(2))
    y = torch.randint(0, 2, (32,), generator=torch.Generator().manual_seed(3))
    for _ in range(5):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(X), y).backward()
        opt.step()
    assert torch.all(model[0].weight[masks[0] == 0] == 0) and torch.all(model[2].weight[masks[1] == 0] == 0)
    assert torch.any(model[0].weight[masks[0] == 1] != 0)


def test_apply_masks_and_fraction_outside():
    params = nets.random_layers([6, 5, 3], seed=4)
    masks = symmetry.prepruning_masks([6, 5, 3], 0.5, seed=5, dtype=torch.float64)
    masked = symmetry.apply_masks(params, masks)
    assert all(torch.equal(W, V * M) and torch.equal(b, c) for (W, b), (V, c), M in zip(masked, params, masks))
    fractions = symmetry.fraction_outside_mask(params, masks)
    for (W, _), M, fraction in zip(params, masks, fractions):
        assert fraction == pytest.approx(float((W[M == 0] ** 2).sum() / (W ** 2).sum()))
    assert symmetry.fraction_outside_mask(masked, masks) == [0.0, 0.0]


def test_bad_inputs():
    params = nets.random_layers([3, 4, 2], seed=0)
    with pytest.raises(TypeError, match="params"):
        symmetry.permute_hidden(None, [torch.arange(4)])
    with pytest.raises(TypeError, match=r"params\[0\]\[0\]"):
        symmetry.permute_hidden([(torch.zeros(4, 3, dtype=torch.long), torch.zeros(4)), params[1]], [torch.arange(4)])
    with pytest.raises(ValueError, match="perms"):
        symmetry.permute_hidden(params, [torch.tensor([0, 0, 1, 2])])
    with pytest.raises(ValueError, match="perms"):
        symmetry.permute_hidden(params, [])
    with pytest.raises(TypeError, match="perms"):
        symmetry.permute_hidden(params, [torch.arange(4.0)])
    with pytest.raises(ValueError, match="signs"):
        symmetry.flip_signs(params, 1, torch.tensor([1.0, 2.0, 1.0, 1.0]))
    with pytest.raises(ValueError, match="signs"):
        symmetry.flip_signs(params, 1, torch.ones(3))
    with pytest.raises(TypeError, match="signs"):
        symmetry.flip_signs(params, 1, torch.ones(4, dtype=torch.long))
    with pytest.raises(ValueError, match="layer"):
        symmetry.flip_signs(params, 2, torch.ones(2))
    with pytest.raises(ValueError, match="scales"):
        symmetry.rescale_relu(params, 1, torch.tensor([1.0, -1.0, 1.0, 1.0]))
    with pytest.raises(ValueError, match="hidden_widths"):
        symmetry.log10_group_order([3, 0])
    with pytest.raises(TypeError, match="hidden_widths"):
        symmetry.log10_group_order("12")
    with pytest.raises(TypeError, match="sign_flips"):
        symmetry.log10_group_order([3], sign_flips=1)
    with pytest.raises(ValueError, match="too large"):
        symmetry.orbit_size_bruteforce(nets.random_layers([2, 12, 1]))
    with pytest.raises(ValueError, match="zero_rate"):
        symmetry.prepruning_masks([3, 4], 1.0)
    with pytest.raises(TypeError, match="widths"):
        symmetry.prepruning_masks(12, 0.5)
    with pytest.raises(ValueError, match="masks"):
        symmetry.apply_prepruning(nets.mlp([3, 4]), [])
    with pytest.raises(ValueError, match=r"masks\[0\]"):
        symmetry.apply_prepruning(nets.mlp([3, 4]), [torch.ones(3, 4)])
    with pytest.raises(ValueError, match=r"masks\[1\]"):
        symmetry.apply_masks(params, [torch.ones(4, 3), torch.ones(3, 4)])
    with pytest.raises(TypeError, match="W_other"):
        symmetry.phi_distance(torch.ones(2, 2), torch.ones(2, 2, dtype=torch.long))
    with pytest.raises(ValueError, match="num_inputs"):
        symmetry.connection_table_symmetries([[0, 1]], 10)
    with pytest.raises(ValueError, match=r"inputs_of\[1\]"):
        symmetry.connection_table_symmetries([[0], [3]], 3)
    with pytest.raises(TypeError, match="inputs_of"):
        symmetry.connection_table_symmetries("abc", 3)
