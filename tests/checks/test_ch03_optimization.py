"""Checks of chapter 3's exercises: reference solutions pass, plausible wrong answers fail, bad answers fail cleanly."""
from __future__ import annotations

import math

import numpy as np
import torch
from exercise_contract import bad_types

import dlbook.exercises.checks.ch03_optimization as optimization
from dlbook.exercises import EXERCISES, run_check

IDS = ("3.1", "3.2", "3.3", "3.4")


# ---------------------------------------------------------------------------
# Reference solutions (independent of the chapter's modules)
# ---------------------------------------------------------------------------

def cross_entropy_backward(logits, targets):
    logits = logits.clone().requires_grad_()
    torch.nn.functional.cross_entropy(logits, targets).backward()  # torch's autograd as the reference
    return logits.grad


def cross_entropy_backward_by_hand(logits, targets):
    probabilities = torch.softmax(logits, dim=1)
    probabilities[torch.arange(len(targets)), targets] -= 1
    return probabilities / len(targets)


def step_size_facts(A):
    eigenvalues = np.linalg.eigvalsh(np.asarray(A))
    mu, L = eigenvalues[0], eigenvalues[-1]
    return 2 / L, 2 / (mu + L), (L / mu - 1) / (L / mu + 1)


def adam_iterates(grad_fn, theta0, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, steps=100):
    """Runs torch.optim.Adam itself, which uses the same conventions."""
    theta = theta0.clone()
    optimizer = torch.optim.Adam([theta], lr=lr, betas=betas, eps=eps)
    iterates = [theta.clone()]
    for _ in range(steps):
        theta.grad = grad_fn(theta.detach().clone())
        optimizer.step()
        iterates.append(theta.detach().clone())
    return torch.stack(iterates)


def heavy_ball_steps(lr, momentum, num_steps):
    return [lr * sum(momentum**k for k in range(t + 1)) for t in range(num_steps)]


def heavy_ball_steps_with_torch(lr, momentum, num_steps):
    p = torch.zeros(1, dtype=torch.float64)
    opt = torch.optim.SGD([p], lr=lr, momentum=momentum)
    steps = []
    for _ in range(num_steps):
        before = p.clone()
        p.grad = torch.ones(1, dtype=torch.float64)
        opt.step()
        steps.append((before - p).item())
    return np.array(steps)


REFERENCES = {
    "3.1": [cross_entropy_backward, cross_entropy_backward_by_hand],
    "3.2": [step_size_facts],
    "3.3": [adam_iterates],
    "3.4": [heavy_ball_steps, heavy_ball_steps_with_torch],
}


# ---------------------------------------------------------------------------
# Plausible wrong answers
# ---------------------------------------------------------------------------

def ce_sum_not_mean(logits, targets):
    return cross_entropy_backward(logits, targets) * len(targets)


def ce_softmax_only(logits, targets):
    return torch.softmax(logits, dim=1) / len(targets)


def ce_unstable(logits, targets):
    probabilities = logits.exp() / logits.exp().sum(dim=1, keepdim=True)
    one_hot = torch.nn.functional.one_hot(targets, logits.shape[1]).to(logits.dtype)
    return (probabilities - one_hot) / len(targets)


def ce_transposed_sign(logits, targets):
    return -cross_entropy_backward(logits, targets)


def facts_one_over_L(A):
    eigenvalues = np.linalg.eigvalsh(np.asarray(A))
    mu, L = eigenvalues[0], eigenvalues[-1]
    return 1 / L, 2 / (mu + L), (L - mu) / (L + mu)


def facts_rate_one_minus_inverse_kappa(A):
    eigenvalues = np.linalg.eigvalsh(np.asarray(A))
    mu, L = eigenvalues[0], eigenvalues[-1]
    return 2 / L, 2 / (mu + L), 1 - mu / L


def facts_diagonal_instead_of_eigenvalues(A):
    diagonal = np.diag(np.asarray(A))
    mu, L = diagonal.min(), diagonal.max()
    return 2 / L, 2 / (mu + L), (L - mu) / (L + mu)


def adam_without_bias_correction(grad_fn, theta0, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, steps=100):
    beta1, beta2 = betas
    theta, m, v = theta0.clone(), torch.zeros_like(theta0), torch.zeros_like(theta0)
    iterates = [theta.clone()]
    for _ in range(steps):
        g = grad_fn(theta)
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g**2
        theta = theta - lr * m / (v.sqrt() + eps)
        iterates.append(theta.clone())
    return torch.stack(iterates)


def adam_eps_inside_sqrt(grad_fn, theta0, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, steps=100):
    beta1, beta2 = betas
    theta, m, v = theta0.clone(), torch.zeros_like(theta0), torch.zeros_like(theta0)
    iterates = [theta.clone()]
    for t in range(1, steps + 1):
        g = grad_fn(theta)
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g**2
        theta = theta - lr * (m / (1 - beta1**t)) / torch.sqrt(v / (1 - beta2**t) + eps)
        iterates.append(theta.clone())
    return torch.stack(iterates)


def adam_without_start(grad_fn, theta0, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, steps=100):
    return adam_iterates(grad_fn, theta0, lr, betas, eps, steps)[1:]


def heavy_ball_source_sum(lr, momentum, num_steps):
    """The lecture-note typo: eta * sum_{tau=1}^{t-1} momentum^tau."""
    return [lr * sum(momentum**k for k in range(1, t)) for t in range(num_steps)]


def heavy_ball_limit_only(lr, momentum, num_steps):
    return [lr / (1 - momentum)] * num_steps


def heavy_ball_off_by_one(lr, momentum, num_steps):
    return [lr * (1 - momentum**t) / (1 - momentum) for t in range(1, num_steps + 1)][1:] + [lr / (1 - momentum)]


WRONG = {
    "3.1": {"sum instead of mean": ce_sum_not_mean, "softmax without the one-hot": ce_softmax_only,
            "no max subtraction (overflows)": ce_unstable, "wrong sign": ce_transposed_sign},
    "3.2": {"1/L as the largest stable step": facts_one_over_L,
            "rate 1 - 1/kappa": facts_rate_one_minus_inverse_kappa,
            "diagonal entries instead of eigenvalues": facts_diagonal_instead_of_eigenvalues},
    "3.3": {"no bias correction": adam_without_bias_correction, "eps inside the sqrt": adam_eps_inside_sqrt,
            "start not included": adam_without_start},
    "3.4": {"the source's sum from 1 to t-1": heavy_ball_source_sum, "the limit every step": heavy_ball_limit_only,
            "shifted by one step": heavy_ball_off_by_one},
}


BAD_TYPES = bad_types("raises ValueError", "stub", "returns None", "returns a string", "returns NaN")


# ---------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------

def test_every_chapter_3_exercise_is_registered_and_covered():
    for eid in IDS:
        assert eid in EXERCISES, eid
        assert REFERENCES.get(eid) and WRONG.get(eid), eid
        assert EXERCISES[eid].check_fn.__module__ == optimization.__name__


def test_unstable_answer_fails_on_the_large_logits_case():
    result = run_check("3.1", ce_unstable)
    assert "large logits" in result.message, result.message


def test_expected_values_are_right():
    # The NumPy references of the check module agree with torch's own implementations.
    for _, logits, targets in optimization._ce_cases():
        t = torch.tensor(logits, dtype=torch.float64, requires_grad=True)
        torch.nn.functional.cross_entropy(t, torch.tensor(targets)).backward()
        assert np.allclose(optimization._reference_ce_grad(logits, targets), t.grad.numpy(), atol=1e-15)
    assert np.allclose(optimization._reference_heavy_ball(0.1, 0.9, 30),
                       [0.1 * (1 - 0.9 ** (t + 1)) / 0.1 for t in range(30)], rtol=1e-12)
    for _, grad_np, theta0, kwargs in optimization._adam_problems():
        ours = optimization._reference_adam(grad_np, theta0, kwargs["lr"], kwargs["betas"], kwargs["eps"],
                                            kwargs["steps"])
        theirs = adam_iterates(lambda th: torch.as_tensor(grad_np(th.numpy())), torch.tensor(theta0), **kwargs)
        assert np.allclose(ours, theirs.numpy(), atol=1e-13)
    A = optimization._spd([2.0, 50.0], 2)
    assert np.allclose(np.linalg.eigvalsh(A), [2.0, 50.0]) and math.isclose(step_size_facts(A)[2], 48 / 52)
