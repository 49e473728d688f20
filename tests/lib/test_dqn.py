"""Tests of dlbook.dqn: the replay buffer, the exploration schedule and the training loop."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from dlbook import dqn


def test_replay_buffer_wraps_around_and_samples_uniformly():
    buffer = dqn.ReplayBuffer(5, 2)
    for i in range(7):
        buffer.add([i, -i], i % 2, float(i), [i + 1, 0], i == 6)
    assert len(buffer) == 5 and sorted(buffer.rewards.tolist()) == [2.0, 3.0, 4.0, 5.0, 6.0]
    assert buffer.rewards[buffer.latest(2)].tolist() == [6.0, 5.0]
    s, a, r, s_next, done = buffer.tensors(buffer.latest(1), "cpu")
    assert s.tolist() == [[6.0, -6.0]] and a.tolist() == [0] and done.tolist() == [1.0]
    counts = np.bincount(buffer.sample(50_000, np.random.default_rng(0)), minlength=5)
    assert np.abs(counts / 50_000 - 0.2).max() < 0.01


def test_linear_epsilon():
    assert dqn.linear_epsilon(0, 1.0, 0.05, 100) == 1.0
    assert dqn.linear_epsilon(50, 1.0, 0.05, 100) == pytest.approx(0.525)
    assert dqn.linear_epsilon(500, 1.0, 0.05, 100) == pytest.approx(0.05)


@pytest.mark.parametrize("replay, target_network", [(True, True), (False, False)])
def test_training_runs_and_is_reproducible(replay, target_network):
    config = dqn.DQNConfig(num_steps=300, learning_starts=50, hidden=(16,), replay=replay,
                           target_network=target_network, target_sync=50, train_every=2, seed=3)
    first, second = dqn.train_dqn(config), dqn.train_dqn(config)
    assert len(first.returns) > 5 and np.array_equal(first.returns, second.returns)
    assert np.all(np.diff(first.end_steps) == first.returns[1:])      # CartPole pays 1 per step
    for a, b in zip(first.q_network.parameters(), second.q_network.parameters()):
        assert torch.equal(a, b)


def test_the_huber_target_is_what_the_loop_fits():
    """One update of the loop equals a hand-written DQN step on the same mini-batch."""
    buffer = dqn.ReplayBuffer(10, 4)
    rng = np.random.default_rng(0)
    for i in range(10):
        buffer.add(rng.normal(size=4), i % 2, 1.0, rng.normal(size=4), i == 9)
    from dlbook import nets
    q_net = nets.mlp((4, 8, 2), seed=0)
    target_net = nets.mlp((4, 8, 2), seed=1)
    s, a, r, s_next, done = buffer.tensors(np.arange(10), "cpu")
    with torch.no_grad():
        target = r + 0.9 * (1 - done) * target_net(s_next).max(1).values
    q = q_net(s).gather(1, a[:, None])[:, 0]
    loss = torch.nn.functional.smooth_l1_loss(q, target)
    by_hand = torch.where((q - target).abs() < 1, 0.5 * (q - target) ** 2, (q - target).abs() - 0.5).mean()
    assert torch.allclose(loss, by_hand)


def test_bad_inputs():
    with pytest.raises(TypeError, match="config must be a DQNConfig"):
        dqn.train_dqn({"num_steps": 10})
    with pytest.raises(ValueError, match="config.num_steps must be >= 1"):
        dqn.train_dqn(dqn.DQNConfig(num_steps=0))
    with pytest.raises(TypeError, match="config.replay must be True or False"):
        dqn.train_dqn(dqn.DQNConfig(replay=1))
    with pytest.raises(ValueError, match="empty"):
        dqn.ReplayBuffer(3, 2).sample(1, np.random.default_rng(0))
