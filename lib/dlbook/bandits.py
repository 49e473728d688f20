"""Multi-armed bandits, simulated for many independent runs at once (Chapter 11).

Conventions. Every array has a leading axis of runs: a policy keeps its
statistics in arrays of shape (runs, arms) and picks one arm per run in each
round, so a regret curve averaged over hundreds of runs costs about as much
as one run. Rounds are numbered t = 1, ..., horizon; arms 0, ..., K - 1.
Policy parameters (epsilon, c, tau, ...) may be one number or one per run,
which lets a single simulation compare several settings.

Fair comparisons use common random numbers: the environment's reward table
comes from its own seeded stream, separate from the policy's, so every policy
simulated with the same seed reads the same outcomes. For Bernoulli arms the
table holds one uniform number U per round and run, and arm k pays
1[U < mu_k]; for Gaussian arms arm k pays mu_k + sd Z with one normal Z per
round and run. Each arm has the right distribution, and since a policy sees
one arm per round, coupling the arms this way leaves the law of everything
it observes unchanged.

The simulators use NumPy and a seeded ``numpy.random.Generator``: a round is
a handful of operations on small arrays, where NumPy's per-call overhead is
several times smaller than torch's, and nothing here is differentiated.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy.special import ndtr

from .validation import check_choice, check_float, check_int, check_sequence, describe

#: Rounds of the reward table drawn at once.
BLOCK = 1024


# ---------------------------------------------------------------------------
# Arguments
# ---------------------------------------------------------------------------

def _setting(name: str, value, **limits) -> np.ndarray:
    """One number, or one per run, as an array of shape (1,) or (runs,) after range checks."""
    if isinstance(value, (list, tuple, np.ndarray, range)):
        return np.asarray(check_sequence(name, np.ravel(np.asarray(value)), check_float, **limits), dtype=float)
    return np.array([check_float(name, value, **limits)])


def _fit_runs(name: str, values: np.ndarray, num_runs: int) -> np.ndarray:
    """A per-run setting as a column (runs, 1) or (1, 1), so it broadcasts over arms."""
    if len(values) not in (1, num_runs):
        raise ValueError(f"{name} must be one number or one per run ({num_runs}), got {len(values)} values")
    return values[:, None]


def _means(means, num_runs, *, bernoulli: bool) -> np.ndarray:
    """Arm means as an array of shape (runs, arms), from (arms,) or (runs, arms)."""
    if not isinstance(means, (list, tuple, np.ndarray)):
        raise TypeError(f"means must be a list or array of arm means, got {describe(means)}")
    try:
        array = np.array(means, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(f"means must hold numbers, got {describe(means)}") from None
    if array.ndim not in (1, 2) or array.shape[-1] < 2:
        raise ValueError(f"means must have shape (arms,) or (runs, arms) with at least 2 arms, got {array.shape}")
    if not np.all(np.isfinite(array)):
        raise ValueError("means must be finite")
    if bernoulli and (array.min() < 0 or array.max() > 1):
        raise ValueError(f"Bernoulli means must lie in [0, 1], got values in [{array.min():g}, {array.max():g}]")
    if array.ndim == 1:
        if num_runs is None:
            raise ValueError("num_runs is needed when means has shape (arms,)")
        return np.tile(array, (check_int("num_runs", num_runs, minimum=1), 1))
    if num_runs is not None and check_int("num_runs", num_runs, minimum=1) != len(array):
        raise ValueError(f"num_runs ({num_runs}) disagrees with the {len(array)} rows of means")
    return array


def _record_times(times, horizon: int) -> np.ndarray:
    """Sorted distinct rounds in 1..horizon at which regret is recorded (the last round always)."""
    if times is None:
        grid = np.concatenate([np.geomspace(1, horizon, 150).round(), np.linspace(0, horizon, 101)[1:].round()])
    else:
        grid = np.asarray(check_sequence("times", times, check_int, minimum=1, maximum=horizon), dtype=float)
    return np.unique(np.append(grid, horizon)).astype(np.int64)


def _streams(seed) -> tuple[np.random.Generator, np.random.Generator]:
    """Independent generators for the environment and the policy, both from ``seed``."""
    seed = check_int("seed", seed, minimum=0)
    environment, policy = np.random.SeedSequence(seed).spawn(2)
    return np.random.default_rng(environment), np.random.default_rng(policy)


def _sample(probabilities: np.ndarray, uniforms: np.ndarray) -> np.ndarray:
    """One arm per row with the row's probabilities (or weights), by inverting the cumulative sum at a uniform."""
    cumulative = np.cumsum(probabilities, axis=1)
    picks = (cumulative < uniforms[:, None] * cumulative[:, -1:]).sum(axis=1)
    return np.minimum(picks, probabilities.shape[1] - 1)  # rounding can put a uniform past the last sum


def softmax_rows(scores: np.ndarray, scale) -> np.ndarray:
    """exp(scale * scores) normalised over the last axis, stably (Chapter 11)."""
    z = scale * scores
    z = np.exp(z - z.max(axis=-1, keepdims=True))
    return z / z.sum(axis=-1, keepdims=True)


# ---------------------------------------------------------------------------
# Policies for K arms: reset, then choose and update once per round
# ---------------------------------------------------------------------------

class Policy:
    """A bandit policy for many runs: ``choose(t)`` returns one arm per run, ``update`` learns (Chapter 11).

    The base class keeps what most policies need: how often each arm was
    pulled and the sum of its rewards, as arrays of shape (runs, arms).
    Ties between arms are broken by a random order of the arms drawn for
    each run at reset, so that no arm is favoured by its number.
    """

    name = "policy"

    def reset(self, num_runs: int, num_arms: int, rng: np.random.Generator) -> None:
        self.num_runs, self.num_arms, self.rng = num_runs, num_arms, rng
        self.counts = np.zeros((num_runs, num_arms))
        self.sums = np.zeros((num_runs, num_arms))
        self.tie_break = 1e-9 * rng.random((num_runs, num_arms))  # far below any difference of means
        self.flat_rows = np.arange(num_runs) * num_arms
        self.uniforms = np.empty((0, num_runs))

    @property
    def means(self) -> np.ndarray:
        """The mean reward of each arm so far, 0 for arms never pulled."""
        return self.sums / np.maximum(self.counts, 1)

    def uniform(self, t: int) -> np.ndarray:
        """The policy's own uniform number for round t, one per run (drawn in blocks)."""
        i = (t - 1) % BLOCK
        if i == 0 or len(self.uniforms) == 0:
            self.uniforms = self.rng.random((BLOCK, self.num_runs))
        return self.uniforms[i]

    def greedy(self, values: np.ndarray) -> np.ndarray:
        """The arm of largest value in each run, ties broken by the run's random order."""
        return (values + self.tie_break).argmax(axis=1)

    def choose(self, t: int) -> np.ndarray:
        raise NotImplementedError

    def update(self, arms: np.ndarray, rewards: np.ndarray) -> None:
        flat = self.flat_rows + arms
        self.counts.reshape(-1)[flat] += 1  # reshape(-1) is a view: the writes reach the arrays
        self.sums.reshape(-1)[flat] += rewards

    def __repr__(self) -> str:
        return self.name


class UniformRandom(Policy):
    """Every round an arm chosen uniformly at random: the baseline of no learning (Chapter 11)."""

    name = "uniform"

    def choose(self, t):
        return np.minimum((self.uniform(t) * self.num_arms).astype(np.int64), self.num_arms - 1)


class ExploreThenCommit(Policy):
    """Pull every arm ``explore`` times in turn, then the arm of best mean for good (Chapter 11)."""

    def __init__(self, explore):
        self.explore = _setting("explore", explore, low=1)
        if not np.all(self.explore == np.round(self.explore)):
            raise ValueError("explore must be a whole number of pulls per arm")
        self.name = f"ETC (m = {self.explore[0]:g})" if len(self.explore) == 1 else "ETC"

    def reset(self, num_runs, num_arms, rng):
        super().reset(num_runs, num_arms, rng)
        per_run = _fit_runs("explore", self.explore, num_runs)[:, 0]
        self.exploration_rounds = np.broadcast_to(per_run * num_arms, (num_runs,))
        self.committed = np.zeros(num_runs, dtype=np.int64)

    def choose(self, t):
        exploring = t <= self.exploration_rounds
        ending = t == self.exploration_rounds + 1  # the first round after exploring: commit now
        if ending.any():
            self.committed[ending] = self.greedy(self.means)[ending]
        return np.where(exploring, (t - 1) % self.num_arms, self.committed)


class EpsilonGreedy(Policy):
    """With probability epsilon a uniformly random arm, otherwise the arm of best mean (Chapter 11)."""

    def __init__(self, epsilon):
        self.epsilon = _setting("epsilon", epsilon, low=0.0, high=1.0)
        self.name = f"ε-greedy (ε = {self.epsilon[0]:g})" if len(self.epsilon) == 1 else "ε-greedy"

    def reset(self, num_runs, num_arms, rng):
        super().reset(num_runs, num_arms, rng)
        self.eps = _fit_runs("epsilon", self.epsilon, num_runs)[:, 0]

    def exploration_probability(self, rounds: np.ndarray) -> np.ndarray:
        """epsilon for each of the given rounds and each run, shape (len(rounds), runs)."""
        return np.broadcast_to(self.eps, (len(rounds), self.num_runs))

    def choose(self, t):
        i = (t - 1) % BLOCK
        if i == 0:  # whether and where to explore does not depend on the rewards: decide a block at once
            u = self.rng.random((BLOCK, self.num_runs))
            eps = self.exploration_probability(np.arange(t, t + BLOCK))
            self.explore = u < eps
            # Given u < eps, u / eps is uniform on [0, 1): the same number also picks the random arm.
            spread = np.divide(u, eps, out=np.zeros_like(u), where=self.explore)
            self.random_arm = np.minimum((spread * self.num_arms).astype(np.int64), self.num_arms - 1)
        return np.where(self.explore[i], self.random_arm[i], self.greedy(self.means))


class DecayingEpsilonGreedy(EpsilonGreedy):
    """epsilon-greedy with epsilon_t = min(1, scale / t), after Auer et al. (Chapter 11)."""

    def __init__(self, scale):
        self.scale = _setting("scale", scale, low=0.0)
        self.name = f"decaying ε (ε_t = min(1, {self.scale[0]:g}/t))" if len(self.scale) == 1 else "decaying ε"

    def reset(self, num_runs, num_arms, rng):
        Policy.reset(self, num_runs, num_arms, rng)
        self.eps_scale = _fit_runs("scale", self.scale, num_runs)[:, 0]

    def exploration_probability(self, rounds):
        return np.minimum(1.0, self.eps_scale[None, :] / rounds[:, None])


class Softmax(Policy):
    """Boltzmann exploration: arm k with probability proportional to exp(mean_k / temperature) (Chapter 11)."""

    def __init__(self, temperature):
        self.temperature = _setting("temperature", temperature, low=0.0, low_open=True)
        self.name = f"softmax (τ = {self.temperature[0]:g})" if len(self.temperature) == 1 else "softmax"

    def reset(self, num_runs, num_arms, rng):
        super().reset(num_runs, num_arms, rng)
        self.inverse_temperature = 1.0 / _fit_runs("temperature", self.temperature, num_runs)

    def choose(self, t):
        scores = self.means * self.inverse_temperature
        weights = np.exp(scores - scores.max(axis=1, keepdims=True))  # _sample needs no normalising
        return _sample(weights, self.uniform(t))


class UCB(Policy):
    """Optimism: each arm once, then the largest mean_k + sqrt(c log n / T_k), n = t - 1 (Chapter 11).

    c = 2 is Auer et al.'s UCB1; an index with log(t^3) = 3 log t inside
    sqrt(2 ... / T_k) is c = 6.
    """

    def __init__(self, c=2.0):
        self.c = _setting("c", c, low=0.0)
        self.name = f"UCB (c = {self.c[0]:g})" if len(self.c) == 1 else "UCB"

    def reset(self, num_runs, num_arms, rng):
        super().reset(num_runs, num_arms, rng)
        c = _fit_runs("c", self.c, num_runs)
        self.c_column = float(c[0, 0]) if len(c) == 1 else c

    def index(self, t: int) -> np.ndarray:
        """The upper confidence bounds before round t, shape (runs, arms); every arm pulled at least once."""
        return self.sums / self.counts + np.sqrt(self.c_column * math.log(t - 1) / self.counts)

    def choose(self, t):
        if t <= self.num_arms:
            return np.full(self.num_runs, t - 1)
        return self.greedy(self.index(t))


class ThompsonSampling(Policy):
    """Bernoulli Thompson sampling: one draw from each arm's Beta posterior, play the largest (Chapter 11).

    The posterior of arm k after S_k successes and F_k failures is
    Beta(a + S_k, b + F_k); rewards must be 0 or 1.
    """

    def __init__(self, prior=(1.0, 1.0)):
        a, b = check_sequence("prior", prior, check_float, length=2, low=0.0, low_open=True)
        self.prior = (a, b)
        self.name = "Thompson" if self.prior == (1.0, 1.0) else f"Thompson (Beta({a:g}, {b:g}) prior)"

    def posterior(self) -> tuple[np.ndarray, np.ndarray]:
        """The Beta parameters (a + S, b + F) of every run and arm."""
        return self.prior[0] + self.sums, self.prior[1] + self.counts - self.sums

    def choose(self, t):
        a, b = self.posterior()
        x, y = self.rng.standard_gamma(a), self.rng.standard_gamma(b)
        return (x / (x + y)).argmax(axis=1)  # X / (X + Y) ~ Beta(a, b) for independent Gamma(a), Gamma(b)


class Exp3(Policy):
    """Exponential weights on importance-weighted reward estimates, for adversarial rewards (Chapter 11).

    P_t(k) is proportional to exp(eta * sum_{s<t} Rhat_s(k)), with the
    loss-based estimate Rhat_s(k) = 1 - 1[A_s = k] (1 - R_s) / P_s(k) and by
    default eta = sqrt(2 log K / (horizon K)).
    """

    def __init__(self, horizon, learning_rate=None):
        self.horizon = check_int("horizon", horizon, minimum=1)
        self.learning_rate = None if learning_rate is None else check_float(
            "learning_rate", learning_rate, low=0.0, low_open=True)
        self.name = "Exp3"

    def reset(self, num_runs, num_arms, rng):
        super().reset(num_runs, num_arms, rng)
        self.eta = self.learning_rate or exp3_learning_rate(num_arms, self.horizon)
        self.estimates = np.zeros((num_runs, num_arms))  # the sums of Rhat_s(k) so far

    def probabilities(self) -> np.ndarray:
        return softmax_rows(self.estimates, self.eta)

    def choose(self, t):
        self.current = self.probabilities()
        return _sample(self.current, self.uniform(t))

    def update(self, arms, rewards):
        super().update(arms, rewards)
        flat = self.flat_rows + arms
        self.estimates += 1.0
        self.estimates.reshape(-1)[flat] -= (1.0 - rewards) / self.current.reshape(-1)[flat]


# ---------------------------------------------------------------------------
# The simulator
# ---------------------------------------------------------------------------

class BanditRun(NamedTuple):
    """Regret of many runs of one policy, recorded at chosen rounds (Chapter 11).

    ``pseudo_regret[i, r]`` is sum_k Delta_k T_k(t) in run r after round
    ``times[i]``; ``realized_regret`` is t mu* minus the rewards collected.
    Both have the expected regret as their mean; the pseudo-regret leaves out
    the noise of the rewards. ``pulls`` counts each arm's pulls at the end.
    """

    times: np.ndarray
    pseudo_regret: np.ndarray
    realized_regret: np.ndarray
    pulls: np.ndarray

    def mean(self, realized: bool = False) -> np.ndarray:
        """The mean regret over runs at each recorded round."""
        return (self.realized_regret if realized else self.pseudo_regret).mean(axis=1)

    def standard_error(self, realized: bool = False) -> np.ndarray:
        """The standard error of that mean at each recorded round."""
        values = self.realized_regret if realized else self.pseudo_regret
        return values.std(axis=1, ddof=1) / math.sqrt(values.shape[1]) if values.shape[1] > 1 else 0 * values[:, 0]

    def at(self, t: int, realized: bool = False) -> float:
        """The mean regret after round t (a recorded round)."""
        where = np.flatnonzero(self.times == t)
        if len(where) == 0:
            raise ValueError(f"round {t} was not recorded; recorded rounds run from {self.times[0]} to "
                             f"{self.times[-1]} (pass times= to simulate)")
        return float(self.mean(realized)[where[0]])

    def split(self, num_groups: int) -> list[BanditRun]:
        """Consecutive equal groups of runs, e.g. the runs of each setting of a per-run parameter."""
        num_groups = check_int("num_groups", num_groups, minimum=1)
        if self.pulls.shape[0] % num_groups:
            raise ValueError(f"{self.pulls.shape[0]} runs do not split into {num_groups} equal groups")
        return [BanditRun(self.times, p, r, n) for p, r, n in zip(
            np.split(self.pseudo_regret, num_groups, axis=1), np.split(self.realized_regret, num_groups, axis=1),
            np.split(self.pulls, num_groups, axis=0))]


class _RewardTable:
    """The stochastic environment: draws the shared table in blocks and pays the arms pulled.

    With ``groups`` > 1 the runs form that many consecutive groups that read
    the same tables (run r of every group reads table r).
    """

    def __init__(self, means: np.ndarray, rewards: str, sd: float, rng: np.random.Generator, groups: int):
        self.flat_means, self.rewards, self.sd, self.rng = means.reshape(-1), rewards, sd, rng
        self.num_runs, self.num_arms = means.shape
        self.groups = groups
        self.flat_rows = np.arange(self.num_runs) * self.num_arms

    def __call__(self, t: int, arms: np.ndarray) -> np.ndarray:
        i = (t - 1) % BLOCK
        if i == 0:
            shape = (BLOCK, self.num_runs // self.groups)
            draw = self.rng.random(shape) if self.rewards == "bernoulli" else self.rng.standard_normal(shape)
            self.block = np.tile(draw, (1, self.groups))
        mean = self.flat_means[self.flat_rows + arms]
        if self.rewards == "bernoulli":
            return (self.block[i] < mean).astype(float)
        return mean + self.sd * self.block[i]


def _play(policy: Policy, pay, horizon: int, num_runs: int, num_arms: int, rng: np.random.Generator,
          times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The loop every simulation shares: pulls (len(times), runs, arms) and total rewards (len(times), runs).

    The simulator counts pulls and rewards itself, so a policy's own
    bookkeeping cannot change the regret it is charged.
    """
    if not isinstance(policy, Policy):
        raise TypeError(f"policy must be a dlbook.bandits.Policy, got {describe(policy)}")
    policy.reset(num_runs, num_arms, rng)
    pulls = np.zeros((num_runs, num_arms))
    flat_pulls, flat_rows = pulls.reshape(-1), np.arange(num_runs) * num_arms
    total = np.zeros(num_runs)
    pulls_at, total_at = np.empty((len(times), num_runs, num_arms)), np.empty((len(times), num_runs))
    j = 0
    for t in range(1, horizon + 1):
        arms = policy.choose(t)
        rewards = pay(t, arms)
        policy.update(arms, rewards)
        flat_pulls[flat_rows + arms] += 1
        total += rewards
        if t == times[j]:
            pulls_at[j], total_at[j] = pulls, total
            j += 1
    return pulls_at, total_at


def simulate(policy: Policy, means, horizon: int, *, num_runs: int | None = None, rewards: str = "bernoulli",
             sd: float = 1.0, seed: int = 0, times=None, groups: int = 1) -> BanditRun:
    """Run ``policy`` on stochastic arms for ``horizon`` rounds in many runs at once (Chapter 11).

    ``means`` has shape (arms,) with ``num_runs`` given, or (runs, arms) to
    give each run its own arms. ``rewards`` is "bernoulli" (means in [0, 1])
    or "gaussian" (standard deviation ``sd``). Regret is recorded at
    ``times`` (by default about 250 rounds spread evenly and geometrically).
    The reward tables depend on ``seed`` and the number of runs only, so
    simulations with the same seed compare policies on common random
    numbers; ``groups`` splits the runs into consecutive groups (of settings
    given per run) that read the same tables as a simulation of one group.
    """
    rewards = check_choice("rewards", rewards, ("bernoulli", "gaussian"))
    means = _means(means, num_runs, bernoulli=rewards == "bernoulli")
    horizon = check_int("horizon", horizon, minimum=1)
    sd = check_float("sd", sd, low=0.0)
    times = _record_times(times, horizon)
    groups = check_int("groups", groups, minimum=1)
    if len(means) % groups:
        raise ValueError(f"{len(means)} runs do not split into {groups} equal groups")
    if isinstance(policy, ThompsonSampling) and rewards != "bernoulli":
        raise ValueError("ThompsonSampling has Beta posteriors for 0/1 rewards: use rewards='bernoulli'")
    environment, own = _streams(seed)
    pulls_at, total_at = _play(policy, _RewardTable(means, rewards, sd, environment, groups), horizon,
                               *means.shape, own, times)
    best = means.max(axis=1)
    pseudo = ((best[:, None] - means)[None] * pulls_at).sum(axis=2)  # sum_k Delta_k T_k(t)
    realized = times[:, None] * best[None] - total_at
    return BanditRun(times, pseudo, realized, pulls_at[-1])


# ---------------------------------------------------------------------------
# Theory for stochastic arms: KL, Lai and Robbins, explore-then-commit
# ---------------------------------------------------------------------------

def bernoulli_kl(p, q):
    """KL(Bernoulli(p) || Bernoulli(q)), elementwise, with 0 log 0 = 0 (Chapter 11)."""
    p, q = np.asarray(p, dtype=float), np.asarray(q, dtype=float)
    if np.any((p < 0) | (p > 1)) or np.any((q <= 0) | (q >= 1)):
        raise ValueError("bernoulli_kl needs p in [0, 1] and q in (0, 1)")
    with np.errstate(divide="ignore", invalid="ignore"):
        first = np.where(p > 0, p * np.log(p / q), 0.0)
        second = np.where(p < 1, (1 - p) * np.log((1 - p) / (1 - q)), 0.0)
    return first + second


def lai_robbins_constant(means) -> float:
    """sum over suboptimal arms of Delta_i / KL(mu_i || mu*): the least slope of regret in log T (Chapter 11)."""
    means = _means(means, 1, bernoulli=True)[0]
    best = means.max()
    if not 0 < best < 1:
        raise ValueError(f"the best mean must lie strictly between 0 and 1, got {best:g}")
    worse = means[means < best]
    return float(((best - worse) / bernoulli_kl(worse, best)).sum())


def _gap_and_horizon(gap, horizon) -> tuple[float, int]:
    return check_float("gap", gap, low=0.0, low_open=True), check_int("horizon", horizon, minimum=1)


def etc_exploration_length(gap, horizon) -> int:
    """m = max(1, ceil(4 / gap^2 log(horizon gap^2 / 4))): the m that minimises the ETC bound (Chapter 11)."""
    gap, horizon = _gap_and_horizon(gap, horizon)
    return max(1, math.ceil(4 / gap**2 * math.log(horizon * gap**2 / 4)))


def etc_regret_bound(gap, horizon, explore) -> float:
    """m Delta + (T - 2m) Delta exp(-m Delta^2 / 4): ETC's regret on two 1-sub-Gaussian arms (Chapter 11)."""
    gap, horizon = _gap_and_horizon(gap, horizon)
    explore = check_int("explore", explore, minimum=0, maximum=horizon // 2)
    return explore * gap + (horizon - 2 * explore) * gap * math.exp(-explore * gap**2 / 4)


def etc_tuned_bound(gap, horizon) -> float:
    """(4 / Delta)(log(T Delta^2 / 4) + 1) + Delta: the bound at the tuned m, when T Delta^2 > 4 (Chapter 11)."""
    gap, horizon = _gap_and_horizon(gap, horizon)
    if horizon * gap**2 <= 4:
        raise ValueError(f"the tuned bound needs horizon * gap^2 > 4, got {horizon * gap**2:g}")
    return 4 / gap * (math.log(horizon * gap**2 / 4) + 1) + gap


def etc_expected_regret(gap, horizon, explore, sd=1.0) -> float:
    """The exact expected regret of ETC on two Gaussian arms: m Delta + (T - 2m) Delta P(wrong) (Chapter 11).

    After m pulls each, the difference of the two averages is normal with
    mean Delta and variance 2 sd^2 / m, so the wrong arm wins with
    probability Phi(-Delta sqrt(m / 2) / sd).
    """
    gap, horizon = _gap_and_horizon(gap, horizon)
    explore = check_int("explore", explore, minimum=1, maximum=horizon // 2)
    sd = check_float("sd", sd, low=0.0, low_open=True)
    wrong = float(ndtr(-gap * math.sqrt(explore / 2) / sd))
    return explore * gap + (horizon - 2 * explore) * gap * wrong


def explore_then_commit_regret(means, explore, horizon, *, num_runs: int, rewards: str = "gaussian",
                               sd: float = 1.0, seed: int = 0) -> np.ndarray:
    """Pseudo-regret of ETC in each of ``num_runs`` runs, without simulating round by round (Chapter 11).

    Committing is one comparison of the exploration averages, and those can
    be drawn directly: a mean of m Gaussian rewards is Gaussian, a sum of m
    Bernoulli rewards binomial. Ties go to a random arm among the tied. The
    round-by-round reference is ``simulate(ExploreThenCommit(m), ...)``.
    """
    rewards = check_choice("rewards", rewards, ("bernoulli", "gaussian"))
    means = _means(means, num_runs, bernoulli=rewards == "bernoulli")
    explore, horizon = check_int("explore", explore, minimum=1), check_int("horizon", horizon, minimum=1)
    num_arms = means.shape[1]
    if explore * num_arms > horizon:
        raise ValueError(f"explore * arms = {explore * num_arms} exceeds the horizon {horizon}")
    sd = check_float("sd", sd, low=0.0)
    rng = np.random.default_rng(check_int("seed", seed, minimum=0))
    if rewards == "gaussian":
        averages = means + sd / math.sqrt(explore) * rng.standard_normal(means.shape)
    else:
        averages = rng.binomial(explore, means) / explore
    tied = averages == averages.max(axis=1, keepdims=True)
    chosen = (tied * rng.random(means.shape)).argmax(axis=1)  # a uniformly random arm among the tied
    gaps = means.max(axis=1, keepdims=True) - means
    return explore * gaps.sum(axis=1) + (horizon - explore * num_arms) * gaps[np.arange(len(means)), chosen]


# ---------------------------------------------------------------------------
# Adversarial rewards
# ---------------------------------------------------------------------------

def exp3_learning_rate(num_arms, horizon) -> float:
    """eta = sqrt(2 log K / (T K)), the step for which Exp3's regret is at most sqrt(2 T K log K) (Chapter 11)."""
    num_arms, horizon = check_int("num_arms", num_arms, minimum=2), check_int("horizon", horizon, minimum=1)
    return math.sqrt(2 * math.log(num_arms) / (horizon * num_arms))


def exp3_regret_bound(num_arms, horizon) -> float:
    """sqrt(2 T K log K): Exp3's regret bound against any table of rewards in [0, 1] (Chapter 11)."""
    num_arms, horizon = check_int("num_arms", num_arms, minimum=2), check_int("horizon", horizon, minimum=1)
    return math.sqrt(2 * horizon * num_arms * math.log(num_arms))


def switching_table(horizon, num_arms=5, *, block=500, steady=0.6, high=0.9, low=0.3) -> np.ndarray:
    """A reward table (horizon, arms): arm 0 always pays ``steady``; in each block of rounds one other arm,
    in turn, pays ``high`` and the rest ``low`` (Chapter 11)."""
    horizon, num_arms = check_int("horizon", horizon, minimum=1), check_int("num_arms", num_arms, minimum=2)
    block = check_int("block", block, minimum=1)
    steady, high, low = (check_float(name, v, low=0.0, high=1.0) for name, v in
                         (("steady", steady), ("high", high), ("low", low)))
    table = np.full((horizon, num_arms), low)
    table[:, 0] = steady
    hot = 1 + (np.arange(horizon) // block) % (num_arms - 1)
    table[np.arange(horizon), hot] = high
    return table


class AdversarialRun(NamedTuple):
    """Regret against the best fixed arm in hindsight, recorded at chosen rounds (Chapter 11)."""

    times: np.ndarray
    regret: np.ndarray  # (len(times), runs): max_k sum_{s<=t} R_s(k) - sum_{s<=t} R_s(A_s)
    pulls: np.ndarray

    def mean(self) -> np.ndarray:
        return self.regret.mean(axis=1)

    def standard_error(self) -> np.ndarray:
        return self.regret.std(axis=1, ddof=1) / math.sqrt(self.regret.shape[1])


def play_table(policy: Policy, table, *, num_runs: int, seed: int = 0, times=None) -> AdversarialRun:
    """Run ``policy`` against a fixed table of rewards R_t(k) in [0, 1], shape (horizon, arms) (Chapter 11).

    The table is the same in every run (an oblivious adversary fixed it in
    advance); the runs differ in the policy's own random choices.
    """
    if not isinstance(table, np.ndarray) or table.ndim != 2 or table.shape[1] < 2:
        raise ValueError(f"table must be an array of shape (horizon, arms) with at least 2 arms, got {describe(table)}")
    if not np.all((table >= 0) & (table <= 1)):
        raise ValueError("table must hold rewards in [0, 1]")
    num_runs = check_int("num_runs", num_runs, minimum=1)
    horizon, num_arms = table.shape
    times = _record_times(times, horizon)
    _, own = _streams(seed)
    pulls_at, total_at = _play(policy, lambda t, arms: table[t - 1, arms], horizon, num_runs, num_arms, own, times)
    best_in_hindsight = np.cumsum(table, axis=0)[times - 1].max(axis=1)
    return AdversarialRun(times, best_in_hindsight[:, None] - total_at, pulls_at[-1])


def table_against(policy: Policy, horizon, *, num_arms: int = 2, seed: int = 0) -> np.ndarray:
    """The table an adversary who can predict ``policy`` fixes in advance: in every round 0 for the arm
    the policy will pull and 1 for every other arm, shape (horizon, arms) (Chapter 11).

    The adversary simply runs the policy once. For a deterministic policy
    (and a policy's random numbers are fixed by its seed) replaying the table
    with the same seed repeats every choice, so the policy collects nothing.
    """
    horizon = check_int("horizon", horizon, minimum=1)
    num_arms = check_int("num_arms", num_arms, minimum=2)
    pulled = []

    def pay_nothing(t, arms):
        pulled.append(int(arms[0]))
        return np.zeros(1)

    _play(policy, pay_nothing, horizon, 1, num_arms, _streams(seed)[1], np.array([horizon]))
    table = np.ones((horizon, num_arms))
    table[np.arange(horizon), pulled] = 0.0
    return table


def importance_weighted_estimates(arms, rewards, probabilities, *, loss_based: bool = True) -> np.ndarray:
    """Estimates Rhat(k) of every arm's reward from one pull per row (Chapter 11).

    ``arms`` (n,) are the arms pulled, ``rewards`` (n,) what they paid and
    ``probabilities`` (n, K) the distribution each arm was drawn from. The
    plain estimate is 1[A = k] R / P(k); the loss-based one,
    1 - 1[A = k] (1 - R) / P(k), is at most 1. Both are unbiased.
    """
    probabilities = np.asarray(probabilities, dtype=float)
    arms, rewards = np.asarray(arms), np.asarray(rewards, dtype=float)
    if probabilities.ndim != 2 or arms.shape != (len(probabilities),) or rewards.shape != arms.shape:
        raise ValueError(f"expected arms (n,), rewards (n,) and probabilities (n, K), got shapes {arms.shape}, "
                         f"{rewards.shape} and {probabilities.shape}")
    if not np.issubdtype(arms.dtype, np.integer) or arms.min() < 0 or arms.max() >= probabilities.shape[1]:
        raise ValueError(f"arms must be integers in 0..{probabilities.shape[1] - 1}")
    if np.any(probabilities <= 0):
        raise ValueError("probabilities must be positive: an arm that cannot be drawn has no unbiased estimate")
    chosen = np.zeros(probabilities.shape)
    chosen[np.arange(len(arms)), arms] = 1.0
    if loss_based:
        return 1.0 - chosen * (1.0 - rewards[:, None]) / probabilities
    return chosen * rewards[:, None] / probabilities


# ---------------------------------------------------------------------------
# Contextual bandits with linear rewards
# ---------------------------------------------------------------------------

class LinearContexts:
    """Contexts on the unit sphere's positive orthant and Bernoulli rewards with means beta_a . x (Chapter 11).

    ``coefficients`` has shape (arms, p), every row non-negative with norm at
    most 1, so every mean lies in [0, 1].
    """

    def __init__(self, coefficients):
        beta = np.array(coefficients, dtype=float) if isinstance(coefficients, (list, tuple, np.ndarray)) else None
        if beta is None or beta.ndim != 2 or beta.shape[0] < 2:
            raise ValueError(f"coefficients must have shape (arms, p) with at least 2 arms, "
                             f"got {describe(coefficients)}")
        if beta.min() < 0 or np.linalg.norm(beta, axis=1).max() > 1 + 1e-12:
            raise ValueError("coefficients must be non-negative rows of norm at most 1, so means lie in [0, 1]")
        self.coefficients = beta
        self.num_arms, self.num_features = beta.shape

    @classmethod
    def random(cls, num_arms: int, num_features: int, *, norm: float = 0.9, seed: int = 0) -> LinearContexts:
        """A random instance: rows of |N(0, I)| scaled to length ``norm``."""
        num_arms = check_int("num_arms", num_arms, minimum=2)
        num_features = check_int("num_features", num_features, minimum=1)
        norm = check_float("norm", norm, low=0.0, high=1.0)
        beta = np.abs(np.random.default_rng(check_int("seed", seed, minimum=0)).standard_normal(
            (num_arms, num_features)))
        return cls(norm * beta / np.linalg.norm(beta, axis=1, keepdims=True))

    def contexts(self, shape, rng: np.random.Generator) -> np.ndarray:
        """Contexts of the given leading shape, each |N(0, I)| normalised to length 1."""
        x = np.abs(rng.standard_normal((*np.atleast_1d(shape), self.num_features)))
        return x / np.linalg.norm(x, axis=-1, keepdims=True)

    def mean_rewards(self, x: np.ndarray) -> np.ndarray:
        """beta_a . x for every arm: shape (..., arms)."""
        return x @ self.coefficients.T


class ContextualPolicy:
    """A policy that sees a context per run before it chooses: ``choose(t, x)`` with x of shape (runs, p).

    Keeps, per run and arm, the ridge regression of the rewards on the
    contexts: the inverse of A = I + sum x x^T, updated by Sherman and
    Morrison, and the estimate beta_hat = A^-1 b with b = sum R x (Chapter 11).
    """

    name = "contextual policy"

    def reset(self, num_runs: int, num_arms: int, num_features: int, rng: np.random.Generator) -> None:
        self.rng = rng
        self.A_inv = np.tile(np.eye(num_features), (num_runs, num_arms, 1, 1))  # (runs, arms, p, p)
        self.beta_hat = np.zeros((num_runs, num_arms, num_features))
        self.rows = np.arange(num_runs)

    def estimates(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Ridge estimates beta_hat_a . x and widths sqrt(x^T A_a^-1 x), both (runs, arms)."""
        A_inv_x = (self.A_inv @ x[:, None, :, None])[..., 0]  # (runs, arms, p)
        return (self.beta_hat * x[:, None, :]).sum(-1), np.sqrt((A_inv_x * x[:, None, :]).sum(-1))

    def update(self, arms: np.ndarray, x: np.ndarray, rewards: np.ndarray) -> None:
        A_inv = self.A_inv[self.rows, arms]  # (runs, p, p), the pulled arm of each run
        beta_hat = self.beta_hat[self.rows, arms]
        A_inv_x = (A_inv @ x[..., None])[..., 0]
        denominator = 1 + (A_inv_x * x).sum(-1, keepdims=True)
        self.A_inv[self.rows, arms] = sherman_morrison_update(A_inv, x)
        # The new A^-1 x is A_inv_x / denominator, so beta_hat moves along it by the prediction error.
        error = rewards - (beta_hat * x).sum(-1)
        self.beta_hat[self.rows, arms] = beta_hat + A_inv_x / denominator * error[:, None]

    def choose(self, t: int, x: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def __repr__(self) -> str:
        return self.name


def sherman_morrison_update(A_inv: np.ndarray, x: np.ndarray) -> np.ndarray:
    """(A + x x^T)^-1 from A^-1 in O(p^2): A^-1 - (A^-1 x)(A^-1 x)^T / (1 + x^T A^-1 x), batched (Chapter 11)."""
    A_inv_x = (A_inv @ x[..., None])[..., 0]  # A^-1 is symmetric, so x^T A^-1 = (A^-1 x)^T
    return A_inv - A_inv_x[..., :, None] * A_inv_x[..., None, :] / (1 + (A_inv_x * x).sum(-1))[..., None, None]


def linucb_alpha(delta) -> float:
    """alpha = 1 + sqrt(log(2 / delta) / 2), LinUCB's width for confidence 1 - delta (Chapter 11)."""
    delta = check_float("delta", delta, low=0.0, high=1.0, low_open=True, high_open=True)
    return 1 + math.sqrt(math.log(2 / delta) / 2)


class LinUCB(ContextualPolicy):
    """The arm with the largest beta_hat_a . x + alpha sqrt(x^T A_a^-1 x) (Li et al.; Chapter 11)."""

    def __init__(self, alpha):
        self.alpha = check_float("alpha", alpha, low=0.0)
        self.name = f"LinUCB (α = {self.alpha:.2f})"

    def choose(self, t, x):
        means, widths = self.estimates(x)
        return (means + self.alpha * widths).argmax(axis=1)


class LinearThompson(ContextualPolicy):
    """Linear Thompson sampling: the arm with the largest beta_tilde_a . x, beta_tilde_a ~ N(beta_hat_a, v^2 A_a^-1).

    Only beta_tilde_a . x matters, and it is normal with mean beta_hat_a . x
    and standard deviation v sqrt(x^T A_a^-1 x): one normal draw per arm
    replaces a draw of the whole vector (Chapter 11).
    """

    def __init__(self, scale):
        self.scale = check_float("scale", scale, low=0.0)
        self.name = f"linear Thompson (v = {self.scale:g})"

    def choose(self, t, x):
        means, widths = self.estimates(x)
        return (means + self.scale * widths * self.rng.standard_normal(means.shape)).argmax(axis=1)


class ContextualRun(NamedTuple):
    """Pseudo-regret of a contextual policy at chosen rounds, and how often its intervals held (Chapter 11).

    ``coverage[i]`` is the fraction of (round, run, arm) for which
    |beta_hat_a . x - beta_a . x| <= alpha_i sqrt(x^T A_a^-1 x) before the
    round, for the ``coverage_alphas`` passed to simulate_contextual.
    """

    times: np.ndarray
    regret: np.ndarray  # (len(times), runs)
    coverage: np.ndarray

    def mean(self) -> np.ndarray:
        return self.regret.mean(axis=1)


def simulate_contextual(policy: ContextualPolicy, problem: LinearContexts, horizon, *, num_runs: int,
                        seed: int = 0, times=None, coverage_alphas=()) -> ContextualRun:
    """Run a contextual policy on a linear problem, with the same contexts and reward table per seed (Chapter 11).

    With ``coverage_alphas`` it also counts how often the ridge intervals of
    those widths contain the true mean rewards (every arm, every round).
    """
    if not isinstance(policy, ContextualPolicy):
        raise TypeError(f"policy must be a dlbook.bandits.ContextualPolicy, got {describe(policy)}")
    if not isinstance(problem, LinearContexts):
        raise TypeError(f"problem must be a dlbook.bandits.LinearContexts, got {describe(problem)}")
    horizon, num_runs = check_int("horizon", horizon, minimum=1), check_int("num_runs", num_runs, minimum=1)
    alphas = np.array([] if len(coverage_alphas) == 0 else
                      check_sequence("coverage_alphas", coverage_alphas, check_float, low=0.0))
    times = _record_times(times, horizon)
    environment, own = _streams(seed)
    policy.reset(num_runs, problem.num_arms, problem.num_features, own)
    regret, regret_at = np.zeros(num_runs), np.empty((len(times), num_runs))
    covered, checked = np.zeros(len(alphas)), 0
    j = 0
    for t in range(1, horizon + 1):
        i = (t - 1) % BLOCK
        if i == 0:
            block_x = problem.contexts((BLOCK, num_runs), environment)
            block_u = environment.random((BLOCK, num_runs))
        x = block_x[i]
        true_means = problem.mean_rewards(x)  # (runs, arms)
        if len(alphas):
            estimate, width = policy.estimates(x)
            ratio = (np.abs(estimate - true_means) / width).ravel()  # widths > 0: A^-1 is positive definite
            covered += (ratio[None, :] <= alphas[:, None]).sum(axis=1)
            checked += ratio.size
        arms = policy.choose(t, x)
        chosen_mean = true_means[policy.rows, arms]
        policy.update(arms, x, (block_u[i] < chosen_mean).astype(float))
        regret += true_means.max(axis=1) - chosen_mean
        if t == times[j]:
            regret_at[j] = regret
            j += 1
    return ContextualRun(times, regret_at, covered / max(checked, 1))


# ---------------------------------------------------------------------------
# Evaluating a policy from logged data
# ---------------------------------------------------------------------------

class Logs(NamedTuple):
    """Rounds logged by a randomised policy: what it saw, did, got, and the probability of what it did.

    Arrays have shape (logs, rounds) (and a last axis of p for contexts).
    """

    contexts: np.ndarray
    arms: np.ndarray
    rewards: np.ndarray
    propensities: np.ndarray


def collect_logs(problem: LinearContexts, logging_scores, temperature, *, num_logs: int, num_rounds: int,
                 seed: int = 0) -> Logs:
    """Logs of a softmax policy that plays arm a with probability proportional to exp(w_a . x / temperature).

    ``logging_scores`` has shape (arms, p). Every arm keeps a positive
    probability, so inverse-propensity estimates exist (Chapter 11).
    """
    if not isinstance(problem, LinearContexts):
        raise TypeError(f"problem must be a dlbook.bandits.LinearContexts, got {describe(problem)}")
    W = np.asarray(logging_scores, dtype=float)
    if W.shape != problem.coefficients.shape:
        raise ValueError(f"logging_scores must have shape {problem.coefficients.shape}, got {W.shape}")
    temperature = check_float("temperature", temperature, low=0.0, low_open=True)
    num_logs, num_rounds = check_int("num_logs", num_logs, minimum=1), check_int("num_rounds", num_rounds, minimum=1)
    rng = np.random.default_rng(check_int("seed", seed, minimum=0))
    x = problem.contexts((num_logs, num_rounds), rng)
    probabilities = softmax_rows(x @ W.T, 1 / temperature).reshape(-1, problem.num_arms)
    arms = _sample(probabilities, rng.random(len(probabilities)))
    means = problem.mean_rewards(x).reshape(-1, problem.num_arms)[np.arange(len(arms)), arms]
    rewards = (rng.random(len(arms)) < means).astype(float)
    propensities = probabilities[np.arange(len(arms)), arms]
    shape = (num_logs, num_rounds)
    return Logs(x, arms.reshape(shape), rewards.reshape(shape), propensities.reshape(shape))


def ips_value(target_arms, logged_arms, rewards, propensities):
    """Inverse-propensity estimate of a policy's value from logs: the mean of 1[pi(x) = a] r / p(a | x) (Chapter 11).

    ``target_arms`` are the arms the evaluated policy would pick for the
    logged contexts, ``logged_arms`` the arms the logging policy picked, with
    probabilities ``propensities``; all of one shape (..., rounds). Returns
    one estimate per log: a float for vectors, an array for several logs.
    """
    target_arms, logged_arms = np.asarray(target_arms), np.asarray(logged_arms)
    rewards, propensities = np.asarray(rewards, dtype=float), np.asarray(propensities, dtype=float)
    if not (target_arms.shape == logged_arms.shape == rewards.shape == propensities.shape) or target_arms.ndim < 1:
        raise ValueError(f"target_arms, logged_arms, rewards and propensities must have one shape (..., rounds), "
                         f"got shapes {target_arms.shape}, {logged_arms.shape}, {rewards.shape}, {propensities.shape}")
    if np.any((propensities <= 0) | (propensities > 1)):
        raise ValueError("propensities must lie in (0, 1]")
    values = np.mean((target_arms == logged_arms) * rewards / propensities, axis=-1)
    return float(values) if values.ndim == 0 else values
