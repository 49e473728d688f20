"""Checks of chapter 4's exercises: reference solutions pass, plausible wrong answers fail."""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from exercise_contract import bad_types

from dlbook.exercises import EXERCISES

#: Fewest cases each check must run (tests/checks/test_contract.py).
MIN_CASES = 5

IDS = ["4.1", "4.2", "4.3", "4.4", "4.5"]


# ---------------------------------------------------------------------------
# Reference solutions (independent of the chapter's modules)
# ---------------------------------------------------------------------------

def inverted_dropout(x, p, generator):
    keep = torch.rand(x.shape, generator=generator) >= p
    return x * keep / (1 - p) if p < 1 else torch.zeros_like(x)


def batch_norm_train(x, gamma, beta, running_mean, running_var, momentum=0.1, eps=1e-5):
    n = len(x)
    mean, var = x.mean(0), x.var(0, unbiased=False)
    out = gamma * (x - mean) / torch.sqrt(var + eps) + beta
    return (out, (1 - momentum) * running_mean + momentum * mean,
            (1 - momentum) * running_var + momentum * var * n / (n - 1))


def smoothed_cross_entropy(logits, y, eps):
    k = logits.shape[1]
    targets = (1 - eps) * F.one_hot(y, k).to(logits.dtype) + eps / k
    return -(targets * torch.log_softmax(logits, dim=1)).sum(1).mean()


def distillation_loss(student, teacher, y, T, alpha):
    p = torch.softmax(teacher / T, dim=1)
    soft = -(p * torch.log_softmax(student / T, dim=1)).sum(1).mean()
    return alpha * T ** 2 * soft + (1 - alpha) * F.cross_entropy(student, y)


def gd_weights(X, y, lr, steps):
    lam, Q = torch.linalg.eigh(X.T @ X / len(X))
    w_ls = torch.linalg.lstsq(X, y[:, None]).solution[:, 0]
    return Q @ ((1 - (1 - lr * lam) ** steps) * (Q.T @ w_ls))


REFERENCES = {"4.1": inverted_dropout, "4.2": batch_norm_train, "4.3": smoothed_cross_entropy,
              "4.4": distillation_loss, "4.5": gd_weights}


def _gd_loop(X, y, lr, steps):
    w = torch.zeros(X.shape[1], dtype=X.dtype)
    for _ in range(steps):
        w = w - lr * X.T @ (X @ w - y) / len(X)
    return w


# ---------------------------------------------------------------------------
# Plausible wrong answers
# ---------------------------------------------------------------------------

WRONG = {
    "4.1": {
        "no rescaling of the survivors": lambda x, p, g: x * (torch.rand(x.shape, generator=g) >= p),
        "p read as the keep probability": lambda x, p, g: x * (torch.rand(x.shape, generator=g) < p) / max(p, 1e-9),
        "scales by 1/p": lambda x, p, g: x * (torch.rand(x.shape, generator=g) >= p) / max(p, 1e-9),
        "evaluation mode (identity)": lambda x, p, g: x,
        "one fixed mask": lambda x, p, g: x * (torch.rand(x.shape, generator=torch.Generator().manual_seed(0)) >= p) / (1 - p),
    },
    "4.2": {
        "unbiased variance in the normalization":
            lambda x, g, b, m, v, mo=0.1, eps=1e-5: (g * (x - x.mean(0)) / torch.sqrt(x.var(0) + eps) + b,
                                                     (1 - mo) * m + mo * x.mean(0), (1 - mo) * v + mo * x.var(0)),
        "biased running variance":
            lambda x, g, b, m, v, mo=0.1, eps=1e-5: (batch_norm_train(x, g, b, m, v, mo, eps)[:2]
                                                     + ((1 - mo) * v + mo * x.var(0, unbiased=False),)),
        "momentum as the weight of the old statistics":
            lambda x, g, b, m, v, mo=0.1, eps=1e-5: batch_norm_train(x, g, b, m, v, 1 - mo, eps)[:1]
            + batch_norm_train(x, g, b, m, v, 1 - mo, eps)[1:],
        "eps outside the square root":
            lambda x, g, b, m, v, mo=0.1, eps=1e-5: ((g * (x - x.mean(0)) / (x.std(0, unbiased=False) + eps) + b,)
                                                     + batch_norm_train(x, g, b, m, v, mo, eps)[1:]),
    },
    "4.3": {
        "eps/(K-1) on the wrong classes only": lambda z, y, eps: -(
            ((1 - eps) * F.one_hot(y, z.shape[1]) + eps / (z.shape[1] - 1) * (1 - F.one_hot(y, z.shape[1])))
            * torch.log_softmax(z, 1)).sum(1).mean(),
        "forgot the (1 - eps)": lambda z, y, eps: -(
            (F.one_hot(y, z.shape[1]) + eps / z.shape[1]) * torch.log_softmax(z, 1)).sum(1).mean(),
        "log of softmax overflows": lambda z, y, eps: -(
            ((1 - eps) * F.one_hot(y, z.shape[1]) + eps / z.shape[1])
            * torch.log(torch.exp(z) / torch.exp(z).sum(1, keepdim=True))).sum(1).mean(),
        "sum instead of mean": lambda z, y, eps: smoothed_cross_entropy(z, y, eps) * len(z),
    },
    "4.4": {
        "the source's sign (no minus)": lambda G, Fl, y, T, a: a * T ** 2 * (
            torch.softmax(Fl / T, 1) * torch.log_softmax(G / T, 1)).sum(1).mean() + (1 - a) * F.cross_entropy(G, y),
        "no T squared": lambda G, Fl, y, T, a: distillation_loss(G, Fl, y, T, a) - a * (T ** 2 - 1) * (
            -(torch.softmax(Fl / T, 1) * torch.log_softmax(G / T, 1)).sum(1).mean()),
        "teacher without temperature": lambda G, Fl, y, T, a: a * T ** 2 * (
            -(torch.softmax(Fl, 1) * torch.log_softmax(G / T, 1)).sum(1).mean()) + (1 - a) * F.cross_entropy(G, y),
        "KL instead of cross-entropy": lambda G, Fl, y, T, a: a * T ** 2 * F.kl_div(
            torch.log_softmax(G / T, 1), torch.softmax(Fl / T, 1), reduction="batchmean")
            + (1 - a) * F.cross_entropy(G, y),
    },
    "4.5": {
        "one step too many": lambda X, y, lr, t: _gd_loop(X, y, lr, t + 1),
        "ridge with mu = 1/(lr t)": lambda X, y, lr, t: torch.linalg.solve(
            X.T @ X / len(X) + torch.eye(X.shape[1], dtype=X.dtype) / (lr * max(t, 1)), X.T @ y / len(X)),
        "least squares whatever t": lambda X, y, lr, t: torch.linalg.lstsq(X, y[:, None]).solution[:, 0],
        "gradient without 1/N": lambda X, y, lr, t: _gd_loop(X * len(X) ** 0.5, y * len(X) ** 0.5, lr, t),
    },
}


BAD_TYPES = bad_types("raises ValueError", "stub", "returns None", "returns a string",
                      "returns a 3x3 tensor", "returns NaN", "returns a list")


# ---------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------

def test_all_chapter_4_exercises_are_registered():
    assert all(eid in EXERCISES for eid in IDS)
    for eid in IDS:
        ex = EXERCISES[eid]
        assert ex.title and ex.hint and ex.function_name == REFERENCES[eid].__name__


def test_batch_norm_reference_matches_torch_functional():
    x = torch.randn(10, 3, dtype=torch.float64)
    m, v = torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
    out, nm, nv = batch_norm_train(x, torch.ones(3), torch.zeros(3), m.clone(), v.clone())
    torch.testing.assert_close(out, F.batch_norm(x, m, v, training=True))
    torch.testing.assert_close(nm, m)
    torch.testing.assert_close(nv, v)


def test_gd_reference_equals_the_loop():
    rng = np.random.default_rng(0)
    X, y = torch.tensor(rng.normal(size=(20, 4))), torch.tensor(rng.normal(size=20))
    torch.testing.assert_close(gd_weights(X, y, 0.1, 37), _gd_loop(X, y, 0.1, 37))
