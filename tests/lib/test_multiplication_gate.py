"""Tests of dlbook.multiplication_gate: Lin-Tegmark-Rolnick's four-neuron product."""
import numpy as np
import pytest
import torch

from dlbook import multiplication_gate as mg
from dlbook.runtime import generator


@pytest.mark.parametrize("activation", ["softplus", "exp"])
def test_gate_error_shrinks_like_the_square_of_the_scale(activation):
    x, y = torch.rand(2, 500, generator=generator(0), dtype=torch.float64) * 4 - 2
    errors = [(mg.multiplication_gate(x, y, scale=s, activation=activation) - x * y).abs().max().item()
              for s in (0.1, 0.05, 0.025)]
    assert errors[0] < 0.2
    np.testing.assert_allclose(np.array(errors[:-1]) / np.array(errors[1:]), 4.0, rtol=0.05)


def test_product_tree_multiplies_many_numbers():
    X = torch.rand(200, 5, generator=generator(1), dtype=torch.float64) + 0.5
    got = mg.product_tree(X, scale=1e-3)
    torch.testing.assert_close(got, X.prod(1), rtol=1e-4, atol=0)
    torch.testing.assert_close(mg.product_tree(X[:, :1]), X[:, 0])
    assert [mg.shallow_product_neurons(n) for n in (2, 3, 8)] == [4, 8, 256]


def test_bad_inputs():
    with pytest.raises(ValueError, match="scale"):
        mg.multiplication_gate(torch.ones(2), torch.ones(2), scale=0.0)
    with pytest.raises(ValueError, match="activation"):
        mg.multiplication_gate(torch.ones(2), torch.ones(2), activation="relu")
    with pytest.raises(TypeError, match="x"):
        mg.multiplication_gate(torch.ones(2, dtype=torch.long), torch.ones(2))
    with pytest.raises(ValueError, match="X"):
        mg.product_tree(torch.ones(3, 0, dtype=torch.float64))
    with pytest.raises(ValueError, match="num_factors"):
        mg.shallow_product_neurons(0)
