"""Tests of dlbook.parity: the hypercube, parities, FWHT, per-sample/per-target gradients, variance, training."""
import math

import pytest
import torch
from torch import nn

from dlbook import parity

# --- data ------------------------------------------------------------------------------------

def test_all_inputs_order_and_values():
    X = parity.all_inputs(3)
    assert X.shape == (8, 3) and X.dtype == torch.float64
    assert X[0].tolist() == [1, 1, 1] and X[1].tolist() == [1, 1, -1] and X[-1].tolist() == [-1, -1, -1]
    assert len({tuple(r) for r in X.tolist()}) == 8


def test_random_inputs_are_pm1_and_seeded():
    a, b = parity.random_inputs(100, 7, seed=3), parity.random_inputs(100, 7, seed=3)
    assert torch.equal(a, b) and set(a.unique().tolist()) == {-1.0, 1.0}


def test_parity_matches_definition_and_stacks():
    X = parity.all_inputs(4)
    mask = parity.subset_mask(4, [0, 2])
    assert torch.equal(parity.parity(X, mask), X[:, 0] * X[:, 2])
    masks = torch.stack([mask, parity.subset_mask(4, []), parity.subset_mask(4, [1, 2, 3])])
    Y = parity.parity(X, masks)
    assert Y.shape == (3, 16)
    assert torch.equal(Y[1], torch.ones(16, dtype=X.dtype))
    assert torch.equal(Y[2], X[:, 1] * X[:, 2] * X[:, 3])


def test_random_subset_has_k_elements():
    mask = parity.random_subset(10, 4, seed=1)
    assert mask.dtype == torch.bool and int(mask.sum()) == 4


def test_character_matrix_orthonormal_and_fwht_matches_dense():
    for d in (1, 4, 8):
        H = parity.character_matrix(d)
        assert torch.equal(H @ H.T, 2**d * torch.eye(2**d, dtype=H.dtype))
        A = torch.randn(2**d, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(d))
        assert torch.allclose(parity.fwht(A), H @ A, atol=1e-10)
    v = torch.randn(16, dtype=torch.float64)
    assert torch.allclose(parity.fwht(v), parity.character_matrix(4) @ v)


def test_fwht_equals_scipy_hadamard():
    scipy_linalg = pytest.importorskip("scipy.linalg")
    A = torch.randn(32, 2, dtype=torch.float64)
    H = torch.tensor(scipy_linalg.hadamard(32), dtype=torch.float64)
    assert torch.allclose(parity.fwht(A), H @ A, atol=1e-10)


# --- gradients -------------------------------------------------------------------------------

def _autograd_output_grad(model, x):
    model.zero_grad()
    model(x[None]).sum().backward()
    return torch.cat([p.grad.reshape(-1) for p in model.parameters()])


def test_per_sample_grads_match_autograd():
    model = parity.make_mlp(5, width=7, depth=2, seed=1)
    X = parity.random_inputs(6, 5, dtype=torch.float64)
    G = parity.per_sample_grads(model, X)
    assert G.shape == (6, parity.num_parameters(model))
    for i in range(6):
        assert torch.allclose(G[i], _autograd_output_grad(model, X[i]), atol=1e-12)


@pytest.mark.parametrize("loss", ["square", "hinge"])
def test_per_target_grads_match_autograd(loss):
    model = parity.make_mlp(4, width=6, seed=2)
    X = parity.all_inputs(4)
    Y = parity.character_matrix(4)[[0, 3, 9]]
    grads = parity.per_target_grads(model, X, Y, loss=loss)
    for row, y in zip(grads, Y):
        model.zero_grad()
        p_hat = model(X).reshape(-1)
        value = 0.5 * ((p_hat - y) ** 2).mean() if loss == "square" else torch.relu(1 - y * p_hat).mean()
        value.backward()
        assert torch.allclose(row, torch.cat([p.grad.reshape(-1) for p in model.parameters()]), atol=1e-12)


def test_family_gradients_variance_and_identity_agree_with_brute_force():
    for d, depth in ((3, 1), (6, 2)):
        model = parity.make_mlp(d, width=16, depth=depth, seed=d)
        brute = parity.per_target_grads(model, parity.all_inputs(d), parity.character_matrix(d))
        assert torch.allclose(parity.family_gradients(model, d), brute, atol=1e-12)
        brute_var = ((brute - brute.mean(0)) ** 2).sum(1).mean().item()
        stats = parity.variance_identity(model, d)
        assert math.isclose(parity.family_variance(model, d), brute_var, rel_tol=1e-10)
        assert math.isclose(stats["identity"], brute_var, rel_tol=1e-10)
        assert brute_var <= stats["bound"] == pytest.approx(stats["G2"] / 2**d)


# --- training --------------------------------------------------------------------------------

def test_stacked_networks_follow_lone_torch_networks_exactly():
    """Stacked nets trained together take the same Adam steps as separate nn.Sequential nets."""
    gen = torch.Generator().manual_seed(0)
    d, width, num = 5, 12, 3
    stacked = parity._init_group(num, d, width, gen, torch.float64, "cpu")
    lone = []
    for m in range(num):
        net = nn.Sequential(nn.Linear(d, width), nn.ReLU(), nn.Linear(width, 1)).double()
        with torch.no_grad():
            net[0].weight.copy_(stacked[0][m]); net[0].bias.copy_(stacked[1][m])
            net[2].weight.copy_(stacked[2][m][None]); net[2].bias.copy_(stacked[3][m][None])
        lone.append((net, torch.optim.Adam(net.parameters(), lr=0.01)))
    opt = torch.optim.Adam(stacked, lr=0.01)
    for step in range(5):
        X = parity.random_inputs(num * 8, d, seed=step, dtype=torch.float64).reshape(num, 8, d)
        y = X[..., 0] * X[..., 1]
        opt.zero_grad()
        torch.relu(1 - y * parity.ensemble_forward(stacked, X)).mean(dim=1).sum().backward()
        opt.step()
        for m, (net, net_opt) in enumerate(lone):
            net_opt.zero_grad()
            torch.relu(1 - y[m] * net(X[m]).reshape(-1)).mean().backward()
            net_opt.step()
    for m, (net, _) in enumerate(lone):
        assert torch.allclose(net[0].weight, stacked[0][m], atol=1e-12)
        assert torch.allclose(net[2].weight.reshape(-1), stacked[2][m], atol=1e-12)


def test_train_parities_learns_a_small_parity_and_is_deterministic():
    runs = parity.train_parities([(6, 2), (8, 8)], steps=300, eval_every=100, test_size=500)
    again = parity.train_parities([(6, 2), (8, 8)], steps=300, eval_every=100, test_size=500)
    assert torch.equal(runs.accuracy, again.accuracy)
    assert runs.accuracy.shape == (2, 4) and runs.steps.tolist() == [0, 100, 200, 300]
    assert runs.final(6, 2) >= 0.95
    assert runs.steps_to(6, 2) is not None and runs.steps_to(8, 8, 1.01) is None


# --- bad input -------------------------------------------------------------------------------

def test_bad_inputs_raise_clear_errors():
    with pytest.raises(ValueError, match="d"):
        parity.all_inputs(0)
    with pytest.raises(TypeError, match="d"):
        parity.all_inputs("3")
    with pytest.raises(ValueError, match="k"):
        parity.random_subset(3, 4)
    with pytest.raises(ValueError, match="subset"):
        parity.subset_mask(3, [0, 5])
    with pytest.raises(ValueError, match="mask"):
        parity.parity(parity.all_inputs(3), torch.ones(4, dtype=torch.bool))
    with pytest.raises(ValueError, match="X"):
        parity.parity(torch.zeros(2, 3), torch.ones(3, dtype=torch.bool))
    with pytest.raises(ValueError, match="A"):
        parity.fwht(torch.ones(6, 2))
    with pytest.raises(TypeError, match="model"):
        parity.per_sample_grads("net", parity.all_inputs(2))
    with pytest.raises(ValueError, match="loss"):
        parity.per_target_grads(parity.make_mlp(2), parity.all_inputs(2), torch.ones(1, 4), loss="l1")
    with pytest.raises(ValueError, match="Y"):
        parity.per_target_grads(parity.make_mlp(2), parity.all_inputs(2), torch.ones(1, 3))
    with pytest.raises(ValueError, match="optimizer"):
        parity.train_parities([(4, 2)], optimizer="rmsprop")
    with pytest.raises(ValueError, match="k in configs"):
        parity.train_parities([(4, 5)])
    with pytest.raises(TypeError, match="configs"):
        parity.train_parities(None)
    with pytest.raises(ValueError, match="lr"):
        parity.train_parities([(4, 2)], lr=-1.0)
