"""Tests of dlbook.data_parallel: DDP in two real processes (spawn and torchrun) against the single-process
run, and the local-SGD / federated-averaging simulation against synchronous SGD."""
import pytest
import torch
from torch import nn

from dlbook import data_parallel, nets
from dlbook.data_parallel import DataParallelRun


def _data(n, dim=64, num_classes=10, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, dim, generator=g, dtype=torch.float64), torch.randint(0, num_classes, (n,), generator=g)


def _max_gap(a, b):
    return max((x - y).abs().max().item() for x, y in zip(a, b))


@pytest.fixture(scope="module")
def spawned():
    """One launch of two ranks with unequal shards (the chapter also launches exactly once)."""
    config = DataParallelRun(shard_sizes=(80, 48), num_steps=3)
    X, y = _data(3 * 128)
    return config, X, y, data_parallel.spawn_data_parallel(config, X, y, timeout=300)


def test_equal_shards_single_process_identity():
    """The mean of equal shards' mean gradients is the global mean gradient: checked without processes."""
    config = DataParallelRun(shard_sizes=(64, 64), num_steps=0)
    X, y = _data(128)
    reference = data_parallel.single_process_run(config, X, y)
    halves = [data_parallel.single_process_run(DataParallelRun(shard_sizes=(64,), num_steps=0), X[i:i + 64],
                                               y[i:i + 64]) for i in (0, 64)]
    mean = [(a + b) / 2 for a, b in zip(halves[0].gradient, halves[1].gradient)]
    assert _max_gap(mean, reference.gradient) < 1e-12


@pytest.mark.slow
def test_ddp_unequal_shards(spawned):
    config, X, y, ranks = spawned
    reference = data_parallel.single_process_run(config, X, y)
    # Every rank applies the same all-reduced gradient: the plain mean of the per-rank mean gradients ...
    plain_mean = [(a + b) / 2 for a, b in zip(ranks[0].local_gradient, ranks[1].local_gradient)]
    for rank in ranks:
        assert _max_gap(rank.gradient, plain_mean) < 1e-12
    # ... which for unequal shards is not the full-batch gradient, while the size-weighted average is.
    assert _max_gap(plain_mean, reference.gradient) > 1e-4
    weighted = data_parallel.shard_weighted_average([r.local_gradient for r in ranks], config.shard_sizes)
    assert _max_gap(weighted, reference.gradient) < 1e-12
    # The ranks' parameters stay bitwise identical.
    assert all(torch.equal(a, b) for a, b in zip(ranks[0].parameters, ranks[1].parameters))


@pytest.mark.slow
def test_ddp_with_equal_shards_under_torchrun_equals_single_process():
    config = DataParallelRun(shard_sizes=(64, 64), num_steps=4)
    X, y = _data(4 * 128, seed=1)
    ranks = data_parallel.torchrun_data_parallel(config, X, y, timeout=300)
    reference = data_parallel.single_process_run(config, X, y)
    for rank in ranks:
        assert _max_gap(rank.gradient, reference.gradient) < 1e-12
        assert _max_gap(rank.parameters, reference.parameters) < 1e-10
    assert all(torch.equal(a, b) for a, b in zip(ranks[0].parameters, ranks[1].parameters))


def test_spawn_stops_the_ranks_and_says_so_on_timeout():
    """Half a second is far too short for two children to import torch: the ranks are stopped."""
    config = DataParallelRun(shard_sizes=(4, 4), num_steps=1, widths=(3, 2))
    X, y = _data(8, dim=3, num_classes=2)
    with pytest.raises(TimeoutError, match="2 ranks did not finish within 0.5 s"):
        data_parallel.spawn_data_parallel(config, X, y, timeout=0.5)


def test_torchrun_command():
    command = data_parallel.torchrun_command("/tmp/run", nproc_per_node=4)
    assert command == ["torchrun", "--standalone", "--nproc-per-node=4", "-m", "dlbook.data_parallel", "/tmp/run"]


def _sgd_reference(model, X, y, batches, lr):
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    for rows in batches:
        opt.zero_grad()
        nn.functional.cross_entropy(model(X[rows]), y[rows]).backward()
        opt.step()
    return model


def test_local_sgd_with_one_local_step_is_synchronous_sgd():
    X, y = _data(120, dim=8, num_classes=3, seed=2)
    model = nets.mlp((8, 16, 3), dtype=torch.float64, seed=3)
    shards = [torch.arange(k, 120, 4) for k in range(4)]   # 4 equal shards of 30
    result = data_parallel.local_sgd(model, X, y, shards, local_steps=1, rounds=6, lr=0.2, batch_size=5,
                                     weighting="equal")
    # Round r uses rows r*5 .. r*5+4 of every shard (cyclically): together one global batch of 20.
    batches = [torch.cat([s[(r * 5 + torch.arange(5)) % 30] for s in shards]) for r in range(6)]
    reference = _sgd_reference(nets.mlp((8, 16, 3), dtype=torch.float64, seed=3), X, y, batches, 0.2)
    assert _max_gap(list(result.model.parameters()), list(reference.parameters())) < 1e-12
    assert len(result.losses) == 7 and result.losses[-1] < result.losses[0]
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), nets.mlp((8, 16, 3), dtype=torch.float64,
                                                                           seed=3).parameters()))


def test_federated_averaging_one_step_is_full_batch_gradient_descent_on_non_iid_shards():
    X, y = _data(150, dim=8, num_classes=3, seed=4)
    shards = [torch.nonzero(y == c).squeeze(1) for c in range(3)]   # one class per client, unequal sizes
    assert len({len(s) for s in shards}) > 1
    model = nets.mlp((8, 16, 3), dtype=torch.float64, seed=5)
    fedavg = data_parallel.local_sgd(model, X, y, shards, local_steps=1, rounds=5, lr=0.3)
    reference = _sgd_reference(nets.mlp((8, 16, 3), dtype=torch.float64, seed=5), X, y,
                               [torch.arange(150)] * 5, 0.3)
    assert _max_gap(list(fedavg.model.parameters()), list(reference.parameters())) < 1e-12
    # More local steps on non-IID shards drift away from it.
    drifted = data_parallel.local_sgd(model, X, y, shards, local_steps=8, rounds=5, lr=0.3 / 8)
    assert _max_gap(list(drifted.model.parameters()), list(reference.parameters())) > 1e-4


def test_steps_to_accuracy_matches_a_manual_loop_and_falls_with_batch_size():
    X, y = _data(200, dim=8, num_classes=3, seed=6)
    model = nets.mlp((8, 32, 3), dtype=torch.float64, seed=7)
    steps = data_parallel.steps_to_accuracy(model, X, y, batch_size=20, lr=0.2, target=0.7, max_steps=3000)
    assert steps is not None
    # The same run by hand: fit's batches, accuracy after every step.
    from dlbook import runtime, train
    net = nets.mlp((8, 32, 3), dtype=torch.float64, seed=7)
    opt, shuffler, count, reached = torch.optim.SGD(net.parameters(), lr=0.2), runtime.generator(0), 0, None
    while reached is None:
        order = torch.randperm(200, generator=shuffler)
        for start in range(0, 200, 20):
            opt.zero_grad()
            nn.functional.cross_entropy(net(X[order[start:start + 20]]), y[order[start:start + 20]]).backward()
            opt.step()
            count += 1
            if train.accuracy(net(X), y) >= 0.7:
                reached = count
                break
    assert steps == reached
    larger = data_parallel.steps_to_accuracy(model, X, y, batch_size=200, lr=0.2, target=0.7, max_steps=3000)
    assert larger is not None and larger <= steps
    assert data_parallel.steps_to_accuracy(model, X, y, batch_size=20, lr=0.2, target=1.0, max_steps=3) is None


def test_bad_inputs():
    config = DataParallelRun(shard_sizes=(4, 4), num_steps=2, widths=(3, 2))
    X, y = _data(16, dim=3, num_classes=2)
    with pytest.raises(ValueError, match="shard_sizes"):
        DataParallelRun(shard_sizes=(4, 0))
    with pytest.raises(ValueError, match="lr"):
        DataParallelRun(lr=-1.0)
    with pytest.raises(TypeError, match="dtype"):
        DataParallelRun(dtype=torch.int64)
    with pytest.raises(ValueError, match="X must have at least 16 rows"):
        data_parallel.single_process_run(config, X[:10], y[:10])
    with pytest.raises(ValueError, match="X must have shape"):
        data_parallel.single_process_run(config, X[:, :2], y)
    with pytest.raises(ValueError, match="y must lie"):
        data_parallel.single_process_run(config, X, y + 5)
    with pytest.raises(TypeError, match="config"):
        data_parallel.spawn_data_parallel({"shard_sizes": (4, 4)}, X, y)
    with pytest.raises(ValueError, match="timeout"):
        data_parallel.spawn_data_parallel(config, X, y, timeout=0)
    with pytest.raises(ValueError, match="gradients"):
        data_parallel.shard_weighted_average([[torch.ones(2)]], (1, 2))
    model = nets.mlp((3, 4, 2), dtype=torch.float64)
    with pytest.raises(ValueError, match="batch_size"):
        data_parallel.steps_to_accuracy(model, X, y, batch_size=17, lr=0.1, target=0.9, max_steps=5)
    with pytest.raises(ValueError, match="target"):
        data_parallel.steps_to_accuracy(model, X, y, batch_size=4, lr=0.1, target=1.5, max_steps=5)
    with pytest.raises(TypeError, match="shards"):
        data_parallel.local_sgd(model, X, y, torch.arange(4), local_steps=1, rounds=1, lr=0.1)
    with pytest.raises(ValueError, match="shards\\[1\\]"):
        data_parallel.local_sgd(model, X, y, [torch.arange(4), torch.tensor([99])], local_steps=1, rounds=1, lr=0.1)
    with pytest.raises(ValueError, match="local_steps"):
        data_parallel.local_sgd(model, X, y, [torch.arange(4)], local_steps=0, rounds=1, lr=0.1)
    with pytest.raises(ValueError, match="weighting"):
        data_parallel.local_sgd(model, X, y, [torch.arange(4)], local_steps=1, rounds=1, lr=0.1, weighting="mean")
