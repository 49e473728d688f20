"""Tests of dlbook.normalization against torch.nn (Chapter 4), in float64."""
import pytest
import torch

from dlbook import normalization as norm


def _batches(num=4, rows=16, features=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [3.0 + 2.0 * torch.randn(rows, features, generator=g, dtype=torch.float64) for _ in range(num)]


def test_batch_norm_matches_torch_in_training_and_eval_with_running_stats():
    ours = norm.BatchNorm1d(5, dtype=torch.float64)
    ref = torch.nn.BatchNorm1d(5, dtype=torch.float64)
    with torch.no_grad():
        for module in (ours, ref):
            module.weight.copy_(torch.linspace(0.5, 2.0, 5))
            module.bias.copy_(torch.linspace(-1.0, 1.0, 5))
    for x in _batches():
        torch.testing.assert_close(ours(x), ref(x), rtol=0, atol=1e-12)
    torch.testing.assert_close(ours.running_mean, ref.running_mean, rtol=0, atol=1e-12)
    torch.testing.assert_close(ours.running_var, ref.running_var, rtol=0, atol=1e-12)
    ours.eval(), ref.eval()
    x = _batches(1, seed=9)[0]
    torch.testing.assert_close(ours(x), ref(x), rtol=0, atol=1e-12)
    before = ours.running_mean.clone()
    ours(x)
    assert torch.equal(ours.running_mean, before)  # eval mode never updates the statistics


def test_batch_norm_gradients_match_torch():
    x = _batches(1)[0].requires_grad_(True)
    x_ref = x.detach().clone().requires_grad_(True)
    ours, ref = norm.BatchNorm1d(5, dtype=torch.float64), torch.nn.BatchNorm1d(5, dtype=torch.float64)
    upstream = torch.randn(16, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    (ours(x) * upstream).sum().backward()
    (ref(x_ref) * upstream).sum().backward()
    torch.testing.assert_close(x.grad, x_ref.grad, rtol=0, atol=1e-12)
    torch.testing.assert_close(ours.weight.grad, ref.weight.grad, rtol=0, atol=1e-12)


def test_batch_norm_training_output_is_standardized_per_feature():
    out = norm.BatchNorm1d(5, affine=False, dtype=torch.float64)(_batches(1, rows=64)[0])
    assert out.mean(0).abs().max() < 1e-12
    assert (out.var(0, unbiased=False) - 1).abs().max() < 1e-4  # eps = 1e-5 shrinks it a little


def test_functional_batch_norm_eval_uses_running_stats():
    x = _batches(1)[0]
    result = norm.batch_norm(x, torch.ones(5), torch.zeros(5), torch.full((5,), 3.0), torch.full((5,), 4.0),
                             training=False)
    out, m, v = result
    assert result.output is out and result.running_mean is m and result.running_var is v
    torch.testing.assert_close(out, (x - 3) / torch.sqrt(torch.tensor(4.0 + 1e-5, dtype=torch.float64)))
    assert torch.equal(m, torch.full((5,), 3.0)) and torch.equal(v, torch.full((5,), 4.0))


def test_layer_norm_matches_torch_and_ignores_the_batch():
    ref = torch.nn.LayerNorm(5, dtype=torch.float64)
    ours = norm.LayerNorm(5, dtype=torch.float64)
    with torch.no_grad():
        for module in (ours, ref):
            module.weight.copy_(torch.linspace(0.5, 2.0, 5))
            module.bias.copy_(torch.linspace(-1.0, 1.0, 5))
    x = _batches(1)[0]
    torch.testing.assert_close(ours(x), ref(x), rtol=0, atol=1e-12)
    torch.testing.assert_close(ours(x[:1]), ref(x)[:1], rtol=0, atol=1e-12)
    x3 = torch.randn(2, 3, 5, dtype=torch.float64)
    torch.testing.assert_close(ours(x3), ref(x3), rtol=0, atol=1e-12)


def test_weight_norm_matches_torch_parametrization():
    linear = torch.nn.Linear(6, 4, dtype=torch.float64)
    ours = norm.WeightNormLinear(linear.weight, linear.bias)
    ref = torch.nn.utils.parametrizations.weight_norm(torch.nn.Linear(6, 4, dtype=torch.float64))
    with torch.no_grad():
        ref.parametrizations.weight.original0.copy_(ours.g[:, None])
        ref.parametrizations.weight.original1.copy_(ours.v)
        ref.bias.copy_(linear.bias)
    torch.testing.assert_close(ours.weight, ref.weight, rtol=0, atol=1e-14)
    torch.testing.assert_close(ours.weight, linear.weight, rtol=0, atol=1e-14)
    x = torch.randn(3, 6, dtype=torch.float64)
    torch.testing.assert_close(ours(x), ref(x), rtol=0, atol=1e-14)


def test_weight_norm_closed_form_gradients_equal_autograd_and_are_orthogonal_to_v():
    g_ = torch.Generator().manual_seed(3)
    v = torch.randn(4, 6, dtype=torch.float64, generator=g_).requires_grad_(True)
    g = torch.rand(4, dtype=torch.float64, generator=g_).add(0.5).requires_grad_(True)
    upstream = torch.randn(4, 6, dtype=torch.float64, generator=g_)
    (norm.weight_norm(v, g) * upstream).sum().backward()
    grads = norm.weight_norm_gradients(v.detach(), g.detach(), upstream)
    grad_v, grad_g = grads
    assert grads.v is grad_v and grads.g is grad_g
    torch.testing.assert_close(grad_v, v.grad, rtol=0, atol=1e-14)
    torch.testing.assert_close(grad_g, g.grad, rtol=0, atol=1e-14)
    assert (grad_v * v.detach()).sum(1).abs().max() < 1e-13


@pytest.mark.parametrize("call,match", [
    (lambda: norm.BatchNorm1d(0), "num_features"),
    (lambda: norm.BatchNorm1d(3, momentum=2.0), "momentum"),
    (lambda: norm.BatchNorm1d(3)(torch.randn(4, 2)), "features"),
    (lambda: norm.BatchNorm1d(3)(torch.randn(1, 3)), "at least 2"),
    (lambda: norm.batch_norm(torch.randn(4, 3), torch.ones(2), torch.zeros(3), torch.zeros(3),
                             torch.ones(3), training=True), "weight"),
    (lambda: norm.batch_norm(torch.randn(4, 3), torch.ones(3), torch.zeros(3), torch.zeros(3),
                             torch.ones(3), training="yes"), "training"),
    (lambda: norm.layer_norm(torch.randn(4, 3), torch.ones(3), torch.zeros(3), eps=0.0), "eps"),
    (lambda: norm.weight_norm(torch.randn(4, 3), torch.ones(3)), "g"),
    (lambda: norm.weight_norm_gradients(torch.randn(4, 3), torch.ones(4), torch.randn(3, 4)), "grad_w"),
    (lambda: norm.layer_norm(torch.tensor(1.0), torch.ones(1), torch.zeros(1)), "x"),
    (lambda: norm.weight_norm(torch.ones(4, 3, dtype=torch.int64), torch.ones(4)), "v"),
    (lambda: norm.BatchNorm1d(3, dtype=torch.int64), "dtype"),
    (lambda: norm.LayerNorm(3, dtype=torch.int32), "dtype"),
])
def test_bad_arguments_are_named(call, match):
    with pytest.raises((TypeError, ValueError), match=match):
        call()


def test_integer_input_is_rejected():
    with pytest.raises(TypeError, match="x"):
        norm.BatchNorm1d(3)(torch.ones(4, 3, dtype=torch.int64))


def test_layer_norm_module_names_the_input_when_its_width_is_wrong():
    """LayerNorm(3) on a width-5 input blames x, not the weight the caller never passed."""
    with pytest.raises(ValueError, match=r"x must have 3 features.*\(2, 5\)"):
        norm.LayerNorm(3)(torch.ones(2, 5))
    with pytest.raises(TypeError, match="x"):
        norm.LayerNorm(3)(torch.ones(2, 3, dtype=torch.int64))
