import numpy as np
import pytest
import torch

from dlbook import validation as v


def test_check_int_accepts_integers_and_numpy_integers():
    assert v.check_int("n", 3) == 3
    assert v.check_int("n", np.int64(4), minimum=1, maximum=4) == 4


@pytest.mark.parametrize("value, error", [(True, TypeError), (2.0, TypeError), ("3", TypeError),
                                          (0, ValueError), (11, ValueError)])
def test_check_int_rejects(value, error):
    with pytest.raises(error, match="num_points"):
        v.check_int("num_points", value, minimum=1, maximum=10)


def test_check_float_ranges():
    assert v.check_float("p", 0.5, low=0, high=1) == 0.5
    with pytest.raises(ValueError, match="p must be > 0"):
        v.check_float("p", 0.0, low=0, low_open=True)
    with pytest.raises(ValueError, match="finite"):
        v.check_float("p", float("nan"))
    with pytest.raises(TypeError, match="p must be a real number"):
        v.check_float("p", "0.1")


def test_as_tensor_converts_and_checks_dimensions():
    t = v.as_tensor("X", [[1.0, 2.0]], ndim=2, dtype=torch.float64)
    assert t.dtype == torch.float64 and t.shape == (1, 2)
    assert v.as_tensor("X", np.zeros(3)).shape == (3,)
    with pytest.raises(ValueError, match="X must have 2 dimension"):
        v.as_tensor("X", torch.zeros(3), ndim=2)
    with pytest.raises(TypeError, match="X must be a tensor"):
        v.as_tensor("X", "abc")
    with pytest.raises(TypeError, match="X must"):
        v.as_tensor("X", [[1, 2], [3]])


def test_labels_and_lengths():
    v.check_labels_pm1("y", torch.tensor([1.0, -1.0]))
    with pytest.raises(ValueError, match="y must contain only -1 and \\+1"):
        v.check_labels_pm1("y", torch.tensor([0.0, 1.0]))
    with pytest.raises(ValueError, match="X and y"):
        v.check_same_length("X", torch.zeros(3, 2), "y", torch.zeros(2))
    with pytest.raises(ValueError, match="W must be finite"):
        v.check_finite("W", torch.tensor([1.0, float("inf")]))
    assert v.check_choice("mode", "a", ("a", "b")) == "a"
    with pytest.raises(ValueError, match="mode must be one of"):
        v.check_choice("mode", "c", ("a", "b"))


def test_bool_dtype_device_and_int_sequences():
    assert v.check_bool("flag", True) is True
    with pytest.raises(TypeError, match="flag must be True or False"):
        v.check_bool("flag", 1)
    assert v.check_dtype("dtype", torch.float64) == torch.float64
    with pytest.raises(TypeError, match="dtype"):
        v.check_dtype("dtype", torch.int32)
    assert v.check_device("device", "cpu") == torch.device("cpu")
    with pytest.raises(TypeError, match="device"):
        v.check_device("device", 3.5)
    assert v.check_ints("widths", (2, 3), minimum=1) == [2, 3]
    with pytest.raises(TypeError, match="widths must be a list"):
        v.check_ints("widths", 3)
    with pytest.raises(ValueError, match=r"widths\[1\] must be >= 1"):
        v.check_ints("widths", [2, 0], minimum=1)
    with pytest.raises(ValueError, match="at least 2 entries"):
        v.check_ints("widths", [2], min_length=2)
    assert v.check_sequence("alphas", (0.1, 0.2), v.check_float, low=0.0) == [0.1, 0.2]
    with pytest.raises(ValueError, match="alphas must not be empty"):
        v.check_sequence("alphas", [], v.check_float)


def test_shapes_floating_square_and_broadcasting():
    x = v.as_tensor("x", torch.zeros(4, 3), shape=(None, 3), floating=True)
    assert x.shape == (4, 3)
    with pytest.raises(ValueError, match=r"x must have shape \(any, 2\)"):
        v.as_tensor("x", torch.zeros(4, 3), shape=(None, 2))
    with pytest.raises(TypeError, match="x must hold floating-point numbers"):
        v.as_tensor("x", torch.zeros(4, 3, dtype=torch.int64), floating=True)
    with pytest.raises(ValueError, match="same shape"):
        v.check_same_shape("a", torch.zeros(2), "b", torch.zeros(3))
    assert v.check_square("A", torch.eye(3), symmetric=True).shape == (3, 3)
    with pytest.raises(ValueError, match="A must be a square matrix"):
        v.check_square("A", torch.zeros(2, 3))
    with pytest.raises(ValueError, match="A must be symmetric"):
        v.check_square("A", torch.tensor([[1.0, 2.0], [0.0, 1.0]]), symmetric=True)
    assert v.check_broadcastable("a", (3, 1), "b", (1, 4)) == (3, 4)
    with pytest.raises(ValueError, match=r"a of shape \(3,\) and b of shape \(4,\) do not broadcast"):
        v.check_broadcastable("a", (3,), "b", (4,))
    assert "tensor of shape (2,)" in v.describe(torch.zeros(2))


def test_values_in_class_indices_intervals_and_lengths():
    assert v.check_values_in("x", torch.tensor([0.0, 1.0, 1.0]), (0, 1)) is not None
    with pytest.raises(ValueError, match=r"x must contain only 0 or 1, found values such as \[2.0\]"):
        v.check_values_in("x", torch.tensor([0.0, 2.0]), (0, 1))
    assert v.check_class_indices("y", [0, 2, 1], 3).dtype == torch.int64
    with pytest.raises(TypeError, match="y must hold integer class indices"):
        v.check_class_indices("y", torch.tensor([0.0, 1.0]), 3)
    with pytest.raises(ValueError, match=r"y must lie in 0..2, got values in 0..3"):
        v.check_class_indices("y", [0, 3], 3)
    assert v.check_interval(-1, 2) == (-1.0, 2.0)
    with pytest.raises(ValueError, match="low must be smaller than high"):
        v.check_interval(2, 2)
    with pytest.raises(ValueError, match="a must be smaller than b"):
        v.check_interval(3, 1, names=("a", "b"))
    with pytest.raises(ValueError, match="betas must have 2 entries, got 3"):
        v.check_sequence("betas", (0.9, 0.99, 0.5), v.check_float, length=2)
