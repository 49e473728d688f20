"""Tests of dlbook.parity: parities, the FWHT, per-sample/per-target gradients, variance, noise, training."""
import math

import pytest
import torch
from torch import nn

from dlbook import data, nets, parity


def cube(d):
    return data.hypercube(d, encoding="pm1", dtype=torch.float64)


def mlp(d, width, depth=1, seed=0):
    return nets.mlp((d,) + (width,) * depth + (1,), seed=seed, dtype=torch.float64)


# --- parities and the Walsh-Hadamard transform -----------------------------------------------

def test_parity_matches_definition_and_stacks():
    X = cube(4)
    mask = parity.subset_mask(4, [0, 2])
    assert torch.equal(parity.parity(X, mask), X[:, 0] * X[:, 2])
    masks = torch.stack([mask, parity.subset_mask(4, []), parity.subset_mask(4, [1, 2, 3])])
    Y = parity.parity(X, masks)
    assert Y.shape == (3, 16)
    assert torch.equal(Y[1], torch.ones(16, dtype=X.dtype))
    assert torch.equal(Y[2], X[:, 1] * X[:, 2] * X[:, 3])


def test_random_subset_has_k_elements_and_is_seeded():
    mask = parity.random_subset(10, 4, seed=1)
    assert mask.dtype == torch.bool and int(mask.sum()) == 4
    assert torch.equal(mask, parity.random_subset(10, 4, seed=1))


def test_character_matrix_rows_are_the_parities_of_the_index_bits():
    Phi = parity.character_matrix(3)
    X = cube(3)
    for row in range(8):
        subset = [i for i in range(3) if (row >> (2 - i)) & 1]      # MSB first, like the cube
        assert torch.equal(Phi[row], parity.parity(X, parity.subset_mask(3, subset)))


def test_character_matrix_orthonormal_and_fwht_matches_dense():
    for d in (1, 4, 8):
        Phi = parity.character_matrix(d)
        assert torch.equal(Phi @ Phi.T, 2**d * torch.eye(2**d, dtype=Phi.dtype))
        A = torch.randn(2**d, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(d))
        assert torch.allclose(parity.fwht(A), Phi @ A, atol=1e-10)
    v = torch.randn(16, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    assert torch.allclose(parity.fwht(v), parity.character_matrix(4) @ v)
    B = torch.randn(8, 2, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    assert torch.allclose(parity.fwht(B), torch.einsum("ij,jkl->ikl", parity.character_matrix(3), B))


def test_fwht_equals_scipy_hadamard():
    scipy_linalg = pytest.importorskip("scipy.linalg")
    A = torch.randn(32, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    Phi = torch.tensor(scipy_linalg.hadamard(32), dtype=torch.float64)
    assert torch.allclose(parity.fwht(A), Phi @ A, atol=1e-10)


# --- gradients -------------------------------------------------------------------------------

def _autograd_output_grad(model, x):
    model.zero_grad()
    model(x[None]).sum().backward()
    return torch.cat([p.grad.reshape(-1) for p in model.parameters()])


def test_per_sample_grads_match_autograd():
    model = mlp(5, 7, depth=2, seed=1)
    X = data.random_sign_patterns(6, 5, seed=0, dtype=torch.float64)
    G = parity.per_sample_grads(model, X)
    assert G.shape == (6, nets.num_parameters(model))
    for i in range(6):
        assert torch.allclose(G[i], _autograd_output_grad(model, X[i]), atol=1e-12)


def test_per_sample_grads_cast_float32_inputs_to_the_model_dtype():
    model = mlp(3, 4)
    assert parity.per_sample_grads(model, cube(3).float()).dtype == torch.float64


@pytest.mark.parametrize("loss", ["square", "hinge"])
def test_per_target_grads_match_autograd(loss):
    model = mlp(4, 6, seed=2)
    X = cube(4)
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
        model = mlp(d, 16, depth=depth, seed=d)
        brute = parity.per_target_grads(model, cube(d), parity.character_matrix(d))
        assert torch.allclose(parity.family_gradients(model, d), brute, atol=1e-12)
        brute_var = ((brute - brute.mean(0)) ** 2).sum(1).mean().item()
        stats = parity.variance_identity(model, d)
        assert math.isclose(parity.family_variance(model, d), brute_var, rel_tol=1e-10)
        assert math.isclose(stats.identity, brute_var, rel_tol=1e-10)
        assert brute_var <= stats.bound == pytest.approx(stats.G2 / 2**d)


def test_minibatch_gradient_noise_matches_the_exact_sampling_variance():
    """With replacement, E||g_B - grad F||^2 = tr Cov(per-sample loss gradient) / B."""
    d, batch = 5, 16
    model = mlp(d, 8, seed=3)
    mask = parity.subset_mask(d, [0, 3])
    X = cube(d)
    residual = (model(X).reshape(-1) - parity.parity(X, mask)).detach()
    per_sample = residual[:, None] * parity.per_sample_grads(model, X)       # loss gradient of each input
    exact = per_sample.var(dim=0, unbiased=False).sum().item() / batch
    measured = parity.minibatch_gradient_noise(model, mask, batch, num_batches=1000, seed=1)
    assert abs(measured.noise - exact) < 4 * measured.standard_error
    assert measured.population_norm2 == pytest.approx((per_sample.mean(0) ** 2).sum().item(), rel=1e-10)


def test_minibatch_gradient_noise_equals_autograd_on_each_batch():
    """The fast path (per-sample gradients, batch counts) against a plain loop of backward passes."""
    d, batch, num_batches = 4, 8, 6
    model = mlp(d, 5, seed=1)
    mask = parity.subset_mask(d, [1, 2])
    X = cube(d)

    def loss_grad(inputs):
        model.zero_grad()
        (0.5 * ((model(inputs).reshape(-1) - parity.parity(inputs, mask)) ** 2).mean()).backward()
        return torch.cat([p.grad.reshape(-1) for p in model.parameters()])

    population = loss_grad(X)
    indices = torch.randint(2**d, (num_batches, batch), generator=torch.Generator().manual_seed(5))
    deviations = torch.stack([((loss_grad(X[rows]) - population) ** 2).sum() for rows in indices])
    fast = parity.minibatch_gradient_noise(model, mask, batch, num_batches=num_batches, seed=5)
    assert fast.noise == pytest.approx(deviations.mean().item(), rel=1e-12)
    assert fast.standard_error == pytest.approx((deviations.std() / num_batches**0.5).item(), rel=1e-10)


# --- training --------------------------------------------------------------------------------

def test_stacked_networks_follow_lone_torch_networks_exactly():
    """Stacked nets trained together take the same Adam steps as separate nn.Sequential nets."""
    d, width, seeds = 5, 12, [4, 5, 6]
    stacked = parity._stacked_nets(d, width, seeds, torch.float64, "cpu")
    lone = []
    for seed in seeds:
        net = mlp(d, width, seed=seed)
        lone.append((net, torch.optim.Adam(net.parameters(), lr=0.01)))
    opt = torch.optim.Adam(stacked, lr=0.01)
    for step in range(5):
        X = data.random_sign_patterns(len(seeds) * 8, d, seed=step, dtype=torch.float64).reshape(len(seeds), 8, d)
        y = X[..., 0] * X[..., 1]
        opt.zero_grad()
        torch.relu(1 - y * parity.ensemble_forward(stacked, X)).mean(dim=1).sum().backward()
        opt.step()
        for m, (net, net_opt) in enumerate(lone):
            net_opt.zero_grad()
            torch.relu(1 - y[m] * net(X[m]).reshape(-1)).mean().backward()
            net_opt.step()
    for m, (net, _) in enumerate(lone):
        assert isinstance(net[0], nn.Linear)
        assert torch.allclose(net[0].weight, stacked[0][m], atol=1e-12)
        assert torch.allclose(net[2].weight.reshape(-1), stacked[2][m], atol=1e-12)


def test_train_parities_learns_a_small_parity_and_is_deterministic():
    runs = parity.train_parities([(6, 2), (8, 8)], steps=300, eval_every=100, test_size=500)
    again = parity.train_parities([(6, 2), (8, 8)], steps=300, eval_every=100, test_size=500)
    assert torch.equal(runs.accuracy, again.accuracy)
    assert runs.accuracy.shape == (2, 4) and runs.steps.tolist() == [0, 100, 200, 300]
    assert runs.at(6, 2) >= 0.95 and runs.at(6, 2, 150) == runs.curve(6, 2)[1].item()
    assert runs.steps_to(6, 2) is not None and runs.steps_to(8, 8, 1.01) is None


# --- bad input -------------------------------------------------------------------------------

def test_bad_inputs_raise_clear_errors():
    with pytest.raises(ValueError, match="k"):
        parity.random_subset(3, 4)
    with pytest.raises(ValueError, match="subset"):
        parity.subset_mask(3, [0, 5])
    with pytest.raises(ValueError, match="mask"):
        parity.parity(cube(3), torch.ones(4, dtype=torch.bool))
    with pytest.raises(ValueError, match="X"):
        parity.parity(torch.zeros(2, 3), torch.ones(3, dtype=torch.bool))
    with pytest.raises(ValueError, match="A"):
        parity.fwht(torch.ones(6, 2))
    with pytest.raises(TypeError, match="A"):
        parity.fwht(torch.ones(4, 2, dtype=torch.long))
    with pytest.raises(TypeError, match="model"):
        parity.per_sample_grads("net", cube(2))
    with pytest.raises(ValueError, match="X must have 3 columns"):
        parity.per_sample_grads(mlp(3, 4), cube(4))
    with pytest.raises(TypeError, match="X"):
        parity.per_sample_grads(mlp(2, 4), torch.ones(4, 2, dtype=torch.long))
    with pytest.raises(ValueError, match="d must equal the model's input width 3"):
        parity.family_variance(mlp(3, 4), 4)
    with pytest.raises(ValueError, match="d must equal"):
        parity.variance_identity(mlp(3, 4), 2)
    with pytest.raises(ValueError, match="loss"):
        parity.per_target_grads(mlp(2, 3), cube(2), torch.ones(1, 4), loss="l1")
    with pytest.raises(ValueError, match="Y"):
        parity.per_target_grads(mlp(2, 3), cube(2), torch.ones(1, 3))
    with pytest.raises(TypeError, match="mask"):
        parity.minibatch_gradient_noise(mlp(2, 3), torch.ones(2), 4)
    with pytest.raises(ValueError, match="d must equal"):
        parity.minibatch_gradient_noise(mlp(2, 3), torch.ones(3, dtype=torch.bool), 4)
    with pytest.raises(ValueError, match="optimizer"):
        parity.train_parities([(4, 2)], optimizer="rmsprop")
    with pytest.raises(ValueError, match="k in configs"):
        parity.train_parities([(4, 5)])
    with pytest.raises(ValueError, match="repeat"):
        parity.train_parities([(4, 2), (4, 2)])
    with pytest.raises(TypeError, match="configs"):
        parity.train_parities(None)
    with pytest.raises(ValueError, match="lr"):
        parity.train_parities([(4, 2)], lr=-1.0)
    with pytest.raises(TypeError, match="device"):
        parity.train_parities([(4, 2)], device=0.5)
    with pytest.raises(TypeError, match="device"):
        parity.random_subset(4, 2, device=[])
    runs = parity.train_parities([(4, 2)], steps=2, test_size=10)
    with pytest.raises(ValueError, match="configurations"):
        runs.at(5, 2)
