"""Checks for the exercises of chapter 17 (17_symmetry): symmetries, orbits, a ReLU normal form, SGD noise.

Expected values are computed here by independent NumPy code (explicit permutation
matrices, brute-force orbits, exact integers, Kronecker-product linear solves) and by
simulations the checks run themselves, never by calling dlbook.symmetry,
dlbook.alignment or dlbook.sgd_noise.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import torch

from ..core import Mismatch, as_array, as_float, describe, exercise, expect, expect_close

# ---------------------------------------------------------------------------
# Networks as lists of (W, b), in NumPy
# ---------------------------------------------------------------------------


def _random_layers(widths, seed, bias_scale=0.5):
    rng = np.random.default_rng(seed)
    return [(rng.normal(size=(n_out, n_in)) / math.sqrt(n_in), rng.normal(size=n_out) * bias_scale)
            for n_in, n_out in zip(widths[:-1], widths[1:])]


def _forward(layers, X, activation):
    h = X
    for index, (W, b) in enumerate(layers):
        h = h @ W.T + b
        if index < len(layers) - 1:
            h = np.tanh(h) if activation == "tanh" else np.maximum(h, 0.0)
    return h


def _as_torch(layers):
    return [(torch.tensor(W), torch.tensor(b)) for W, b in layers]


def _unpack_layers(out, reference):
    if not isinstance(out, (list, tuple)) or len(out) != len(reference):
        raise Mismatch(f"a list of {len(reference)} (W, b) pairs", describe(out))
    layers = []
    for index, ((W_ref, b_ref), layer) in enumerate(zip(reference, out)):
        if not isinstance(layer, (list, tuple)) or len(layer) != 2:
            raise Mismatch(f"layer {index} as a pair (W, b)", f"{describe(layer)} in {describe(out)}")
        layers.append((as_array(layer[0], W_ref.shape, f"W of layer {index} with shape {W_ref.shape}"),
                       as_array(layer[1], b_ref.shape, f"b of layer {index} with shape {b_ref.shape}")))
    return layers


def _expect_same_function(got, layers, activation, num_inputs, what):
    X = np.random.default_rng(7).normal(size=(200, num_inputs))
    reference = _forward(layers, X, activation)
    gap = np.abs(_forward(got, X, activation) - reference).max() / max(np.abs(reference).max(), 1e-300)
    expect(gap < 1e-10, f"{what} to compute the same function ({activation} hidden units)",
           f"outputs that differ by up to {gap:.3g} of their size")


# ---------------------------------------------------------------------------
# Exercise 17.1: permuting hidden units
# ---------------------------------------------------------------------------


def _permuted_reference(layers, perms):
    """W_l -> P_l W_l P_{l-1}^T with explicit matrices, (P x)_i = x_{perm[i]}."""
    matrices = [np.eye(len(p))[p] for p in perms]
    out = []
    for index, (W, b) in enumerate(layers):
        left = matrices[index] if index < len(layers) - 1 else np.eye(W.shape[0])
        right = matrices[index - 1].T if index > 0 else np.eye(W.shape[1])
        out.append((left @ W @ right, left @ b))
    return out


@exercise("17.1", title="Permuting hidden units", function="permute_hidden_units",
          kind="transcribe", difficulty=1, minutes=10, blocked=("dlbook.symmetry.permute_hidden",),
          hint="whatever you do to the rows of one layer, undo it in the columns of the next; a "
               "bias moves with its unit, and the output layer stays put.")
def check_permute_hidden_units(permute_hidden_units, cases):
    """Layers are float64 tensors (W of shape (out, in), b of shape (out,)); perms are int64 tensors."""
    for label, widths, seed in [("one hidden layer 3-5-2", [3, 5, 2], 0),
                                ("two hidden layers 4-6-5-3", [4, 6, 5, 3], 1),
                                ("three hidden layers 2-4-4-4-1", [2, 4, 4, 4, 1], 2),
                                ("a hidden layer of one unit 3-1-2", [3, 1, 2], 3),
                                ("a wide hidden layer 6-32-2", [6, 32, 2], 4)]:
        rng = np.random.default_rng(100 + seed)
        layers = _random_layers(widths, seed)
        perms = [rng.permutation(n) for n in widths[1:-1]]
        with cases.case(f"permute_hidden_units(layers, perms) on {label}"):
            out = permute_hidden_units(_as_torch(layers), [torch.tensor(p) for p in perms])
            got = _unpack_layers(out, layers)
            _expect_same_function(got, layers, "tanh", widths[0], "the permuted network")
            expected = _permuted_reference(layers, perms)
            for index, ((W, b), (W_ref, b_ref)) in enumerate(zip(got, expected)):
                expect(np.allclose(W, W_ref, atol=1e-12) and np.allclose(b, b_ref, atol=1e-12),
                       f"layer {index} to be P_l W P_(l-1)^T with new unit i = old unit perms[l][i]",
                       "other weights (a function-preserving permutation, but not the one in perms?)")


# ---------------------------------------------------------------------------
# Exercise 17.2: the orbit of a network with twin units
# ---------------------------------------------------------------------------


def _twin_network(num_inputs, num_outputs, groups, seed, *, equal_in_weights=(), zero_out=0, dead=0):
    """One hidden layer whose units come in groups of exact copies of sizes ``groups``.

    ``equal_in_weights``: pairs of groups that share in-weights and bias but not out-weights;
    ``zero_out`` more singleton units with zero out-weights; ``dead`` more singleton units
    with a bias so negative that they never fire on inputs of moderate size.
    """
    rng = np.random.default_rng(seed)
    rows, biases, columns = [], [], []
    prototypes = [(rng.normal(size=num_inputs), rng.normal(), rng.normal(size=num_outputs)) for _ in groups]
    for first, second in equal_in_weights:
        w, b, _ = prototypes[first]
        prototypes[second] = (w, b, prototypes[second][2])
    for (w, b, v), size in zip(prototypes, groups):
        rows += [w] * size
        biases += [b] * size
        columns += [v] * size
    for _ in range(zero_out):
        rows.append(rng.normal(size=num_inputs))
        biases.append(rng.normal())
        columns.append(np.zeros(num_outputs))
    for _ in range(dead):
        rows.append(rng.normal(size=num_inputs))
        biases.append(-100.0)
        columns.append(rng.normal(size=num_outputs))
    order = rng.permutation(len(rows))  # twins need not sit next to each other
    W1 = np.array(rows)[order]
    b1 = np.array(biases)[order]
    W2 = np.array(columns).T[:, order]
    return W1, b1, W2


def _orbit_by_enumeration(W1, b1, W2):
    """Distinct (W1, b1, W2) over all n! orderings of the hidden units (tiny n only)."""
    seen = set()
    for perm in itertools.permutations(range(len(b1))):
        p = list(perm)
        seen.add(np.concatenate([W1[p].ravel(), b1[p], W2[:, p].ravel()]).tobytes())
    return len(seen)


def _log10_orbit_exact(W1, b1, W2):
    """log10(n! / prod m_k!) with exact integers; m_k are the sizes of the groups of identical units."""
    signatures = np.concatenate([W1, b1[:, None], W2.T], axis=1)
    _, counts = np.unique(signatures, axis=0, return_counts=True)
    orbit = math.factorial(len(b1)) // math.prod(math.factorial(int(m)) for m in counts)
    return math.log10(orbit)


@exercise("17.2", title="How many twins does this network have?", function="log10_orbit_size",
          kind="derive", difficulty=2, minutes=25,
          blocked=("dlbook.symmetry.orbit_size_bruteforce", "dlbook.symmetry.log10_group_order"),
          hint="a permutation leaves the parameters unchanged exactly when it only swaps units that "
               "are identical in everything they carry; count those permutations (the stabiliser) "
               "and divide.")
def check_log10_orbit_size(log10_orbit_size, cases):
    """W1 (n, m), b1 (n,), W2 (k, n) float64 tensors; the answer is log10 of the orbit size."""
    settings = [
        ("3 distinct units", (2, 1, [1, 1, 1], 0, {}), True),
        ("5 units, two of them identical", (3, 2, [2, 1, 1, 1], 1, {}), True),
        ("6 units: a triple and a pair of identical units", (2, 2, [3, 2, 1], 2, {}), True),
        ("5 units, two with the same in-weights and bias but different out-weights",
         (3, 2, [1, 1, 1, 1, 1], 3, {"equal_in_weights": [(0, 1)]}), True),
        ("6 units, two of which have zero out-weights", (2, 2, [1, 1, 1, 1], 4, {"zero_out": 2}), True),
        ("6 units, two of which never fire", (2, 1, [2, 1, 1], 5, {"dead": 2}), True),
        ("4 identical units", (3, 3, [4], 6, {}), True),
        ("1000 units in groups of 1 to 5 copies", (8, 10, [1] * 900 + [2] * 30 + [3] * 8 + [4] * 3 + [5] * 2, 7, {}),
         False),
        ("2000 distinct units", (4, 3, [1] * 2000, 8, {}), False),
    ]
    for label, (num_inputs, num_outputs, groups, seed, extra), small in settings:
        W1, b1, W2 = _twin_network(num_inputs, num_outputs, groups, seed, **extra)
        expected = _log10_orbit_exact(W1, b1, W2)
        if small and not math.isclose(10 ** expected, _orbit_by_enumeration(W1, b1, W2), rel_tol=1e-9):
            raise RuntimeError("exercise 17.2: exact count and enumeration disagree")
        with cases.case(f"log10_orbit_size(W1, b1, W2) for {label}", time_limit=2.0,
                        why="count the twins, do not enumerate the permutations"):
            got = as_float(log10_orbit_size(torch.tensor(W1), torch.tensor(b1), torch.tensor(W2)),
                           "log10 of the orbit size as one number")
            expect_close(got, expected, rtol=1e-9, atol=1e-9)


# ---------------------------------------------------------------------------
# Exercise 17.3: a normal form for the ReLU rescaling symmetry
# ---------------------------------------------------------------------------


def _random_rescaling(layers, rng):
    """Rescale every hidden unit by a random positive factor, compensating in the next layer."""
    out = [(W.copy(), b.copy()) for W, b in layers]
    for index in range(len(out) - 1):
        W, b = out[index]
        scales = np.where((W ** 2).sum(axis=1) + b ** 2 > 0, np.exp(rng.normal(size=len(b))), 1.0)
        out[index] = (W * scales[:, None], b * scales)
        W_next, b_next = out[index + 1]
        out[index + 1] = (W_next / scales[None, :], b_next)
    return out


def _normal_form_reference(layers):
    """Unit norm of (row of W, bias) for every hidden unit, from the first hidden layer on."""
    out = [(W.copy(), b.copy()) for W, b in layers]
    for index in range(len(out) - 1):
        W, b = out[index]
        norms = np.sqrt((W ** 2).sum(axis=1) + b ** 2)
        norms = np.where(norms > 0, norms, 1.0)
        out[index] = (W / norms[:, None], b / norms)
        W_next, b_next = out[index + 1]
        out[index + 1] = (W_next * norms[None, :], b_next)
    return out


@exercise("17.3", title="A normal form for the ReLU rescaling", function="normalise_relu_units",
          kind="extend", difficulty=2, minutes=30, blocked=("dlbook.symmetry.rescale_relu",),
          hint="relu(a z) = a relu(z) for a > 0 lets you move any positive factor from a unit's "
               "incoming weights to its outgoing ones; dividing by the norm is one such factor. "
               "The order of the layers matters.")
def check_normalise_relu_units(normalise_relu_units, cases):
    """Layers are float64 tensors; the answer has unit-norm (row, bias) for each hidden unit."""
    settings = [("one hidden layer 3-5-2", [3, 5, 2], 0), ("two hidden layers 4-6-5-3", [4, 6, 5, 3], 1),
                ("three hidden layers 2-8-8-8-1", [2, 8, 8, 8, 1], 2), ("a wide layer 10-64-4", [10, 64, 4], 3),
                ("a unit whose weights and bias are all zero, 3-4-4-2", [3, 4, 4, 2], 4)]
    for label, widths, seed in settings:
        rng = np.random.default_rng(200 + seed)
        layers = _random_layers(widths, seed)
        if "zero" in label:
            W, b = layers[1]
            W[2], b[2] = 0.0, 0.0  # unit 2 of the second hidden layer: nothing to normalise
        twin = _random_rescaling(layers, rng)  # a unit with no weights keeps its factor 1
        reference = _normal_form_reference(layers)
        with cases.case(f"normalise_relu_units(layers) on {label}"):
            got = _unpack_layers(normalise_relu_units(_as_torch(layers)), layers)
            _expect_same_function(got, layers, "relu", widths[0], "the normalised network")
            for index, (W, b) in enumerate(got[:-1], start=1):
                norms = np.sqrt((W ** 2).sum(axis=1) + b ** 2)
                original = np.sqrt((reference[index - 1][0] ** 2).sum(axis=1) + reference[index - 1][1] ** 2)
                wanted = np.where(original > 0, 1.0, 0.0)
                worst = np.abs(norms - wanted).max()
                expect(worst < 1e-10, f"every unit of hidden layer {index} with |(row of W, bias)| = 1 "
                       "(0 for a unit with no weights)", f"norms off by up to {worst:.3g}")
            for index, ((W, b), (W_ref, b_ref)) in enumerate(zip(got, reference)):
                expect(np.allclose(W, W_ref, rtol=1e-10, atol=1e-12) and np.allclose(b, b_ref, rtol=1e-10, atol=1e-12),
                       f"layer {index} of the normal form (positive factors only, layers in order)", "other weights")
        with cases.case(f"normalise_relu_units on a rescaled twin of {label} (the same normal form)"):
            got_twin = _unpack_layers(normalise_relu_units(_as_torch(twin)), layers)
            gap = max(np.abs(W - W_ref).max() for (W, _), (W_ref, _) in zip(got_twin, reference))
            expect(gap < 1e-9, "the normal form of the original network (rescaled twins share one)",
                   f"weights that differ by up to {gap:.3g}")


# ---------------------------------------------------------------------------
# Exercises 17.4 and 17.5: predictions about SGD's stationary cloud, checked against simulations
# ---------------------------------------------------------------------------


def _stationary_second_moments(A, noise):
    """Stationary covariance of s_{t+1} = A s_t + e_t, Cov e = noise: vec(S) = (I - A ⊗ A)^{-1} vec(noise)."""
    n = len(A)
    return np.linalg.solve(np.eye(n * n) - np.kron(A, A), noise.reshape(-1)).reshape(n, n)


def _momentum_exact(curvature, noise_variance, lr, momentum):
    """Var(θ - θ*) of the heavy ball, from its 2-d state (θ - θ*, velocity); inf when unstable."""
    A = np.array([[1 - lr * curvature, momentum], [-lr * curvature, momentum]])  # (δ, v) -> (δ', v')
    if np.abs(np.linalg.eigvals(A)).max() >= 1:
        return math.inf
    noise = lr ** 2 * noise_variance * np.ones((2, 2))  # both δ' and v' receive -lr ξ
    return float(_stationary_second_moments(A, noise)[0, 0])


def _heavy_ball_matrix(curvature, lr, momentum):
    return np.array([[1 - lr * curvature, momentum], [-lr * curvature, momentum]])


def _measured_momentum_variance(curvature, noise_variance, lr, momentum, rng, *, chains=4000):
    """Simulate heavy-ball chains from rest at the optimum; mean of Var(θ - θ*) and its standard error.

    Each chain's time average of δ² over a window after the burn-in is one independent sample.
    """
    memory = -1 / math.log(np.abs(np.linalg.eigvals(_heavy_ball_matrix(curvature, lr, momentum))).max())
    burn_in, window = int(6 * memory) + 20, int(4 * memory) + 20  # the start fades as e^(-2t/memory)
    delta, velocity, total = np.zeros(chains), np.zeros(chains), np.zeros(chains)
    for step in range(burn_in + window):
        gradient = curvature * delta + math.sqrt(noise_variance) * rng.normal(size=chains)
        velocity = momentum * velocity - lr * gradient
        delta = delta + velocity
        if step >= burn_in:
            total += delta ** 2
    per_chain = total / window
    return per_chain.mean(), per_chain.std(ddof=1) / math.sqrt(chains)


@exercise("17.4", title="Predict the spread of SGD with momentum", function="momentum_stationary_variance",
          kind="predict", difficulty=3, minutes=40,
          blocked=("dlbook.sgd_noise.stationary_covariance", "dlbook.sgd_noise.diagonal_stationary_variance",
                   "dlbook.sgd_noise.simulate_quadratic_sgd"),
          hint="with momentum the state is the pair (θ - θ*, velocity), and one step is linear in it; "
               "its stationary covariance solves a 2 x 2 discrete Lyapunov equation. Eliminating "
               "the velocity instead gives an AR(2) process for θ alone.")
def check_momentum_stationary_variance(momentum_stationary_variance, cases):
    """The prediction against simulated chains (5 standard errors) and, sharper, the exact 2-d Lyapunov value."""
    rng = np.random.default_rng(17)
    settings = [(1.0, 1.0, 0.1, 0.0), (2.0, 0.5, 0.05, 0.9), (1.0, 2.0, 1.0, 0.5), (4.0, 1.0, 0.5, 0.3),
                (0.5, 1.0, 0.02, 0.95), (3.0, 0.2, 0.3, -0.3)]
    for curvature, noise_variance, lr, momentum in settings:
        exact = _momentum_exact(curvature, noise_variance, lr, momentum)
        mean, error = _measured_momentum_variance(curvature, noise_variance, lr, momentum, rng)
        if abs(mean - exact) > 5 * error:
            raise RuntimeError("exercise 17.4: the simulation disagrees with the exact value")
        label = f"momentum_stationary_variance({curvature:g}, {noise_variance:g}, {lr:g}, {momentum:g})"
        with cases.case(label, time_limit=1.0, why="the task asks for a prediction, not a simulation"):
            got = as_float(momentum_stationary_variance(curvature, noise_variance, lr, momentum),
                           "the stationary variance as one finite number")
            expect(abs(got - mean) <= 5 * error,
                   f"about {mean:.5g}, the variance measured over 4,000 simulated chains (± {5 * error:.2g})",
                   f"{got:.6g}")
            expect_close(got, exact, rtol=1e-6)
    with cases.case("momentum_stationary_variance(1, 1, 3.5, 0.5): lr·λ = 3.5 > 2(1 + β), the iterates diverge"):
        got = momentum_stationary_variance(1.0, 1.0, 3.5, 0.5)
        value = got.item() if isinstance(got, (torch.Tensor, np.ndarray)) and np.size(got) == 1 else got
        expect(isinstance(value, (float, np.floating)) and value == math.inf,
               "inf (there is no stationary distribution)", describe(got))


def _averaged_exact(curvature, noise_variance, lr, num_averaged):
    """Var of the mean of T stationary AR(1) iterates, summing the covariances ρ^|i-j| Σ directly."""
    rho = 1 - lr * curvature
    variance = lr * noise_variance / (curvature * (2 - lr * curvature))
    lags = np.arange(num_averaged)
    return float(variance * (rho ** np.abs(lags[:, None] - lags[None, :])).sum() / num_averaged ** 2)


def _measured_averaged_variance(curvature, noise_variance, lr, num_averaged, rng, *, chains=8000):
    """Run plain SGD chains into stationarity, average T consecutive iterates; their variance and its error."""
    rho = 1 - lr * curvature
    burn_in = int(6 / -math.log(abs(rho))) + 20 if rho != 0 else 5
    delta, total = np.zeros(chains), np.zeros(chains)
    for step in range(burn_in + num_averaged):
        delta = rho * delta - lr * math.sqrt(noise_variance) * rng.normal(size=chains)
        if step >= burn_in:
            total += delta
    variance = (total / num_averaged).var(ddof=1)
    return variance, variance * math.sqrt(2 / (chains - 1))  # the average is Gaussian


@exercise("17.5", title="Predict how much averaging the iterates helps", function="averaged_iterate_variance",
          kind="predict", difficulty=2, minutes=30,
          blocked=("dlbook.sgd_noise.stationary_covariance", "dlbook.sgd_noise.diagonal_stationary_variance",
                   "dlbook.sgd_noise.autocorrelation_time", "dlbook.sgd_noise.simulate_quadratic_sgd"),
          hint="the iterates are not independent: two of them s steps apart have covariance "
               "(1 - lr λ)^s times the stationary variance. Add up all the pairs.")
def check_averaged_iterate_variance(averaged_iterate_variance, cases):
    """The prediction against simulated chains (5 standard errors) and the exact double sum."""
    rng = np.random.default_rng(175)
    settings = [(1.0, 1.0, 0.1, 1), (2.0, 1.0, 0.025, 5), (1.0, 0.5, 0.1, 200), (4.0, 2.0, 0.375, 10),
                (0.5, 1.0, 0.1, 40), (1.0, 1.0, 1.0, 7)]
    for curvature, noise_variance, lr, num_averaged in settings:
        exact = _averaged_exact(curvature, noise_variance, lr, num_averaged)
        mean, error = _measured_averaged_variance(curvature, noise_variance, lr, num_averaged, rng)
        if abs(mean - exact) > 5 * error:
            raise RuntimeError("exercise 17.5: the simulation disagrees with the exact value")
        label = f"averaged_iterate_variance({curvature:g}, {noise_variance:g}, {lr:g}, {num_averaged})"
        with cases.case(label, time_limit=1.0, why="the task asks for a prediction, not a simulation"):
            got = as_float(averaged_iterate_variance(curvature, noise_variance, lr, num_averaged),
                           "the variance of the average as one number")
            expect(abs(got - mean) <= 5 * error,
                   f"about {mean:.5g}, measured over 8,000 simulated chains (± {5 * error:.2g})", f"{got:.6g}")
            expect_close(got, exact, rtol=1e-6)
    with cases.case("averaged_iterate_variance(1, 1, 0.001, 10**9): an average over 10^9 iterates", time_limit=1.0,
                    why="the task asks for the sum in closed form; a loop over 10^9 lags takes minutes"):
        got = as_float(averaged_iterate_variance(1.0, 1.0, 0.001, 10 ** 9), "one number")
        rho, variance, T = 0.999, 0.001 / 1.999, 10 ** 9
        expected = variance / T * ((1 + rho) / (1 - rho) - 2 * rho * (1 - rho ** T) / (T * (1 - rho) ** 2))
        expect_close(got, expected, rtol=1e-6)
