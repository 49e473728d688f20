"""Tests of dlbook.sharpness: Hessian-vector products, power iteration and Dinh et al.'s rescaling."""
import pytest
import torch
from torch import nn

from dlbook import nets, sharpness
from dlbook.runtime import generator


def _problem(seed=0):
    g = generator(seed)
    X = torch.randn(30, 3, generator=g, dtype=torch.float64)
    y = torch.sin(X.sum(1, keepdim=True))
    model = nets.mlp((3, 6, 1), seed=seed, dtype=torch.float64)
    return model, X, y


def _loss(model, X, y):
    return lambda: ((model(X) - y) ** 2).mean()


def _full_hessian(model, X, y):
    """The Hessian of the same loss over all parameters flattened, by torch.autograd.functional."""
    named = dict(model.named_parameters())
    sizes = [p.numel() for p in named.values()]

    def loss_flat(theta):
        chunks = torch.split(theta, sizes)
        params = {name: c.reshape(p.shape) for (name, p), c in zip(named.items(), chunks)}
        return ((torch.func.functional_call(model, params, (X,)) - y) ** 2).mean()
    return torch.autograd.functional.hessian(loss_flat, torch.cat([p.detach().reshape(-1) for p in named.values()]))


@pytest.mark.parametrize("seed", [0, 1])
def test_hvp_and_top_eigenvalue_match_the_full_hessian(seed):
    model, X, y = _problem(seed)
    H = _full_hessian(model, X, y)
    params = list(model.parameters())
    v = torch.randn(H.shape[0], generator=generator(5), dtype=torch.float64)
    chunks = torch.split(v, [p.numel() for p in params])
    vectors = [c.reshape(p.shape) for c, p in zip(chunks, params)]
    hv = sharpness.hessian_vector_product(_loss(model, X, y), params, vectors)
    torch.testing.assert_close(torch.cat([h.reshape(-1) for h in hv]), H @ v, rtol=1e-10, atol=1e-12)
    top = torch.linalg.eigvalsh(H).abs().max().item()
    got = sharpness.top_hessian_eigenvalue(_loss(model, X, y), params, iterations=2000, tol=1e-13)
    assert abs(got) == pytest.approx(top, rel=1e-6)


def test_rescaling_keeps_the_function_and_changes_the_sharpness():
    model, X, y = _problem(0)
    before = [p.detach().clone() for p in model.parameters()]
    sharp = []
    for alpha in (1.0, 5.0, 25.0):
        scaled = sharpness.rescale_relu_layers(model, 0, alpha)
        torch.testing.assert_close(scaled(X), model(X), rtol=1e-12, atol=1e-12)
        sharp.append(sharpness.top_hessian_eigenvalue(_loss(scaled, X, y), list(scaled.parameters()),
                                                      iterations=2000, tol=1e-12))
    assert sharp[2] > 10 * sharp[0] and sharp[1] > sharp[0]          # second layer's curvature grows like α²
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))      # the original is untouched


def test_bad_inputs():
    model, X, y = _problem(0)
    params = list(model.parameters())
    with pytest.raises(TypeError, match="loss_fn"):
        sharpness.hessian_vector_product(3.0, params, params)
    with pytest.raises(ValueError, match="vectors"):
        sharpness.hessian_vector_product(_loss(model, X, y), params, params[:1])
    with pytest.raises(TypeError, match="params"):
        sharpness.top_hessian_eigenvalue(_loss(model, X, y), [torch.zeros(2)])
    with pytest.raises(ValueError, match="alpha"):
        sharpness.rescale_relu_layers(model, 0, 0.0)
    with pytest.raises(ValueError, match="layer"):
        sharpness.rescale_relu_layers(model, 1, 2.0)
    with pytest.raises(ValueError, match="only Linear and ReLU"):
        sharpness.rescale_relu_layers(nets.mlp((3, 4, 1), activation="tanh"), 0, 2.0)
    with pytest.raises(TypeError, match="model"):
        sharpness.rescale_relu_layers(nn.Linear(2, 2), 0, 2.0)
