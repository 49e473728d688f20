"""Tests of dlbook.optim: step-for-step equality with torch.optim, and the textbook identities."""
import math

import pytest
import torch

from dlbook import optim

SETTINGS = [
    ("SGD", dict(lr=0.05)),
    ("SGD", dict(lr=0.05, momentum=0.9)),
    ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True)),
    ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.05)),
    ("SGD", dict(lr=0.02, momentum=0.5, dampening=0.3, weight_decay=0.1, maximize=False)),
    ("SGD", dict(lr=0.02, momentum=0.9, maximize=True)),
    ("Adagrad", dict(lr=0.1)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.05, weight_decay=0.1, initial_accumulator_value=0.3, eps=1e-6)),
    ("Adagrad", dict(lr=0.05, maximize=True)),
    ("RMSprop", dict(lr=0.01)),
    ("RMSprop", dict(lr=0.01, alpha=0.9, eps=1e-6, weight_decay=0.1)),
    ("RMSprop", dict(lr=0.01, momentum=0.9, centered=True)),
    ("RMSprop", dict(lr=0.005, momentum=0.5, maximize=True)),
    ("Adam", dict(lr=0.01)),
    ("Adam", dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1)),
    ("Adam", dict(lr=0.01, amsgrad=True)),
    ("Adam", dict(lr=0.01, amsgrad=True, weight_decay=0.05, maximize=True)),
    ("Adam", dict(lr=0.01, betas=(0.0, 0.5))),
    ("Adadelta", dict()),
    ("Adadelta", dict(lr=0.5, rho=0.8, eps=1e-4, weight_decay=0.1)),
    ("Adadelta", dict(lr=2.0, rho=0.95, maximize=True)),
    ("Adamax", dict(lr=0.01)),
    ("Adamax", dict(lr=0.02, betas=(0.8, 0.99), eps=1e-4, weight_decay=0.1)),
    ("Adamax", dict(lr=0.01, betas=(0.0, 0.5), maximize=True)),
    ("AdamW", dict(lr=0.01)),
    ("AdamW", dict(lr=0.01, weight_decay=0.3, amsgrad=True)),
    ("AdamW", dict(lr=0.003, betas=(0.5, 0.9), eps=1e-6, maximize=True)),
]


@pytest.mark.parametrize("name,kwargs", SETTINGS, ids=[f"{n}-{k}" for n, k in SETTINGS])
def test_matches_torch_optim_step_for_step(name, kwargs):
    comparison = optim.deviation_from_torch(name, steps=60, seed=1, **kwargs)
    assert comparison.max_difference < 1e-12
    assert comparison.distance_moved > 1e-3  # the run actually moved


def test_deviation_from_torch_sees_a_different_algorithm(monkeypatch):
    # The comparison can fail: our Adam standing in for Adamax is far from torch's Adamax.
    monkeypatch.setattr(optim, "Adamax", optim.Adam)
    comparison = optim.deviation_from_torch("Adamax", steps=20, lr=0.01)
    assert comparison.max_difference > 1e-4, comparison
    with pytest.raises(ValueError, match="name"):
        optim.deviation_from_torch("LBFGS")


def test_loss_decreases_when_maximize_is_false_and_increases_when_true():
    for maximize in (False, True):
        p = torch.tensor([1.0, -2.0], dtype=torch.float64)
        opt = optim.Adam([p], lr=0.1, maximize=maximize)
        before = (p**2).sum().item()
        for _ in range(5):
            p.grad = 2 * p
            opt.step()
        assert ((p**2).sum().item() > before) == maximize


def test_closure_is_called_and_its_loss_returned():
    p = torch.nn.Parameter(torch.tensor([3.0], dtype=torch.float64))
    opt = optim.SGD([p], lr=0.1)

    def closure():
        opt.zero_grad()
        loss = (p**2).sum()
        loss.backward()
        return loss

    assert opt.step(closure).item() == 9.0
    assert abs(p.item() - 2.4) < 1e-15


def test_param_groups_and_state_dict_round_trip():
    a = torch.nn.Parameter(torch.ones(2, dtype=torch.float64))
    b = torch.nn.Parameter(torch.ones(2, dtype=torch.float64))
    opt = optim.Adam([{"params": [a]}, {"params": [b], "lr": 0.1}], lr=0.01)
    a.grad, b.grad = torch.ones(2, dtype=torch.float64), torch.ones(2, dtype=torch.float64)
    opt.step()
    assert torch.allclose(1 - a.detach(), torch.full((2,), 0.01, dtype=torch.float64))
    assert torch.allclose(1 - b.detach(), torch.full((2,), 0.1, dtype=torch.float64))
    restored = optim.Adam([{"params": [a]}, {"params": [b]}], lr=0.01)
    restored.load_state_dict(opt.state_dict())
    assert restored.state[b]["step"] == 1


def test_parameters_without_gradient_are_skipped():
    a = torch.nn.Parameter(torch.ones(2))
    b = torch.nn.Parameter(torch.ones(2))
    opt = optim.RMSprop([a, b], lr=0.1)
    a.grad = torch.ones(2)
    opt.step()
    assert torch.equal(b.detach(), torch.ones(2)) and not torch.equal(a.detach(), torch.ones(2))


def test_adam_first_step_is_lr_times_sign_and_bias_correction_matters():
    g = torch.tensor([1e-3, -5.0, 200.0], dtype=torch.float64)
    p = torch.zeros(3, dtype=torch.float64)
    opt = optim.Adam([p], lr=0.01)
    p.grad = g
    opt.step()
    assert torch.allclose(-p, 0.01 * g / (g.abs() + 1e-8), rtol=1e-14, atol=0)
    state = opt.state[p]
    uncorrected = 0.01 * state["exp_avg"] / (state["exp_avg_sq"].sqrt() + 1e-8)
    assert torch.allclose(uncorrected / -p, torch.full((3,), 0.1 / math.sqrt(0.001), dtype=torch.float64),
                          rtol=1e-3)


def test_adam_with_constant_gradient_steps_lr_every_time():
    p = torch.zeros(1, dtype=torch.float64)
    opt = optim.Adam([p], lr=0.1, eps=0.0)
    for t in range(1, 30):
        before = p.clone()
        p.grad = torch.tensor([2.0], dtype=torch.float64)
        opt.step()
        assert abs((before - p).item() - 0.1) < 1e-14


def test_adagrad_steps_shrink_like_one_over_sqrt_t():
    p = torch.zeros(1, dtype=torch.float64)
    opt = optim.Adagrad([p], lr=1.0, eps=0.0)
    for t in range(1, 20):
        before = p.clone()
        p.grad = torch.tensor([3.0], dtype=torch.float64)
        opt.step()
        assert abs((before - p).item() - 1 / math.sqrt(t)) < 1e-14


def test_heavy_ball_constant_gradient_geometric_sum():
    p = torch.zeros(1, dtype=torch.float64)
    opt = optim.SGD([p], lr=0.1, momentum=0.9)
    for t in range(40):
        before = p.clone()
        p.grad = torch.ones(1, dtype=torch.float64)
        opt.step()
        assert abs((before - p).item() - 0.1 * (1 - 0.9 ** (t + 1)) / 0.1) < 1e-12


def test_weight_decay_is_coupled_in_adam_and_decoupled_in_adamw():
    # Zero gradient: Adam's decay enters the moments (step lr * sign), AdamW only shrinks by 1 - lr wd.
    for cls, expected in ((optim.Adam, 2.0 - 0.01), (optim.AdamW, 2.0 * (1 - 0.01 * 0.1))):
        p = torch.tensor([2.0], dtype=torch.float64)
        opt = cls([p], lr=0.01, weight_decay=0.1)
        p.grad = torch.zeros(1, dtype=torch.float64)
        opt.step()
        assert abs(p.item() - expected) < 1e-9, cls


def test_sgd_weight_decay_equals_l2_penalty_with_momentum():
    gen = torch.Generator().manual_seed(0)
    X, y = torch.randn(20, 3, generator=gen, dtype=torch.float64), torch.randn(20, generator=gen, dtype=torch.float64)
    paths = []
    for decay_in_optimizer in (True, False):
        w = torch.zeros(3, dtype=torch.float64, requires_grad=True)
        opt = optim.SGD([w], lr=0.05, momentum=0.9, weight_decay=0.1 if decay_in_optimizer else 0.0)
        for _ in range(30):
            loss = ((X @ w - y) ** 2).mean() + (0.0 if decay_in_optimizer else 0.05 * (w**2).sum())
            opt.zero_grad()
            loss.backward()
            opt.step()
        paths.append(w.detach().clone())
    assert torch.allclose(paths[0], paths[1], atol=1e-12)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA device"))])
def test_runs_on_every_device(device):
    p = torch.ones(3, device=device, requires_grad=True)
    for cls in (optim.SGD, optim.Adagrad, optim.RMSprop, optim.Adadelta, optim.Adam, optim.Adamax,
                optim.AdamW):
        opt = cls([p], lr=0.01)
        (p**2).sum().backward()
        opt.step()
        opt.zero_grad()
    assert p.device.type == device and torch.all(p < 1)


# --- bad inputs -----------------------------------------------------------------------------

@pytest.mark.parametrize("cls,kwargs,match", [
    (optim.SGD, dict(lr=-0.1), "lr"), (optim.SGD, dict(lr="fast"), "lr"),
    (optim.SGD, dict(momentum=-1.0), "momentum"), (optim.SGD, dict(nesterov=True), "nesterov"),
    (optim.SGD, dict(momentum=0.9, dampening=0.1, nesterov=True), "nesterov"),
    (optim.SGD, dict(nesterov=1), "nesterov"), (optim.SGD, dict(maximize=None), "maximize"),
    (optim.Adagrad, dict(eps=-1.0), "eps"), (optim.Adagrad, dict(lr_decay=-0.1), "lr_decay"),
    (optim.Adagrad, dict(initial_accumulator_value=-1.0), "initial_accumulator_value"),
    (optim.RMSprop, dict(alpha=1.5), "alpha"), (optim.RMSprop, dict(centered="yes"), "centered"),
    (optim.Adam, dict(betas=(0.9, 1.0)), "betas"), (optim.Adam, dict(betas=0.9), "betas"),
    (optim.Adam, dict(weight_decay=-0.1), "weight_decay"), (optim.AdamW, dict(amsgrad=None), "amsgrad"),
    (optim.Adam, dict(betas=(0.9, 0.99, 0.9)), "betas"), (optim.Adam, dict(betas=("a", 0.9)), "betas"),
    (optim.Adadelta, dict(rho=1.5), "rho"), (optim.Adadelta, dict(eps=-1.0), "eps"),
    (optim.Adadelta, dict(lr=-1.0), "lr"), (optim.Adamax, dict(betas=(1.0, 0.9)), "betas"),
    (optim.Adamax, dict(eps="small"), "eps"), (optim.Adamax, dict(maximize=1), "maximize"),
])
def test_bad_hyperparameters_raise(cls, kwargs, match):
    with pytest.raises((TypeError, ValueError), match=match):
        cls([torch.zeros(2, requires_grad=True)], **kwargs)


def test_sparse_gradients_are_refused():
    p = torch.zeros(3, requires_grad=True)
    opt = optim.Adam([p])
    p.grad = torch.zeros(3).to_sparse()
    with pytest.raises(RuntimeError, match="sparse"):
        opt.step()


def test_adadelta_first_step_is_sqrt_eps_over_rms_of_the_gradient():
    # u = 0 at the start: the first step is sqrt(eps) / sqrt((1 - rho) g^2 + eps) * g, whatever lr's units.
    g = torch.tensor([1e-3, -2.0, 50.0], dtype=torch.float64)
    p = torch.zeros(3, dtype=torch.float64)
    opt = optim.Adadelta([p], rho=0.9, eps=1e-6)
    p.grad = g
    opt.step()
    assert torch.allclose(-p, math.sqrt(1e-6) / torch.sqrt(0.1 * g**2 + 1e-6) * g, rtol=1e-14, atol=0)


def test_adamax_steps_are_bounded_whatever_the_gradients():
    # |m_t| <= (1 - b1) sum b1^(t-k) |g_k| and u_t >= b2^(t-k) |g_k|: every step is at most
    # lr (1 - b1) / (1 - b1 / b2), and the first step is exactly lr in every coordinate (eps = 0).
    gen = torch.Generator().manual_seed(3)
    p = torch.zeros(4, dtype=torch.float64)
    opt = optim.Adamax([p], lr=0.01, betas=(0.9, 0.999), eps=0.0)
    p.grad = torch.tensor([1e-3, -5.0, 200.0, 0.7], dtype=torch.float64)
    opt.step()
    assert torch.allclose(-p, 0.01 * p.grad.sign(), rtol=1e-14, atol=0)
    largest = 0.0
    for _ in range(300):
        before = p.clone()
        p.grad = 10.0 ** torch.randint(-3, 4, (4,), generator=gen) * torch.randn(4, generator=gen, dtype=torch.float64)
        opt.step()
        largest = max(largest, (before - p).abs().max().item())
    assert 0.5 * 0.01 < largest <= 0.01 * 0.1 / (1 - 0.9 / 0.999)


def test_polyak_ruppert_average_matches_swa_averaged_model():
    gen = torch.Generator().manual_seed(0)
    iterates = torch.randn(30, 4, generator=gen, dtype=torch.float64)
    averages = optim.polyak_ruppert_average(iterates)
    assert torch.allclose(averages[-1], iterates.mean(0), rtol=0, atol=1e-15)
    param = torch.nn.Parameter(iterates[0].clone())
    model = torch.nn.ParameterList([param])
    averaged = torch.optim.swa_utils.AveragedModel(model)
    for t in range(len(iterates)):
        param.data.copy_(iterates[t])
        averaged.update_parameters(model)
        assert torch.allclose(averaged.module[0], averages[t], rtol=0, atol=1e-14)


def test_exponential_moving_average_matches_swa_ema():
    gen = torch.Generator().manual_seed(1)
    iterates = torch.randn(40, 3, 2, generator=gen, dtype=torch.float64)
    averages = optim.exponential_moving_average(iterates, 0.9)
    param = torch.nn.Parameter(iterates[0].clone())
    model = torch.nn.ParameterList([param])
    averaged = torch.optim.swa_utils.AveragedModel(model,
                                                   multi_avg_fn=torch.optim.swa_utils.get_ema_multi_avg_fn(0.9))
    for t in range(len(iterates)):
        param.data.copy_(iterates[t])
        averaged.update_parameters(model)
        assert torch.allclose(averaged.module[0], averages[t], rtol=0, atol=1e-14)
    # decay 0 is no averaging at all; a constant trajectory is its own average
    assert torch.equal(optim.exponential_moving_average(iterates, 0.0), iterates)
    assert torch.allclose(optim.exponential_moving_average(torch.ones(5, 2), 0.7), torch.ones(5, 2))


def test_averaging_bad_inputs():
    with pytest.raises(ValueError, match="iterates"):
        optim.polyak_ruppert_average(torch.zeros(0, 3))
    with pytest.raises(TypeError, match="iterates"):
        optim.polyak_ruppert_average(torch.zeros(4, 3, dtype=torch.int64))
    with pytest.raises(ValueError, match="decay"):
        optim.exponential_moving_average(torch.zeros(4, 3), 1.0)
    with pytest.raises(TypeError, match="decay"):
        optim.exponential_moving_average(torch.zeros(4, 3), "0.9")
