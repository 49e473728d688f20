"""Tests of dlbook.bandits: policies against plain reference loops, the simulator's bookkeeping, the
explore-then-commit formulas, Exp3 and importance weighting, LinUCB's algebra and inverse propensities."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import integrate, stats

from dlbook import bandits

MEANS = [0.9, 0.8, 0.7, 0.6, 0.5]


def drive(policy, table, num_runs=1, seed=0):
    """Run a policy by hand against a reward table (horizon, runs, arms); returns the arms (horizon, runs)."""
    horizon, _, num_arms = table.shape
    policy.reset(num_runs, num_arms, np.random.default_rng(seed))
    arms = np.empty((horizon, num_runs), dtype=np.int64)
    for t in range(1, horizon + 1):
        arms[t - 1] = policy.choose(t)
        policy.update(arms[t - 1], table[t - 1, np.arange(num_runs), arms[t - 1]])
    return arms


def bernoulli_table(means, horizon, num_runs, seed):
    rng = np.random.default_rng(seed)
    return (rng.random((horizon, num_runs, len(means))) < np.asarray(means)).astype(float)


# --- policies against readable one-run loops ---------------------------------------------------

def ucb_reference(table, c, tie_break):
    """UCB for one run written as the textbook states it: each arm once, then the largest index."""
    num_arms = table.shape[1]
    counts, sums, chosen = [0] * num_arms, [0.0] * num_arms, []
    for t in range(1, len(table) + 1):
        if t <= num_arms:
            arm = t - 1
        else:
            index = [sums[k] / counts[k] + math.sqrt(c * math.log(t - 1) / counts[k]) + tie_break[k]
                     for k in range(num_arms)]
            arm = max(range(num_arms), key=lambda k: index[k])
        counts[arm] += 1
        sums[arm] += table[t - 1, arm]
        chosen.append(arm)
    return chosen


@pytest.mark.parametrize("c", [0.5, 2.0, 6.0])
def test_ucb_chooses_as_the_reference_loop(c):
    table = bernoulli_table(MEANS, 400, 3, seed=1)
    policy = bandits.UCB(c)
    arms = drive(policy, table, num_runs=3)
    for run in range(3):
        assert arms[:, run].tolist() == ucb_reference(table[:, run], c, policy.tie_break[run])


def test_per_run_settings_equal_separate_policies():
    table = bernoulli_table(MEANS, 300, 4, seed=2)
    mixed = drive(bandits.UCB([0.5, 0.5, 6.0, 6.0]), table, num_runs=4)
    for run, c in enumerate([0.5, 0.5, 6.0, 6.0]):
        policy = bandits.UCB(c)
        single = drive(policy, table, num_runs=4)  # same seed: same tie-break order
        assert np.array_equal(single[:, run], mixed[:, run])


def test_epsilon_greedy_explores_at_rate_epsilon_and_is_greedy_otherwise():
    table = bernoulli_table(MEANS, 4000, 50, seed=3)
    policy = bandits.EpsilonGreedy(0.2)
    arms = drive(policy, table, num_runs=50)
    late = arms[1000:]
    # Greedy picks arm 0 late; exploration picks it too, 1 time in 5: P(other arm) = 0.2 * 4/5.
    other = (late != 0).mean()
    assert abs(other - 0.16) < 0.01, other


def test_epsilon_zero_is_greedy_and_one_is_uniform():
    table = bernoulli_table(MEANS, 2000, 20, seed=4)
    greedy = bandits.EpsilonGreedy(0.0)
    arms = drive(greedy, table, num_runs=20)
    means = greedy.sums / np.maximum(greedy.counts, 1)
    assert np.all(arms[-1] == (means + greedy.tie_break).argmax(axis=1))
    uniform = drive(bandits.EpsilonGreedy(1.0), table, num_runs=20)
    assert abs(np.bincount(uniform.ravel(), minlength=5) / uniform.size - 0.2).max() < 0.01


def test_decaying_epsilon_schedule():
    policy = bandits.DecayingEpsilonGreedy(50.0)
    policy.reset(2, 3, np.random.default_rng(0))
    eps = policy.exploration_probability(np.array([1, 50, 100, 1000]))
    assert np.allclose(eps[:, 0], [1.0, 1.0, 0.5, 0.05])


def test_softmax_plays_each_arm_with_its_boltzmann_probability():
    policy = bandits.Softmax(0.25)
    policy.reset(20000, 3, np.random.default_rng(5))
    policy.sums[:] = [0.2, 0.5, 0.4]
    policy.counts[:] = 1.0
    frequencies = np.bincount(policy.choose(1), minlength=3) / 20000
    expected = torch.softmax(torch.tensor([0.2, 0.5, 0.4]) / 0.25, dim=0).numpy()
    assert np.abs(frequencies - expected).max() < 4 * np.sqrt(expected * (1 - expected) / 20000).max()


def test_thompson_posterior_and_probability_matching():
    policy = bandits.ThompsonSampling(prior=(2.0, 3.0))
    policy.reset(1, 2, np.random.default_rng(0))
    for arm, reward in [(0, 1.0), (0, 0.0), (1, 1.0), (0, 1.0)]:
        policy.update(np.array([arm]), np.array([reward]))
    a, b = policy.posterior()
    assert a.tolist() == [[4.0, 3.0]] and b.tolist() == [[4.0, 3.0]]
    # Posterior means (a + S) / (a + b + S + F), exactly.
    assert np.allclose(a / (a + b), [[0.5, 0.5]])
    # Each arm is played with its posterior probability of having the largest mean.
    runs = 40000
    policy = bandits.ThompsonSampling()
    policy.reset(runs, 3, np.random.default_rng(1))
    policy.sums[:] = [3.0, 6.0, 1.0]
    policy.counts[:] = [5.0, 12.0, 2.0]
    frequencies = np.bincount(policy.choose(1), minlength=3) / runs
    posteriors = [stats.beta(1 + s, 1 + n - s) for s, n in [(3, 5), (6, 12), (1, 2)]]

    def best(k):
        others = [p for j, p in enumerate(posteriors) if j != k]
        return integrate.quad(lambda x: posteriors[k].pdf(x) * np.prod([p.cdf(x) for p in others]), 0, 1)[0]

    expected = np.array([best(k) for k in range(3)])
    assert abs(expected.sum() - 1) < 1e-8
    assert np.abs(frequencies - expected).max() < 4 * math.sqrt(0.25 / runs)


def test_thompson_beta_draws_have_beta_moments():
    rng = np.random.default_rng(0)
    a, b = np.full(200000, 3.0), np.full(200000, 7.0)
    x, y = rng.standard_gamma(a), rng.standard_gamma(b)
    draws = x / (x + y)
    assert abs(draws.mean() - 0.3) < 0.002 and abs(draws.var() - stats.beta(3, 7).var()) < 0.001


def test_explore_then_commit_round_robin_then_commits():
    table = bernoulli_table([0.2, 0.8, 0.5], 60, 2, seed=6)
    policy = bandits.ExploreThenCommit([4, 10])
    arms = drive(policy, table, num_runs=2)
    assert arms[:12, 0].tolist() == [0, 1, 2] * 4 and arms[:30, 1].tolist() == [0, 1, 2] * 10
    for run, m in enumerate([4, 10]):
        explored = np.array([table[k:3 * m:3, run, k].mean() for k in range(3)])  # arm k in rounds k+1, k+4, ...
        assert np.all(arms[3 * m:, run] == (explored + policy.tie_break[run]).argmax())


def test_uniform_random_spreads_evenly():
    arms = drive(bandits.UniformRandom(), bernoulli_table(MEANS, 1000, 40, seed=7), num_runs=40)
    assert abs(np.bincount(arms.ravel(), minlength=5) / arms.size - 0.2).max() < 0.01


# --- the simulator -----------------------------------------------------------------------------

class AlwaysArm(bandits.Policy):
    def __init__(self, arm):
        self.arm, self.name = arm, f"arm {arm}"

    def choose(self, t):
        return np.full(self.num_runs, self.arm)


def test_simulator_bookkeeping_and_common_random_numbers():
    horizon = 500
    runs = {k: bandits.simulate(AlwaysArm(k), MEANS, horizon, num_runs=30, seed=3, times=[horizon]) for k in range(5)}
    for k, run in runs.items():
        assert np.allclose(run.pseudo_regret[-1], horizon * (0.9 - MEANS[k]))
        assert run.pulls[:, k].tolist() == [horizon] * 30
    # One uniform per round and run: a better arm pays whenever a worse one does.
    collected = {k: horizon * 0.9 - run.realized_regret[-1] for k, run in runs.items()}
    for better, worse in zip(range(4), range(1, 5)):
        assert np.all(collected[better] >= collected[worse])
    again = bandits.simulate(AlwaysArm(2), MEANS, horizon, num_runs=30, seed=3, times=[horizon])
    assert np.array_equal(again.realized_regret, runs[2].realized_regret)


def test_groups_read_the_tables_of_a_separate_simulation():
    grouped = bandits.simulate(AlwaysArm(1), MEANS, 300, num_runs=40, seed=5, groups=2, times=[300])
    alone = bandits.simulate(AlwaysArm(1), MEANS, 300, num_runs=20, seed=5, times=[300])
    first, second = grouped.split(2)
    assert np.array_equal(first.realized_regret, alone.realized_regret)
    assert np.array_equal(second.realized_regret, alone.realized_regret)
    with pytest.raises(ValueError, match="equal groups"):
        bandits.simulate(AlwaysArm(1), MEANS, 10, num_runs=5, groups=2)


def test_pseudo_and_realized_regret_agree_on_average():
    run = bandits.simulate(bandits.UCB(2.0), MEANS, 3000, num_runs=300, seed=0)
    gap = abs(run.mean()[-1] - run.mean(realized=True)[-1])
    assert gap < 4 * run.standard_error(realized=True)[-1]
    assert np.allclose(run.pseudo_regret[-1], run.pulls @ (0.9 - np.array(MEANS)))
    assert run.times[-1] == 3000 and np.all(np.diff(run.times) > 0)
    assert np.all(np.diff(run.mean()) >= 0)  # pseudo-regret never decreases


def test_same_seed_same_result_and_per_run_means():
    means = np.array([[0.5, 0.4], [0.5, 0.1]])
    a = bandits.simulate(bandits.EpsilonGreedy(0.1), means, 2000, seed=11)
    b = bandits.simulate(bandits.EpsilonGreedy(0.1), means, 2000, seed=11)
    assert np.array_equal(a.pseudo_regret, b.pseudo_regret)
    assert a.pulls.shape == (2, 2)


def test_gaussian_rewards():
    run = bandits.simulate(bandits.UCB(2.0), [0.0, -1.0], 2000, num_runs=100, rewards="gaussian", sd=0.5, seed=0)
    assert run.mean()[-1] < 60
    assert abs(run.mean()[-1] - run.mean(realized=True)[-1]) < 4 * run.standard_error(realized=True)[-1]


def test_split_and_at():
    run = bandits.simulate(bandits.UCB([2.0, 6.0]), MEANS, 100, num_runs=2, times=[10, 100])
    first, second = run.split(2)
    assert first.pseudo_regret.shape == (2, 1) and run.at(100) == pytest.approx(
        (first.at(100) + second.at(100)) / 2)
    with pytest.raises(ValueError, match="round 50 was not recorded"):
        run.at(50)
    with pytest.raises(ValueError, match="do not split"):
        run.split(3)


# --- explore-then-commit theory ----------------------------------------------------------------

@pytest.mark.parametrize("gap, m, bound", [(0.05, 2933, 227), (0.1, 1288, 169), (0.2, 461, 112), (0.5, 104, 60)])
def test_etc_tuning_and_bound(gap, m, bound):
    assert bandits.etc_exploration_length(gap, 10_000) == m
    assert bandits.etc_tuned_bound(gap, 10_000) == pytest.approx(bound, abs=0.5)
    assert bandits.etc_expected_regret(gap, 10_000, m) <= bandits.etc_regret_bound(gap, 10_000, m) <= bound


def test_etc_expected_regret_matches_the_fast_path_and_the_round_by_round_simulator():
    gap, horizon, m = 0.2, 2000, 30
    fast = bandits.explore_then_commit_regret([0.0, -gap], m, horizon, num_runs=20000, seed=1)
    exact = bandits.etc_expected_regret(gap, horizon, m)
    assert abs(fast.mean() - exact) < 4 * fast.std() / math.sqrt(len(fast))
    slow = bandits.simulate(bandits.ExploreThenCommit(m), [0.0, -gap], horizon, num_runs=2000,
                            rewards="gaussian", seed=2, times=[horizon]).pseudo_regret[-1]
    assert abs(slow.mean() - exact) < 4 * slow.std() / math.sqrt(len(slow))


def test_etc_fast_path_bernoulli_breaks_ties_at_random():
    # Equal exploration sums are common with few pulls: a tie must go either way.
    regret = bandits.explore_then_commit_regret([0.5, 0.5, 0.4], 2, 100, num_runs=20000, rewards="bernoulli",
                                                seed=0)
    slow = bandits.simulate(bandits.ExploreThenCommit(2), [0.5, 0.5, 0.4], 100, num_runs=4000,
                            seed=1, times=[100]).pseudo_regret[-1]
    assert abs(regret.mean() - slow.mean()) < 4 * math.hypot(regret.std() / math.sqrt(20000),
                                                             slow.std() / math.sqrt(4000))


def test_lai_robbins_constant_and_kl_against_torch():
    assert bandits.lai_robbins_constant(MEANS) == pytest.approx(5.3006, abs=1e-3)
    p = torch.tensor([0.0, 0.1, 0.5, 0.9, 1.0], dtype=torch.float64)
    q = torch.tensor([0.3, 0.2, 0.7, 0.5, 0.6], dtype=torch.float64)
    expected = torch.distributions.kl_divergence(torch.distributions.Bernoulli(probs=p),
                                                 torch.distributions.Bernoulli(probs=q))
    assert np.allclose(bandits.bernoulli_kl(p.numpy(), q.numpy()), expected.numpy(), rtol=1e-12, atol=1e-15)


# --- adversarial bandits -----------------------------------------------------------------------

def test_importance_weighted_estimates_are_unbiased():
    rng = np.random.default_rng(0)
    P = np.array([0.1, 0.2, 0.3, 0.4])
    rewards = np.array([0.2, 0.5, 0.9, 0.1])
    n = 200_000
    arms = rng.choice(4, size=n, p=P)
    for loss_based in (True, False):
        estimates = bandits.importance_weighted_estimates(arms, rewards[arms], np.tile(P, (n, 1)),
                                                          loss_based=loss_based)
        se = estimates.std(axis=0) / math.sqrt(n)
        assert np.all(np.abs(estimates.mean(axis=0) - rewards) < 4 * se)
        if loss_based:
            assert estimates.max() <= 1.0


def test_exp3_update_follows_the_formula():
    policy = bandits.Exp3(horizon=100, learning_rate=0.5)
    policy.reset(1, 3, np.random.default_rng(0))
    assert np.allclose(policy.probabilities(), 1 / 3)
    arm = policy.choose(1)
    P = policy.current.copy()
    policy.update(arm, np.array([0.25]))
    expected = np.ones(3)
    expected[arm[0]] = 1 - (1 - 0.25) / P[0, arm[0]]
    assert np.allclose(policy.estimates[0], expected)
    assert np.allclose(policy.probabilities()[0], torch.softmax(torch.tensor(0.5 * expected), 0).numpy())


def test_exp3_regret_within_its_bound_on_the_switching_table():
    table = bandits.switching_table(4000, 5, block=500)
    assert table[0].tolist() == [0.6, 0.9, 0.3, 0.3, 0.3] and table[500].tolist() == [0.6, 0.3, 0.9, 0.3, 0.3]
    run = bandits.play_table(bandits.Exp3(4000), table, num_runs=30, seed=0)
    assert run.mean()[-1] < bandits.exp3_regret_bound(5, 4000)
    uniform = bandits.play_table(bandits.UniformRandom(), table, num_runs=30, seed=0)
    assert uniform.mean()[-1] == pytest.approx(4000 * (0.6 - 0.48), rel=0.05)


def test_a_table_built_against_a_deterministic_policy_takes_everything():
    for policy in (bandits.UCB(2.0), bandits.EpsilonGreedy(0.0), bandits.ExploreThenCommit(5)):
        for num_arms in (2, 3):
            table = bandits.table_against(policy, 1001, num_arms=num_arms, seed=4)
            assert np.all(table.sum(axis=1) == num_arms - 1)
            run = bandits.play_table(policy, table, num_runs=1, seed=4)
            collected = table.sum(axis=0).max() - run.regret[-1, 0]
            assert collected == 0 and run.regret[-1, 0] >= 1001 * (num_arms - 1) / num_arms
    table = bandits.table_against(bandits.UCB(2.0), 2000, seed=0)
    assert bandits.play_table(bandits.Exp3(2000), table, num_runs=20).mean()[-1] < bandits.exp3_regret_bound(2, 2000)
    assert bandits.exp3_learning_rate(5, 10_000) == pytest.approx(math.sqrt(2 * math.log(5) / 50_000))


# --- contextual bandits ------------------------------------------------------------------------

def test_sherman_morrison_equals_the_inverse():
    rng = np.random.default_rng(0)
    M = rng.standard_normal((4, 3, 5, 5))
    A = M @ np.swapaxes(M, -1, -2) + np.eye(5)
    x = rng.standard_normal((4, 3, 5))
    updated = bandits.sherman_morrison_update(np.linalg.inv(A), x)
    assert np.abs(updated - np.linalg.inv(A + x[..., :, None] * x[..., None, :])).max() < 1e-10


def test_linucb_statistics_are_the_ridge_regression_of_its_data():
    problem = bandits.LinearContexts.random(3, 4, seed=1)
    policy = bandits.LinUCB(1.0)
    rng = np.random.default_rng(2)
    policy.reset(2, 3, 4, rng)
    X, arms_seen, rewards_seen = [], [], []
    for t in range(1, 60):
        x = problem.contexts(2, rng)
        arms = policy.choose(t, x)
        rewards = (rng.random(2) < problem.mean_rewards(x)[np.arange(2), arms]).astype(float)
        policy.update(arms, x, rewards)
        X.append(x), arms_seen.append(arms), rewards_seen.append(rewards)
    X, arms_seen, rewards_seen = np.array(X), np.array(arms_seen), np.array(rewards_seen)
    probe = problem.contexts(2, rng)
    means, widths = policy.estimates(probe)
    for run in range(2):
        for arm in range(3):
            rows = arms_seen[:, run] == arm
            D = X[rows, run]
            A = np.eye(4) + D.T @ D
            beta_hat = np.linalg.solve(A, D.T @ rewards_seen[rows, run])
            assert abs(means[run, arm] - beta_hat @ probe[run]) < 1e-10
            assert abs(widths[run, arm] - math.sqrt(probe[run] @ np.linalg.solve(A, probe[run]))) < 1e-10


def test_linear_contexts_and_alpha():
    problem = bandits.LinearContexts.random(4, 5, seed=0)
    x = problem.contexts((100, 7), np.random.default_rng(0))
    assert x.shape == (100, 7, 5) and np.allclose(np.linalg.norm(x, axis=-1), 1)
    means = problem.mean_rewards(x)
    assert means.shape == (100, 7, 4) and means.min() >= 0 and means.max() <= 1
    assert bandits.linucb_alpha(0.1) == pytest.approx(1 + math.sqrt(math.log(20) / 2))


def test_linucb_and_linear_thompson_learn():
    problem = bandits.LinearContexts.random(3, 5, seed=0)
    for policy in (bandits.LinUCB(bandits.linucb_alpha(0.1)), bandits.LinearThompson(0.3)):
        run = bandits.simulate_contextual(policy, problem, 1500, num_runs=10, seed=0, times=[300, 1500],
                                          coverage_alphas=[0.1, bandits.linucb_alpha(0.1)])
        r300, r1500 = run.mean()
        assert r1500 < 3 * r300, (policy, r300, r1500)
        assert run.coverage[1] >= 0.9 and run.coverage[0] < run.coverage[1]


def test_ips_is_unbiased_and_checks_its_inputs():
    rng = np.random.default_rng(0)
    n, reps = 200, 3000
    logged = rng.integers(0, 2, size=(reps, n))
    propensities = np.full((reps, n), 0.5)
    rewards = (rng.random((reps, n)) < np.where(logged == 1, 0.7, 0.2)).astype(float)
    target = np.ones(n, dtype=np.int64)
    values = np.array([bandits.ips_value(target, logged[i], rewards[i], propensities[i]) for i in range(reps)])
    assert abs(values.mean() - 0.7) < 4 * values.std() / math.sqrt(reps)
    with pytest.raises(ValueError, match="propensities"):
        bandits.ips_value([0], [0], [1.0], [0.0])
    with pytest.raises(ValueError, match="must have one shape"):
        bandits.ips_value([0, 1], [0], [1.0], [0.5])


def test_collected_logs_record_the_logging_probabilities():
    problem = bandits.LinearContexts.random(3, 4, seed=2)
    W = np.random.default_rng(3).random((3, 4))
    logs = bandits.collect_logs(problem, W, 0.5, num_logs=40, num_rounds=500, seed=1)
    assert logs.contexts.shape == (40, 500, 4) and logs.arms.shape == logs.rewards.shape == (40, 500)
    probabilities = torch.softmax(torch.tensor(logs.contexts @ W.T / 0.5), dim=-1).numpy()
    assert np.allclose(np.take_along_axis(probabilities, logs.arms[..., None], -1)[..., 0], logs.propensities)
    frequencies = np.bincount(logs.arms.ravel(), minlength=3) / logs.arms.size
    assert np.abs(frequencies - probabilities.reshape(-1, 3).mean(0)).max() < 0.01
    # One estimate per log, and the value of the logging policy itself is the plain average reward.
    values = bandits.ips_value(logs.arms, logs.arms, logs.rewards, np.ones_like(logs.propensities))
    assert values.shape == (40,) and np.allclose(values, logs.rewards.mean(axis=1))


# --- bad input -----------------------------------------------------------------------------------

@pytest.mark.parametrize("call, error, fragment", [
    (lambda: bandits.simulate(bandits.UCB(), [0.5, 1.5], 10, num_runs=2), ValueError, "lie in \\[0, 1\\]"),
    (lambda: bandits.simulate(bandits.UCB(), [0.5], 10, num_runs=2), ValueError, "at least 2 arms"),
    (lambda: bandits.simulate(bandits.UCB(), "0.5, 0.4", 10, num_runs=2), TypeError, "means"),
    (lambda: bandits.simulate(bandits.UCB(), [0.5, 0.4], 10), ValueError, "num_runs is needed"),
    (lambda: bandits.simulate(bandits.UCB(), [0.5, 0.4], 0, num_runs=2), ValueError, "horizon"),
    (lambda: bandits.simulate(bandits.UCB(), [0.5, 0.4], 10, num_runs=2, rewards="poisson"), ValueError, "rewards"),
    (lambda: bandits.simulate(bandits.UCB(), [0.5, 0.4], 10, num_runs=2, times=[11]), ValueError, "times"),
    (lambda: bandits.simulate(bandits.UCB([1.0, 2.0, 3.0]), [0.5, 0.4], 10, num_runs=2), ValueError, "one per run"),
    (lambda: bandits.simulate("UCB", [0.5, 0.4], 10, num_runs=2), TypeError, "policy"),
    (lambda: bandits.simulate(bandits.ThompsonSampling(), [0.5, 0.4], 10, num_runs=2, rewards="gaussian"),
     ValueError, "0/1 rewards"),
    (lambda: bandits.EpsilonGreedy(1.5), ValueError, "epsilon"),
    (lambda: bandits.EpsilonGreedy("0.1"), TypeError, "epsilon"),
    (lambda: bandits.Softmax(0.0), ValueError, "temperature"),
    (lambda: bandits.UCB(-1.0), ValueError, "c"),
    (lambda: bandits.ExploreThenCommit(2.5), ValueError, "whole number"),
    (lambda: bandits.ThompsonSampling(prior=(1.0,)), ValueError, "prior"),
    (lambda: bandits.Exp3(0), ValueError, "horizon"),
    (lambda: bandits.etc_tuned_bound(0.01, 100), ValueError, "horizon \\* gap"),
    (lambda: bandits.etc_regret_bound(-0.1, 100, 5), ValueError, "gap"),
    (lambda: bandits.explore_then_commit_regret([0.5, 0.4], 60, 100, num_runs=5), ValueError, "exceeds"),
    (lambda: bandits.play_table(bandits.Exp3(10), np.full((10, 3), 2.0), num_runs=2), ValueError, "\\[0, 1\\]"),
    (lambda: bandits.importance_weighted_estimates([0, 3], [1.0, 1.0], np.full((2, 3), 1 / 3)),
     ValueError, "arms"),
    (lambda: bandits.importance_weighted_estimates([0, 1], [1.0, 1.0], [[1.0, 0.0], [0.5, 0.5]]),
     ValueError, "positive"),
    (lambda: bandits.LinearContexts([[0.9, 0.9], [0.1, 0.1]]), ValueError, "norm at most 1"),
    (lambda: bandits.linucb_alpha(1.0), ValueError, "delta"),
    (lambda: bandits.simulate_contextual(bandits.UCB(), bandits.LinearContexts.random(2, 2), 10, num_runs=1),
     TypeError, "ContextualPolicy"),
    (lambda: bandits.bernoulli_kl(0.5, 1.0), ValueError, "q in"),
])
def test_bad_input_is_named(call, error, fragment):
    with pytest.raises(error, match=fragment):
        call()
