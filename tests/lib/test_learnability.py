"""Tests of dlbook.learnability: cosine landscape, tuples, PWL conditioning, staircase."""
import math

import pytest
import torch

from dlbook import learnability as L
from dlbook import nets, quadratics

V = torch.tensor([2.0, 2.0], dtype=torch.float64)


# --- cosine landscape ------------------------------------------------------------------------

def test_cosine_loss_matches_monte_carlo_and_known_values():
    assert L.cosine_loss(V, V).item() == pytest.approx(0.0, abs=1e-15)
    assert L.cosine_loss(torch.zeros(2), V).item() == pytest.approx(1.5 - 2 * math.exp(-4) + 0.5 * math.exp(-16))
    w = torch.tensor([0.7, -0.3], dtype=torch.float64)
    mc, se = L.cosine_loss_mc(w, V, 200_000, seed=2)
    assert L.cosine_loss_mc(w, V, 200_000, seed=2).standard_error == se
    assert abs(L.cosine_loss(w, V).item() - mc) < 4 * se


def test_cosine_grad_matches_autograd_and_batches():
    W = torch.randn(5, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0)).requires_grad_()
    v = torch.tensor([1.0, -0.5, 2.0], dtype=torch.float64)
    L.cosine_loss(W, v).sum().backward()
    assert torch.allclose(L.cosine_grad(W.detach(), v), W.grad, atol=1e-12)


def test_cosine_hessian_at_minimum_matches_the_closed_form_and_saddle_is_indefinite():
    # At w = v: I + e^{-16} (31 u u^T - (I - u u^T)) with u = v / |v| (the two far bumps).
    u = V / V.norm()
    exact = torch.eye(2, dtype=torch.float64) + math.exp(-16) * (32 * torch.outer(u, u) - torch.eye(2))
    assert torch.allclose(L.cosine_hessian(V, V), exact, atol=1e-14)
    saddle = 2 / math.sqrt(3) * torch.tensor([1.0, -1.0], dtype=torch.float64)
    eig = torch.linalg.eigvalsh(L.cosine_hessian(saddle, V))
    assert eig[0] < 0 < eig[1]


def test_target_variance_decays_with_radius():
    values = [L.target_variance(5, r, num_targets=2000) for r in (2, 4, 6)]
    assert values[0] > 100 * values[1] > 100 * 100 * values[2]


# --- tuples ----------------------------------------------------------------------------------

def test_tuple_data_labels_are_products():
    Z, items, labels = L.tuple_data(50, 3, dim=4, seed=1)
    assert Z.shape == (50, 3, 4) and items.shape == (50, 3)
    assert torch.equal(labels, items.prod(dim=1))
    assert torch.equal(items, L.tuple_data(50, 3, dim=4, seed=1).items)


def test_tuple_network_is_the_scorer_and_head_of_nets_mlp():
    p = L.tuple_network(3, dim=4, hidden=5, head=6, seed=2)
    scorer, head = nets.mlp((4, 5, 1), seed=2), nets.mlp((3, 6, 1), seed=3)
    Z = torch.randn(7, 3, 4, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        expected = head(torch.sigmoid(scorer(Z)[..., 0]))[..., 0]
    assert torch.allclose(L._tuple_output(p, Z), expected, atol=1e-6)


def test_item_grad_snr_vanishes_end_to_end_only_and_the_naive_estimate_is_biased():
    end_to_end = L.item_grad_snr(3, False, num_batches=100)
    assert abs(end_to_end.snr) < 4 * end_to_end.standard_error
    # The naive mean of ||batch mean||^2 is off by tr(Cov) / batch_size, that is 1 / batch_size in SNR units.
    assert end_to_end.naive == pytest.approx(end_to_end.snr + 1 / 100, rel=0.3)
    assert L.item_grad_snr(3, True, num_batches=100).snr > 0.01


def test_item_grad_snr_is_unbiased_where_the_mean_is_known():
    """With the decomposition loss the pooled estimate over many samples is the reference."""
    small = L.item_grad_snr(2, True, num_batches=400, batch_size=10)
    large = L.item_grad_snr(2, True, num_batches=40, batch_size=100)
    assert abs(small.snr - large.snr) < 4 * math.hypot(small.standard_error, large.standard_error)
    assert small.naive - small.snr > 5 * small.standard_error


def test_train_tuples_shapes():
    runs = L.train_tuples((1, 2), steps=20, eval_every=10, test_size=100)
    assert runs.ks == (1, 2) and runs.steps.tolist() == [0, 10, 20]
    assert runs.end_to_end.shape == runs.decomposed.shape == (2, 3)
    # Both nets of one k start from the same weights.
    assert torch.equal(runs.end_to_end[:, 0], runs.decomposed[:, 0])


# --- conditioning ----------------------------------------------------------------------------

def test_second_difference_is_inverse_of_integration():
    for n in (1, 2, 3, 10):
        assert torch.equal(L.integration_matrix(n) @ L.second_difference_matrix(n), torch.eye(n, dtype=torch.float64))


def test_pwl_curves_structure():
    p, f = L.pwl_curves(20, 30, 3, seed=0)
    assert torch.equal(L.pwl_curves(20, 30, 3, seed=0).curves, f)
    assert torch.equal((p[:, 1:] != 0).sum(dim=1), torch.full((20,), 3))
    assert torch.allclose(f, p @ L.integration_matrix(30).T)
    patches = L.patch_features(f)
    assert patches.shape == (20 * 28, 3)
    assert torch.equal(patches[0], torch.stack([f[0, 2], f[0, 1], f[0, 0]]))


def test_condition_number_and_whitening():
    C = torch.tensor([[4.0, 1.0], [1.0, 2.0]], dtype=torch.float64)
    assert quadratics.condition_number(C) == pytest.approx(torch.linalg.cond(C).item())
    R = L.whitening(C)
    assert torch.allclose(R @ C @ R, torch.eye(2, dtype=torch.float64), atol=1e-12)


def test_gd_least_squares_whitened_converges_in_one_step():
    A = torch.randn(200, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0)) @ torch.diag(
        torch.tensor([1.0, 10.0, 100.0], dtype=torch.float64))
    b = A @ torch.tensor([1.0, -2.0, 1.0], dtype=torch.float64)
    gaps = L.gd_least_squares(A, b, 50)
    assert gaps.shape == (50,) and gaps[-1] < gaps[0] <= 1
    C = A.T @ A / len(A)
    assert L.gd_least_squares(A @ L.whitening(C), b, 1)[0] < 1e-12


# --- flat activations ------------------------------------------------------------------------

def test_staircase_gradients():
    z = torch.tensor([0.3, 1.7, -2.2], requires_grad=True)
    L.staircase(z).sum().backward()
    assert torch.equal(z.grad, torch.zeros(3))
    z.grad = None
    out = L.staircase(z, straight_through=True)
    out.sum().backward()
    assert torch.equal(out, torch.floor(z.detach())) and torch.equal(z.grad, torch.ones(3))


def test_train_staircase_plain_stays_forward_only_converges():
    plain = L.train_staircase(False, steps=50)
    assert torch.all(plain == plain[0])
    assert L.train_staircase(True, steps=300)[-1] < 0.05


# --- bad input -------------------------------------------------------------------------------

def test_bad_inputs_raise_clear_errors():
    with pytest.raises(ValueError, match="w"):
        L.cosine_loss(torch.zeros(3), V)
    with pytest.raises(TypeError, match="v"):
        L.cosine_loss(torch.zeros(2), "v")
    with pytest.raises(ValueError, match="radius"):
        L.target_variance(3, 0.0)
    with pytest.raises(TypeError, match="decompose"):
        L.item_grad_snr(2, "yes")
    with pytest.raises(ValueError, match="k"):
        L.tuple_data(10, 0)
    with pytest.raises(ValueError, match="n"):
        L.pwl_curves(5, n=5)
    with pytest.raises(ValueError, match="C"):
        L.whitening(-torch.eye(2))
    with pytest.raises(ValueError, match="f"):
        L.patch_features(torch.zeros(2, 2))
    with pytest.raises(TypeError, match="straight_through"):
        L.train_staircase(1)
    with pytest.raises(ValueError, match="steps"):
        L.gd_least_squares(torch.eye(2), torch.ones(2), 0)
    with pytest.raises(ValueError, match="A and b"):
        L.gd_least_squares(torch.ones(5, 2, dtype=torch.float64), torch.ones(4, dtype=torch.float64), 3)
    with pytest.raises(ValueError, match="b must have 1"):
        L.gd_least_squares(torch.ones(5, 2, dtype=torch.float64), torch.ones(5, 1, dtype=torch.float64), 3)
    with pytest.raises(ValueError, match="A must have at least as many rows"):
        L.gd_least_squares(torch.ones(1, 2, dtype=torch.float64), torch.ones(1, dtype=torch.float64), 3)
    with pytest.raises(TypeError, match="A"):
        L.gd_least_squares(torch.ones(5, 2, dtype=torch.long), torch.ones(5), 3)
    with pytest.raises(ValueError, match="C must be a square"):
        L.whitening(torch.ones(2, 3))
    with pytest.raises(ValueError, match="w must be a single vector"):
        L.cosine_hessian(torch.zeros(3, 2), V)
    with pytest.raises(TypeError, match="z"):
        L.staircase(torch.ones(3, dtype=torch.long))
    with pytest.raises(ValueError, match="ks"):
        L.train_tuples((1, 0), steps=1)
    with pytest.raises(ValueError, match="hidden"):
        L.tuple_network(2, hidden=0)
    with pytest.raises(TypeError, match="dtype"):
        L.integration_matrix(4, dtype=torch.int64)
    with pytest.raises(TypeError, match="device"):
        L.pwl_curves(3, device=3)
    with pytest.raises(TypeError, match="direction_seed"):
        L.tuple_data(3, 2, direction_seed="u")
