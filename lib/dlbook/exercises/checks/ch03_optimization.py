"""Checks for the exercises of chapter 3 (03_optimization): a new operation for the autograd
engine, exact step counts of gradient descent, one Adam step, and the noise floor of SGD with
momentum.

Every expected value comes from independent code here: torch.autograd for the engine's new
operation, NumPy for gradient descent and Adam, and a simulation of minibatch SGD with momentum
written in this file. Nothing calls dlbook.autograd, dlbook.optim, dlbook.quadratics or
dlbook.convergence, so a bug there cannot make a wrong answer pass. The student's functions
receive and return plain values only (numbers, tensors, tuples).
"""
from __future__ import annotations

import numpy as np
import torch

from ..core import Mismatch, as_array, as_float, as_int, describe, exercise, expect, expect_equal, seconds_taken

# ---------------------------------------------------------------------------
# Exercise 3.1: a new operation for the engine, a ** b with a tensor exponent
# ---------------------------------------------------------------------------


def _pow_pair(shape_a, shape_b, seed: int, *, low: float = 0.3, high: float = 2.5):
    """A positive base of ``shape_a`` and an exponent of ``shape_b`` (float64, seeded)."""
    gen = torch.Generator().manual_seed(seed)
    a = low + (high - low) * torch.rand(shape_a, generator=gen, dtype=torch.float64)
    b = 3 * torch.randn(shape_b, generator=gen, dtype=torch.float64)
    return a, b


def _autograd_pow(a, b, grad_out):
    """d(sum(grad_out * a ** b)) / d(a, b) by torch.autograd."""
    a, b = a.clone().requires_grad_(), b.clone().requires_grad_()
    (a**b).backward(grad_out)
    return a.grad, b.grad


def _pow_answer(answer, shape_a, shape_b):
    if not isinstance(answer, (tuple, list)) or len(answer) != 2:
        raise Mismatch("a pair (grad_a, grad_b)", describe(answer))
    return (as_array(answer[0], tuple(shape_a), f"grad_a of a's shape {tuple(shape_a)}"),
            as_array(answer[1], tuple(shape_b), f"grad_b of b's shape {tuple(shape_b)}"))


def _expect_gradient(name: str, got: np.ndarray, expected: torch.Tensor) -> None:
    """Relative error below 1e-10 in every entry; the message shows the worst entry."""
    expected = expected.numpy()
    error = np.abs(got - expected) / (1 + np.abs(expected))
    worst = np.unravel_index(np.argmax(error), error.shape)
    expect(error.max() <= 1e-10,
           f"{name} equal to torch.autograd's to 1e-10; at index {tuple(int(i) for i in worst)} "
           f"{expected[worst]:.10g}", f"{got[worst]:.10g}")


_POW_SHAPES = [
    ((3, 4), (3, 4), "same shapes (3, 4)"),
    ((3, 4), (4,), "a (3, 4), b (4,): b broadcast over rows"),
    ((2, 1, 4), (3, 1), "a (2, 1, 4), b (3, 1): both stretched to (2, 3, 4)"),
    ((5,), (), "a (5,), b a 0-dimensional tensor"),
    ((), (2, 3), "a a 0-dimensional tensor, b (2, 3)"),
    ((1, 3), (4, 1), "a (1, 3), b (4, 1): an outer product of shapes"),
]


@exercise("3.1", title="A new operation for the engine: a ** b with a tensor exponent",
          function="pow_backward", kind="extend", difficulty=2, minutes=40,
          blocked=("dlbook.autograd.Tensor", "dlbook.autograd.unbroadcast"),
          hint="differentiate a ** b once with respect to a (b fixed) and once with respect to b "
               "(a fixed), multiply by the incoming gradient, and then sum over every dimension "
               "that broadcasting added or stretched, so each gradient gets its input's shape.")
def check_pow_backward(pow_backward, cases):
    """a > 0 and b of broadcastable shapes, float64; compare with torch.autograd."""
    for seed, (shape_a, shape_b, label) in enumerate(_POW_SHAPES):
        a, b = _pow_pair(shape_a, shape_b, seed)
        out_shape = torch.broadcast_shapes(a.shape, b.shape)
        grad_out = torch.randn(out_shape, generator=torch.Generator().manual_seed(100 + seed), dtype=torch.float64)
        with cases.case(f"pow_backward(a, b, grad_out) with {label}"):
            got_a, got_b = _pow_answer(pow_backward(a.clone(), b.clone(), grad_out.clone()), shape_a, shape_b)
            expected_a, expected_b = _autograd_pow(a, b, grad_out)
            _expect_gradient("grad_a", got_a, expected_a)
            _expect_gradient("grad_b", got_b, expected_b)

    with cases.case("pow_backward with integer-valued exponents, zeros included, and a base near 1"):
        a = torch.tensor([[1.0 + 1e-9, 0.5, 2.0], [3.0, 1.0, 0.25]], dtype=torch.float64)
        b = torch.tensor([0.0, 1.0, -2.0], dtype=torch.float64)
        grad_out = torch.tensor([[1.0, -2.0, 0.5], [3.0, 1.5, -1.0]], dtype=torch.float64)
        got_a, got_b = _pow_answer(pow_backward(a.clone(), b.clone(), grad_out.clone()), (2, 3), (3,))
        expected_a, expected_b = _autograd_pow(a, b, grad_out)
        _expect_gradient("grad_a", got_a, expected_a)
        _expect_gradient("grad_b", got_b, expected_b)

    # Composition, as the engine would run it: y = (a ** b) ** c, backward through the outer
    # operation first, then the inner one with the gradient that the outer one returned.
    a, b = _pow_pair((3, 1, 5), (4, 1), 11, low=0.5, high=1.5)
    c = 0.5 + torch.rand(5, generator=torch.Generator().manual_seed(12), dtype=torch.float64)
    weights = torch.randn(3, 4, 5, generator=torch.Generator().manual_seed(13), dtype=torch.float64)
    with cases.case("pow_backward used twice by the chain rule on sum(w * (a ** b) ** c), "
                    "a (3, 1, 5), b (4, 1), c (5,)"):
        inner = a**b
        got_inner, got_c = _pow_answer(pow_backward(inner.clone(), c.clone(), weights.clone()), (3, 4, 5), (5,))
        got_a, got_b = _pow_answer(pow_backward(a.clone(), b.clone(), torch.tensor(got_inner)), (3, 1, 5), (4, 1))
        leaves = [t.clone().requires_grad_() for t in (a, b, c)]
        ((leaves[0] ** leaves[1]) ** leaves[2] * weights).sum().backward()
        for name, got, leaf in (("grad_a", got_a, leaves[0]), ("grad_b", got_b, leaves[1]),
                                ("grad_c", got_c, leaves[2])):
            _expect_gradient(name, got, leaf.grad)

    a, b = _pow_pair((1000, 800), (800,), 21)
    grad_out = torch.randn(1000, 800, generator=torch.Generator().manual_seed(22), dtype=torch.float64)
    expected_a, expected_b = _autograd_pow(a, b, grad_out)
    autograd_seconds = seconds_taken(_autograd_pow, a, b, grad_out)
    with cases.case("pow_backward(a, b, grad_out) with a (1000, 800) and b (800,)",
                    time_limit=max(0.1, 4 * autograd_seconds),
                    why=f"the task asks for tensor operations, not a loop over entries (autograd took "
                        f"{autograd_seconds:.3f} s here; the limit is 4 times that, at least 0.1 s)"):
        answer = pow_backward(a.clone(), b.clone(), grad_out.clone())
    with cases.case("the gradients of that (1000, 800) case"):
        got_a, got_b = _pow_answer(answer, (1000, 800), (800,))
        _expect_gradient("grad_a", got_a, expected_a)
        _expect_gradient("grad_b", got_b, expected_b)


# ---------------------------------------------------------------------------
# Exercise 3.2: how many steps gradient descent needs, exactly
# ---------------------------------------------------------------------------


def _spd(eigenvalues, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A symmetric matrix with these eigenvalues in a random orthonormal basis, and the basis."""
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.normal(size=(len(eigenvalues), len(eigenvalues))))
    A = (Q * np.asarray(eigenvalues, dtype=float)) @ Q.T
    return (A + A.T) / 2, Q


def _loss_ratio(eigenvalues, coordinates, lr, t) -> float:
    """h(θ_t) / h(θ_0) = Σ λ c² (1 - lr λ)^(2t) / Σ λ c² (each factor below 1 in size)."""
    weights = eigenvalues * coordinates**2
    return float((weights * np.abs(1 - lr * eigenvalues) ** (2 * t)).sum() / weights.sum())


def _reference_steps(eigenvalues, coordinates, lr, tolerance) -> int:
    """The first t with h(θ_t) <= tolerance h(θ_0): the ratio decreases in t, so double, then bisect."""
    if _loss_ratio(eigenvalues, coordinates, lr, 0) <= tolerance:
        return 0
    high = 1
    while _loss_ratio(eigenvalues, coordinates, lr, high) > tolerance:
        high *= 2
    low = high // 2  # ratio(low) > tolerance >= ratio(high)
    while high - low > 1:
        middle = (low + high) // 2
        if _loss_ratio(eigenvalues, coordinates, lr, middle) > tolerance:
            low = middle
        else:
            high = middle
    return high


def _steps_cases():
    """(label, eigenvalues, start in the eigenbasis, lr as a multiple of 1/L, tolerance, seed, time limit)."""
    geometric = lambda d, kappa: np.geomspace(1 / kappa, 1.0, d)  # noqa: E731
    ones = lambda d: np.ones(d)  # noqa: E731
    return [
        ("A = diag(1, 0.1) in a rotated basis, lr = 1/L, tolerance 1e-3",
         np.array([0.1, 1.0]), np.array([1.0, 1.0]), 1.0, 1e-3, 1, None),
        ("d = 20, kappa = 100, lr = 1/L, tolerance 1e-6", geometric(20, 100.0), ones(20), 1.0, 1e-6, 2, None),
        ("d = 20, kappa = 100, lr = 1.9/L (the stiff direction oscillates), tolerance 1e-6",
         geometric(20, 100.0), ones(20), 1.9, 1e-6, 3, None),
        ("a start with little weight on the flat directions: they matter only late, tolerance 1e-4",
         geometric(10, 1000.0), np.r_[1e-3 * np.ones(3), np.ones(7)], 1.0, 1e-4, 4, None),
        ("a start along the stiffest eigenvector only", geometric(8, 1e4), np.r_[np.zeros(7), 1.0],
         0.5, 1e-9, 5, None),
        ("a tolerance the start already meets (tolerance 1)", geometric(5, 10.0), ones(5), 1.0, 1.0, 6, None),
        ("d = 50, kappa = 1e6, lr = 1/L, tolerance 1e-8: millions of steps", geometric(50, 1e6), ones(50),
         1.0, 1e-8, 7, 2.0),
    ]


@exercise("3.2", title="How many steps gradient descent needs", function="steps_to_tolerance",
          kind="derive", difficulty=2, minutes=40,
          blocked=("dlbook.quadratics.gradient_descent", "dlbook.quadratics.run_on_quadratic",
                   "dlbook.convergence.steps_to_reach"),
          hint="in the eigenbasis of A the loss after t steps is a sum of terms that each shrink "
               "geometrically; the sum decreases with t, so you can search for the first t "
               "without running the iteration.")
def check_steps_to_tolerance(steps_to_tolerance, cases):
    """A: symmetric positive definite float64 tensor; theta0: float64 vector; answer: an integer."""
    for label, eigenvalues, start, step, tolerance, seed, time_limit in _steps_cases():
        A, Q = _spd(eigenvalues, seed)
        theta0 = Q @ start
        lr = step / eigenvalues.max()
        coordinates = Q.T @ theta0
        expected = _reference_steps(eigenvalues, coordinates, lr, tolerance)
        # The case must not sit on a knife's edge, where rounding in A could move the answer by one.
        assert expected == 0 or (_loss_ratio(eigenvalues, coordinates, lr, expected - 1) > tolerance * (1 + 1e-7)
                                 and _loss_ratio(eigenvalues, coordinates, lr, expected) < tolerance * (1 - 1e-7))
        kwargs = {} if time_limit is None else dict(
            time_limit=time_limit, why="running gradient descent step by step is too slow here; use the eigenbasis")
        with cases.case(f"steps_to_tolerance(A, theta0, lr, tolerance) with {label}", **kwargs):
            got = as_int(steps_to_tolerance(torch.tensor(A), torch.tensor(theta0), lr, tolerance),
                         "a number of steps (an integer)")
            expect_equal(got, expected)


# ---------------------------------------------------------------------------
# Exercise 3.3: one Adam step
# ---------------------------------------------------------------------------


def _reference_adam_step(theta, grad, m, v, t, lr, beta1, beta2, eps):
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * grad * grad
    theta = theta - lr * (m / (1 - beta1**t)) / (np.sqrt(v / (1 - beta2**t)) + eps)
    return theta, m, v


def _adam_problems():
    A, _ = _spd([0.05, 0.5, 2.0, 10.0], 7)
    return [
        ("an ill-conditioned quadratic in R^4", lambda th: A @ th, np.array([1.0, -2.0, 0.5, 3.0]),
         dict(lr=0.05, beta1=0.9, beta2=0.999, eps=1e-8), 80),
        ("h = sum log(1 + theta^2) in R^3", lambda th: 2 * th / (1 + th**2), np.array([3.0, -0.2, 1.5]),
         dict(lr=0.1, beta1=0.8, beta2=0.99, eps=1e-8), 60),
        ("h = sum theta^4 / 4 with a large eps (where eps goes matters)", lambda th: th**3,
         np.array([0.3, -1.2]), dict(lr=0.02, beta1=0.9, beta2=0.999, eps=0.5), 40),
        ("gradients of very different scales, beta1 = 0", lambda th: np.array([1e-3, -50.0]) * (1 + th),
         np.array([0.0, 0.0]), dict(lr=0.01, beta1=0.0, beta2=0.9, eps=1e-8), 25),
    ]


def _adam_answer(answer, d: int):
    if not isinstance(answer, (tuple, list)) or len(answer) != 3:
        raise Mismatch("a triple (theta, m, v)", describe(answer))
    return tuple(as_array(x, (d,), f"{name} of shape ({d},)") for name, x in zip(("theta", "m", "v"), answer))


@exercise("3.3", title="One step of Adam", function="adam_step", kind="transcribe", difficulty=1,
          minutes=20, blocked=("dlbook.optim.Adam", "dlbook.optim.AdamW"),
          hint="update both moving averages first, then correct each for its zero start with the "
               "step number t (which starts at 1), and add eps after the square root.")
def check_adam_step(adam_step, cases):
    """The check runs the student's step from t = 1 on and compares every iterate and moment."""
    for label, grad_np, theta0, settings, steps in _adam_problems():
        text = ", ".join(f"{k}={v}" for k, v in settings.items())
        with cases.case(f"{steps} calls of adam_step(theta, grad, m, v, t, {text}) on {label}"):
            d = len(theta0)
            ours = (theta0.copy(), np.zeros(d), np.zeros(d))
            theirs = tuple(torch.tensor(x) for x in ours)
            for t in range(1, steps + 1):
                grad = grad_np(ours[0])
                expected = _reference_adam_step(*ours[:1], grad, *ours[1:], t, **settings)
                answer = adam_step(theirs[0].clone(), torch.tensor(grad), theirs[1].clone(), theirs[2].clone(), t,
                                   **settings)
                got = _adam_answer(answer, d)
                for name, g, e in zip(("theta", "m", "v"), got, expected):
                    error = np.abs(g - e).max()
                    expect(error <= 1e-12 * (1 + np.abs(e).max()),
                           f"{name} = {np.round(e, 12).tolist()} after step t = {t}",
                           f"{np.round(g, 12).tolist()} (off by {error:.2g})")
                ours = expected  # continue from the exact values: report the first step that goes wrong
                theirs = tuple(torch.tensor(x) for x in expected)


# ---------------------------------------------------------------------------
# Exercise 3.4: predict the noise floor of minibatch SGD with momentum
# ---------------------------------------------------------------------------


def _least_squares_data(seed: int, curvatures, num_points: int = 1000, noise: float = 1.0):
    gen = torch.Generator().manual_seed(seed)
    curvatures = torch.tensor(curvatures, dtype=torch.float64)
    X = torch.randn(num_points, len(curvatures), generator=gen, dtype=torch.float64) * curvatures.sqrt()
    theta_true = torch.randn(len(curvatures), generator=gen, dtype=torch.float64)
    y = X @ theta_true + noise * torch.randn(num_points, generator=gen, dtype=torch.float64)
    return X, y


def _measured_floor(X, y, lr, momentum, batch_size, *, burn_in, steps, num_chains=100, seed=0) -> float:
    """Mean excess loss of heavy-ball minibatch SGD (torch.optim.SGD's convention, batches drawn
    with replacement), over chains started at the minimiser and the steps after the burn-in."""
    X, y = np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.float64)
    num_points, dim = X.shape
    theta_star = np.linalg.lstsq(X, y, rcond=None)[0]
    H = X.T @ X / num_points
    residual_star = X @ theta_star - y
    rng = np.random.default_rng(seed)
    delta = np.zeros((num_chains, dim))      # θ - θ*, one row per chain
    velocity = np.zeros((num_chains, dim))
    total = 0.0
    for t in range(burn_in + steps):
        batch = rng.integers(num_points, size=(num_chains, batch_size))
        X_batch = X[batch]                                                              # (R, B, d)
        residual = np.einsum("rbd,rd->rb", X_batch, delta) + residual_star[batch]       # (R, B)
        gradient = np.einsum("rbd,rb->rd", X_batch, residual) / batch_size              # (R, d)
        velocity = momentum * velocity + gradient
        delta = delta - lr * velocity
        if t >= burn_in:
            total += ((delta @ H) * delta).sum()
    return 0.5 * total / (steps * num_chains)


def _floor_cases():
    """(label, curvatures, lr, momentum, batch_size, data seed, burn-in steps)."""
    return [
        ("no momentum, B = 4, lr = 0.005, curvatures (4, 2, 1, 0.5)", (4.0, 2.0, 1.0, 0.5), 0.005, 0.0, 4, 1, 600),
        ("momentum 0.5, B = 1, lr = 0.002, curvatures (4, 2, 1, 0.5)", (4.0, 2.0, 1.0, 0.5), 0.002, 0.5, 1, 2, 750),
        ("momentum 0.9, B = 2, lr = 0.001, six curvatures from 2 to 0.25",
         (2.0, 1.0, 1.0, 0.5, 0.5, 0.25), 0.001, 0.9, 2, 3, 600),
        ("momentum 0.8, B = 16, lr = 0.004, curvatures (1, 1, 1, 0.25)", (1.0, 1.0, 1.0, 0.25), 0.004, 0.8, 16, 4, 300),
    ]


@exercise("3.4", title="Predict the noise floor of SGD with momentum", function="momentum_noise_floor",
          kind="predict", difficulty=2, minutes=30,
          blocked=("dlbook.quadratics.sgd_stationary_covariance", "dlbook.quadratics.sgd_offsets",
                   "dlbook.quadratics.least_squares", "dlbook.optim.SGD"),
          hint="under a constant gradient, momentum multiplies the step by a factor you derived in "
               "Section 3.3; near the minimum the noise is the per-example gradient covariance C at "
               "the least-squares solution, divided by the batch size.")
def check_momentum_noise_floor(momentum_noise_floor, cases):
    """X (N, d), y (N,) float64 tensors; the prediction is compared with a simulation made here."""
    for label, curvatures, lr, momentum, batch_size, seed, burn_in in _floor_cases():
        X, y = _least_squares_data(seed, curvatures)
        with cases.case(f"momentum_noise_floor(X, y, lr={lr}, momentum={momentum}, batch_size={batch_size}) "
                        f"with {label}"):
            predicted = as_float(momentum_noise_floor(X.clone(), y.clone(), lr, momentum, batch_size),
                                 "the predicted excess loss (a number)")
            measured = _measured_floor(X, y, lr, momentum, batch_size, burn_in=burn_in, steps=1500, seed=seed)
            expect(abs(predicted / measured - 1) <= 0.1,
                   f"a prediction within 10% of the excess loss {measured:.4g} that 100 simulated chains reach",
                   f"{predicted:.4g} ({predicted / measured:.2f} times the measurement)")
