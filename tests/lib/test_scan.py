"""Tests of dlbook.scan: the parallel scan equals the loop, LRU eigenvalues, the real block form (Chapter 6)."""
import math

import pytest
import torch

from dlbook import scan


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def _loop(a, b, z0):
    """An independent reference: plain Python floats, one step at a time."""
    z, out = z0, []
    for a_t, b_t in zip(a, b):
        z = a_t * z + b_t
        out.append(z)
    return out


@pytest.mark.parametrize("steps", [1, 2, 3, 7, 8, 9, 100, 1000])
def test_parallel_scan_equals_the_sequential_recurrence(steps):
    g = _gen(steps)
    a = 0.8 + 0.2 * torch.rand(steps, generator=g, dtype=torch.float64)
    b = torch.randn(steps, generator=g, dtype=torch.float64)
    result = scan.parallel_scan(a, b, torch.tensor(0.5, dtype=torch.float64))
    expected = torch.tensor(_loop(a.tolist(), b.tolist(), 0.5), dtype=torch.float64)
    torch.testing.assert_close(result.values, expected, rtol=0, atol=1e-13)
    torch.testing.assert_close(scan.linear_recurrence(a, b, torch.tensor(0.5, dtype=torch.float64)), expected,
                               rtol=0, atol=1e-13)
    assert result.rounds == math.ceil(math.log2(steps))


def test_scan_takes_complex_and_vector_coefficients():
    g = _gen(1)
    a = torch.complex(torch.randn(50, 4, 3, generator=g, dtype=torch.float64),
                      torch.randn(50, 4, 3, generator=g, dtype=torch.float64)) * 0.5
    b = torch.complex(torch.randn(50, 4, 3, generator=g, dtype=torch.float64),
                      torch.randn(50, 4, 3, generator=g, dtype=torch.float64))
    torch.testing.assert_close(scan.parallel_scan(a, b).values, scan.linear_recurrence(a, b), rtol=0, atol=1e-12)


def test_combining_affine_maps_is_associative_and_means_composition():
    g = _gen(2)
    maps = [tuple(torch.randn(2, generator=g, dtype=torch.float64)) for _ in range(3)]
    left = scan.combine(scan.combine(maps[0], maps[1]), maps[2])
    right = scan.combine(maps[0], scan.combine(maps[1], maps[2]))
    torch.testing.assert_close(torch.stack(left), torch.stack(right), rtol=0, atol=1e-14)
    z = 0.3
    for a, b in maps:
        z = a * z + b
    torch.testing.assert_close(left[0] * 0.3 + left[1], torch.as_tensor(z), rtol=0, atol=1e-14)


def test_lru_eigenvalues_stay_inside_the_unit_disc_and_the_parametrisation_inverts():
    nu = torch.linspace(-20, 5, 501, dtype=torch.float64)
    modulus = scan.lru_eigenvalues(nu, torch.linspace(0, 6, 501, dtype=torch.float64)).abs()
    assert modulus.min() > 0 and modulus.max() < 1
    r = torch.linspace(0.01, 0.999, 200, dtype=torch.float64)
    torch.testing.assert_close(scan.lru_eigenvalues(scan.nu_from_modulus(r), torch.zeros(200)).abs(), r,
                               rtol=1e-12, atol=0)
    assert scan.half_life(0.9) == pytest.approx(6.5788, abs=1e-4)
    assert scan.half_life(0.5) == pytest.approx(1.0)


def test_complex_diagonal_recurrence_equals_its_real_block_form():
    g = _gen(3)
    lam = scan.lru_eigenvalues(torch.randn(6, generator=g, dtype=torch.float64) - 2,
                               6 * torch.rand(6, generator=g, dtype=torch.float64))
    u = torch.randn(40, 6, 2, generator=g, dtype=torch.float64)
    complex_states = scan.linear_recurrence(lam.expand(40, 6), torch.complex(u[..., 0], u[..., 1]))
    real_states = scan.real_block_recurrence(scan.rotation_scaling_blocks(lam), u)
    torch.testing.assert_close(torch.stack([complex_states.real, complex_states.imag], -1), real_states,
                               rtol=0, atol=1e-12)


def test_min_gru_by_scan_equals_a_step_by_step_reference():
    g = _gen(4)
    X = torch.randn(33, 5, generator=g, dtype=torch.float64)
    G, V = torch.randn(4, 5, generator=g, dtype=torch.float64), torch.randn(4, 5, generator=g, dtype=torch.float64)
    z, expected = torch.zeros(4, dtype=torch.float64), []
    for x in X:
        keep = torch.sigmoid(G @ x)
        z = keep * z + (1 - keep) * (V @ x)
        expected.append(z)
    torch.testing.assert_close(scan.min_gru(X, G, V), torch.stack(expected), rtol=0, atol=1e-13)
    torch.testing.assert_close(scan.min_gru(X, G, V, method="loop"), torch.stack(expected), rtol=0, atol=1e-13)


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="same shape"):
        scan.parallel_scan(torch.ones(4), torch.ones(5))
    with pytest.raises(ValueError, match="at least one step"):
        scan.linear_recurrence(torch.ones(0), torch.ones(0))
    with pytest.raises(ValueError, match="z0"):
        scan.parallel_scan(torch.ones(4, 2), torch.ones(4, 2), torch.ones(3))
    with pytest.raises(TypeError, match="a must hold floating-point"):
        scan.parallel_scan(torch.ones(4, dtype=torch.long), torch.ones(4))
    with pytest.raises(ValueError, match="r must lie"):
        scan.nu_from_modulus(torch.tensor([0.5, 1.0]))
    with pytest.raises(ValueError, match="r must be <"):
        scan.half_life(1.0)
    with pytest.raises(TypeError, match="complex"):
        scan.rotation_scaling_blocks(torch.ones(3))
    with pytest.raises(ValueError, match="method"):
        scan.min_gru(torch.ones(3, 2), torch.ones(1, 2), torch.ones(1, 2), method="fast")
