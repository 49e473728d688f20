"""Checks for the exercises of chapter 1 (01_neurons): the kernel perceptron, separability by linear
programming, Cover's count for points in any position, a predicted Hopfield load, the projection rule.

Every expected value is computed here by a few lines of independent code (a primal perceptron,
exact integers, a brute-force count of labelings by linear programming, a Hopfield network
simulated with NumPy), never by the chapter's modules, so that a bug there cannot make a wrong
answer pass.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import torch

from ..core import (
    Mismatch,
    as_array,
    as_bool,
    as_float,
    as_int,
    describe,
    exercise,
    expect,
    expect_close,
    expect_equal,
)

# ---------------------------------------------------------------------------
# Linear programs and point sets shared by several checks
# ---------------------------------------------------------------------------


def _lp_separable(Z: np.ndarray) -> bool:
    """Is there a w with z_i·w > 0 for every row z_i = y_i x_i? (LP feasibility of z_i·w >= 1)."""
    from scipy.optimize import linprog

    num, dim = Z.shape
    res = linprog(np.zeros(dim), A_ub=-Z, b_ub=-np.ones(num), bounds=[(None, None)] * dim, method="highs")
    if res.status == 0:
        if not np.all(Z @ res.x > 0):  # the LP's tolerance must not decide the case
            raise RuntimeError("the LP's separator does not separate strictly")
        return True
    if res.status == 2:
        return False
    raise RuntimeError(f"linprog failed: {res.message}")


def _brute_force_count(X: np.ndarray) -> int:
    """Labelings of the rows of X that a hyperplane through 0 realises, one LP per labeling.

    w separates y exactly when -w separates -y, so the first label is fixed to +1 and the count doubled.
    """
    X = np.asarray(X, dtype=np.float64)
    rest = itertools.product([1.0, -1.0], repeat=len(X) - 1)
    return 2 * sum(_lp_separable(np.array((1.0, *signs))[:, None] * X) for signs in rest)


def _cover(num_points: int, dim: int) -> int:
    """Cover's C(N, d) = 2 Σ_{i<d} binom(N-1, i) for points in general position: exact integer."""
    return 2 * sum(math.comb(num_points - 1, i) for i in range(dim))


# ---------------------------------------------------------------------------
# Exercise 1.1: the perceptron in dual form, with a kernel
# ---------------------------------------------------------------------------


def _primal_mistakes(X: np.ndarray, y: np.ndarray, max_epochs: int):
    """Rosenblatt's rule with a bias from w = 0, b = 0: mistakes per point and convergence."""
    w, b = np.zeros(X.shape[1]), 0.0
    mistakes = np.zeros(len(X), dtype=np.int64)
    for _ in range(max_epochs):
        before = mistakes.sum()
        for i, (x_i, y_i) in enumerate(zip(X, y)):
            if y_i * (x_i @ w + b) <= 0:  # on the boundary counts as a mistake
                w, b = w + y_i * x_i, b + y_i
                mistakes[i] += 1
        if mistakes.sum() == before:
            return mistakes, True
    return mistakes, False


def _dual_mistakes(K: np.ndarray, y: np.ndarray, max_epochs: int):
    """The same rule written with the Gram matrix: score_i = Σ_j α_j y_j K_ji."""
    alpha = np.zeros(len(y), dtype=np.int64)
    for _ in range(max_epochs):
        before = alpha.sum()
        for i in range(len(y)):
            if y[i] * ((alpha * y) @ K[:, i]) <= 0:
                alpha[i] += 1
        if alpha.sum() == before:
            return alpha, True
    return alpha, False


def _grid_separable_set(seed: int, num_points: int, dim: int, margin: float):
    """Points on a 0.25 grid at least ``margin`` from a random affine separator, with its labels.

    Every coordinate is a multiple of 1/4, so every kernel value and every score the perceptron
    forms is exact in float64 (and float32): the mistakes cannot depend on rounding.
    """
    rng = np.random.default_rng(seed)
    w_true = rng.normal(size=dim)
    w_true /= np.linalg.norm(w_true)
    b_true = float(2.0 * rng.normal())
    X, y = [], []
    while len(X) < num_points:
        x = np.round(rng.normal(size=dim) * 8) / 4  # N(0, 2²) rounded to the 0.25 grid
        score = x @ w_true + b_true
        if abs(score) >= margin:
            X.append(x)
            y.append(1.0 if score > 0 else -1.0)
    return np.array(X), np.array(y)


def _affine(X: np.ndarray) -> np.ndarray:
    """Gram matrix of the inputs augmented with a constant 1: the linear kernel with a bias."""
    return X @ X.T + 1.0


def _polynomial(X: np.ndarray, degree: int) -> np.ndarray:
    return (1.0 + X @ X.T) ** degree


def _kernel_cases():
    """(label, K, y, max_epochs, compare_exactly) for exercise 1.1."""
    cases = []
    for name, seed, n, d in [("A", 11, 40, 2), ("B", 14, 60, 5)]:
        X, y = _grid_separable_set(seed, n, d, 0.05)
        cases.append((f"the linear kernel x·x' + 1 on the separable set {name} ({n} points in R^{d})",
                      _affine(X), y, 1000, "primal", X))
    square = np.array([[0, 0], [0, 1], [1, 0], [1, 1]], dtype=float)
    xor = np.array([-1.0, 1.0, 1.0, -1.0])
    cases.append(("XOR with the linear kernel x·x' + 1 (not separable)", _affine(square), xor, 50, "primal", square))
    cases.append(("XOR with the kernel (1 + x·x')^2", _polynomial(square, 2), xor, 100, "dual", None))
    cube = np.array(list(itertools.product([-1.0, 1.0], repeat=3)))
    cases.append(("3-bit parity on {-1, 1}^3 with the kernel (1 + x·x')^3", _polynomial(cube, 3),
                  np.prod(cube, axis=1), 100, "dual", None))
    grid = np.array([(i, j) for i in range(-4, 5) for j in range(-4, 5) if i * i + j * j <= 2 or i * i + j * j >= 9],
                    dtype=float)
    cases.append(("a disc inside a ring of grid points with the kernel (1 + x·x')^2", _polynomial(grid, 2),
                  np.where((grid ** 2).sum(1) <= 2, 1.0, -1.0), 1000, "dual", None))
    X, y = _grid_separable_set(21, 30, 3, 0.2)
    cases.append(("the separable set C, stopped after one sweep (max_epochs=1)", _affine(X), y, 1, "primal", X))
    cases.append(("a single point", np.array([[5.0]]), np.array([-1.0]), 10, "dual", None))
    rng = np.random.default_rng(7)
    X = rng.normal(size=(30, 2))
    sq_dist = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    cases.append(("random labels on 30 Gaussian points with the kernel exp(-|x - x'|^2 / 0.5)",
                  np.exp(-sq_dist / 0.5), np.where(rng.random(30) < 0.5, 1.0, -1.0), 1000, "separates", None))
    return cases


def _unpack_kernel_perceptron(out, num_points: int):
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise Mismatch("a tuple (alpha, converged)", describe(out))
    alpha = as_array(out[0], (num_points,), f"alpha with one mistake count per point ({num_points})")
    expect(np.all(alpha == np.round(alpha)) and np.all(alpha >= 0),
           "alpha holding counts of mistakes (integers >= 0)", str(np.round(alpha, 3)[:8].tolist()))
    return alpha.astype(np.int64), as_bool(out[1], "converged as True or False")


@exercise("1.1", title="The kernel perceptron", function="kernel_perceptron", kind="extend",
          difficulty=2, minutes=30,
          blocked=("dlbook.perceptron.train_perceptron", "dlbook.perceptron.train_perceptron_reference"),
          hint="keep one mistake count per point instead of w: the score of point i is the sum over j "
               "of alpha_j y_j K[j, i]. Sweep the points in order and stop after a sweep with no mistake.")
def check_kernel_perceptron(kernel_perceptron, cases):
    """K is an (N, N) float64 Gram matrix, y holds ±1 as float64; compare with the perceptron's mistakes."""
    for label, K, y, max_epochs, compare, X in _kernel_cases():
        expected, converged = _dual_mistakes(K, y, max_epochs)
        if compare == "primal":
            primal, primal_converged = _primal_mistakes(X, y, max_epochs)
            if not np.array_equal(primal, expected) or primal_converged != converged:
                raise RuntimeError(f"exercise 1.1: the primal and dual perceptrons disagree on {label}")
        with cases.case(f"kernel_perceptron(K, y, max_epochs={max_epochs}) on {label}"):
            out = kernel_perceptron(torch.tensor(K), torch.tensor(y), max_epochs)
            alpha, got_converged = _unpack_kernel_perceptron(out, len(y))
            expect_equal(got_converged, converged)
            scores = y * ((alpha * y) @ K)
            if compare == "separates":
                worst = int(np.argmin(scores))
                expect(scores[worst] > 0, "every point on its side, y_i Σ_j α_j y_j K[j, i] > 0",
                       f"{scores[worst]:.4g} for point {worst}")
            else:
                what = ("the mistakes of the ordinary perceptron on the augmented inputs (x, 1)"
                        if compare == "primal" else "the mistakes of the perceptron rule, sweeping in order")
                expect(np.array_equal(alpha, expected), f"alpha = {expected.tolist()}, {what}",
                       str(alpha.tolist()))


# ---------------------------------------------------------------------------
# Exercise 1.2: linear separability by linear programming
# ---------------------------------------------------------------------------


def _separability_cases():
    """Hand-made cases (tiny margins, XOR, duplicates) as (label, X, y, expected)."""
    delta = 1e-3
    cases = [
        ("two points at angle 1e-3 with opposite labels (separable, tiny margin)",
         [[1.0, 0.0], [1.0, -delta]], [1.0, -1.0], True),
        ("XOR on the corners of a square centred at 0",
         [[1.0, 1.0], [-1.0, -1.0], [1.0, -1.0], [-1.0, 1.0]], [1.0, 1.0, -1.0, -1.0], False),
        ("XOR with a constant third coordinate (x1, x2, 1)",
         [[0, 0, 1], [0, 1, 1], [1, 0, 1], [1, 1, 1]], [-1.0, 1.0, 1.0, -1.0], False),
        ("AND with a constant third coordinate (x1, x2, 1)",
         [[0, 0, 1], [0, 1, 1], [1, 0, 1], [1, 1, 1]], [-1.0, -1.0, -1.0, 1.0], True),
        ("three nearly collinear points in R^3 (separable, tiny margin)",
         [[1.0, 0.0, 0.0], [1.0, -delta, 0.0], [0.0, 0.0, 1.0]], [1.0, -1.0, 1.0], True),
        ("three points, one wedged between two of the other label (not separable)",
         [[1.0, 0.0], [1.0, -delta], [1.0, delta]], [1.0, -1.0, -1.0], False),
        ("the same point twice with opposite labels",
         [[1.0, 2.0], [1.0, 2.0]], [1.0, -1.0], False),
        ("a single point", [[0.5, -2.0, 1.0]], [-1.0], True),
    ]
    return [(label, np.asarray(X, dtype=np.float32).astype(np.float64), np.asarray(y, dtype=np.float64), expected)
            for label, X, y, expected in cases]


def _gaussian_points(seed: int, num_points: int, dim: int) -> np.ndarray:
    """Standard Gaussian points, rounded to float32 (what the student receives)."""
    rng = np.random.default_rng(seed)
    return rng.normal(size=(num_points, dim)).astype(np.float32).astype(np.float64)


@exercise("1.2", title="Linear separability by linear programming", function="is_separable", kind="derive",
          difficulty=2, minutes=25, blocked=("dlbook.perceptron.is_linearly_separable",),
          hint="strict separability can be rescaled into linear inequalities with margin 1; "
               "whether such inequalities have a solution is a linear program with a zero objective.")
def check_is_separable(is_separable, cases):
    """Hand-made hard cases, then all 2^N labelings of Gaussian point sets against Cover's count."""
    for label, X, y, expected in _separability_cases():
        if _lp_separable(y[:, None] * X) != expected:
            raise RuntimeError(f"exercise 1.2: the case {label} is wrong")
        with cases.case(f"is_separable(X, y) on {label}"):
            got = is_separable(torch.tensor(X, dtype=torch.float32), torch.tensor(y, dtype=torch.float32))
            expect_equal(as_bool(got, f"{expected} (a bool)"), expected)
    for name, seed, s, n in [("P", 3, 5, 2), ("Q", 4, 6, 3)]:
        X = _gaussian_points(seed, s, n)
        count = _cover(s, n)
        truth = {signs: _lp_separable(np.array(signs)[:, None] * X)
                 for signs in itertools.product([1.0, -1.0], repeat=s)}
        if sum(truth.values()) != count:  # the check must agree with Cover's theorem
            raise RuntimeError(f"exercise 1.2: point set {name} is not in general position")
        with cases.case(f"is_separable(X, y) on point set {name} ({s} Gaussian points in R^{n}; "
                        f"Cover: {count} of {2 ** s} labelings are separable)"):
            got_count = 0
            for signs, expected in truth.items():
                got = is_separable(torch.tensor(X, dtype=torch.float32), torch.tensor(signs, dtype=torch.float32))
                got = as_bool(got, f"{expected} (a bool) for labels {list(map(int, signs))}")
                if got != expected:
                    raise Mismatch(f"{expected} for labels y = {list(map(int, signs))}", str(got))
                got_count += got
            expect_equal(got_count, count)


# ---------------------------------------------------------------------------
# Exercise 1.3: Cover's count for points in any position
# ---------------------------------------------------------------------------


def _moment_curve(ts, dim: int) -> np.ndarray:
    """Integer points (t, t^2, ..., t^dim) for distinct non-zero t: always in general position.

    Any dim of them form a matrix whose determinant is t_1 ... t_dim times a Vandermonde
    determinant, which is not 0; fewer of them are independent a fortiori.
    """
    ts = np.asarray(ts, dtype=np.int64)
    if len(set(ts.tolist())) != len(ts) or np.any(ts == 0):
        raise ValueError("the parameters of a moment curve must be distinct and non-zero")
    return ts[:, None] ** np.arange(1, dim + 1)


def _small_counting_cases():
    """(label, X) with small integer points in special position; the count comes from brute force."""
    rng = np.random.default_rng(13)
    cases = [
        ("two pairs of points on two lines through 0 in R^2", [[1, 0], [2, 0], [0, 1], [0, -3]]),
        ("5 points of R^3 in the plane z = 0, no two on a line through 0",
         [[1, 0, 0], [0, 1, 0], [1, 1, 0], [1, -2, 0], [3, 1, 0]]),
        ("6 points of R^3, four of them in one plane through 0",
         [[1, 0, 0], [0, 1, 0], [1, 1, 0], [2, -1, 0], [0, 0, 1], [1, 2, 3]]),
        ("a point, twice the point, and minus the point, with two others in R^2",
         [[1, 2], [2, 4], [-1, -2], [3, -1], [0, 1]]),
        ("4 points of R^3 with the zero vector among them", [[1, 0, 0], [0, 0, 0], [0, 1, 0], [1, 1, 1]]),
        ("one point of R^4", [[0, 2, 0, -1]]),
        ("5 points on a line through 0 in R^3", [[k, -k, 2 * k] for k in (1, 2, -1, -3, 5)]),
        ("6 points of R^4 in general position", _moment_curve([-4, -3, -1, 1, 2, 5], 4).tolist()),
    ]
    for k in range(2):
        cases.append((f"6 random points with coordinates in -1..1 in R^3 (draw {k + 1})",
                      rng.integers(-1, 2, size=(6, 3)).tolist()))
    return [(label, np.array(X, dtype=np.int64)) for label, X in cases]


def _large_counting_cases():
    """(label, X, expected) with 40 to 45 points, where the count follows from Cover's theorem on a subspace."""
    rng = np.random.default_rng(17)
    ts = rng.permutation([t for t in range(-30, 31) if t != 0])
    lines = _moment_curve(ts[:15], 3)
    # Each direction three times, as x, 2x and -x: 45 points on 15 lines through 0 in general position.
    repeated = rng.permutation(np.concatenate([lines, 2 * lines, -lines]))
    A = np.array([[1, 0, 0, 1], [0, 1, 0, 2], [0, 0, 1, -1]])     # rank 3: R^3 onto a subspace of R^4
    return [("45 points of R^3 on 15 lines through 0 (each direction x as x, 2x and -x)", repeated, _cover(15, 3)),
            ("45 points of R^4 that span only a 3-dimensional subspace", _moment_curve(ts[15:60], 3) @ A,
             _cover(45, 3)),
            ("40 points of R^3 in general position", _moment_curve(ts[:40], 3), _cover(40, 3))]


@exercise("1.3", title="Counting separable labelings of points in any position", function="count_dichotomies",
          kind="derive", difficulty=3, minutes=45,
          blocked=("dlbook.cover.cover_count", "dlbook.cover.cover_count_recursive",
                   "dlbook.cover.count_separable_dichotomies"),
          hint="count labelings by deleting the last point p: the labelings of the others that extend in two "
               "ways are those separable by a hyperplane through p, which you count by projecting the other "
               "points onto the space orthogonal to p. Points on one line through 0 act like one point; a "
               "zero point can never be on a side. Keep the arithmetic in integers.")
def check_count_dichotomies(count_dichotomies, cases):
    """Exact counts: brute force by linear programming for small sets, Cover's theorem on a subspace for large ones."""
    for label, X in _small_counting_cases():
        expected = _brute_force_count(X)
        with cases.case(f"count_dichotomies(X) for {label}"):
            got = count_dichotomies(torch.tensor(X))
            expect_equal(as_int(got, f"the integer {expected}"), expected)
    for label, X, expected in _large_counting_cases():
        with cases.case(f"count_dichotomies(X) for {label}", time_limit=30.0,
                        why=f"a search over the 2^{len(X)} labelings cannot finish; use the recursion"):
            got = count_dichotomies(torch.tensor(X))
            expect_equal(as_int(got, f"the integer {expected}"), expected)


# ---------------------------------------------------------------------------
# Exercise 1.4: predict the load at which a given fraction of bits flips
# ---------------------------------------------------------------------------

#: Network size and seeds of the measurement in exercise 1.4.
FLIP_SIZE, FLIP_SEEDS = 1000, (0, 1, 2)
#: Relative tolerance of the measurement: the finite-size bias at n = 1000 stays under 10%.
FLIP_MEASURED_RTOL = 0.2


def _measured_flip_rate(alpha: float, n: int = FLIP_SIZE, seeds=FLIP_SEEDS) -> float:
    """Store round(alpha n) random patterns by Hebb's rule; the fraction of bits one update flips."""
    flips = []
    for seed in seeds:
        rng = np.random.default_rng(100 + seed)
        patterns = rng.choice(np.array([-1.0, 1.0], dtype=np.float32), size=(max(1, round(alpha * n)), n))
        W = patterns.T @ patterns / n
        np.fill_diagonal(W, 0.0)
        updated = np.where(patterns @ W >= 0, 1.0, -1.0)       # sgn(0) = +1
        flips.append(float(np.mean(updated != patterns)))
    return float(np.mean(flips))


def _load_for(flip_rate: float) -> float:
    """The load alpha with 1/2 erfc(1/sqrt(2 alpha)) = flip_rate, by bisection on log(alpha)."""
    low, high = math.log(1e-4), math.log(1e4)
    for _ in range(200):
        mid = (low + high) / 2
        if 0.5 * math.erfc(1.0 / math.sqrt(2.0 * math.exp(mid))) < flip_rate:
            low = mid
        else:
            high = mid
    return math.exp((low + high) / 2)


@exercise("1.4", title="Predict the load for a given error rate", function="load_for_flip_rate", kind="predict",
          difficulty=2, minutes=20,
          blocked=("dlbook.hopfield.flip_probability", "dlbook.hopfield.one_step_flip_fraction",
                   "dlbook.hopfield.capacity_curve"),
          hint="the crosstalk is approximately Gaussian with variance alpha and a bit flips when it falls "
               "below -1; set that tail probability equal to the target and solve for alpha "
               "(scipy.special.erfcinv, or a bisection).")
def check_load_for_flip_rate(load_for_flip_rate, cases):
    """The predicted load, stored in simulated networks, gives the asked-for flip rate; also exact cases."""
    for flip_rate in (0.003, 0.02, 0.1):
        label = f"load_for_flip_rate({flip_rate})"
        with cases.case(label, time_limit=2.0, why="the task asks for a prediction from the theory, not a simulation"):
            alpha = as_float(load_for_flip_rate(flip_rate), "a load (one positive number)")
            expect(0 < alpha <= 5, "a load between 0 and 5", f"{alpha:.6g}")
        with cases.case(f"{label} = {alpha:.4g}: one update of a Hebbian network with "
                        f"{round(alpha * FLIP_SIZE)} patterns in {FLIP_SIZE} units"):
            measured = _measured_flip_rate(alpha)
            expect(abs(measured / flip_rate - 1) <= FLIP_MEASURED_RTOL,
                   f"about {flip_rate:g} of the bits to flip (within {FLIP_MEASURED_RTOL:.0%})",
                   f"{measured:.4g} flipped in the simulation ({len(FLIP_SEEDS)} networks)")
    for flip_rate in (1e-6, 0.3):
        with cases.case(f"load_for_flip_rate({flip_rate:g}), too far out to simulate here", time_limit=2.0,
                        why="the task asks for a prediction from the theory, not a simulation"):
            alpha = as_float(load_for_flip_rate(flip_rate), "a load (one positive number)")
            expect_close(alpha, _load_for(flip_rate), rtol=1e-6)


# ---------------------------------------------------------------------------
# Exercise 1.5: the projection rule
# ---------------------------------------------------------------------------


def _projection(patterns: np.ndarray) -> np.ndarray:
    """Orthogonal projection onto the span of the rows, by an SVD (rank-safe), with a zero diagonal."""
    U, singular, Vt = np.linalg.svd(patterns, full_matrices=False)
    basis = Vt[singular > singular.max() * 1e-10]                    # orthonormal rows spanning the patterns
    W = basis.T @ basis
    np.fill_diagonal(W, 0.0)
    return W


def _projection_cases():
    rng = np.random.default_rng(15)
    signs = np.array([-1.0, 1.0])
    half = rng.choice(signs, size=(50, 100))
    repeated = rng.choice(signs, size=(6, 20))
    repeated = np.concatenate([repeated, repeated[:2], -repeated[2:3]])   # dependent rows
    correlated = np.where(rng.random((12, 40)) < 0.8, 1.0, -1.0)          # mostly +1: strongly correlated
    return [("5 random patterns in 16 units", rng.choice(signs, size=(5, 16))),
            ("50 random patterns in 100 units (load 0.5, far beyond Hebb's rule)", half),
            ("12 correlated patterns in 40 units (80% of the bits +1)", correlated),
            ("9 patterns in 20 units, three of them repeats or negatives of others", repeated),
            ("a single pattern in 7 units", rng.choice(signs, size=(1, 7)))]


@exercise("1.5", title="Storing patterns exactly: the projection rule", function="projection_weights",
          kind="extend", difficulty=2, minutes=30,
          hint="W must act as the identity on every combination of the patterns and as zero on every "
               "vector orthogonal to all of them: the orthogonal projection onto their span. With the "
               "patterns as the rows of P, a pseudo-inverse also covers patterns that are linearly dependent.")
def check_projection_weights(projection_weights, cases):
    """Compare with the projection computed by an SVD; every stored pattern must be a fixed point."""
    for label, patterns in _projection_cases():
        num_units = patterns.shape[1]
        expected = _projection(patterns)
        if not np.all(np.where(patterns @ expected >= 0, 1.0, -1.0) == patterns):
            raise RuntimeError(f"exercise 1.5: the projection rule does not store {label}")
        with cases.case(f"projection_weights(patterns) for {label}"):
            W = as_array(projection_weights(torch.tensor(patterns)), (num_units, num_units),
                         f"W of shape ({num_units}, {num_units})")
            expect(np.array_equal(np.diag(W), np.zeros(num_units)), "a zero diagonal (no self-coupling)",
                   f"diagonal entries up to {np.abs(np.diag(W)).max():.3g}")
            expect(np.allclose(W, W.T, rtol=0, atol=1e-10), "a symmetric W",
                   f"|W - W^T| up to {np.abs(W - W.T).max():.3g}")
            unstable = np.flatnonzero(np.any(np.where(patterns @ W >= 0, 1.0, -1.0) != patterns, axis=1))
            expect(len(unstable) == 0, "every stored pattern a fixed point, sgn(W x) = x",
                   f"{len(unstable)} of {len(patterns)} patterns change under one update")
            error = np.abs(W - expected).max()
            expect(error <= 1e-8, "the projection onto the span of the patterns with its diagonal set to 0",
                   f"a W that differs from it by up to {error:.3g}")
