"""Tests of dlbook.alignment: sort orders, Hungarian matching, whole-network alignment, barriers."""
import itertools

import pytest
import torch

from dlbook import alignment, nets, symmetry, train


def test_sort_permutation_lex_and_maximin():
    W = torch.tensor([[1.0, 5.0], [0.0, 9.0], [1.0, -2.0], [0.0, 1.0]])
    assert alignment.sort_permutation(W, "lex").tolist() == [3, 1, 2, 0]
    # Column 1 spreads most (11 against 1): sort by it.
    assert alignment.sort_permutation(W, "maximin").tolist() == [2, 3, 0, 1]


def test_match_units_equals_brute_force():
    S = torch.randn(5, 5, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    best = max(itertools.permutations(range(5)), key=lambda p: sum(S[i, p[i]] for i in range(5)))
    assert alignment.match_units(S).tolist() == list(best)


def test_recovery_hungarian_exact_sorts_fragile():
    assert alignment.recovery_experiment(64, 64, 1.0, "hungarian", trials=5) == 1.0
    assert alignment.recovery_experiment(64, 64, 0.0, "lex", trials=3) == 1.0
    assert alignment.recovery_experiment(64, 64, 0.03, "lex", trials=10) <= 0.7
    assert alignment.recovery_experiment(64, 64, 0.03, "maximin", trials=10) <= 0.7


@pytest.mark.parametrize("method", ["weights", "activations", "lex", "maximin"])
def test_alignment_undoes_a_hidden_permutation(method):
    A = nets.random_layers([8, 12, 10, 3], seed=1)
    B = symmetry.permute_hidden(A, symmetry.random_permutations(A, seed=5))
    X = torch.randn(200, 8, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    aligned = alignment.align(A, B, method, X=X)
    reference = alignment.align(A, A, method, X=X) if method in alignment.SORT_KEYS else A
    assert all(torch.allclose(W, V) and torch.allclose(b, c) for (W, b), (V, c) in zip(reference, aligned))
    assert torch.allclose(nets.forward(aligned, X), nets.forward(B, X), atol=1e-12)


def test_weight_matching_recovers_noisy_copy():
    A = nets.random_layers([16, 64, 64, 4], seed=3)
    perms = symmetry.random_permutations(A, seed=4)
    noisy = [(W + 0.3 * W.std() * torch.randn(W.shape, generator=torch.Generator().manual_seed(i), dtype=W.dtype), b)
             for i, (W, b) in enumerate(symmetry.permute_hidden(A, perms))]
    found = alignment.weight_matching(A, noisy)
    for p, true in zip(found, perms):
        assert alignment.fraction_matched(p, torch.argsort(true)) >= 0.99


def test_interpolation_and_barrier():
    A = nets.random_layers([4, 6, 3], seed=0)
    B = nets.random_layers([4, 6, 3], seed=1)
    mid = alignment.interpolate(A, B, 0.5)
    assert torch.allclose(mid[0][0], (A[0][0] + B[0][0]) / 2)
    X = torch.randn(30, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    y = torch.randint(0, 3, (30,), generator=torch.Generator().manual_seed(1))
    path = alignment.interpolation_path(A, A, X, y, num_points=5)
    assert path.barrier == pytest.approx(0.0, abs=1e-12) and len(path.losses) == 5
    assert alignment.loss_barrier([0, 0.5, 1], [1.0, 3.0, 2.0]) == pytest.approx(1.5)
    assert alignment.loss_barrier([0, 0.5, 1], [1.0, 1.0, 2.0]) == pytest.approx(0.0)


def test_trained_digit_nets_align_and_cache():
    from dlbook import data
    split = data.load_digits(seed=0)
    config_a = alignment.DigitsRun(32, init_seed=1, order_seed=11, epochs=5)
    A = alignment.train_digits_mlp(config_a)
    B = alignment.train_digits_mlp(alignment.DigitsRun(32, init_seed=2, order_seed=22, epochs=5))
    assert ("dlbook.alignment.train_digits_mlp", config_a) in train.RUNS
    again = alignment.train_digits_mlp(alignment.DigitsRun(32, init_seed=1, order_seed=11, epochs=5,
                                                           device=torch.device("cpu")))
    assert torch.equal(A.layers[0].W, again.layers[0].W) and A.layers[0].W is not again.layers[0].W
    assert A.history.num_epochs == 5
    aligned = alignment.align(A.layers, B.layers, "weights")
    naive = alignment.interpolation_path(A.layers, B.layers, split.X_test, split.y_test)
    matched = alignment.interpolation_path(A.layers, aligned, split.X_test, split.y_test)
    assert float(matched.losses[-1]) == pytest.approx(float(naive.losses[-1]), abs=1e-5)
    assert matched.barrier < naive.barrier


def test_pruned_digit_net_keeps_its_mask():
    config = alignment.DigitsRun(16, epochs=2, zero_rate=0.5, mask_seed=3)
    net = alignment.train_digits_mlp(config).layers
    masks = alignment.digits_masks(config)
    assert symmetry.fraction_outside_mask(net, masks) == [0.0, 0.0, 0.0]
    assert all(torch.all(mask == 1) for mask in alignment.digits_masks(alignment.DigitsRun(16)))


def test_the_trained_net_starts_from_nets_mlp():
    config = alignment.DigitsRun(8, epochs=1, lr=1e-12)
    start = nets.random_layers(config.widths, seed=config.init_seed, dtype=torch.float32)
    trained = alignment.train_digits_mlp(config).layers
    assert all(torch.allclose(W, V, atol=1e-9) for (W, _), (V, _) in zip(start, trained))


def test_bad_inputs():
    A = nets.random_layers([4, 6, 3], seed=0)
    with pytest.raises(ValueError, match="key"):
        alignment.sort_permutation(torch.zeros(3, 3), "random")
    with pytest.raises(ValueError, match="similarity"):
        alignment.match_units(torch.zeros(3, 4))
    with pytest.raises(ValueError, match="widths"):
        alignment.weight_matching(A, nets.random_layers([4, 5, 3]))
    with pytest.raises(ValueError, match="method"):
        alignment.align(A, A, "greedy")
    with pytest.raises(ValueError, match="X"):
        alignment.align(A, A, "activations")
    with pytest.raises(ValueError, match="noise"):
        alignment.recovery_experiment(8, 8, -1.0, "lex")
    with pytest.raises(ValueError, match="X and y"):
        alignment.interpolation_path(A, A, torch.zeros(5, 4), torch.zeros(4, dtype=torch.long))
    with pytest.raises(ValueError, match="ts"):
        alignment.loss_barrier([0.0], [1.0])
    with pytest.raises(TypeError, match="params_b"):
        alignment.interpolate(A, None, 0.5)
    with pytest.raises(ValueError, match="width"):
        alignment.DigitsRun(0)
    with pytest.raises(ValueError, match="zero_rate"):
        alignment.DigitsRun(8, zero_rate=1.0)
    with pytest.raises(TypeError, match="config"):
        alignment.train_digits_mlp({"width": 8})
    with pytest.raises(TypeError, match="X"):
        alignment.interpolation_path(A, A, torch.zeros(5, 4, dtype=torch.long), torch.zeros(5, dtype=torch.long))
    with pytest.raises(TypeError, match="y"):
        alignment.interpolation_path(A, A, torch.zeros(5, 4), torch.zeros(5))
    with pytest.raises(TypeError, match="similarity"):
        alignment.match_units(torch.zeros(3, 3, dtype=torch.long))
