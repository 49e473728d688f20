"""Tests of dlbook.hopfield: storage, energy descent, recall, spurious states, capacity."""
import math

import numpy as np
import pytest
import torch
from scipy.special import erfc

from dlbook import hopfield
from dlbook.data import random_sign_patterns

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA device"))]




@pytest.fixture(scope="module")
def curve():
    return hopfield.capacity_curve(n=500, seeds=(0,))


# --- storage and energy ---------------------------------------------------------------------

def test_hebbian_weights_symmetric_zero_diagonal_outer_products():
    patterns = random_sign_patterns(7, 40, seed=1)
    W = hopfield.hebbian_weights(patterns)
    assert W.shape == (40, 40)
    assert torch.equal(W, W.T)
    assert torch.all(W.diagonal() == 0)
    off_diagonal = ~torch.eye(40, dtype=torch.bool)
    assert torch.equal(W[off_diagonal], (patterns.T @ patterns / 40)[off_diagonal])


def test_energy_by_hand():
    W = torch.tensor([[0.0, 1.0], [1.0, 0.0]])
    states = torch.tensor([[1.0, 1.0], [1.0, -1.0]])
    assert hopfield.energy(W, states).tolist() == [-1.0, 1.0]
    assert hopfield.energy(W, states, bias=torch.tensor([0.5, 0.0])).tolist() == [-0.5, 1.5]
    assert float(hopfield.energy(W, torch.tensor([1.0, 1.0]))) == -1.0


def test_energy_never_increases_along_async_trajectories():
    patterns = random_sign_patterns(30, 200, seed=1, dtype=torch.float64)
    W = hopfield.hebbian_weights(patterns)
    start = hopfield.corrupt(patterns[:6], 0.3, seed=2)
    bias = 0.05 * torch.randn(200, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    for b in (None, bias):
        run = hopfield.run_async(W, start, sweeps=5, seed=3, record_every=1, bias=b)
        assert run.trajectory.shape == (run.sweeps_done * 200 + 1, 6, 200)
        assert torch.equal(run.trajectory[0], start) and torch.equal(run.trajectory[-1], run.states)
        every_100th = run.trajectory[::100]
        assert torch.allclose(run.energies[::100], torch.stack(
            [hopfield.energy(W, states, bias=b) for states in every_100th]))
        assert float(run.energies.diff(dim=0).max()) <= 1e-9
        assert float((run.energies[-1] - run.energies[0]).max()) < 0


def test_run_async_converges_and_reports_it():
    patterns = random_sign_patterns(5, 200, seed=4)
    W = hopfield.hebbian_weights(patterns)
    noisy = hopfield.corrupt(patterns, 0.1, seed=5)
    run = hopfield.run_async(W, noisy, sweeps=20, seed=6)
    assert torch.equal(run.states, patterns)            # recall from 10% noise
    assert bool(run.converged.all()) and run.sweeps_done < 20
    assert run.trajectory is None and run.energies is None
    assert torch.equal(noisy, hopfield.corrupt(patterns, 0.1, seed=5))   # input untouched
    single = hopfield.run_async(W, noisy[0].clone(), seed=6)
    assert single.states.shape == (1, 200) and torch.equal(single.states[0], patterns[0])
    none = hopfield.run_async(W, noisy, sweeps=0)
    assert torch.equal(none.states, noisy) and none.sweeps_done == 0


def test_run_async_snapshot_spacing_and_seed():
    patterns = random_sign_patterns(40, 100, seed=7)
    W = hopfield.hebbian_weights(patterns)
    start = hopfield.corrupt(patterns[:3], 0.2, seed=8)
    run = hopfield.run_async(W, start, sweeps=3, seed=1, record_every=50)
    assert run.trajectory.shape[0] == 1 + run.sweeps_done * 100 // 50
    assert run.energies.shape == run.trajectory.shape[:2]
    again = hopfield.run_async(W, start, sweeps=3, seed=1)
    assert torch.equal(run.states, again.states)


def _assert_same_run(W, start, **kwargs):
    fast = hopfield.run_async(W, start, **kwargs)
    slow = hopfield.run_async_reference(W, start, **kwargs)
    assert torch.equal(fast.states, slow.states)
    assert fast.sweeps_done == slow.sweeps_done and torch.equal(fast.converged, slow.converged)
    return fast


@pytest.mark.parametrize("n, num_patterns, flip_prob", [(128, 10, 0.2), (64, 20, 0.3), (200, 30, 0.4)])
def test_run_async_equals_the_reference_loop(n, num_patterns, flip_prob):
    """With n a power of 2 every field is exact, so the two loops must agree bit for bit."""
    patterns = random_sign_patterns(num_patterns, n, seed=n, dtype=torch.float64)
    start = hopfield.corrupt(patterns[:5], flip_prob, seed=1)
    W = hopfield.hebbian_weights(patterns)
    if n & (n - 1):     # not a power of 2: the integer couplings n W keep the fields exact
        W = (patterns.T @ patterns).fill_diagonal_(0)
    run = _assert_same_run(W, start, sweeps=8, seed=3)
    assert run.sweeps_done >= 2                       # several sweeps, not a trivial comparison
    # With a bias, zero fields (sign(0) = +1) and a single state.
    bias = torch.round(4 * torch.randn(n, generator=torch.Generator().manual_seed(5), dtype=torch.float64)) / n
    _assert_same_run(W, start, sweeps=8, seed=4, bias=bias)
    _assert_same_run(W, start[0], sweeps=3, seed=0)
    _assert_same_run(W, start, sweeps=0)


def test_reference_loop_by_hand():
    """Two neurons coupled negatively: one asynchronous sweep settles into opposite signs."""
    W = torch.tensor([[0.0, -1.0], [-1.0, 0.0]])
    run = hopfield.run_async_reference(W, torch.tensor([[1.0, 1.0]]), sweeps=5, seed=0)
    assert run.states.abs().tolist() == [[1.0, 1.0]] and float(run.states.sum()) == 0.0
    assert bool(run.converged.all()) and run.sweeps_done == 2
    # A zero field turns a unit to +1 (sign(0) = +1): an uncoupled unit with no bias.
    run = hopfield.run_async_reference(torch.zeros(3, 3), torch.tensor([[-1.0, 1.0, -1.0]]), sweeps=2)
    assert run.states.tolist() == [[1.0, 1.0, 1.0]]


def test_stored_patterns_and_their_negatives_are_fixed_points_at_low_load():
    patterns = random_sign_patterns(25, 500, seed=9)    # alpha = 0.05
    W = hopfield.hebbian_weights(patterns)
    for states in (patterns, -patterns):
        run = hopfield.run_async(W, states, sweeps=3, seed=0)
        assert torch.equal(run.states, states) and bool(run.converged.all())
        assert run.sweeps_done == 1
        assert torch.equal(hopfield.run_sync(W, states, steps=1)[1], states)


def test_run_sync_shape_and_two_cycle():
    W = torch.tensor([[0.0, -1.0], [-1.0, 0.0]])
    history = hopfield.run_sync(W, torch.tensor([[1.0, 1.0]]), steps=4)
    assert history.shape == (5, 1, 2)
    # Both neurons flip together forever: the 2-cycle asynchronous updates avoid.
    assert history[:, 0].tolist() == [[1, 1], [-1, -1], [1, 1], [-1, -1], [1, 1]]
    assert hopfield.run_async(W, torch.tensor([[1.0, 1.0]]), sweeps=5).converged.all()


@pytest.mark.parametrize("function", [hopfield.energy, hopfield.run_async, hopfield.run_async_reference,
                                      hopfield.run_sync])
def test_dynamics_reject_bad_arguments(function):
    W = hopfield.hebbian_weights(random_sign_patterns(3, 10))
    states = random_sign_patterns(2, 10, seed=1)
    with pytest.raises(ValueError, match="W"):
        function(torch.zeros(10, 9), states)
    with pytest.raises(TypeError, match="W"):
        function("W", states)
    with pytest.raises(ValueError, match="W"):
        function(torch.full((10, 10), float("nan")), states)
    with pytest.raises(ValueError, match="states"):
        function(W, torch.ones(2, 11))
    with pytest.raises(ValueError, match="states"):
        function(W, torch.zeros(2, 10))
    with pytest.raises(ValueError, match="states"):
        function(W, torch.ones(2, 2, 10))
    with pytest.raises(ValueError, match="bias"):
        function(W, states, bias=torch.zeros(3))
    with pytest.raises(TypeError, match="bias"):
        function(W, states, bias=torch.zeros(10, dtype=torch.int64))
    with pytest.raises(TypeError, match="W"):
        function(W.to(torch.int64), states)
    with pytest.raises(ValueError, match="states"):
        function(W, torch.ones(0, 10))


BAD_RUN_OPTIONS = [({"sweeps": -1}, ValueError, "sweeps"), ({"sweeps": 1.0}, TypeError, "sweeps"),
                   ({"seed": -1}, ValueError, "seed")]
BAD_RECORDING = [({"record_every": 0}, ValueError, "record_every"),
                 ({"record_every": "1"}, TypeError, "record_every")]


@pytest.mark.parametrize("run, kwargs, error, name",
                         [(hopfield.run_async, *row) for row in BAD_RUN_OPTIONS + BAD_RECORDING]
                         + [(hopfield.run_async_reference, *row) for row in BAD_RUN_OPTIONS])
def test_run_async_rejects_bad_options(run, kwargs, error, name):
    W = hopfield.hebbian_weights(random_sign_patterns(3, 10))
    with pytest.raises(error, match=name):
        run(W, random_sign_patterns(2, 10), **kwargs)


def test_run_sync_rejects_bad_steps():
    W = hopfield.hebbian_weights(random_sign_patterns(3, 10))
    with pytest.raises(ValueError, match="steps"):
        hopfield.run_sync(W, random_sign_patterns(2, 10), steps=-1)


def test_hebbian_weights_rejects_bad_patterns():
    with pytest.raises(ValueError, match="patterns"):
        hopfield.hebbian_weights(torch.zeros(3, 10))
    with pytest.raises(ValueError, match="patterns"):
        hopfield.hebbian_weights(torch.ones(10))
    with pytest.raises(TypeError, match="patterns"):
        hopfield.hebbian_weights(None)


# --- overlaps and noise ---------------------------------------------------------------------

def test_overlap_and_overlap_matrix():
    a = torch.tensor([[1.0, 1.0, 1.0, 1.0], [1.0, -1.0, 1.0, -1.0]])
    b = torch.tensor([[1.0, 1.0, 1.0, -1.0], [1.0, -1.0, 1.0, -1.0]])
    assert hopfield.overlap(a, b).tolist() == [0.5, 1.0]
    assert hopfield.overlap(a, b[0]).tolist() == [0.5, 0.5]
    assert hopfield.overlap_matrix(a, b).tolist() == [[0.5, 0.0], [0.5, 1.0]]
    assert hopfield.overlap_matrix(a, a).diagonal().tolist() == [1.0, 1.0]


def test_overlaps_reject_bad_arguments():
    with pytest.raises(ValueError, match="patterns"):
        hopfield.overlap(torch.ones(2, 4), torch.ones(3, 4))
    with pytest.raises(ValueError, match="patterns"):
        hopfield.overlap(torch.ones(2, 4), torch.ones(2, 5))
    with pytest.raises(ValueError, match="states"):
        hopfield.overlap(torch.ones(2, 2, 4), torch.ones(4))
    with pytest.raises(TypeError, match="states"):
        hopfield.overlap("x", torch.ones(4))
    with pytest.raises(ValueError, match="a and b"):
        hopfield.overlap_matrix(torch.ones(2, 4), torch.ones(2, 5))
    with pytest.raises(ValueError, match="b"):
        hopfield.overlap_matrix(torch.ones(2, 4), torch.ones(4))


def test_corrupt_flips_the_requested_fraction():
    patterns = random_sign_patterns(20, 1000, seed=1)
    noisy = hopfield.corrupt(patterns, 0.2, seed=2)
    flipped = float((noisy != patterns).float().mean())
    assert abs(flipped - 0.2) < 4 * math.sqrt(0.2 * 0.8 / 20000)
    assert torch.all(noisy.abs() == 1)
    assert torch.equal(hopfield.corrupt(patterns, 0.0), patterns)
    assert torch.equal(hopfield.corrupt(patterns, 1.0), -patterns)
    assert hopfield.corrupt(patterns[0], 0.5).shape == (1000,)


@pytest.mark.parametrize("args, error, name", [
    ((torch.zeros(2, 5), 0.1), ValueError, "patterns"),
    ((torch.ones(2, 5), 1.5), ValueError, "flip_prob"),
    ((torch.ones(2, 5), "p"), TypeError, "flip_prob"),
])
def test_corrupt_rejects_bad_arguments(args, error, name):
    with pytest.raises(error, match=name):
        hopfield.corrupt(*args)


# --- crosstalk theory and capacity ----------------------------------------------------------

def test_flip_probability_matches_erfc_and_known_values():
    for alpha in (0.05, 0.105, 0.138, 0.185, 0.37, 0.61):
        assert hopfield.flip_probability(alpha) == pytest.approx(
            0.5 * erfc(1 / math.sqrt(2 * alpha)), rel=1e-12)
    assert hopfield.flip_probability(0.105) == pytest.approx(0.0010, abs=5e-5)
    assert hopfield.flip_probability(0.138) == pytest.approx(0.0036, abs=5e-5)
    assert hopfield.flip_probability(0.185) == pytest.approx(0.0100, abs=5e-5)
    assert hopfield.flip_probability(0.37) == pytest.approx(0.050, abs=5e-4)
    assert hopfield.flip_probability(0.61) == pytest.approx(0.100, abs=5e-4)
    assert hopfield.flip_probability(0.0) == 0.0
    values = hopfield.flip_probability(np.array([0.0, 0.138]))
    assert isinstance(values, np.ndarray) and values[0] == 0.0
    assert values[1] == hopfield.flip_probability(0.138)


@pytest.mark.parametrize("alpha, error", [(-0.1, ValueError), ("a", TypeError),
                                          ([0.1, -1.0], ValueError), (float("inf"), ValueError)])
def test_flip_probability_rejects_bad_alpha(alpha, error):
    with pytest.raises(error, match="alpha"):
        hopfield.flip_probability(alpha)


@pytest.mark.parametrize("alpha", [0.1, 0.138, 0.2, 0.37])
def test_one_step_flip_fraction_matches_theory(alpha):
    n = 1000
    num_patterns = round(alpha * n)
    measured = np.mean([hopfield.one_step_flip_fraction(hopfield.hebbian_weights(p), p)
                        for p in (random_sign_patterns(num_patterns, n, seed=s) for s in range(5))])
    assert measured == pytest.approx(hopfield.flip_probability(alpha), rel=0.2)


def test_one_step_flip_fraction_rejects_bad_arguments():
    W = hopfield.hebbian_weights(random_sign_patterns(3, 10))
    with pytest.raises(ValueError, match="patterns"):
        hopfield.one_step_flip_fraction(W, torch.ones(3, 9))
    with pytest.raises(ValueError, match="W"):
        hopfield.one_step_flip_fraction(torch.ones(3, 4), torch.ones(3, 4))


def test_capacity_curve_shows_the_phase_transition(curve):
    assert isinstance(curve, hopfield.CapacityCurve)
    assert curve.num_patterns.tolist() == [25, 50, 60, 69, 80, 100, 125]
    low, high = curve.alpha <= 0.12, curve.alpha >= 0.20
    assert np.all(curve.final_overlap[low] >= 0.95)
    assert np.all(curve.final_overlap[high] <= 0.75)
    assert curve.perfect_recall[0] == 1.0 and curve.perfect_recall[-1] == 0.0
    assert np.allclose(curve.flip_theory, hopfield.flip_probability(curve.alpha))


def test_capacity_curve_perfect_recall_is_a_fraction_of_patterns():
    """perfect_recall counts the patterns the dynamics leave exactly unchanged, checked by hand."""
    curve = hopfield.capacity_curve(n=200, alphas=(0.05, 0.15), seeds=(2,), sweeps=5)
    for col, count in enumerate(curve.num_patterns.tolist()):
        patterns = random_sign_patterns(count, 200, seed=2 * 1000 + col)
        final = hopfield.run_async(hopfield.hebbian_weights(patterns), patterns, sweeps=5,
                                   seed=2 * 1000 + col).states
        assert curve.perfect_recall[col] == float(torch.all(final == patterns, dim=1).double().mean())


def test_estimate_capacity_interpolates(curve):
    estimate = hopfield.estimate_capacity(curve, level=0.9)
    assert 0.12 < estimate < 0.2
    toy = _toy_curve([0.1, 0.2, 0.3], [1.0, 0.8, 0.4])
    assert hopfield.estimate_capacity(toy, level=0.9) == pytest.approx(0.15)
    assert hopfield.estimate_capacity(toy, level=0.6) == pytest.approx(0.25)


def _toy_curve(alphas, overlaps):
    alphas, overlaps = np.array(alphas), np.array(overlaps)
    return hopfield.CapacityCurve(alphas, alphas * 100, 0 * alphas, 0 * alphas, overlaps, 0 * alphas)


def test_estimate_capacity_rejects_bad_arguments():
    toy = _toy_curve([0.1, 0.2], [1.0, 0.8])
    with pytest.raises(ValueError, match="level"):
        hopfield.estimate_capacity(toy, level=0.5)       # never falls below
    with pytest.raises(ValueError, match="level"):
        hopfield.estimate_capacity(toy, level=1.0 + 1e-9)
    with pytest.raises(ValueError, match="level"):                  # below at the first load
        hopfield.estimate_capacity(_toy_curve([0.1, 0.2], [0.7, 0.5]), level=0.9)
    with pytest.raises(TypeError, match="curve"):
        hopfield.estimate_capacity([0.1, 0.2])
    with pytest.raises(TypeError, match="curve"):
        hopfield.estimate_capacity({"alpha": np.array([0.1, 0.2]), "final_overlap": np.array([1.0, 0.5])})
    with pytest.raises(ValueError, match="curve"):
        hopfield.estimate_capacity(hopfield.CapacityCurve(*[np.array([0.1])] * 4, np.array([1.0, 0.5]),
                                                          np.array([0.1])))


@pytest.mark.parametrize("kwargs, error, name", [
    ({"n": 1}, ValueError, "n"),
    ({"alphas": ()}, ValueError, "alphas"),
    ({"alphas": (0.1, -0.1)}, ValueError, "alphas"),
    ({"alphas": 0.1}, TypeError, "alphas"),
    ({"seeds": (-1,)}, ValueError, "seeds"),
    ({"seeds": "0"}, TypeError, "seeds"),
    ({"sweeps": 0}, ValueError, "sweeps"),
    ({"device": "nowhere"}, TypeError, "device"),
    ({"dtype": torch.int64}, TypeError, "dtype"),
])
def test_capacity_curve_rejects_bad_arguments(kwargs, error, name):
    with pytest.raises(error, match=name):
        hopfield.capacity_curve(**kwargs)


def test_exact_recall_capacity_uses_natural_log():
    each, all_ = hopfield.exact_recall_capacity(1000)
    assert round(each) == 72 and round(all_) == 36
    assert hopfield.exact_recall_capacity(1000).per_pattern == each
    assert each == pytest.approx(1000 / (2 * math.log(1000)))
    with pytest.raises(ValueError, match="n"):
        hopfield.exact_recall_capacity(1)
    with pytest.raises(TypeError, match="n"):
        hopfield.exact_recall_capacity(10.0)


# --- spurious states and modern Hopfield ----------------------------------------------------

def test_three_mixture_is_a_stable_spurious_state():
    n = 1000
    patterns = random_sign_patterns(20, n, seed=0)
    W = hopfield.hebbian_weights(patterns)
    mixture = hopfield.mixture_state(patterns)
    assert torch.all(mixture.abs() == 1)
    tolerance = 3 / math.sqrt(n)
    assert torch.all((hopfield.overlap(mixture, patterns[:3]) - 0.5).abs() <= tolerance)
    run = hopfield.run_async(W, mixture, sweeps=20)
    assert bool(run.converged.all())
    assert float(hopfield.overlap(run.states, mixture)) >= 0.99       # stays near the mixture
    final_overlaps = hopfield.overlap_matrix(run.states, patterns[:3])[0]
    assert torch.all((final_overlaps - 0.5).abs() <= tolerance)


@pytest.mark.parametrize("indices, error", [((0, 1), ValueError), ((0, 0, 1), ValueError),
                                            ((0, 1, 9), ValueError), ((0, 1, "2"), TypeError),
                                            (3, TypeError)])
def test_mixture_state_rejects_bad_indices(indices, error):
    with pytest.raises(error, match="indices"):
        hopfield.mixture_state(random_sign_patterns(5, 10), indices)


def test_modern_retrieval_recovers_many_patterns():
    n = 64
    for num_patterns in (200, 4 * n):
        patterns = random_sign_patterns(num_patterns, n, seed=0)
        queries = hopfield.corrupt(patterns, 0.1, seed=1)
        retrieved = hopfield.modern_retrieve(patterns, queries, beta=1.0)
        accuracy = float(torch.all(retrieved == patterns, dim=1).float().mean())
        assert accuracy >= 0.99 if num_patterns > 200 else accuracy == 1.0
    # The classical network at the same size fails at a fraction of that load.
    patterns = random_sign_patterns(50, n, seed=0)
    final = hopfield.run_async(hopfield.hebbian_weights(patterns),
                               hopfield.corrupt(patterns, 0.1, seed=1), sweeps=20).states
    assert int(torch.all(final == patterns, dim=1).sum()) <= 2
    assert hopfield.modern_retrieve(patterns, patterns[0]).shape == (n,)


@pytest.mark.parametrize("args, error, name", [
    ((torch.zeros(3, 8), torch.ones(8)), ValueError, "patterns"),
    ((torch.ones(3, 8), torch.ones(2, 9)), ValueError, "queries"),
    ((torch.ones(3, 8), torch.full((8,), float("nan"))), ValueError, "queries"),
    ((torch.ones(3, 8), "q"), TypeError, "queries"),
    ((torch.ones(3, 8), torch.ones(8), 0.0), ValueError, "beta"),
    ((torch.ones(3, 8), torch.ones(8), "1"), TypeError, "beta"),
])
def test_modern_retrieve_rejects_bad_arguments(args, error, name):
    with pytest.raises(error, match=name):
        hopfield.modern_retrieve(*args)


def test_sign_pm1_maps_zero_to_plus_one():
    assert hopfield.sign_pm1(torch.tensor([-2.0, -0.0, 0.0, 3.0])).tolist() == [-1, 1, 1, 1]
    with pytest.raises(TypeError, match="x"):
        hopfield.sign_pm1([1.0])


# --- devices --------------------------------------------------------------------------------

@pytest.mark.parametrize("device", DEVICES)
def test_hopfield_on_device_matches_cpu(device):
    # n = 128: Hebbian weights are multiples of 1/128, so every field is exact
    # and a zero field breaks the same way (to +1) whatever the summation order.
    patterns = random_sign_patterns(12, 128, seed=3)
    W = hopfield.hebbian_weights(patterns)
    start = hopfield.corrupt(patterns, 0.15, seed=4)
    on_cpu = hopfield.run_async(W, start, sweeps=5, seed=5, record_every=128)
    on_device = hopfield.run_async(W.to(device), start.to(device), sweeps=5, seed=5, record_every=128)
    assert on_device.states.device.type == device
    assert torch.equal(on_device.states.cpu(), on_cpu.states)
    assert torch.allclose(on_device.energies.cpu(), on_cpu.energies)
    assert torch.equal(hopfield.corrupt(patterns.to(device), 0.2, seed=1).cpu(),
                       hopfield.corrupt(patterns, 0.2, seed=1))
    assert torch.equal(hopfield.run_sync(W.to(device), start.to(device), steps=3).cpu(),
                       hopfield.run_sync(W, start, steps=3))
    assert torch.equal(hopfield.modern_retrieve(patterns.to(device), start.to(device)).cpu(),
                       hopfield.modern_retrieve(patterns, start))
    small = hopfield.capacity_curve(n=128, alphas=(0.05, 0.2), device=device)
    assert np.allclose(small.final_overlap, hopfield.capacity_curve(n=128, alphas=(0.05, 0.2)).final_overlap)
    assert torch.equal(hopfield.run_async_reference(W.to(device), start.to(device), sweeps=5, seed=5).states.cpu(),
                       on_cpu.states)
