"""Deep Q-networks: Q-learning with a neural network, a replay buffer and a target network (Chapter 12).

``train_dqn`` runs Mnih et al.'s recipe on gymnasium's CartPole-v1 with each
of its two stabilisers behind a switch:

* the replay buffer (``replay=True``) stores past transitions and trains on
  uniformly drawn mini-batches of them; without it every step trains on the
  transition just seen, so consecutive updates are strongly correlated;
* the target network (``target_network=True``) is a copy of the Q-network,
  refreshed every ``target_sync`` steps, that computes the bootstrap targets
  r + gamma max_a' Q_target(s', a'); without it the targets move with every
  update.

The loss is the Huber loss of the TD error, as in the DQN paper. The network
is a float32 ``nets.mlp`` on ``device``; transitions are kept in NumPy and
minibatches are drawn with a seeded NumPy generator.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch

from . import nets
from .mdp import mdp_rng
from .validation import check_bool, check_device, check_float, check_int, check_ints, describe

__all__ = ["ReplayBuffer", "DQNConfig", "DQNRun", "linear_epsilon", "train_dqn"]


class ReplayBuffer:
    """A circular buffer of transitions (s, a, r, s', terminated) with uniform sampling (Chapter 12)."""

    def __init__(self, capacity: int, obs_size: int):
        self.capacity = check_int("capacity", capacity, minimum=1)
        obs_size = check_int("obs_size", obs_size, minimum=1)
        self.obs = np.zeros((self.capacity, obs_size), dtype=np.float32)
        self.next_obs = np.zeros((self.capacity, obs_size), dtype=np.float32)
        self.actions = np.zeros(self.capacity, dtype=np.int64)
        self.rewards = np.zeros(self.capacity, dtype=np.float32)
        self.terminated = np.zeros(self.capacity, dtype=np.float32)
        self.size = 0
        self._next = 0

    def __len__(self) -> int:
        return self.size

    def add(self, obs, action: int, reward: float, next_obs, terminated: bool) -> None:
        """Store one transition, overwriting the oldest when full."""
        i = self._next
        self.obs[i], self.actions[i], self.rewards[i] = obs, action, reward
        self.next_obs[i], self.terminated[i] = next_obs, float(terminated)
        self._next = (i + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)

    def latest(self, count: int = 1) -> np.ndarray:
        """Indices of the ``count`` most recent transitions."""
        count = check_int("count", count, minimum=1, maximum=max(self.size, 1))
        return (self._next - 1 - np.arange(count)) % self.capacity

    def sample(self, batch_size: int, rng: np.random.Generator) -> np.ndarray:
        """Indices of ``batch_size`` transitions drawn uniformly, with replacement."""
        batch_size = check_int("batch_size", batch_size, minimum=1)
        if self.size == 0:
            raise ValueError("the buffer is empty: add transitions before sampling")
        return rng.integers(0, self.size, batch_size)

    def tensors(self, index: np.ndarray, device) -> tuple[torch.Tensor, ...]:
        """The transitions at ``index`` as tensors (s, a, r, s', terminated) on ``device``."""
        return tuple(torch.as_tensor(array[index], device=device)
                     for array in (self.obs, self.actions, self.rewards, self.next_obs, self.terminated))


@dataclass(frozen=True)
class DQNConfig:
    """A DQN run on CartPole-v1 (Chapter 12): every setting that changes the run."""

    num_steps: int = 8000
    replay: bool = True
    target_network: bool = True
    hidden: tuple = (64, 64)
    batch_size: int = 64
    buffer_size: int = 10_000
    lr: float = 1e-3
    gamma: float = 0.99
    target_sync: int = 500
    epsilon_start: float = 1.0
    epsilon_end: float = 0.05
    epsilon_steps: int = 5000
    learning_starts: int = 500
    train_every: int = 1
    seed: int = 0


class DQNRun(NamedTuple):
    """The return of every finished episode, the step at which it ended, and the trained Q-network."""

    returns: np.ndarray
    end_steps: np.ndarray
    q_network: torch.nn.Module


def linear_epsilon(step: int, start: float, end: float, num_steps: int) -> float:
    """Exploration rate falling linearly from ``start`` to ``end`` over ``num_steps`` steps, then flat."""
    fraction = min(1.0, step / max(num_steps, 1))
    return start + fraction * (end - start)


def _check_config(config) -> DQNConfig:
    if not isinstance(config, DQNConfig):
        raise TypeError(f"config must be a DQNConfig, got {describe(config)}")
    for name in ("num_steps", "batch_size", "buffer_size", "target_sync", "epsilon_steps", "train_every"):
        check_int(f"config.{name}", getattr(config, name), minimum=1)
    check_int("config.learning_starts", config.learning_starts, minimum=0)
    check_int("config.seed", config.seed, minimum=0)
    check_bool("config.replay", config.replay)
    check_bool("config.target_network", config.target_network)
    check_ints("config.hidden", config.hidden, minimum=1)
    check_float("config.lr", config.lr, low=0.0, low_open=True)
    check_float("config.gamma", config.gamma, low=0.0, high=1.0)
    for name in ("epsilon_start", "epsilon_end"):
        check_float(f"config.{name}", getattr(config, name), low=0.0, high=1.0)
    return config


def train_dqn(config: DQNConfig = DQNConfig(), *, device="cpu") -> DQNRun:
    """Train a Q-network on CartPole-v1 for ``config.num_steps`` environment steps (Chapter 12).

    Actions are epsilon-greedy in the network's Q-values, with epsilon falling
    linearly. After ``learning_starts`` steps every ``train_every``-th step makes one Adam update
    on the Huber loss of r + gamma (1 - terminated) max_a' Q_target(s', a') -
    Q(s, a): on a mini-batch from the buffer (replay) or on the newest
    transition alone (no replay). An episode cut off by the time limit is not
    terminated, so its last state is still bootstrapped.
    """
    import gymnasium as gym

    config = _check_config(config)
    device = check_device("device", device)
    env = gym.make("CartPole-v1")
    obs_size, num_actions = env.observation_space.shape[0], env.action_space.n
    q_net = nets.mlp((obs_size, *config.hidden, num_actions), seed=config.seed, device=device)
    target_net = copy.deepcopy(q_net) if config.target_network else q_net
    # The fused kernel: one call per step instead of a few per parameter tensor.
    optimizer = torch.optim.Adam(q_net.parameters(), lr=config.lr, fused=device.type in ("cpu", "cuda"))
    buffer = ReplayBuffer(config.buffer_size if config.replay else 1, obs_size)
    rng = mdp_rng(config.seed)
    returns, end_steps = [], []
    obs, _ = env.reset(seed=config.seed)
    episode_return = 0.0
    for step in range(config.num_steps):
        epsilon = linear_epsilon(step, config.epsilon_start, config.epsilon_end, config.epsilon_steps)
        if rng.random() < epsilon:
            action = int(rng.integers(num_actions))
        else:
            with torch.no_grad():
                action = int(q_net(torch.as_tensor(obs, device=device)).argmax())
        next_obs, reward, terminated, truncated, _ = env.step(action)
        buffer.add(obs, action, reward, next_obs, terminated)
        episode_return += reward
        obs = next_obs
        if terminated or truncated:
            returns.append(episode_return)
            end_steps.append(step + 1)
            episode_return = 0.0
            obs, _ = env.reset()
        if step + 1 < config.learning_starts or (step + 1) % config.train_every:
            continue
        index = buffer.sample(config.batch_size, rng) if config.replay else buffer.latest(1)
        s, a, r, s_next, done = buffer.tensors(index, device)
        with torch.no_grad():
            target = r + config.gamma * (1 - done) * target_net(s_next).max(1).values
        q_taken = q_net(s).gather(1, a[:, None])[:, 0]
        loss = torch.nn.functional.smooth_l1_loss(q_taken, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if config.target_network and (step + 1) % config.target_sync == 0:
            target_net.load_state_dict(q_net.state_dict())
    env.close()
    return DQNRun(np.array(returns), np.array(end_steps), q_net)
