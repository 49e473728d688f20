"""Learning curves of linear models and double descent (Chapter 18).

The teacher-student setting of Advani and Saxe: N parameters, P = αN samples
with inputs of variance 1/N per coordinate, targets y = X w̄ + ε with teacher
weights of variance σ_w², noise of variance σ_ε², and a student started at
weights of variance σ₀². Gradient flow on ½‖y - Xw‖² decouples in the
eigenbasis of XᵀX, so :func:`gradient_flow` gives the weights at any time in
closed form, and :func:`predicted_generalization_error` the expected error

    E_g(t) = (1/N) Σ_i [(σ_w² + σ₀²) e^{-2λ_i t} + σ_ε² (1 - e^{-λ_i t})² / λ_i] + σ_ε²,

the noise term counting only the non-zero eigenvalues λ_i of XᵀX. Its limit
t → ∞ (the minimum-norm solution) diverges at α = 1: the double-descent peak,
which :func:`random_features_errors` shows again for regression on a fixed
random ReLU layer as the width crosses the number of samples.

Everything here is float64: its purpose is a comparison with closed forms.
"""
from __future__ import annotations

from typing import NamedTuple

import torch

from .runtime import generator
from .validation import (
    as_tensor,
    check_float,
    check_int,
    check_ints,
    check_same_length,
    describe,
)


class TeacherStudent(NamedTuple):
    """A batch of teacher-student regression problems: X (reps, P, N), y (reps, P), teacher and initial weights."""
    X: torch.Tensor
    y: torch.Tensor
    w_teacher: torch.Tensor
    w_init: torch.Tensor


def teacher_student(num_params: int, num_samples: int, *, weight_std: float = 1.0, init_std: float = 0.0,
                    noise_std: float = 0.5, num_problems: int = 1, seed: int = 0) -> TeacherStudent:
    """``num_problems`` independent linear teacher-student problems in the Advani-Saxe scaling (Chapter 18)."""
    N = check_int("num_params", num_params, minimum=1)
    P = check_int("num_samples", num_samples, minimum=1)
    reps = check_int("num_problems", num_problems, minimum=1)
    weight_std = check_float("weight_std", weight_std, low=0.0)
    init_std = check_float("init_std", init_std, low=0.0)
    noise_std = check_float("noise_std", noise_std, low=0.0)
    gen = generator(seed)
    X = torch.randn(reps, P, N, generator=gen, dtype=torch.float64) / N ** 0.5
    w_teacher = weight_std * torch.randn(reps, N, generator=gen, dtype=torch.float64)
    w_init = init_std * torch.randn(reps, N, generator=gen, dtype=torch.float64)
    noise = noise_std * torch.randn(reps, P, generator=gen, dtype=torch.float64)
    y = (X @ w_teacher.unsqueeze(-1)).squeeze(-1) + noise
    return TeacherStudent(X, y, w_teacher, w_init)


def _problem(X, y, w_init):
    X = as_tensor("X", X, floating=True)
    if X.dim() not in (2, 3):
        raise ValueError(f"X must have shape (P, N) or (reps, P, N), got {describe(X)}")
    y = as_tensor("y", y, floating=True, shape=tuple(X.shape[:-1]))
    w_init = as_tensor("w_init", w_init, floating=True, shape=tuple(X.shape[:-2]) + (X.shape[-1],))
    return X, y, w_init


def gradient_flow(X, y, w_init, times) -> torch.Tensor:
    """Weights of gradient flow dw/dt = Xᵀ(y - Xw) at each of ``times``, in closed form (Chapter 18).

    In the eigenbasis V of XᵀX = V Λ Vᵀ the flow moves each coordinate by
    (1 - e^{-λt}) / λ times the initial gradient's coordinate (t where λ = 0).
    ``X`` is (P, N) or batched (reps, P, N); the result is (..., len(times), N).
    """
    X, y, w_init = _problem(X, y, w_init)
    times = as_tensor("times", times, ndim=1, floating=True, dtype=X.dtype)
    if (times < 0).any():
        raise ValueError("times must be non-negative")
    lam, V = torch.linalg.eigh(X.mT @ X)                                  # (..., N), (..., N, N)
    lam = lam.clamp_min(0.0)
    grad = (X.mT @ (y - (X @ w_init.unsqueeze(-1)).squeeze(-1)).unsqueeze(-1)).squeeze(-1)  # (..., N)
    coords = (V.mT @ grad.unsqueeze(-1)).squeeze(-1)                      # (..., N) in the eigenbasis
    lt = lam.unsqueeze(-2) * times.unsqueeze(-1)                           # (..., T, N)
    safe = torch.where(lam > 0, lam, torch.ones_like(lam)).unsqueeze(-2)
    gain = torch.where(lam.unsqueeze(-2) > 0, -torch.expm1(-lt) / safe, times.unsqueeze(-1).expand_as(lt))
    return w_init.unsqueeze(-2) + (gain * coords.unsqueeze(-2)) @ V.mT


def minimum_norm_solution(X, y) -> torch.Tensor:
    """The minimum-norm least-squares weights pinv(X) y, the t → ∞ limit of the flow from zero (Chapter 18)."""
    X = as_tensor("X", X, ndim=2, floating=True)
    y = as_tensor("y", y, shape=(X.shape[0],), floating=True)
    return torch.linalg.pinv(X) @ y


def ridge_solution(X, y, ridge: float) -> torch.Tensor:
    """Ridge weights argmin ½‖y - Xw‖² + ½ ridge ‖w‖² (Chapter 18); batched X (reps, P, N) is allowed."""
    X = as_tensor("X", X, floating=True)
    y = as_tensor("y", y, floating=True, shape=tuple(X.shape[:-1]))
    ridge = check_float("ridge", ridge, low=0.0, low_open=True)
    P, N = X.shape[-2:]
    if N > P:    # the dual form Xᵀ(XXᵀ + r I)⁻¹ y solves a P x P system instead of an N x N one
        K = X @ X.mT + ridge * torch.eye(P, dtype=X.dtype)
        return (X.mT @ torch.linalg.solve(K, y.unsqueeze(-1))).squeeze(-1)
    A = X.mT @ X + ridge * torch.eye(N, dtype=X.dtype)
    return torch.linalg.solve(A, (X.mT @ y.unsqueeze(-1)).squeeze(-1))


def generalization_error(w, w_teacher, noise_std: float) -> torch.Tensor:
    """Expected test error ‖w - w̄‖² / N + σ_ε² on a fresh input of variance 1/N per coordinate (Chapter 18)."""
    w = as_tensor("w", w, floating=True)
    w_teacher = as_tensor("w_teacher", w_teacher, floating=True)
    noise_std = check_float("noise_std", noise_std, low=0.0)
    return ((w - w_teacher) ** 2).mean(-1) + noise_std ** 2


def predicted_generalization_error(eigenvalues, times, *, weight_std: float = 1.0, init_std: float = 0.0,
                                   noise_std: float = 0.5, rtol: float = 1e-9) -> torch.Tensor:
    """E_g(t) from the eigenvalues of XᵀX (Chapter 18): shape (..., len(times)) for eigenvalues (..., N).

    Eigenvalues below rtol times the largest count as zero: their direction keeps
    its initial error σ_w² + σ₀² and gets no noise.
    """
    lam = as_tensor("eigenvalues", eigenvalues, floating=True)
    if lam.dim() == 0:
        raise ValueError(f"eigenvalues must have at least one dimension, got {describe(lam)}")
    times = as_tensor("times", times, ndim=1, floating=True, dtype=lam.dtype)
    weight_std = check_float("weight_std", weight_std, low=0.0)
    init_std = check_float("init_std", init_std, low=0.0)
    noise_std = check_float("noise_std", noise_std, low=0.0)
    nonzero = (lam > rtol * lam.amax(-1, keepdim=True)).unsqueeze(-2)
    lam = lam.clamp_min(0.0).unsqueeze(-2)
    lt = lam * times.unsqueeze(-1)
    signal = (weight_std ** 2 + init_std ** 2) * torch.exp(-2 * lt)
    noise = torch.where(nonzero, noise_std ** 2 * torch.expm1(-lt) ** 2 / torch.where(nonzero, lam, 1.0), 0.0)
    return (signal + noise).mean(-1) + noise_std ** 2


def predicted_ridge_error(eigenvalues, ridges, *, weight_std: float = 1.0, noise_std: float = 0.5) -> torch.Tensor:
    """Expected test error of ridge regression from the eigenvalues of XᵀX (Chapter 18), one value per ridge.

    (1/N) Σ_i [σ_w² (r / (λ_i + r))² + σ_ε² λ_i / (λ_i + r)²] + σ_ε²: the
    counterpart of :func:`predicted_generalization_error` for the penalty r,
    whose best value matches the best stopping time of the flow closely.
    """
    lam = as_tensor("eigenvalues", eigenvalues, floating=True)
    if lam.dim() == 0:
        raise ValueError(f"eigenvalues must have at least one dimension, got {describe(lam)}")
    ridges = as_tensor("ridges", ridges, ndim=1, floating=True, dtype=lam.dtype)
    if (ridges <= 0).any():
        raise ValueError("ridges must be positive")
    weight_std = check_float("weight_std", weight_std, low=0.0)
    noise_std = check_float("noise_std", noise_std, low=0.0)
    lam = lam.clamp_min(0.0).unsqueeze(-2)                                # (..., 1, N)
    r = ridges.unsqueeze(-1)                                               # (R, 1)
    terms = weight_std ** 2 * (r / (lam + r)) ** 2 + noise_std ** 2 * lam / (lam + r) ** 2
    return terms.mean(-1) + noise_std ** 2


def minimum_norm_error(num_params: int, num_samples: int, *, weight_std: float = 1.0, init_std: float = 0.0,
                       noise_std: float = 0.5) -> float:
    """Expected long-time error of the flow for Gaussian inputs, exact at finite N and P (Chapter 18).

    P > N + 1: σ_ε² (1 + N / (P - N - 1)); P < N - 1: (σ_w² + σ₀²)(1 - P/N) + σ_ε² (1 + P / (N - P - 1)).
    Infinite in between: the interpolation peak.
    """
    N = check_int("num_params", num_params, minimum=1)
    P = check_int("num_samples", num_samples, minimum=1)
    weight_std = check_float("weight_std", weight_std, low=0.0)
    init_std = check_float("init_std", init_std, low=0.0)
    noise_std = check_float("noise_std", noise_std, low=0.0)
    if P > N + 1:
        return noise_std ** 2 * (1 + N / (P - N - 1))
    if P < N - 1:
        return (weight_std ** 2 + init_std ** 2) * (1 - P / N) + noise_std ** 2 * (1 + P / (N - P - 1))
    return float("inf")


def random_relu_features(X, num_features: int, *, seed: int = 0) -> torch.Tensor:
    """Features ReLU(X W / √d) of a fixed random first layer with standard Gaussian W (Chapter 18)."""
    X = as_tensor("X", X, ndim=2, floating=True)
    num_features = check_int("num_features", num_features, minimum=1)
    W = torch.randn(X.shape[1], num_features, generator=generator(seed), dtype=torch.float64)
    return torch.relu(X @ W.to(X.dtype) / X.shape[1] ** 0.5)


class RandomFeaturesFit(NamedTuple):
    """Per width: test and training mean squared error and the norm of the readout weights."""
    test_errors: torch.Tensor
    train_errors: torch.Tensor
    readout_norms: torch.Tensor


def random_features_fit(X_train, y_train, X_test, y_test, widths, *, ridge: float = 0.0,
                        seed: int = 0) -> RandomFeaturesFit:
    """Fit a linear readout on random ReLU features of each width; errors and readout norms (Chapter 18).

    With ``ridge`` = 0 the readout is the minimum-norm least-squares fit (it
    interpolates once the width reaches the number of samples); with ridge > 0
    it is ridge regression. The features of every width are the first columns
    of one random layer, so the widths are nested.
    """
    X_train = as_tensor("X_train", X_train, ndim=2, floating=True)
    y_train = as_tensor("y_train", y_train, ndim=1, floating=True)
    X_test = as_tensor("X_test", X_test, shape=(None, X_train.shape[1]), floating=True)
    y_test = as_tensor("y_test", y_test, ndim=1, floating=True)
    check_same_length("X_train", X_train, "y_train", y_train)
    check_same_length("X_test", X_test, "y_test", y_test)
    widths = check_ints("widths", widths, minimum=1)
    ridge = check_float("ridge", ridge, low=0.0)
    both = random_relu_features(torch.cat([X_train, X_test]), max(widths), seed=seed)
    test, train, norms = [], [], []
    for width in widths:
        F_train, F_test = both[:len(X_train), :width], both[len(X_train):, :width]
        if ridge > 0:
            a = ridge_solution(F_train, y_train, ridge)
        else:
            a = minimum_norm_solution(F_train, y_train)
        test.append(((F_test @ a - y_test) ** 2).mean())
        train.append(((F_train @ a - y_train) ** 2).mean())
        norms.append(a.norm())
    return RandomFeaturesFit(torch.stack(test), torch.stack(train), torch.stack(norms))


def random_features_errors(X_train, y_train, X_test, y_test, widths, *, ridge: float = 0.0,
                           seed: int = 0) -> torch.Tensor:
    """Test mean squared error of :func:`random_features_fit` for each width (Chapter 18)."""
    return random_features_fit(X_train, y_train, X_test, y_test, widths, ridge=ridge, seed=seed).test_errors
