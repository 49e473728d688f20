"""Tests of dlbook.data: synthetic and bundled data sets."""
import pytest
import torch

from dlbook import data

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA device"))]


# --- linearly_separable ----------------------------------------------------------------------

@pytest.mark.parametrize("dim, margin, bias", [(2, 0.1, True), (10, 0.3, True), (5, 0.05, False)])
def test_linearly_separable_respects_the_margin(dim, margin, bias):
    X, y, w_star, b_star = data.linearly_separable(300, dim, margin, bias=bias, seed=1)
    assert X.shape == (300, dim) and y.shape == (300,) and w_star.shape == (dim,)
    assert X.dtype == y.dtype == w_star.dtype == torch.float32
    assert isinstance(b_star, float)
    assert torch.all((y == 1) | (y == -1))
    assert X.abs().max() <= 1
    assert abs(float(w_star.norm()) - 1) < 1e-6
    assert -0.3 <= b_star <= 0.3 if bias else b_star == 0.0
    X64, w64 = X.double(), w_star.double()
    distances = y.double() * (X64 @ w64 + b_star) / w64.norm()
    assert float(distances.min()) >= margin   # exact: rejection used the rounded tensors


def test_linearly_separable_is_reproducible_and_seeded():
    first = data.linearly_separable(50, 3, 0.1, seed=7)
    again = data.linearly_separable(50, 3, 0.1, seed=7)
    other = data.linearly_separable(50, 3, 0.1, seed=8)
    for a, b in zip(first[:3], again[:3]):
        assert torch.equal(a, b)
    assert first.b_star == again.b_star
    assert not torch.equal(first.X, other.X)


def test_linearly_separable_float64_has_the_same_points():
    single = data.linearly_separable(50, 2, 0.1, seed=3)
    double = data.linearly_separable(50, 2, 0.1, seed=3, dtype=torch.float64)
    assert double.X.dtype == torch.float64
    assert torch.allclose(single.X.double(), double.X, atol=1e-6)
    assert torch.equal(single.y.double(), double.y)


def test_linearly_separable_large_margin_still_fast_and_exact():
    X, y, w_star, b_star = data.linearly_separable(200, 10, 1.0, seed=0)
    assert float((y * (X @ w_star + b_star)).min() / w_star.norm()) >= 1.0 - 1e-6


@pytest.mark.parametrize("kwargs, error, name", [
    ({"num_points": 0}, ValueError, "num_points"),
    ({"num_points": 2.5}, TypeError, "num_points"),
    ({"dim": 0}, ValueError, "dim"),
    ({"margin": -0.1}, ValueError, "margin"),
    ({"margin": 5.0}, ValueError, "margin"),
    ({"margin": "big"}, TypeError, "margin"),
    ({"bias": 1}, TypeError, "bias"),
    ({"seed": -1}, ValueError, "seed"),
    ({"dtype": torch.int64}, TypeError, "dtype"),
    ({"device": "nowhere"}, TypeError, "device"),
])
def test_linearly_separable_rejects_bad_arguments(kwargs, error, name):
    with pytest.raises(error, match=name):
        data.linearly_separable(**kwargs)


# --- xor and random_sign_patterns -------------------------------------------------------------

def test_xor_truth_table():
    X, y = data.xor()
    assert X.tolist() == [[0, 0], [0, 1], [1, 0], [1, 1]]
    assert y.tolist() == [-1, 1, 1, -1]
    assert data.xor(dtype=torch.float64)[0].dtype == torch.float64


def test_xor_rejects_bad_arguments():
    with pytest.raises(TypeError, match="dtype"):
        data.xor(dtype="float")
    with pytest.raises(TypeError, match="device"):
        data.xor(device="nowhere")


def test_random_sign_patterns():
    patterns = data.random_sign_patterns(40, 300, seed=5)
    assert patterns.shape == (40, 300) and patterns.dtype == torch.float32
    assert torch.all(patterns.abs() == 1)
    assert abs(float(patterns.mean())) < 4 / (40 * 300) ** 0.5 * 2
    assert torch.equal(patterns, data.random_sign_patterns(40, 300, seed=5))
    assert not torch.equal(patterns, data.random_sign_patterns(40, 300, seed=6))


@pytest.mark.parametrize("args, kwargs, error, name", [
    ((0, 5), {}, ValueError, "num_patterns"),
    ((5, 0), {}, ValueError, "dim"),
    ((5.0, 5), {}, TypeError, "num_patterns"),
    ((5, 5), {"seed": "a"}, TypeError, "seed"),
    ((5, 5), {"dtype": torch.int32}, TypeError, "dtype"),
])
def test_random_sign_patterns_rejects_bad_arguments(args, kwargs, error, name):
    with pytest.raises(error, match=name):
        data.random_sign_patterns(*args, **kwargs)


# --- gaussian_blobs and two_moons -----------------------------------------------------------

@pytest.mark.parametrize("num_classes, dim", [(2, 2), (3, 5), (4, 1)])
def test_gaussian_blobs(num_classes, dim):
    X, y = data.gaussian_blobs(120, num_classes, dim, spread=0.5, seed=2)
    assert X.shape == (120, dim) and X.dtype == torch.float32 and y.dtype == torch.int64
    assert torch.equal(torch.bincount(y), torch.full((num_classes,), 120 // num_classes))
    # Each class's mean sits near its own centre, away from the others.
    means = torch.stack([X[y == k].mean(0) for k in range(num_classes)])
    assert torch.cdist(means, means).add(torch.eye(num_classes) * 99).min() > 1.0
    X2, y2 = data.gaussian_blobs(120, num_classes, dim, spread=0.5, seed=2)
    assert torch.equal(X, X2) and torch.equal(y, y2)


@pytest.mark.parametrize("kwargs, error, name", [
    ({"num_points": 1, "num_classes": 2}, ValueError, "num_points"),
    ({"num_classes": 0}, ValueError, "num_classes"),
    ({"dim": 0}, ValueError, "dim"),
    ({"spread": -1.0}, ValueError, "spread"),
    ({"spread": None}, TypeError, "spread"),
    ({"radius": -1.0}, ValueError, "radius"),
])
def test_gaussian_blobs_rejects_bad_arguments(kwargs, error, name):
    with pytest.raises(error, match=name):
        data.gaussian_blobs(**kwargs)


def test_two_moons():
    X, y = data.two_moons(150, noise=0.05, seed=1)
    assert X.shape == (150, 2) and X.dtype == torch.float32 and y.dtype == torch.int64
    assert set(y.tolist()) == {0, 1}
    assert torch.equal(X, data.two_moons(150, noise=0.05, seed=1)[0])


@pytest.mark.parametrize("kwargs, error, name", [
    ({"num_points": 1}, ValueError, "num_points"),
    ({"noise": -0.1}, ValueError, "noise"),
    ({"noise": "x"}, TypeError, "noise"),
    ({"seed": -3}, ValueError, "seed"),
])
def test_two_moons_rejects_bad_arguments(kwargs, error, name):
    with pytest.raises(error, match=name):
        data.two_moons(**kwargs)


# --- load_digits ----------------------------------------------------------------------------

def test_load_digits_split():
    split = data.load_digits()
    assert len(split.X_train) + len(split.X_test) == 1797
    assert split.X_train.shape[1:] == (64,) and split.X_train.dtype == torch.float32
    assert split.y_train.dtype == torch.int64
    assert float(split.X_train.min()) == 0.0 and float(split.X_train.max()) == 1.0
    assert abs(len(split.X_test) / 1797 - 0.25) < 0.01
    # Stratified: every class has about a quarter of its images in the test set.
    fraction = torch.bincount(split.y_test, minlength=10) / (
        torch.bincount(split.y_test, minlength=10) + torch.bincount(split.y_train, minlength=10))
    assert torch.all((fraction - 0.25).abs() < 0.02)


def test_load_digits_is_seeded_and_can_keep_images():
    first, again = data.load_digits(seed=3), data.load_digits(seed=3)
    assert torch.equal(first.X_train, again.X_train)
    assert not torch.equal(first.y_train, data.load_digits(seed=4).y_train)
    images = data.load_digits(seed=3, flatten=False, test_fraction=0.5)
    assert images.X_train.shape[1:] == (1, 8, 8)
    assert abs(len(images.X_test) - 1797 / 2) <= 1


@pytest.mark.parametrize("kwargs, error, name", [
    ({"test_fraction": 0.0}, ValueError, "test_fraction"),
    ({"test_fraction": 1.0}, ValueError, "test_fraction"),
    ({"test_fraction": 0.001}, ValueError, "test_fraction"),
    ({"test_fraction": "a"}, TypeError, "test_fraction"),
    ({"flatten": "yes"}, TypeError, "flatten"),
    ({"seed": 1.5}, TypeError, "seed"),
])
def test_load_digits_rejects_bad_arguments(kwargs, error, name):
    with pytest.raises(error, match=name):
        data.load_digits(**kwargs)


# --- devices --------------------------------------------------------------------------------

@pytest.mark.parametrize("device", DEVICES)
def test_data_on_device_matches_cpu(device):
    on_device = data.linearly_separable(60, 3, 0.1, seed=4, device=device)
    on_cpu = data.linearly_separable(60, 3, 0.1, seed=4)
    assert on_device.X.device.type == device
    assert torch.equal(on_device.X.cpu(), on_cpu.X) and torch.equal(on_device.y.cpu(), on_cpu.y)
    assert torch.equal(data.random_sign_patterns(5, 9, seed=1, device=device).cpu(),
                       data.random_sign_patterns(5, 9, seed=1))
    assert data.xor(device=device)[0].device.type == device
    assert torch.equal(data.gaussian_blobs(device=device)[0].cpu(), data.gaussian_blobs()[0])
    assert data.two_moons(device=device)[1].device.type == device
    assert data.load_digits(device=device).X_test.device.type == device


@pytest.mark.parametrize("encoding, values", [("01", (0.0, 1.0)), ("pm1", (1.0, -1.0))])
def test_hypercube_rows_count_in_binary_msb_first(encoding, values):
    cube = data.hypercube(3, encoding=encoding)
    zero, one = values
    assert cube.shape == (8, 3) and cube.dtype == torch.float32
    assert cube[0].tolist() == [zero] * 3 and cube[1].tolist() == [zero, zero, one]
    assert cube[4].tolist() == [one, zero, zero] and cube[7].tolist() == [one] * 3
    assert len({tuple(row) for row in cube.tolist()}) == 8
    assert data.hypercube(2, encoding=encoding, dtype=torch.float64).dtype == torch.float64


@pytest.mark.parametrize("kwargs, error, name", [
    ({"num_bits": 0}, ValueError, "num_bits"),
    ({"num_bits": 2, "encoding": "bool"}, ValueError, "encoding"),
    ({"num_bits": 2, "dtype": torch.int64}, TypeError, "dtype"),
    ({"num_bits": 2, "device": 3.5}, TypeError, "device"),
])
def test_hypercube_rejects_bad_arguments(kwargs, error, name):
    with pytest.raises(error, match=name):
        data.hypercube(**kwargs)
