"""Tests of dlbook.meta_learning: sine tasks, the inner SGD against torch.optim.SGD, and one meta step of
first-order MAML and Reptile against the update written out by hand."""
import copy
import math

import pytest
import torch
from torch import nn

from dlbook import meta_learning as ml
from dlbook import nets


def _model(seed=0):
    return nets.mlp((1, 16, 16, 1), dtype=torch.float64, seed=seed)


def _params(model):
    return {name: p.detach().clone() for name, p in model.named_parameters()}


def _gap(a, b):
    return max((a[k] - b[k]).abs().max().item() for k in a)


def test_sine_tasks_and_samples():
    tasks = ml.sine_tasks(200, seed=1)
    assert tasks.amplitude.min() >= 0.1 and tasks.amplitude.max() <= 5.0
    assert tasks.phase.min() >= 0 and tasks.phase.max() <= math.pi
    X, Y = ml.sine_samples(tasks, 7, seed=2, dtype=torch.float64)
    assert X.shape == Y.shape == (200, 7, 1)
    assert X.abs().max() <= 5
    expected = tasks.amplitude.view(-1, 1, 1) * torch.sin(X - tasks.phase.view(-1, 1, 1))
    assert torch.equal(Y, expected)
    assert torch.equal(X, ml.sine_samples(tasks, 7, seed=2, dtype=torch.float64)[0])


def test_adapt_equals_torch_sgd():
    model = _model()
    X, Y = ml.sine_samples(ml.sine_tasks(1, seed=3), 10, seed=3, dtype=torch.float64)
    params = _params(model)
    assert _gap(ml.adapt(model, params, X[0], Y[0], lr=0.05, steps=0), params) == 0
    adapted = ml.adapt(model, params, X[0], Y[0], lr=0.05, steps=3)
    reference = copy.deepcopy(model)
    opt = torch.optim.SGD(reference.parameters(), lr=0.05)
    for _ in range(3):
        opt.zero_grad()
        nn.functional.mse_loss(reference(X[0]), Y[0]).backward()
        opt.step()
    assert _gap(adapted, _params(reference)) < 1e-14
    assert _gap(_params(model), params) == 0  # the model is not changed


def test_one_first_order_maml_step_by_hand():
    model = _model(seed=4)
    trained = ml.first_order_maml(model, meta_steps=1, tasks_per_step=2, num_support=5, num_query=6,
                                  inner_lr=0.02, inner_steps=2, outer_lr=1e-2, seed=7)
    # The same step by hand: the tasks and points of meta step 0 of seed 7.
    tasks = ml.sine_tasks(2, seed=7 * 1_000_003)
    X, Y = ml.sine_samples(tasks, 11, seed=7 * 1_000_003, dtype=torch.float64)
    reference = copy.deepcopy(model)
    grads = [torch.zeros_like(p) for p in reference.parameters()]
    for t in range(2):
        learner = copy.deepcopy(model)
        opt = torch.optim.SGD(learner.parameters(), lr=0.02)
        for _ in range(2):
            opt.zero_grad()
            nn.functional.mse_loss(learner(X[t, :5]), Y[t, :5]).backward()
            opt.step()
        learner.zero_grad()
        nn.functional.mse_loss(learner(X[t, 5:]), Y[t, 5:]).backward()
        grads = [g + p.grad / 2 for g, p in zip(grads, learner.parameters())]
    adam = torch.optim.Adam(reference.parameters(), lr=1e-2)
    for p, g in zip(reference.parameters(), grads):
        p.grad = g
    adam.step()
    assert _gap(_params(trained), _params(reference)) < 1e-14


@pytest.mark.parametrize("step_size", [1.0, 0.25])
def test_one_reptile_step_moves_toward_the_adapted_weights(step_size):
    model = _model(seed=5)
    trained = ml.reptile(model, meta_steps=1, tasks_per_step=1, num_support=8, inner_lr=0.03, inner_steps=4,
                         outer_step_size=step_size, seed=2)
    X, Y = ml.sine_samples(ml.sine_tasks(1, seed=2 * 1_000_003), 8, seed=2 * 1_000_003, dtype=torch.float64)
    theta = _params(model)
    phi = ml.adapt(model, theta, X[0], Y[0], lr=0.03, steps=4)
    expected = {k: theta[k] + step_size * (phi[k] - theta[k]) for k in theta}
    assert _gap(_params(trained), expected) < 1e-14


def test_adaptation_curve_is_the_query_loss_after_k_steps():
    model = _model(seed=6)
    tasks = ml.sine_tasks(4, seed=8)
    curve = ml.adaptation_curve(model, tasks, num_support=10, num_query=50, inner_lr=0.01, max_steps=5, seed=1)
    X, Y = ml.sine_samples(tasks, 60, seed=1, dtype=torch.float64)
    with torch.no_grad():
        unadapted = sum(nn.functional.mse_loss(model(X[t, 10:]), Y[t, 10:]).item() for t in range(4)) / 4
    assert curve.shape == (6,)
    assert curve[0].item() == pytest.approx(unadapted, rel=1e-12)
    params = _params(model)
    after_two = sum(nn.functional.mse_loss(torch.func.functional_call(
        model, ml.adapt(model, params, X[t, :10], Y[t, :10], lr=0.01, steps=2), (X[t, 10:],)), Y[t, 10:]).item()
        for t in range(4)) / 4
    assert curve[2].item() == pytest.approx(after_two, rel=1e-12)


def test_joint_training_reduces_the_pooled_loss():
    model = _model(seed=9)
    tasks = ml.sine_tasks(50, seed=10)
    before = ml.adaptation_curve(model, tasks, max_steps=0)[0]
    after = ml.adaptation_curve(ml.joint_training(model, steps=200, lr=1e-2), tasks, max_steps=0)[0]
    assert after < before


def test_bad_inputs():
    model = _model()
    with pytest.raises(ValueError, match="num_tasks"):
        ml.sine_tasks(0)
    with pytest.raises(TypeError, match="tasks"):
        ml.sine_samples((1.0, 0.0), 5)
    with pytest.raises(ValueError, match="steps"):
        ml.adapt(model, _params(model), torch.zeros(3, 1), torch.zeros(3, 1), lr=0.1, steps=-1)
    with pytest.raises(TypeError, match="X"):
        ml.adapt(model, _params(model), torch.zeros(3, 1, dtype=torch.long), torch.zeros(3, 1), lr=0.1, steps=1)
    with pytest.raises(TypeError, match="model"):
        ml.first_order_maml("net", meta_steps=1)
    with pytest.raises(ValueError, match="inner_steps"):
        ml.first_order_maml(model, meta_steps=1, inner_steps=0)
    with pytest.raises(ValueError, match="outer_step_size"):
        ml.reptile(model, meta_steps=1, outer_step_size=2.0)
    with pytest.raises(ValueError, match="lr"):
        ml.joint_training(model, steps=1, lr=-1.0)
