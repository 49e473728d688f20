"""Tests of dlbook.threshold: McCulloch–Pitts units and Boolean functions."""
import itertools

import pytest
import torch

from dlbook import threshold
from dlbook.data import hypercube

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA device"))]


def test_truth_tables_follow_the_rows_of_the_hypercube():
    """NAMES_2D and realizable_functions list outputs on data.hypercube's rows: 00, 01, 10, 11."""
    cube = hypercube(3, encoding="01")
    assert [tuple(row) for row in cube.int().tolist()] == list(itertools.product((0, 1), repeat=3))
    and_table = tuple(int(v) for v in threshold.mcculloch_pitts(hypercube(2), [1, 1], 2).tolist())
    assert threshold.NAMES_2D[and_table] == "AND"


def test_mcculloch_pitts_and_or():
    x = hypercube(2)
    assert threshold.mcculloch_pitts(x, [1, 1], 2).tolist() == [0, 0, 0, 1]      # AND
    assert threshold.mcculloch_pitts(x, [1, 1], 1).tolist() == [0, 1, 1, 1]      # OR
    assert threshold.mcculloch_pitts(x, [-1, -1], 0).tolist() == [1, 0, 0, 0]    # NOR
    assert threshold.mcculloch_pitts(x, [1, -1], 1).tolist() == [0, 0, 1, 0]     # x1 AND NOT x2
    # A single input row and integer inputs work too.
    assert float(threshold.mcculloch_pitts(torch.tensor([1, 1]), [1, 1], 2)) == 1.0


@pytest.mark.parametrize("args, error, name", [
    (([[0, 2]], [1, 1], 1), ValueError, "x"),
    ((torch.zeros(2, 2, 2), [1, 1], 1), ValueError, "x"),
    (("01", [1, 1], 1), TypeError, "x"),
    (([[0, 1]], [1, 2], 1), ValueError, "signs"),
    (([[0, 1]], [0.5, 1], 1), ValueError, "signs"),
    ((torch.tensor([[0.0, 0.5]]), [1, 1], 1), ValueError, "x"),
    (([[0, 1]], "ab", 1), TypeError, "signs"),
    (([[0, 1]], [1, 1, 1], 1), ValueError, "signs"),
    (([[0, 1]], [[1, 1]], 1), ValueError, "signs"),
    (([[0, 1]], [1, 1], "one"), TypeError, "threshold"),
    (([[0, 1]], [1, 1], float("nan")), ValueError, "threshold"),
])
def test_mcculloch_pitts_rejects_bad_arguments(args, error, name):
    with pytest.raises(error, match=name):
        threshold.mcculloch_pitts(*args)


def test_names_cover_all_sixteen_functions_in_order():
    assert len(threshold.NAMES_2D) == 16
    assert threshold.NAMES_2D[(0, 0, 0, 1)] == "AND"
    assert threshold.NAMES_2D[(0, 1, 1, 0)] == "XOR"
    assert threshold.NAMES_2D[(0, 0, 1, 1)] == "x1"
    assert threshold.NAMES_2D[(1, 1, 1, 0)] == "NAND"
    # Each name agrees with evaluating it on the truth-table inputs.
    rules = {"x1": lambda a, b: a, "x2": lambda a, b: b, "AND": lambda a, b: a & b,
             "OR": lambda a, b: a | b, "XOR": lambda a, b: a ^ b, "NOR": lambda a, b: 1 - (a | b),
             "NAND": lambda a, b: 1 - (a & b), "XNOR": lambda a, b: 1 - (a ^ b)}
    inputs = [(0, 0), (0, 1), (1, 0), (1, 1)]
    for table, name in threshold.NAMES_2D.items():
        if name in rules:
            assert table == tuple(rules[name](a, b) for a, b in inputs)
    assert threshold.function_name(torch.tensor([0.0, 1.0, 1.0, 1.0])) == "OR"


def test_function_name_rejects_bad_tables():
    with pytest.raises(ValueError, match="table"):
        threshold.function_name((0, 1, 2, 0))
    with pytest.raises(TypeError, match="table"):
        threshold.function_name(5)


def test_realizable_counts_are_exact():
    signs_only = threshold.realizable_functions(2)
    assert len(signs_only) == 10
    names = {threshold.NAMES_2D[table] for table in signs_only}
    assert not names & {"XOR", "XNOR", "x1", "x2", "NOT x1", "NOT x2"}
    with_zero = threshold.realizable_functions(2, weight_values=(-1, 0, 1))
    assert len(with_zero) == 14
    assert {threshold.NAMES_2D[table] for table in set(threshold.NAMES_2D) - with_zero} == {"XOR", "XNOR"}
    assert len(threshold.realizable_functions(3)) == 26
    assert all(len(table) == 8 for table in threshold.realizable_functions(3))


def test_realizable_functions_agree_with_the_unit():
    x = hypercube(3)
    for signs in itertools.product((-1, 1), repeat=3):
        for theta in (-3.5, -1, 0, 0.5, 1, 2, 3, 3.5):
            table = tuple(int(v) for v in threshold.mcculloch_pitts(x, list(signs), theta).tolist())
            assert table in threshold.realizable_functions(3)


@pytest.mark.parametrize("args, error, name", [
    ((0,), ValueError, "n"),
    ((9,), ValueError, "n"),
    ((2, "ab"), TypeError, "weight_values"),
    ((2, 3), TypeError, "weight_values"),
    ((2, ()), ValueError, "weight_values"),
    ((2, (1, float("inf"))), ValueError, "weight_values"),
    ((8, (-2, -1, 0, 1, 2)), ValueError, "weight_values"),
])
def test_realizable_functions_rejects_bad_arguments(args, error, name):
    with pytest.raises(error, match=name):
        threshold.realizable_functions(*args)


def test_xor_network():
    x = hypercube(2)
    assert threshold.xor_network(x).tolist() == [0, 1, 1, 0]
    assert threshold.function_name(threshold.xor_network(x)) == "XOR"
    assert float(threshold.xor_network([1, 0])) == 1.0


def test_xor_network_rejects_bad_arguments():
    with pytest.raises(ValueError, match="x"):
        threshold.xor_network(torch.zeros(4, 3))
    with pytest.raises(ValueError, match="x"):
        threshold.xor_network(torch.full((4, 2), 0.5))
    with pytest.raises(TypeError, match="x"):
        threshold.xor_network(None)


@pytest.mark.parametrize("device", DEVICES)
def test_threshold_units_on_device(device):
    x = hypercube(2, device=device)
    assert x.device.type == device
    assert threshold.xor_network(x).cpu().tolist() == [0, 1, 1, 0]
    assert threshold.mcculloch_pitts(x, [1, 1], 2).device.type == device
