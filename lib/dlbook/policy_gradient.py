"""Policy gradients: the policy-gradient theorem, REINFORCE, baselines, actor-critic, evolution strategies
(Chapter 12).

Two settings.

* Sutton and Barto's short corridor (``gridworlds.short_corridor``), where
  every state looks the same, so the policy is one number p = Pr(right) =
  sigmoid(theta). Its value J(p) = -2 (2 - p) / (p (1 - p)) has a closed form,
  so the exact gradient, REINFORCE's single-episode estimates (vectorised over
  episodes in NumPy) and whole learning runs (vectorised over runs) can all be
  compared with it.
* CartPole from gymnasium, run as a vector of environments
  (``gym.make_vec(..., vectorization_mode="vector_entry_point")``, one NumPy
  program for all of them), with a small torch policy: REINFORCE with a
  per-time-step baseline, and a batched one-step actor-critic.

The exact corridor computations are float64 NumPy; the CartPole networks are
float32 torch modules built by ``nets.mlp`` on ``device``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch

from . import nets
from .mdp import MDP, mdp_rng, policy_dynamics, q_from_v
from .validation import as_tensor, check_choice, check_device, check_float, check_int, describe

__all__ = ["corridor_value", "corridor_gradient", "corridor_optimum", "policy_gradient_theorem",
           "corridor_gradient_estimates", "CorridorRuns", "reinforce_corridor", "softmax_bandit_gradient",
           "es_gradient", "CartPoleConfig", "CartPoleRun", "train_cartpole", "cartpole_returns", "sample_actions"]

BASELINES = ("none", "learned")
CARTPOLE_METHODS = ("reinforce", "actor_critic")


# ---------------------------------------------------------------------------
# The short corridor, exactly
# ---------------------------------------------------------------------------

def _probability(name: str, p) -> np.ndarray:
    p = np.asarray(as_tensor(name, p if isinstance(p, (list, tuple, np.ndarray, torch.Tensor)) else [p],
                             floating=True).double().cpu().numpy())
    if ((p <= 0) | (p >= 1)).any():
        raise ValueError(f"{name} must lie strictly between 0 and 1, got values in {p.min()}..{p.max()}")
    return p


def corridor_value(p):
    """J(p) = v(start) of the short corridor when every state goes right with probability p (Chapter 12)."""
    scalar = np.ndim(p) == 0
    p = _probability("p", p)
    value = -2 * (2 - p) / (p * (1 - p))
    return float(value[0]) if scalar else value


def corridor_gradient(p):
    """dJ/dtheta for p = sigmoid(theta): J'(p) p (1 - p) = 2 (p (1 - p) + (2 - p)(1 - 2p)) / (p (1 - p))."""
    scalar = np.ndim(p) == 0
    p = _probability("p", p)
    g = p * (1 - p)
    value = 2 * (g + (2 - p) * (1 - 2 * p)) / g
    return float(value[0]) if scalar else value


def corridor_optimum() -> tuple[float, float]:
    """The best p = 2 - sqrt(2) and J there, -(6 + 4 sqrt(2)), where dJ/dp = 0."""
    p = 2 - np.sqrt(2)
    return p, corridor_value(p)


def policy_gradient_theorem(mdp: MDP, policy, policy_grad, start: int, gamma: float = 1.0) -> np.ndarray:
    """grad J = sum_s eta(s) sum_a d pi(a|s)/d theta q_pi(s, a), J = v_pi(start) (Chapter 12).

    eta(s) is the expected (discounted) number of visits to s from ``start``:
    the row of (I - gamma P_pi)^-1 for the start state. ``policy_grad[k, s, a]``
    is d pi(a|s) / d theta_k; the result has one entry per parameter.
    """
    if not isinstance(mdp, MDP):
        raise TypeError(f"mdp must be a dlbook.mdp.MDP, got {describe(mdp)}")
    start = check_int("start", start, minimum=0, maximum=mdp.num_states - 1)
    gamma = check_float("gamma", gamma, low=0.0, high=1.0)
    dpi = as_tensor("policy_grad", policy_grad, shape=(None, mdp.num_states, mdp.num_actions),
                    floating=True).double().cpu().numpy()
    P_pi, R_pi = policy_dynamics(mdp, policy)
    visits = np.linalg.solve((np.eye(mdp.num_states) - gamma * P_pi).T, np.eye(mdp.num_states)[start])
    v = np.linalg.solve(np.eye(mdp.num_states) - gamma * P_pi, R_pi)
    q = q_from_v(mdp, v, gamma)
    return np.einsum("s,ksa,sa->k", visits * ~mdp.terminal, dpi, q)


def _corridor_step(state: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Next states of the short corridor (3 is the goal): state 1 swaps the actions."""
    forward = np.where(state == 1, ~right, right)
    return np.where(forward, state + 1, np.maximum(state - 1, 0))


def corridor_gradient_estimates(p: float, num_episodes: int, *, baseline: float = 0.0, seed: int = 0,
                                max_steps: int = 100_000) -> np.ndarray:
    """One REINFORCE estimate of dJ/dtheta per episode at a fixed p, all episodes at once (Chapter 12).

    The estimate is sum_t (G_t - baseline) d log pi(a_t) / d theta with
    d log pi / d theta = 1[right] - p and G_t = -(T - t), the negated number
    of steps left. Keeping S1 = sum_t g_t and S2 = sum_t t g_t while the
    episode runs gives sum_t (-(T - t) - b) g_t = S2 - (T + b) S1 at its end.
    """
    p = float(_probability("p", p)[0])
    num_episodes = check_int("num_episodes", num_episodes, minimum=1)
    baseline = check_float("baseline", baseline)
    max_steps = check_int("max_steps", max_steps, minimum=1)
    rng = mdp_rng(seed)
    state = np.zeros(num_episodes, dtype=int)
    s1, s2 = np.zeros(num_episodes), np.zeros(num_episodes)
    length = np.zeros(num_episodes)
    live = np.arange(num_episodes)
    for t in range(max_steps):
        right = rng.random(len(live)) < p
        g = right - p
        s1[live] += g
        s2[live] += t * g
        state[live] = _corridor_step(state[live], right)
        length[live] += 1
        live = live[state[live] != 3]
        if not len(live):
            return s2 - (length + baseline) * s1
    raise RuntimeError(f"some episode lasted more than {max_steps} steps")


class CorridorRuns(NamedTuple):
    """REINFORCE runs on the short corridor: Pr(right) before each episode, and each episode's return."""

    p: np.ndarray             # (runs, episodes + 1)
    returns: np.ndarray       # (runs, episodes)


def reinforce_corridor(alpha: float, num_episodes: int, *, num_runs: int = 10, p0: float = 0.05,
                       baseline: str = "none", baseline_lr: float = 2.0**-6, seed: int = 0,
                       max_steps: int = 10_000_000) -> CorridorRuns:
    """REINFORCE on the short corridor, ``num_runs`` runs in lockstep, one update per episode (Chapter 12).

    theta = logit p moves by alpha sum_t (G_t - b) (1[right] - p) at the end of
    each episode, with p held fixed during the episode. With baseline="learned",
    b is a number w, a running average of the episodes' mean return-to-go:
    w += baseline_lr (mean_t G_t - w) after each episode. (Summing the
    per-step updates w += baseline_lr (G_t - w) with w held fixed would
    multiply w by 1 - baseline_lr T, which diverges for long episodes.)
    """
    alpha = check_float("alpha", alpha, low=0.0, low_open=True)
    num_episodes = check_int("num_episodes", num_episodes, minimum=1)
    num_runs = check_int("num_runs", num_runs, minimum=1)
    p0 = float(_probability("p0", p0)[0])
    baseline = check_choice("baseline", baseline, BASELINES)
    baseline_lr = check_float("baseline_lr", baseline_lr, low=0.0)
    max_steps = check_int("max_steps", max_steps, minimum=1)
    rng = mdp_rng(seed)
    runs = np.arange(num_runs)
    theta = np.full(num_runs, np.log(p0 / (1 - p0)))
    w = np.zeros(num_runs)
    history = np.zeros((num_runs, num_episodes + 1))
    history[:, 0] = p0
    returns = np.zeros((num_runs, num_episodes))
    done = np.zeros(num_runs, dtype=int)
    state, t = np.zeros(num_runs, dtype=int), np.zeros(num_runs)
    s1, s2 = np.zeros(num_runs), np.zeros(num_runs)
    p = 1 / (1 + np.exp(-theta))
    for _ in range(max_steps):
        right = rng.random(num_runs) < p
        g = right - p
        s1 += g
        s2 += t * g
        state = _corridor_step(state, right)
        t += 1
        ended = state == 3
        if ended.any():
            e = runs[ended]
            b = w[e] if baseline == "learned" else 0.0
            theta[e] += alpha * (s2[e] - (t[e] + b) * s1[e])
            if baseline == "learned":
                w[e] += baseline_lr * (-(t[e] + 1) / 2 - w[e])     # mean of G_t = -(T - t)
            recording = e[done[e] < num_episodes]
            returns[recording, done[recording]] = -t[recording]
            done[recording] += 1
            p[e] = 1 / (1 + np.exp(-theta[e]))
            history[recording, done[recording]] = p[recording]
            state[e], t[e], s1[e], s2[e] = 0, 0.0, 0.0, 0.0
            if (done >= num_episodes).all():
                return CorridorRuns(history, returns)
    raise RuntimeError(f"not every run finished {num_episodes} episodes within {max_steps} steps")


def softmax_bandit_gradient(theta, rewards) -> torch.Tensor:
    """dJ/dtheta_a = pi_a (r_a - J) for J = sum_a pi_a r_a, pi = softmax(theta) (Chapter 12)."""
    theta = as_tensor("theta", theta, ndim=1, floating=True)
    rewards = as_tensor("rewards", rewards, shape=(len(theta),), floating=True).to(theta.dtype)
    pi = torch.softmax(theta, 0)
    return pi * (rewards - (pi * rewards).sum())


def es_gradient(objective, theta, sigma: float, num_samples: int, *, antithetic: bool = True,
                seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Evolution strategies: estimate grad E F(theta + sigma eps), eps ~ N(0, I), from F alone (Chapter 12).

    Plain: mean of F(theta + sigma eps) eps / sigma. Antithetic: mean of
    (F(theta + sigma eps) - F(theta - sigma eps)) eps / (2 sigma).
    ``objective`` maps an (n, k) array of parameters to n values. Returns the
    estimate and its standard error, entry by entry.
    """
    theta = as_tensor("theta", theta, ndim=1, floating=True).double().cpu().numpy()
    sigma = check_float("sigma", sigma, low=0.0, low_open=True)
    num_samples = check_int("num_samples", num_samples, minimum=2)
    if not callable(objective):
        raise TypeError(f"objective must be a function of an (n, k) array, got {describe(objective)}")
    eps = mdp_rng(seed).normal(size=(num_samples, len(theta)))
    if antithetic:
        terms = ((np.asarray(objective(theta + sigma * eps)) - np.asarray(objective(theta - sigma * eps)))[:, None]
                 * eps / (2 * sigma))
    else:
        terms = np.asarray(objective(theta + sigma * eps))[:, None] * eps / sigma
    return terms.mean(0), terms.std(0, ddof=1) / np.sqrt(num_samples)


# ---------------------------------------------------------------------------
# CartPole: REINFORCE with a baseline, and actor-critic
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class CartPoleConfig:
    """A policy-gradient run on CartPole-v1 (Chapter 12): every setting that changes the run."""

    method: str = "reinforce"        # or "actor_critic"
    num_updates: int = 30
    num_envs: int = 32               # episodes per update
    hidden: int = 32
    lr: float = 1e-2
    gamma: float = 0.99
    critic_lr: float = 1e-2
    critic_steps: int = 20           # critic updates per batch (actor-critic)
    max_steps: int = 500             # CartPole-v1's time limit
    seed: int = 0


class CartPoleRun(NamedTuple):
    """The mean return of the episodes of each update, and the trained policy."""

    mean_returns: np.ndarray         # (num_updates,)
    policy: torch.nn.Module


def sample_actions(logits, rng: np.random.Generator) -> np.ndarray:
    """One action per row of logits (a NumPy array), drawn with one uniform per row from ``rng``."""
    logits = np.asarray(logits, dtype=np.float64)
    probabilities = np.exp(logits - logits.max(-1, keepdims=True))
    probabilities /= probabilities.sum(-1, keepdims=True)
    u = rng.random((len(probabilities), 1))
    return np.minimum((u > probabilities.cumsum(-1)).sum(-1), probabilities.shape[-1] - 1)


def _tanh_forward(layers, X: np.ndarray) -> np.ndarray:
    """The policy's forward pass in NumPy: the rollout asks it once per step, where torch's
    per-call overhead would cost more than the arithmetic."""
    h = X
    for index, (W, b) in enumerate(layers):
        h = h @ W.T + b
        if index < len(layers) - 1:
            h = np.tanh(h)
    return h


def _rollout(env, policy, num_envs, max_steps, rng, seed):
    """Run every environment for one episode; returns observations (T + 1, N, 4), actions, rewards
    and alive masks (T, N), and the termination flags (T, N)."""
    layers = [(W.double().cpu().numpy(), b.double().cpu().numpy()) for W, b in nets.to_layers(policy)]
    obs, _ = env.reset(seed=seed)
    observations, actions, rewards, alive, terminated = [obs], [], [], [], []
    running = np.ones(num_envs, dtype=bool)
    for _ in range(max_steps):
        action = sample_actions(_tanh_forward(layers, obs), rng)
        obs, reward, term, trunc, _ = env.step(action)
        alive.append(running.copy())
        rewards.append(reward * running)
        terminated.append(term & running)
        actions.append(action)
        observations.append(obs)
        running &= ~(term | trunc)
        if not running.any():
            break
    return (np.array(observations), np.array(actions), np.array(rewards, dtype=np.float64),
            np.array(alive), np.array(terminated))


def cartpole_returns(rewards: np.ndarray, alive: np.ndarray, gamma: float) -> np.ndarray:
    """G_t = r_t + gamma G_{t+1} along the time axis of (T, N) arrays, 0 after an episode ends."""
    returns = np.zeros_like(rewards)
    following = np.zeros(rewards.shape[1])
    for t in range(len(rewards) - 1, -1, -1):
        following = (rewards[t] + gamma * following) * alive[t]
        returns[t] = following
    return returns


def train_cartpole(config: CartPoleConfig, *, device="cpu") -> CartPoleRun:
    """Train a 4-hidden-2 tanh policy on CartPole-v1 with REINFORCE or one-step actor-critic (Chapter 12).

    Each update runs ``num_envs`` episodes with the current policy. REINFORCE
    weighs log pi(a_t | s_t) by G_t - b_t, where the baseline b_t is the mean
    return-to-go at step t over the episodes still running. The actor-critic
    weighs it by the TD error delta_t = r_t + gamma V(s_{t+1}) - V(s_t) of a
    critic V (4-hidden-1), fitted before each actor update by ``critic_steps``
    semi-gradient steps on the TD targets of the batch.
    """
    import gymnasium as gym

    if not isinstance(config, CartPoleConfig):
        raise TypeError(f"config must be a CartPoleConfig, got {describe(config)}")
    method = check_choice("config.method", config.method, CARTPOLE_METHODS)
    num_updates = check_int("config.num_updates", config.num_updates, minimum=1)
    num_envs = check_int("config.num_envs", config.num_envs, minimum=1)
    hidden = check_int("config.hidden", config.hidden, minimum=1)
    lr = check_float("config.lr", config.lr, low=0.0, low_open=True)
    critic_lr = check_float("config.critic_lr", config.critic_lr, low=0.0, low_open=True)
    check_int("config.critic_steps", config.critic_steps, minimum=1)
    gamma = check_float("config.gamma", config.gamma, low=0.0, high=1.0)
    max_steps = check_int("config.max_steps", config.max_steps, minimum=1)
    seed = check_int("config.seed", config.seed, minimum=0)
    device = check_device("device", device)
    env = gym.make_vec("CartPole-v1", num_envs=num_envs, vectorization_mode="vector_entry_point",
                       max_episode_steps=max_steps)
    policy = nets.mlp((4, hidden, 2), activation="tanh", seed=seed, device=device)
    critic = nets.mlp((4, hidden, 1), activation="tanh", seed=seed + 1, device=device)
    actor_opt = torch.optim.Adam(policy.parameters(), lr=lr)
    critic_opt = torch.optim.Adam(critic.parameters(), lr=critic_lr)
    rng = mdp_rng(seed)
    mean_returns = []
    for update in range(num_updates):
        obs, actions, rewards, alive, terminated = _rollout(env, policy, num_envs, max_steps, rng,
                                                            seed * 100_000 + update)
        mean_returns.append(rewards.sum(0).mean())
        states = torch.as_tensor(obs[:-1], dtype=torch.float32, device=device)          # (T, N, 4)
        log_pi = torch.log_softmax(policy(states), -1)                                   # (T, N, 2)
        taken = log_pi.gather(-1, torch.as_tensor(actions, device=device).long()[..., None])[..., 0]
        mask = torch.as_tensor(alive, dtype=torch.float32, device=device)
        if method == "reinforce":
            returns = cartpole_returns(rewards, alive, gamma)
            counts = np.maximum(alive.sum(1, keepdims=True), 1)
            baseline = (returns * alive).sum(1, keepdims=True) / counts                   # (T, 1)
            weights = torch.as_tensor((returns - baseline) * alive, dtype=torch.float32, device=device)
        else:
            all_states = torch.as_tensor(obs, dtype=torch.float32, device=device)           # (T + 1, N, 4)
            not_done = torch.as_tensor(~terminated, dtype=torch.float32, device=device)
            reward_t = torch.as_tensor(rewards, dtype=torch.float32, device=device)
            for _ in range(config.critic_steps):     # semi-gradient TD(0): the target is held fixed
                values = critic(all_states)[..., 0]
                delta = (reward_t + gamma * not_done * values[1:].detach() - values[:-1]) * mask
                critic_opt.zero_grad()
                ((delta**2).sum() / mask.sum()).backward()
                critic_opt.step()
            with torch.no_grad():
                values = critic(all_states)[..., 0]
                weights = (reward_t + gamma * not_done * values[1:] - values[:-1]) * mask
        actor_opt.zero_grad()
        (-(weights * taken).sum() / num_envs).backward()
        actor_opt.step()
    env.close()
    return CartPoleRun(np.array(mean_returns), policy)
