"""Tests of dlbook.symmetry: the function-preserving symmetries, group orders, orbits, Φ and pre-pruning."""
import math

import pytest
import torch

from dlbook import symmetry

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA device"))]


def _inputs(n, dim, seed=0, dtype=torch.float64, device="cpu"):
    return torch.randn(n, dim, generator=torch.Generator().manual_seed(seed), dtype=dtype).to(device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("activation", ["relu", "tanh"])
def test_permutation_keeps_function_float64(activation, device):
    params = symmetry.random_mlp([20, 64, 32, 3], seed=1, device=device)
    perms = symmetry.random_permutations(params, seed=2)
    permuted = symmetry.permute_hidden(params, perms)
    X = _inputs(1000, 20, device=device)
    diff = (symmetry.forward(params, X, activation) - symmetry.forward(permuted, X, activation)).abs().max()
    assert diff < 1e-12
    # ... while the parameters themselves moved a lot.
    assert (symmetry.flatten(params) - symmetry.flatten(permuted)).norm() > 0.5 * symmetry.flatten(params).norm()


def test_permutation_matches_explicit_matrices():
    params = symmetry.random_mlp([4, 3, 2], seed=0)
    perm = torch.tensor([2, 0, 1])
    P = torch.eye(3, dtype=torch.float64)[perm]  # (P W)[i] = W[perm[i]]
    (W1, b1), (W2, b2) = symmetry.permute_hidden(params, [perm])
    assert torch.equal(W1, P @ params[0][0]) and torch.equal(b1, P @ params[0][1])
    assert torch.allclose(W2, params[1][0] @ P.T) and torch.equal(b2, params[1][1])


def test_permute_inverse_restores_and_input_untouched():
    params = symmetry.random_mlp([5, 6, 7, 2], seed=3)
    perms = symmetry.random_permutations(params, seed=4)
    back = symmetry.permute_hidden(symmetry.permute_hidden(params, perms), [torch.argsort(p) for p in perms])
    assert all(torch.equal(W, V) and torch.equal(b, c) for (W, b), (V, c) in zip(params, back))


def test_sign_flip_keeps_tanh_not_relu():
    params = symmetry.random_mlp([10, 16, 8, 4], seed=5)
    signs = torch.tensor([1.0, -1.0] * 8, dtype=torch.float64)
    flipped = symmetry.flip_signs(params, 1, signs)
    X = _inputs(500, 10)
    assert (symmetry.forward(params, X, "tanh") - symmetry.forward(flipped, X, "tanh")).abs().max() < 1e-12
    assert (symmetry.forward(params, X, "relu") - symmetry.forward(flipped, X, "relu")).abs().max() > 1e-3


def test_relu_rescale_keeps_relu_not_tanh():
    params = symmetry.random_mlp([10, 16, 8, 4], seed=6)
    scales = torch.exp(_inputs(8, 1, seed=7)[:, 0])
    rescaled = symmetry.rescale_relu(params, 2, scales)
    X = _inputs(500, 10)
    assert (symmetry.forward(params, X, "relu") - symmetry.forward(rescaled, X, "relu")).abs().max() < 1e-12
    assert (symmetry.forward(params, X, "tanh") - symmetry.forward(rescaled, X, "tanh")).abs().max() > 1e-4


def test_forward_matches_sequential_and_round_trip():
    params = symmetry.random_mlp([6, 5, 4, 3], seed=8)
    X = _inputs(50, 6)
    for activation in ("relu", "tanh"):
        model = symmetry.to_sequential(params, activation)
        assert torch.allclose(model(X), symmetry.forward(params, X, activation), atol=1e-14)
    back = symmetry.from_sequential(symmetry.to_sequential(params))
    assert all(torch.equal(W, V) for (W, _), (V, _) in zip(params, back))
    out, hidden = symmetry.forward(params, X, return_hidden=True)
    assert [h.shape for h in hidden] == [(50, 5), (50, 4)] and out.shape == (50, 3)


def test_log10_group_order_values():
    assert symmetry.log10_group_order([120, 80, 10]) == pytest.approx(324.24, abs=0.01)
    assert symmetry.log10_group_order([120, 84]) == pytest.approx(325.35, abs=0.01)
    assert symmetry.log10_group_order([6, 16, 120, 84]) == pytest.approx(341.52, abs=0.01)
    assert symmetry.log10_group_order([6, 16, 120, 84], sign_flips=True) == pytest.approx(409.56, abs=0.01)
    assert symmetry.log10_group_order([3, 2]) == pytest.approx(math.log10(12))
    assert symmetry.log10_group_order([]) == 0.0


def test_orbit_sizes_by_brute_force():
    params = symmetry.random_mlp([2, 3, 2, 1], seed=9)
    assert symmetry.orbit_size_bruteforce(params) == 12
    assert symmetry.orbit_size_bruteforce(params, sign_flips=True) == 384
    (W1, b1), (W2, b2), last = params
    W1, b1, W2 = W1.clone(), b1.clone(), W2.clone()
    W1[1], b1[1], W2[:, 1] = W1[0], b1[0], W2[:, 0]  # units 0 and 1 of layer 1 identical
    assert symmetry.orbit_size_bruteforce([(W1, b1), (W2, b2), last]) == 6


def test_phi_distance():
    gen = torch.Generator().manual_seed(0)
    W = torch.randn(256, 256, generator=gen, dtype=torch.float64)
    assert symmetry.phi_distance(W, W) == 0.0
    assert symmetry.phi_distance(W, torch.randn(256, 256, generator=gen, dtype=torch.float64)) == pytest.approx(1, abs=0.1)
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


def test_apply_prepruning_keeps_pruned_weights_zero():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    masks = symmetry.prepruning_masks([4, 8, 2], 0.5, seed=1)
    symmetry.apply_prepruning(model, masks)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    X, y = torch.randn(32, 4), torch.randint(0, 2, (32,))
    for _ in range(5):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(X), y).backward()
        opt.step()
    assert torch.all(model[0].weight[masks[0] == 0] == 0) and torch.all(model[2].weight[masks[1] == 0] == 0)
    assert torch.any(model[0].weight[masks[0] == 1] != 0)


def test_bad_inputs():
    params = symmetry.random_mlp([3, 4, 2], seed=0)
    with pytest.raises(TypeError, match="params"):
        symmetry.permute_hidden(None, [torch.arange(4)])
    with pytest.raises(ValueError, match="perms"):
        symmetry.permute_hidden(params, [torch.tensor([0, 0, 1, 2])])
    with pytest.raises(ValueError, match="perms"):
        symmetry.permute_hidden(params, [])
    with pytest.raises(TypeError, match="perms"):
        symmetry.permute_hidden(params, [torch.arange(4.0)])
    with pytest.raises(ValueError, match="signs"):
        symmetry.flip_signs(params, 1, torch.tensor([1.0, 2.0, 1.0, 1.0]))
    with pytest.raises(ValueError, match="layer"):
        symmetry.flip_signs(params, 2, torch.ones(2))
    with pytest.raises(ValueError, match="scales"):
        symmetry.rescale_relu(params, 1, torch.tensor([1.0, -1.0, 1.0, 1.0]))
    with pytest.raises(ValueError, match="activation"):
        symmetry.forward(params, torch.zeros(2, 3), "sigmoid")
    with pytest.raises(ValueError, match="X"):
        symmetry.forward(params, torch.zeros(2, 5))
    with pytest.raises(ValueError, match=r"params\[1\]"):
        symmetry.check_params("params", [(torch.zeros(4, 3), torch.zeros(4)), (torch.zeros(2, 5), torch.zeros(2))])
    with pytest.raises(ValueError, match="hidden_widths"):
        symmetry.log10_group_order([3, 0])
    with pytest.raises(TypeError, match="hidden_widths"):
        symmetry.log10_group_order("12")
    with pytest.raises(ValueError, match="too large"):
        symmetry.orbit_size_bruteforce(symmetry.random_mlp([2, 12, 1]))
    with pytest.raises(ValueError, match="zero_rate"):
        symmetry.prepruning_masks([3, 4], 1.0)
    with pytest.raises(ValueError, match="masks"):
        symmetry.apply_prepruning(torch.nn.Sequential(torch.nn.Linear(3, 4)), [])
