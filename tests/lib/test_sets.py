"""Tests of dlbook.sets: pooling, Deep Sets and PointNet symmetries, power sums, point clouds."""

import pytest
import torch

from dlbook import equivariance, sets


def _randn(*shape, seed=0, dtype=torch.float64):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def _permute_points(X, seed=0):
    perm = torch.randperm(X.shape[1], generator=torch.Generator().manual_seed(seed))
    return X[:, perm]


def test_pad_sets_and_present():
    X = sets.pad_sets([torch.ones(2, 3), torch.zeros(4, 3)], dtype=torch.float64)
    assert X.shape == (2, 4, 3) and torch.isnan(X[0, 2:]).all()
    assert sets.present(X).tolist() == [[True, True, False, False], [True] * 4]


@pytest.mark.parametrize("aggregation", sets.AGGREGATIONS)
def test_pool_against_a_loop(aggregation):
    H = _randn(3, 5, 2)
    mask = torch.tensor([[1, 1, 0, 0, 0], [1, 1, 1, 1, 1], [0, 1, 0, 1, 0]], dtype=torch.bool)
    out = sets.pool(H, mask, aggregation)
    reduce = {"sum": lambda h: h.sum(0), "mean": lambda h: h.mean(0), "max": lambda h: h.max(0).values}[aggregation]
    for b in range(3):
        assert torch.allclose(out[b], reduce(H[b][mask[b]]), atol=1e-15)


@pytest.mark.parametrize("aggregation", sets.AGGREGATIONS)
def test_deep_sets_is_invariant_and_ignores_padding(aggregation):
    model = sets.DeepSets((1, 16, 8), (8, 16, 1), aggregation=aggregation, seed=0, dtype=torch.float64)
    X = sets.random_sets(6, 3, 9, seed=1, dtype=torch.float64)
    order = torch.argsort(torch.rand(X.shape[:2], generator=torch.Generator().manual_seed(2)), dim=1)
    shuffled = torch.gather(X, 1, order[:, :, None])              # padding moves too, which must not matter
    assert (model(shuffled) - model(X)).abs().max() < 1e-13
    single = [model(X[b:b + 1, sets.present(X)[b]]) for b in range(6)]
    assert (torch.cat(single) - model(X)).abs().max() < 1e-13
    assert equivariance.invariance_error(model, _permute_points, X[:, :3]) < 1e-13


def test_deep_sets_gradients_stay_finite_with_padding():
    model = sets.DeepSets((1, 8, 4), (4, 8, 1), aggregation="max", seed=0)
    X = sets.random_sets(8, 2, 6, seed=3)
    model(X).sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters())


def test_set_targets():
    X = sets.pad_sets([torch.tensor([[1.0], [3.0]]), torch.tensor([[2.0], [2.0], [5.0]])], dtype=torch.float64)
    assert sets.set_target(X, "max").flatten().tolist() == [3.0, 5.0]
    assert torch.allclose(sets.set_target(X, "variance").flatten(), torch.tensor([1.0, 2.0], dtype=torch.float64))


def test_power_sums_are_injective_on_multisets():
    for values in ([0.3], [1.0, 1.0, -2.0], [0.1, 0.5, 0.5, 0.9, -0.4], [2.0, -1.0, 0.25, 0.25, 3.0, 1.5]):
        x = torch.tensor(values, dtype=torch.float64)
        p = sets.power_sums(x)
        assert p.shape == (len(values),)
        recovered = sets.multiset_from_power_sums(p)
        assert (recovered - x.sort().values).abs().max() < 1e-6
    batch = sets.power_sums(_randn(4, 3), 5)
    assert batch.shape == (4, 5)


def test_random_rotations_are_rotations():
    R = sets.random_rotations(50, seed=0)
    assert (R @ R.transpose(1, 2) - torch.eye(3, dtype=torch.float64)).abs().max() < 1e-14
    assert (torch.linalg.det(R) - 1).abs().max() < 1e-14


def test_shape_clouds_lie_on_their_surfaces():
    data = sets.shape_clouds(60, 50, noise=0.0, rotate=False, seed=0, dtype=torch.float64)
    for label, X in zip(data.y, data.X):
        shape = sets.SHAPES[label]
        if shape == "sphere":
            assert (X.norm(dim=1) - 1).abs().max() < 1e-14
        elif shape == "cube":
            assert (X.abs().max(dim=1).values - 1).abs().max() < 1e-14
        else:
            radius, height = X[:, :2].norm(dim=1), X[:, 2]
            on_side = (radius - 1).abs() < 1e-12
            assert torch.all(on_side | ((height.abs() == 1) & (radius <= 1)))
    rotated = sets.shape_clouds(60, 50, noise=0.0, seed=0, dtype=torch.float64)
    spheres = rotated.X[rotated.y == 0]
    assert (spheres.norm(dim=2) - 1).abs().max() < 1e-14


def test_pointnet_invariance_critical_points_and_segmentation_equivariance():
    model = sets.PointNet((3, 16, 32), (32, 16, 3), seed=0, dtype=torch.float64)
    data = sets.shape_clouds(4, 64, seed=1, dtype=torch.float64)
    assert equivariance.invariance_error(model, _permute_points, data.X, relative=False) == 0.0
    full = model.global_feature(data.X)
    for b, points in enumerate(sets.critical_points(model, data.X)):
        assert len(points) <= 32
        # Equal up to rounding: BLAS may block a product of 64 rows differently from one of fewer.
        assert (model.global_feature(data.X[b:b + 1, points]) - full[b:b + 1]).abs().max() < 1e-15
    segmentation = sets.PointNetSegmentation(model, (64, 16, 2), seed=2)
    perm = torch.randperm(64, generator=torch.Generator().manual_seed(3))
    error = equivariance.equivariance_error(segmentation, lambda X: X[:, perm], lambda Y: Y[:, perm], data.X)
    assert error < 1e-14


def test_tnet_and_the_orthogonality_penalty():
    R = sets.random_rotations(3, seed=4)
    assert sets.orthogonality_penalty(R).abs().max() < 1e-28
    assert sets.orthogonality_penalty(torch.diag(torch.tensor([2.0, 1.0, 1.0]))) == 9.0
    tnet = sets.TNet((3, 8, 16), seed=0, dtype=torch.float64)
    X = sets.shape_clouds(2, 20, seed=5, dtype=torch.float64).X
    A = tnet.matrices(X)
    assert A.shape == (2, 3, 3) and (tnet(X) - X @ A.transpose(1, 2)).abs().max() < 1e-14
    assert equivariance.equivariance_error(tnet, _permute_points, _permute_points, X) < 1e-14


def test_fit_deep_sets_and_pointnet_learn():
    run = sets.fit_deep_sets("max", "max", num_sets=512, epochs=4, seed=0)
    losses = run.history["train_loss"]
    assert losses[-1] < 0.1 * losses[0]
    model, history = sets.fit_pointnet(num_train=192, num_points=32, epochs=3, seed=0)
    assert history["train_loss"][-1] < history["train_loss"][0]


def test_bad_arguments():
    with pytest.raises(ValueError, match="aggregation must be one of"):
        sets.pool(torch.zeros(1, 2, 3), aggregation="median")
    with pytest.raises(TypeError, match="mask must be a boolean"):
        sets.pool(torch.zeros(1, 2, 3), torch.ones(1, 2))
    with pytest.raises(ValueError, match="phi's output width"):
        sets.DeepSets((1, 4, 8), (4, 1))
    with pytest.raises(ValueError, match="target must be one of"):
        sets.set_target(torch.zeros(1, 2, 1), "median")
    with pytest.raises(ValueError, match="sets of scalars"):
        sets.set_target(torch.zeros(1, 2, 2), "max")
    with pytest.raises(ValueError, match="max_size must be >="):
        sets.random_sets(3, 5, 2)
    with pytest.raises(TypeError, match="x must hold floating"):
        sets.power_sums(torch.tensor([1, 2]))
    with pytest.raises(ValueError, match="A must be square"):
        sets.orthogonality_penalty(torch.zeros(2, 3))
    with pytest.raises(TypeError, match="model must be a sets.PointNet"):
        sets.critical_points(torch.nn.Linear(3, 3), torch.zeros(1, 4, 3))
    with pytest.raises(ValueError, match="widths\\[0\\] must be 2 K"):
        sets.PointNetSegmentation(sets.PointNet(), (10, 2))
