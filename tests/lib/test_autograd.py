"""Tests of dlbook.autograd: values and gradients against torch.autograd and finite differences."""
import math

import pytest
import torch

from dlbook import autograd, nets
from dlbook.autograd import Tensor, cross_entropy, unbroadcast

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA device"))]


def _inputs(shapes, seed, positive=()):
    gen = torch.Generator().manual_seed(seed)
    inputs = [torch.randn(shape, generator=gen, dtype=torch.float64) for shape in shapes]
    return [x.abs() + 0.5 if i in positive else x for i, x in enumerate(inputs)]


def _compare(fn, shapes, seed, *, positive=(), atol=1e-10):
    """Values and gradients of fn on engine Tensors against torch.autograd (dlbook.autograd.gradient_gap)."""
    gap = autograd.gradient_gap(fn, fn, _inputs(shapes, seed, positive), seed=seed)
    assert gap <= atol, gap


UNARY = {
    "exp": lambda a: a.exp(), "log": lambda a: a.log(), "relu": lambda a: a.relu(),
    "tanh": lambda a: a.tanh(), "sigmoid": lambda a: a.sigmoid(), "neg": lambda a: -a,
    "square": lambda a: a**2, "rsqrt": lambda a: a**-0.5, "sum": lambda a: a.sum(),
    "mean": lambda a: a.mean(), "sum_dim1": lambda a: a.sum(1), "mean_dim0_keep": lambda a: a.mean(0, keepdim=True),
    "sum_dims": lambda a: a.sum((0, 2)), "reshape": lambda a: a.reshape(-1, 2) * 3.0,
}


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("seed", range(3))
def test_unary_ops_match_torch(name, seed):
    _compare(UNARY[name], [(3, 4, 2)], seed, positive=(0,))


BINARY_SHAPES = [((3, 4), (3, 4)), ((3, 4), (4,)), ((3, 4), (3, 1)), ((2, 1, 4), (3, 1)),
                 ((1,), (2, 3)), ((5, 1, 1), (1, 4, 2)), ((), (3, 2))]
BINARY = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
          "div": lambda a, b: a / b, "mixed": lambda a, b: (a * b - b / a).tanh() * a + 1.0}


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("shapes", BINARY_SHAPES, ids=str)
def test_broadcasting_binary_ops_match_torch(name, shapes):
    _compare(BINARY[name], list(shapes), seed=len(shapes[0]) + 7 * len(shapes[1]), positive=(0, 1))


@pytest.mark.parametrize("shapes", [((5, 3), (3, 4)), ((2, 5, 3), (3, 4)), ((5, 3), (2, 3, 4)),
                                    ((2, 1, 5, 3), (3, 3, 2))], ids=str)
def test_matmul_including_batched_broadcasting(shapes):
    _compare(lambda a, b: (a @ b).relu(), list(shapes), seed=3)


def test_python_numbers_on_either_side():
    _compare(lambda a: 2.0 - a / 4 + 3 * a - 1 / (a + 5.0) + (1 + a), [(4,)], seed=1, positive=(0,))


def test_reused_node_accumulates_gradient_from_every_use():
    # x feeds y three times: the gradient must add up all paths (the topological order matters).
    _compare(lambda x: ((x * x).exp() + x.tanh() * (x * x)).sum() + (x * x).mean(), [(6,)], seed=2)


@pytest.mark.parametrize("seed", range(4))
def test_cross_entropy_matches_torch(seed):
    gen = torch.Generator().manual_seed(seed)
    logits = 3 * torch.randn(9, 5, generator=gen, dtype=torch.float64)
    targets = torch.randint(5, (9,), generator=gen)
    t = logits.clone().requires_grad_()
    e = Tensor(logits, requires_grad=True)
    reference = torch.nn.functional.cross_entropy(t, targets)
    ours = cross_entropy(e, targets)
    reference.backward()
    ours.backward()
    assert abs(ours.item() - reference.item()) < 1e-12
    assert torch.allclose(e.grad, t.grad, rtol=0, atol=1e-14)


def test_cross_entropy_is_stable_for_huge_logits():
    logits = Tensor(torch.tensor([[1000.0, 0.0, -1000.0], [-800.0, -800.0, -790.0]], dtype=torch.float64),
                    requires_grad=True)
    loss = cross_entropy(logits, torch.tensor([0, 1]))
    loss.backward()
    assert math.isfinite(loss.item()) and torch.isfinite(logits.grad).all()
    assert abs(loss.item() - 0.5 * (10 + math.log1p(2 * math.exp(-10)))) < 1e-9


@pytest.mark.parametrize("activation", ["relu", "tanh", "sigmoid"])
@pytest.mark.parametrize("device", DEVICES)
def test_mlp_matches_its_torch_copy(activation, device):
    net = autograd.MLP([7, 11, 6, 4], activation=activation, seed=3, device=device)
    reference = net.to_torch()
    gen = torch.Generator().manual_seed(0)
    X = torch.randn(13, 7, generator=gen, dtype=torch.float64).to(device)
    y = torch.randint(4, (13,), generator=gen).to(device)
    loss = cross_entropy(net(X), y)
    loss.backward()
    torch_loss = torch.nn.functional.cross_entropy(reference(X), y)
    torch_loss.backward()
    assert abs(loss.item() - torch_loss.item()) < 1e-12
    linears = [m for m in reference if isinstance(m, torch.nn.Linear)]
    for (W, b), linear in zip(net.layers, linears):
        assert torch.allclose(W.grad, linear.weight.grad.T, rtol=0, atol=1e-12)
        assert torch.allclose(b.grad, linear.bias.grad, rtol=0, atol=1e-12)


def test_mlp_init_matches_torch_linear_range_and_is_seeded():
    a, b = autograd.MLP([50, 20, 3], seed=1), autograd.MLP([50, 20, 3], seed=1)
    assert all(torch.equal(p.data, q.data) for p, q in zip(a.parameters(), b.parameters()))
    W = a.layers[0][0].data
    assert W.abs().max() <= 1 / math.sqrt(50) and W.abs().max() > 0.9 / math.sqrt(50)
    assert not torch.equal(W, autograd.MLP([50, 20, 3], seed=2).layers[0][0].data)


def test_gradients_match_finite_differences():
    net = autograd.MLP([4, 6, 3], activation="tanh", seed=5)
    gen = torch.Generator().manual_seed(5)
    X = torch.randn(8, 4, generator=gen, dtype=torch.float64)
    y = torch.randint(3, (8,), generator=gen)
    cross_entropy(net(X), y).backward()
    for W in (net.layers[0][0], net.layers[1][1]):
        def loss_at(value, W=W):
            saved, W.data = W.data, value
            try:
                return cross_entropy(net(X), y).item()
            finally:
                W.data = saved
        numeric = autograd.finite_difference_gradient(loss_at, W.data)
        assert ((numeric - W.grad).norm() / W.grad.norm()).item() < 1e-7


def test_finite_differences_of_a_known_function():
    x = torch.tensor([0.3, -1.2, 2.0], dtype=torch.float64)
    numeric = autograd.finite_difference_gradient(lambda v: (v**3).sum().item(), x)
    assert torch.allclose(numeric, 3 * x**2, atol=1e-8)


def test_unbroadcast_sums_over_added_and_stretched_dims():
    grad = torch.ones(2, 3, 4)
    assert torch.equal(unbroadcast(grad, (3, 1)), torch.full((3, 1), 8.0))
    assert torch.equal(unbroadcast(grad, (4,)), torch.full((4,), 6.0))
    assert torch.equal(unbroadcast(grad, (2, 3, 4)), grad)
    assert unbroadcast(grad, ()).item() == 24.0


def test_leaf_gradients_accumulate_and_interior_adjoints_are_kept():
    x = Tensor(torch.tensor([1.0, 2.0], dtype=torch.float64), requires_grad=True)
    hidden = x * 3.0
    loss = (hidden * hidden).sum()
    loss.backward()
    assert torch.equal(x.grad, torch.tensor([18.0, 36.0], dtype=torch.float64))
    assert torch.equal(hidden.grad, 2 * hidden.data)  # the adjoint of the intermediate result
    loss.backward()  # leaves accumulate, as in torch; interior adjoints start afresh
    assert torch.equal(x.grad, torch.tensor([36.0, 72.0], dtype=torch.float64))
    assert torch.equal(hidden.grad, 2 * hidden.data)


def test_constants_get_no_gradient():
    x = Tensor(torch.ones(2, 3))
    W = Tensor(torch.ones(3, 2), requires_grad=True)
    (x @ W).sum().backward()
    assert x.grad is None and W.grad is not None


def test_deep_graph_does_not_hit_the_recursion_limit():
    x = Tensor(torch.tensor(1.0, dtype=torch.float64), requires_grad=True)
    y = x
    for _ in range(5000):
        y = y * 1.0001
    y.backward()
    assert abs(x.grad.item() - 1.0001**5000) < 1e-9


def test_topological_order_puts_parents_first():
    a = Tensor(torch.ones(2), requires_grad=True)
    b = a.exp()
    c = b * a
    order = autograd.topological_order(c.sum())
    position = {id(node): i for i, node in enumerate(order)}
    assert position[id(a)] < position[id(b)] < position[id(c)]


# --- bad inputs -----------------------------------------------------------------------------

def test_bad_inputs_raise_clear_errors():
    x = Tensor(torch.ones(2, 3), requires_grad=True)
    with pytest.raises(TypeError, match="data"):
        Tensor("abc")
    with pytest.raises(TypeError, match="requires_grad"):
        Tensor(torch.ones(2), requires_grad=1)
    with pytest.raises(TypeError, match="combine"):
        x + "a"
    with pytest.raises(TypeError, match="exponent"):
        x ** torch.ones(1)
    with pytest.raises(ValueError, match="shape"):
        x.reshape(4, 2)
    with pytest.raises(TypeError, match="dim"):
        x.sum(dim=1.0)
    with pytest.raises(ValueError, match="matmul"):
        x @ Tensor(torch.ones(2, 2))
    with pytest.raises(ValueError, match="matmul"):
        x @ Tensor(torch.ones(3))
    with pytest.raises(ValueError, match="dim"):
        x.sum(dim=5)
    with pytest.raises(ValueError, match="grad"):
        (x * 2).backward()
    with pytest.raises(ValueError, match="grad"):
        (x * 2).backward(torch.ones(3))
    with pytest.raises(RuntimeError, match="requires_grad"):
        Tensor(torch.ones(1)).backward()
    with pytest.raises(ValueError, match="shape"):
        unbroadcast(torch.ones(2, 3), (4,))
    with pytest.raises(TypeError, match="grad"):
        unbroadcast([1.0], (1,))
    with pytest.raises(TypeError, match="root"):
        autograd.topological_order(torch.ones(1))


def test_bad_cross_entropy_and_mlp_arguments():
    logits = Tensor(torch.zeros(3, 4), requires_grad=True)
    with pytest.raises(TypeError, match="logits"):
        cross_entropy(torch.zeros(3, 4), torch.zeros(3, dtype=torch.long))
    with pytest.raises(ValueError, match="logits"):
        cross_entropy(Tensor(torch.zeros(3)), torch.zeros(3, dtype=torch.long))
    with pytest.raises(TypeError, match="targets"):
        cross_entropy(logits, torch.zeros(3))
    with pytest.raises(ValueError, match="targets"):
        cross_entropy(logits, torch.zeros(2, dtype=torch.long))
    with pytest.raises(ValueError, match="targets"):
        cross_entropy(logits, torch.tensor([0, 1, 4]))
    with pytest.raises(ValueError, match="widths"):
        autograd.MLP([3])
    with pytest.raises(TypeError, match="widths"):
        autograd.MLP([3, "4"])
    with pytest.raises(ValueError, match="activation"):
        autograd.MLP([3, 4], activation="gelu")
    with pytest.raises(ValueError, match="X"):
        autograd.MLP([3, 4])(torch.zeros(2, 5))
    with pytest.raises(TypeError, match="X"):
        autograd.MLP([3, 4])(torch.zeros(2, 3, dtype=torch.int64))
    with pytest.raises(TypeError, match="x"):
        autograd.finite_difference_gradient(lambda v: 0.0, torch.zeros(2, dtype=torch.int64))
    with pytest.raises(TypeError, match="fn"):
        autograd.finite_difference_gradient(None, torch.zeros(2))
    with pytest.raises(ValueError, match="eps"):
        autograd.finite_difference_gradient(lambda v: 0.0, torch.zeros(2), eps=0)


@pytest.mark.parametrize("op", ["+", "-", "*", "/"])
def test_shapes_that_do_not_broadcast_raise_a_clear_error(op):
    a, b = Tensor(torch.ones(2, 3), requires_grad=True), Tensor(torch.ones(4))
    operations = {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "/": lambda: a / b}
    with pytest.raises(ValueError, match=rf"left operand of \{op} of shape \(2, 3\) and the right operand "
                                         r"of shape \(4,\) do not broadcast"):
        operations[op]()
    with pytest.raises(ValueError, match="do not broadcast"):  # a torch tensor on the left, too
        {"+": lambda: torch.ones(5) + a, "-": lambda: torch.ones(5) - a, "*": lambda: torch.ones(5) * a,
         "/": lambda: 1.0 / a.reshape(6) * torch.ones(5)}[op]()


def test_matmul_with_different_dtypes_raises_and_mlp_casts_its_input():
    with pytest.raises(TypeError, match="dtype"):
        Tensor(torch.ones(2, 3, dtype=torch.float32)) @ Tensor(torch.ones(3, 2, dtype=torch.float64))
    net = autograd.MLP([3, 4, 2], seed=0)
    assert net(torch.ones(5, 3, dtype=torch.float32)).dtype == torch.float64


def test_integer_data_become_float64_and_float32_leaves_keep_float32_gradients():
    assert Tensor(torch.tensor([1, 2])).dtype == torch.float64
    x = Tensor(torch.ones(3, dtype=torch.float32), requires_grad=True)
    (x * torch.ones(3, dtype=torch.float64)).sum().backward()
    assert x.grad.dtype == torch.float32


def test_mlp_weights_are_those_of_nets_mlp():
    net = autograd.MLP([5, 7, 3], activation="tanh", seed=4)
    reference = nets.mlp((5, 7, 3), activation="tanh", seed=4, dtype=torch.float64)
    X = torch.randn(6, 5, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    assert torch.allclose(net(X).data, reference(X).detach(), rtol=0, atol=1e-14)
    assert torch.allclose(net.to_torch()(X), reference(X), rtol=0, atol=1e-14)


def test_gradient_gap_detects_a_wrong_gradient_and_a_wrong_shape():
    inputs = _inputs([(3, 4)], seed=0)
    assert autograd.gradient_gap(lambda a: a.tanh(), lambda a: a.tanh(), inputs) < 1e-14
    assert autograd.gradient_gap(lambda a: a.tanh(), lambda a: a.sigmoid(), inputs) > 0.1
    assert autograd.gradient_gap(lambda a: a.sum(0), lambda a: a.sum(1), inputs) == math.inf
    with pytest.raises(TypeError, match="inputs"):
        autograd.gradient_gap(lambda a: a, lambda a: a, torch.ones(2))
    with pytest.raises(TypeError, match="inputs"):
        autograd.gradient_gap(lambda a: a, lambda a: a, [torch.ones(2, dtype=torch.int64)])
