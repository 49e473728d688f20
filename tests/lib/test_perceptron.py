"""Tests of dlbook.perceptron: Rosenblatt's rule, margins, Novikoff's bound, the LP test."""
import math

import pytest
import torch

from dlbook import data, perceptron

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA device"))]



def dyadic_separable(num_points, dim, margin, seed):
    """Separable data on a grid of step 1/64, so every sum the perceptron forms is exact in float64."""
    X, y, w_star, b_star = data.linearly_separable(num_points, dim, margin, seed=seed,
                                                   dtype=torch.float64)
    # Rounding moves a point by at most sqrt(dim)/128 < margin: still separated by w_star.
    assert math.sqrt(dim) / 128 < margin
    return torch.round(X * 64) / 64, y, w_star, b_star


def random_labels(num_points, dim, seed):
    rng = torch.Generator().manual_seed(seed)
    X = torch.round(torch.randn(num_points, dim, generator=rng, dtype=torch.float64) * 64) / 64
    y = (2 * torch.randint(0, 2, (num_points,), generator=rng) - 1).double()
    return X, y


def assert_same_as_reference(X, y, **kwargs):
    """The fast path equals the plain loop: weights, counts, epochs and the recorded path."""
    fast = perceptron.train_perceptron(X, y, **kwargs)
    slow = perceptron.train_perceptron_reference(X, y, **kwargs)
    assert torch.equal(fast.w, slow.w) and torch.equal(fast.b, slow.b)
    assert (fast.num_updates, fast.epochs, fast.converged) == (slow.num_updates, slow.epochs, slow.converged)
    assert torch.equal(fast.mistake_counts, slow.mistake_counts)
    assert len(fast.history) == len(slow.history)
    assert all(torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) for a, b in zip(fast.history, slow.history))
    return fast


def test_reference_loop_by_hand():
    """Two points on a line: the updates the textbook rule makes, worked out on paper."""
    X = torch.tensor([[1.0], [2.0]])
    y = torch.tensor([1.0, -1.0])
    # Sweep 1: point 0 is a mistake at w = 0 (w, b) -> (1, 1); point 1: -(2 + 1) < 0 -> (-1, 0).
    # Sweep 2: point 0: -1 < 0 -> (0, 1); point 1: -(0 + 1) < 0 -> (-2, 0).
    # Sweep 3: point 0: -2 < 0 -> (-1, 1); point 1: -(-2 + 1) = 1 > 0. Sweep 4: -1 + 1 = 0 -> (0, 2) ...
    result = perceptron.train_perceptron_reference(X, y, max_epochs=3)
    assert [(float(w), float(b)) for w, b in result.history] == [(1, 1), (-1, 0), (0, 1), (-2, 0), (-1, 1)]
    assert result.mistake_counts.tolist() == [3, 2] and not result.converged and result.epochs == 3
    assert_same_as_reference(X, y, max_epochs=3)
    assert_same_as_reference(X, y, max_epochs=100)


# --- train_perceptron -------------------------------------------------------------------------

@pytest.mark.parametrize("dim, margin, seed", [(2, 0.1, 0), (2, 0.03, 1), (5, 0.1, 2)])
def test_perceptron_equals_the_reference_loop_on_separable_data(dim, margin, seed):
    X, y, _, _ = dyadic_separable(150, dim, margin, seed)
    result = assert_same_as_reference(X, y)
    assert result.converged


def test_perceptron_equals_the_reference_loop_on_random_labels_and_xor():
    X, y = random_labels(40, 3, seed=3)
    result = assert_same_as_reference(X, y, max_epochs=15)
    assert not result.converged and result.epochs == 15
    assert_same_as_reference(*data.xor(dtype=torch.float64), max_epochs=50)
    assert_same_as_reference(X, y, max_epochs=10, bias=False, lr=0.5)


def test_perceptron_on_generic_floats_matches_the_reference_loop():
    X, y, _, _ = data.linearly_separable(200, 3, 0.05, seed=4, dtype=torch.float64)
    fast = perceptron.train_perceptron(X, y)
    slow = perceptron.train_perceptron_reference(X, y)
    assert fast.num_updates == slow.num_updates
    assert torch.allclose(fast.w, slow.w, atol=1e-12) and torch.allclose(fast.b, slow.b, atol=1e-12)


@pytest.mark.parametrize("num_points, dim, margin", [(200, 2, 0.3), (200, 2, 0.03), (500, 10, 0.1)])
def test_perceptron_converges_within_novikoff_bound(num_points, dim, margin):
    X, y, w_star, b_star = data.linearly_separable(num_points, dim, margin, seed=0,
                                                   dtype=torch.float64)
    result = perceptron.train_perceptron(X, y)
    assert result.converged
    assert result.num_updates <= math.floor(perceptron.novikoff_bound(X, y, w_star, b_star))
    assert torch.all(perceptron.signed_margins(X, y, result.w, result.b) > 0)


def test_perceptron_weights_are_a_combination_of_the_mistakes():
    X, y, _, _ = dyadic_separable(120, 2, 0.05, seed=5)
    for lr in (1.0, 0.25):
        result = perceptron.train_perceptron(X, y, lr=lr)
        alpha = result.mistake_counts.to(X.dtype)
        assert torch.equal(result.w, lr * ((alpha * y) @ X))
        assert torch.equal(result.b, lr * (alpha * y).sum())
        assert int(result.mistake_counts.sum()) == result.num_updates
    # Starting from zero, the learning rate only rescales (w, b): same mistakes.
    assert torch.equal(perceptron.train_perceptron(X, y, lr=1.0).mistake_counts,
                       perceptron.train_perceptron(X, y, lr=0.25).mistake_counts)


def test_perceptron_history_records_each_update_on_the_cpu():
    X, y, _, _ = dyadic_separable(100, 2, 0.05, seed=6)
    result = perceptron.train_perceptron(X, y)
    assert len(result.history) == result.num_updates
    w_last, b_last = result.history[-1]
    assert w_last.device.type == "cpu" and torch.equal(w_last, result.w) and torch.equal(b_last, result.b)
    capped = perceptron.train_perceptron(X, y, max_history=3)
    assert len(capped.history) == min(3, result.num_updates)


def test_perceptron_without_bias_keeps_b_zero():
    X, y, _, _ = data.linearly_separable(100, 3, 0.1, bias=False, seed=7, dtype=torch.float64)
    result = perceptron.train_perceptron(X, y, bias=False)
    assert result.converged and float(result.b) == 0.0


def test_perceptron_never_converges_on_xor():
    X, y = data.xor()
    result = perceptron.train_perceptron(X, y, max_epochs=1000)
    assert not result.converged and result.epochs == 1000 and result.num_updates >= 1000
    assert not perceptron.is_linearly_separable(X, y, bias=True)


@pytest.mark.parametrize("args, kwargs, error, name", [
    ((torch.zeros(4), torch.ones(4)), {}, ValueError, "X"),
    ((torch.zeros(0, 2), torch.ones(0)), {}, ValueError, "X"),
    ((torch.full((2, 2), float("nan")), torch.ones(2)), {}, ValueError, "X"),
    (("X", torch.ones(2)), {}, TypeError, "X"),
    ((torch.zeros(3, 2), torch.ones(2)), {}, ValueError, "y"),
    ((torch.zeros(2, 2), torch.tensor([0.0, 1.0])), {}, ValueError, "y"),
    ((torch.zeros(2, 2), torch.ones(2, 1)), {}, ValueError, "y"),
    ((torch.zeros(2, 2), torch.ones(2)), {"lr": 0.0}, ValueError, "lr"),
    ((torch.zeros(2, 2), torch.ones(2)), {"lr": "1"}, TypeError, "lr"),
    ((torch.zeros(2, 2), torch.ones(2)), {"max_epochs": 0}, ValueError, "max_epochs"),
    ((torch.zeros(2, 2), torch.ones(2)), {"max_epochs": 1.5}, TypeError, "max_epochs"),
    ((torch.zeros(2, 2), torch.ones(2)), {"bias": "no"}, TypeError, "bias"),
    ((torch.zeros(2, 2), torch.ones(2)), {"max_history": -1}, ValueError, "max_history"),
])
@pytest.mark.parametrize("train", [perceptron.train_perceptron, perceptron.train_perceptron_reference])
def test_train_perceptron_rejects_bad_arguments(train, args, kwargs, error, name):
    with pytest.raises(error, match=name):
        train(*args, **kwargs)


# --- margins and Novikoff's bound -------------------------------------------------------------

def test_signed_margins_by_hand():
    X = torch.tensor([[2.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    y = torch.tensor([1.0, -1.0, 1.0])
    w = torch.tensor([3.0, -4.0])                     # ||w|| = 5
    expected = torch.tensor([6 / 5, 4 / 5, -1 / 5])
    assert torch.allclose(perceptron.signed_margins(X, y, w), expected)
    assert torch.allclose(perceptron.signed_margins(X, y, 2 * w, 0.0), expected)
    assert torch.allclose(perceptron.signed_margins(X, y, w, torch.tensor(1.0)),
                          expected + y / 5)
    assert perceptron.dataset_margin(X, y, w) == pytest.approx(-0.2)
    assert isinstance(perceptron.dataset_margin(X, y, w), float)


@pytest.mark.parametrize("function", [perceptron.signed_margins, perceptron.dataset_margin])
@pytest.mark.parametrize("args, error, name", [
    ((torch.ones(2, 2), torch.ones(2), torch.ones(3)), ValueError, "w"),
    ((torch.ones(2, 2), torch.ones(2), torch.zeros(2)), ValueError, "w"),
    ((torch.ones(2, 2), torch.ones(2), "w"), TypeError, "w"),
    ((torch.ones(2, 2), torch.ones(2), torch.ones(2), torch.ones(2)), ValueError, "b"),
    ((torch.ones(2, 2), torch.ones(2), torch.ones(2), "b"), TypeError, "b"),
    ((torch.ones(2, 2), torch.ones(3), torch.ones(2)), ValueError, "y"),
    ((torch.ones(2), torch.ones(2), torch.ones(2)), ValueError, "X"),
])
def test_margins_reject_bad_arguments(function, args, error, name):
    with pytest.raises(error, match=name):
        function(*args)


def test_novikoff_bound_by_hand():
    X = torch.tensor([[1.0, 0.0], [-1.0, 0.0]])
    y = torch.tensor([1.0, -1.0])
    w_star = torch.tensor([1.0, 0.0])
    assert perceptron.novikoff_bound(X, y, w_star, bias=False) == pytest.approx(1.0)
    # Augmented: R = sqrt(2), gamma = 1.
    assert perceptron.novikoff_bound(X, y, w_star) == pytest.approx(2.0)
    # Only the direction of (w_star, b_star) matters.
    assert perceptron.novikoff_bound(X, y, 7 * w_star) == pytest.approx(2.0)


def test_novikoff_bound_rejects_bad_arguments():
    X, y = torch.tensor([[1.0, 0.0], [-1.0, 0.0]]), torch.tensor([1.0, -1.0])
    with pytest.raises(ValueError, match="w_star"):
        perceptron.novikoff_bound(X, y, torch.tensor([-1.0, 0.0]))
    with pytest.raises(ValueError, match="w_star"):
        perceptron.novikoff_bound(X, y, torch.tensor([1.0, 0.0, 0.0]))
    with pytest.raises(ValueError, match="b_star"):
        perceptron.novikoff_bound(X, y, torch.tensor([1.0, 0.0]), 0.5, bias=False)
    with pytest.raises(TypeError, match="b_star"):
        perceptron.novikoff_bound(X, y, torch.tensor([1.0, 0.0]), "0")
    with pytest.raises(TypeError, match="bias"):
        perceptron.novikoff_bound(X, y, torch.tensor([1.0, 0.0]), bias=None)
    with pytest.raises(ValueError, match="y"):
        perceptron.novikoff_bound(X, torch.tensor([1.0, 2.0]), torch.tensor([1.0, 0.0]))


# --- is_linearly_separable --------------------------------------------------------------------

def test_is_linearly_separable_boolean_functions():
    X = torch.tensor([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
    assert perceptron.is_linearly_separable(X, torch.tensor([-1.0, -1.0, -1.0, 1.0]), bias=True)   # AND
    assert not perceptron.is_linearly_separable(X, torch.tensor([-1.0, 1.0, 1.0, -1.0]), bias=True)


def test_is_linearly_separable_homogeneous_versus_affine():
    X = torch.tensor([[1.0], [2.0]])
    y = torch.tensor([1.0, -1.0])
    assert not perceptron.is_linearly_separable(X, y)            # a line through 0 cannot
    assert perceptron.is_linearly_separable(X, y, bias=True)     # a threshold at 1.5 can
    X, y, _, _ = data.linearly_separable(100, 4, 0.05, seed=1)
    assert perceptron.is_linearly_separable(X, y, bias=True)


def test_is_linearly_separable_rejects_bad_arguments():
    with pytest.raises(ValueError, match="y"):
        perceptron.is_linearly_separable(torch.ones(2, 2), torch.tensor([1.0, 3.0]))
    with pytest.raises(ValueError, match="X"):
        perceptron.is_linearly_separable(torch.ones(2), torch.ones(2))
    with pytest.raises(TypeError, match="bias"):
        perceptron.is_linearly_separable(torch.ones(2, 2), torch.ones(2), bias=1)


# --- devices --------------------------------------------------------------------------------

@pytest.mark.parametrize("device", DEVICES)
def test_perceptron_on_device_matches_cpu(device):
    X, y, w_star, b_star = dyadic_separable(100, 2, 0.1, seed=8)
    on_cpu = perceptron.train_perceptron(X, y)
    on_device = perceptron.train_perceptron(X.to(device), y.to(device))
    assert on_device.w.device.type == device
    assert torch.equal(on_device.w.cpu(), on_cpu.w)
    assert torch.equal(on_device.mistake_counts.cpu(), on_cpu.mistake_counts)
    assert perceptron.dataset_margin(X.to(device), y.to(device), on_device.w, on_device.b) > 0
    assert perceptron.novikoff_bound(X.to(device), y.to(device), w_star.to(device), b_star) == \
        pytest.approx(perceptron.novikoff_bound(X, y, w_star, b_star))
    assert perceptron.is_linearly_separable(X.to(device), y.to(device), bias=True)
