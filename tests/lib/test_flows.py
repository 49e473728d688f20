"""Tests of dlbook.flows: exact inverse, log-determinant against the full Jacobian, a normalised density."""
import math

import pytest
import torch
from torch.func import jacrev

from dlbook import flows


@pytest.mark.parametrize("dim, num_layers", [(2, 1), (2, 4), (5, 3)])
def test_inverse_and_log_determinant(dim, num_layers):
    flow = flows.CouplingFlow(dim, num_layers, hidden=(8, 8), seed=dim, dtype=torch.float64)
    # Larger weights than at initialisation, so the layers are far from the identity.
    with torch.no_grad():
        for p in flow.parameters():
            p.mul_(3.0)
    x = torch.randn(6, dim, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    z, log_det = flow.transform(x)
    assert (flow.inverse(z) - x).abs().max() < 1e-12
    for row in range(len(x)):
        jacobian = jacrev(lambda v: flow.transform(v[None])[0][0])(x[row])
        sign, log_abs = torch.linalg.slogdet(jacobian)
        assert sign > 0 and abs(log_abs - log_det[row]) < 1e-10


def test_coupling_layer_keeps_its_masked_coordinates():
    layer = flows.AffineCoupling(torch.tensor([1, 0, 1]), hidden=(4,), seed=1, dtype=torch.float64)
    x = torch.randn(3, 3, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    y, _ = layer(x)
    assert torch.equal(y[:, [0, 2]], x[:, [0, 2]]) and not torch.allclose(y[:, 1], x[:, 1])


def test_density_integrates_to_one_and_samples_invert():
    flow = flows.CouplingFlow(2, 3, hidden=(8,), seed=2, dtype=torch.float64)
    grid = torch.linspace(-12, 12, 801, dtype=torch.float64)
    gx, gy = torch.meshgrid(grid, grid, indexing="ij")
    with torch.no_grad():
        density = flow(torch.stack([gx.reshape(-1), gy.reshape(-1)], 1)).exp()
    assert abs(density.sum().item() * (grid[1] - grid[0]).item() ** 2 - 1) < 1e-3
    samples = flow.sample(5, seed=0)
    assert samples.shape == (5, 2) and samples.dtype == torch.float64
    with torch.no_grad():
        z, _ = flow.transform(samples)
    expected = torch.randn(5, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    assert (z - expected).abs().max() < 1e-12


def test_an_untrained_flow_is_a_perturbed_gaussian():
    flow = flows.CouplingFlow(2, 2, seed=3)
    x = torch.zeros(1, 2)
    assert abs(flow(x).item() + math.log(2 * math.pi)) < 1.0


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="mask must hold 0s and 1s"):
        flows.AffineCoupling(torch.tensor([1, 1]))
    with pytest.raises(ValueError, match="dim must be >= 2"):
        flows.CouplingFlow(1)
    with pytest.raises(ValueError, match="hidden\\[0\\] must be >= 1"):
        flows.CouplingFlow(2, hidden=(0,))
    with pytest.raises(ValueError, match="x must have 2 dimension"):
        flows.CouplingFlow(2)(torch.zeros(2))
