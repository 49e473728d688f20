"""Meta-learning on sine-wave regression: first-order MAML, Reptile and a jointly trained baseline (Chapter 15).

Each task is a sine y = A sin(x - φ) with A ~ U[0.1, 5], φ ~ U[0, π], x ~ U[-5, 5] (Finn et
al.'s benchmark). Adaptation is a few SGD steps on the mean square error of K support
points. First-order MAML moves the initial parameters θ along the query-loss gradient
taken at the adapted parameters φ (dropping MAML's second-order term); Reptile moves θ
toward φ, θ ← θ + ε(φ - θ). The baseline fits one network to all tasks at once, whose
best constant answer is the task average, 0. Networks are float32 ``nn.Module`` s used
functionally through ``torch.func.functional_call``; the module passed in is not changed.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import nn
from torch.func import functional_call

from .nets import model_with_parameters
from .runtime import generator
from .validation import as_tensor, check_float, check_int, describe


class SineTasks(NamedTuple):
    amplitude: torch.Tensor   # (num_tasks,)
    phase: torch.Tensor       # (num_tasks,)


def sine_tasks(num_tasks: int, *, seed: int = 0) -> SineTasks:
    """``num_tasks`` sine tasks with A ~ U[0.1, 5] and φ ~ U[0, π], drawn in float64 (Chapter 15)."""
    num_tasks = check_int("num_tasks", num_tasks, minimum=1)
    rng = generator(check_int("seed", seed, minimum=0))
    amplitude = 0.1 + 4.9 * torch.rand(num_tasks, generator=rng, dtype=torch.float64)
    phase = math.pi * torch.rand(num_tasks, generator=rng, dtype=torch.float64)
    return SineTasks(amplitude, phase)


def sine_samples(tasks: SineTasks, num_points: int, *, seed: int = 0,
                 dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """Points x ~ U[-5, 5] and targets A sin(x - φ) for every task: X, Y of shape (num_tasks, num_points, 1)
    (Chapter 15)."""
    if not isinstance(tasks, SineTasks):
        raise TypeError(f"tasks must be SineTasks (from sine_tasks), got {describe(tasks)}")
    num_points = check_int("num_points", num_points, minimum=1)
    rng = generator(check_int("seed", seed, minimum=0))
    X = -5 + 10 * torch.rand(len(tasks.amplitude), num_points, 1, generator=rng, dtype=torch.float64)
    Y = tasks.amplitude.view(-1, 1, 1) * torch.sin(X - tasks.phase.view(-1, 1, 1))
    return X.to(dtype), Y.to(dtype)


def _params(model: nn.Module) -> dict[str, torch.Tensor]:
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {describe(model)}")
    return {name: p.detach().clone() for name, p in model.named_parameters()}


def _mse(model, params, X, Y):
    return nn.functional.mse_loss(functional_call(model, params, (X,)), Y)


def adapt(model: nn.Module, params: dict, X, Y, *, lr: float, steps: int) -> dict[str, torch.Tensor]:
    """``steps`` plain SGD steps on the mean square error of (X, Y) from ``params`` (Chapter 15)."""
    X = as_tensor("X", X, floating=True)
    Y = as_tensor("Y", Y, floating=True)
    lr = check_float("lr", lr, low=0.0)
    steps = check_int("steps", steps, minimum=0)
    current = {name: p.detach() for name, p in params.items()}
    for _ in range(steps):
        live = {name: p.requires_grad_(True) for name, p in ((n, q.clone()) for n, q in current.items())}
        grads = torch.autograd.grad(_mse(model, live, X, Y), list(live.values()))
        current = {name: (p - lr * g).detach() for (name, p), g in zip(live.items(), grads)}
    return current


def _check_common(meta_steps, tasks_per_step, num_support, inner_lr, inner_steps):
    return (check_int("meta_steps", meta_steps, minimum=0), check_int("tasks_per_step", tasks_per_step, minimum=1),
            check_int("num_support", num_support, minimum=1), check_float("inner_lr", inner_lr, low=0.0),
            check_int("inner_steps", inner_steps, minimum=1))


def first_order_maml(model: nn.Module, *, meta_steps: int, tasks_per_step: int = 5, num_support: int = 10,
                     num_query: int = 10, inner_lr: float = 0.01, inner_steps: int = 1, outer_lr: float = 1e-3,
                     seed: int = 0) -> nn.Module:
    """First-order MAML: Adam on θ with the mean over tasks of ∇L_query(φ_task), φ = adapt(θ) (Chapter 15).

    Every meta step draws ``tasks_per_step`` fresh tasks from ``seed``. Returns a trained copy.
    """
    meta_steps, tasks_per_step, num_support, inner_lr, inner_steps = _check_common(
        meta_steps, tasks_per_step, num_support, inner_lr, inner_steps)
    num_query = check_int("num_query", num_query, minimum=1)
    outer_lr = check_float("outer_lr", outer_lr, low=0.0)
    params = _params(model)
    meta = {name: p.clone().requires_grad_(True) for name, p in params.items()}
    optimizer = torch.optim.Adam(meta.values(), lr=outer_lr)
    dtype = next(iter(params.values())).dtype
    for step in range(meta_steps):
        tasks = sine_tasks(tasks_per_step, seed=seed * 1_000_003 + step)
        X, Y = sine_samples(tasks, num_support + num_query, seed=seed * 1_000_003 + step, dtype=dtype)
        total = {name: torch.zeros_like(p) for name, p in params.items()}
        for t in range(tasks_per_step):
            adapted = adapt(model, meta, X[t, :num_support], Y[t, :num_support], lr=inner_lr, steps=inner_steps)
            live = {name: p.requires_grad_(True) for name, p in adapted.items()}
            grads = torch.autograd.grad(_mse(model, live, X[t, num_support:], Y[t, num_support:]),
                                        list(live.values()))
            for name, g in zip(live, grads):
                total[name] += g / tasks_per_step
        optimizer.zero_grad()
        for name, p in meta.items():
            p.grad = total[name]
        optimizer.step()
    return model_with_parameters(model, meta)


def reptile(model: nn.Module, *, meta_steps: int, tasks_per_step: int = 5, num_support: int = 10,
            inner_lr: float = 0.01, inner_steps: int = 5, outer_step_size: float = 0.1, seed: int = 0) -> nn.Module:
    """Reptile: θ ← θ + ε · mean over tasks of (adapt(θ) - θ) (Chapter 15). Returns a trained copy."""
    meta_steps, tasks_per_step, num_support, inner_lr, inner_steps = _check_common(
        meta_steps, tasks_per_step, num_support, inner_lr, inner_steps)
    outer_step_size = check_float("outer_step_size", outer_step_size, low=0.0, high=1.0)
    meta = _params(model)
    dtype = next(iter(meta.values())).dtype
    for step in range(meta_steps):
        tasks = sine_tasks(tasks_per_step, seed=seed * 1_000_003 + step)
        X, Y = sine_samples(tasks, num_support, seed=seed * 1_000_003 + step, dtype=dtype)
        moves = {name: torch.zeros_like(p) for name, p in meta.items()}
        for t in range(tasks_per_step):
            adapted = adapt(model, meta, X[t], Y[t], lr=inner_lr, steps=inner_steps)
            for name in meta:
                moves[name] += (adapted[name] - meta[name]) / tasks_per_step
        meta = {name: p + outer_step_size * moves[name] for name, p in meta.items()}
    return model_with_parameters(model, meta)


def joint_training(model: nn.Module, *, steps: int, tasks_per_step: int = 5, num_points: int = 10,
                   lr: float = 1e-3, seed: int = 0) -> nn.Module:
    """The baseline: Adam on the mean square error of points pooled from fresh tasks each step (Chapter 15)."""
    steps = check_int("steps", steps, minimum=0)
    tasks_per_step = check_int("tasks_per_step", tasks_per_step, minimum=1)
    num_points = check_int("num_points", num_points, minimum=1)
    lr = check_float("lr", lr, low=0.0)
    trained = model_with_parameters(model, _params(model))
    optimizer = torch.optim.Adam(trained.parameters(), lr=lr)
    dtype = next(trained.parameters()).dtype
    for step in range(steps):
        X, Y = sine_samples(sine_tasks(tasks_per_step, seed=seed * 1_000_003 + step), num_points,
                            seed=seed * 1_000_003 + step, dtype=dtype)
        optimizer.zero_grad()
        nn.functional.mse_loss(trained(X.reshape(-1, 1)), Y.reshape(-1, 1)).backward()
        optimizer.step()
    return trained


def adaptation_curve(model: nn.Module, tasks: SineTasks, *, num_support: int = 10, num_query: int = 100,
                     inner_lr: float = 0.01, max_steps: int = 10, seed: int = 0) -> torch.Tensor:
    """Mean query MSE over ``tasks`` after 0, 1, ..., max_steps adaptation steps on K support points, shape
    (max_steps + 1,) (Chapter 15)."""
    num_support = check_int("num_support", num_support, minimum=1)
    num_query = check_int("num_query", num_query, minimum=1)
    max_steps = check_int("max_steps", max_steps, minimum=0)
    params = _params(model)
    X, Y = sine_samples(tasks, num_support + num_query, seed=seed, dtype=next(iter(params.values())).dtype)
    curve = torch.zeros(max_steps + 1, dtype=torch.float64)
    for t in range(len(tasks.amplitude)):
        current = params
        for k in range(max_steps + 1):
            with torch.no_grad():
                curve[k] += float(_mse(model, current, X[t, num_support:], Y[t, num_support:]))
            if k < max_steps:
                current = adapt(model, current, X[t, :num_support], Y[t, :num_support], lr=inner_lr, steps=1)
    return curve / len(tasks.amplitude)
