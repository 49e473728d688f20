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
