"""Tests of dlbook.regularization (Chapter 4)."""
import math

import pytest
import torch
import torch.nn.functional as F

from dlbook import regularization as reg


def _least_squares(n=40, d=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=g, dtype=torch.float64) * torch.linspace(0.2, 2.0, d, dtype=torch.float64)
    y = X @ torch.randn(d, generator=g, dtype=torch.float64) + 0.3 * torch.randn(n, generator=g, dtype=torch.float64)
    return X, y


def test_weight_decay_step_and_penalty_gradient():
    theta = torch.tensor([1.0, -2.0], dtype=torch.float64)
    torch.testing.assert_close(reg.weight_decay_step(theta, torch.zeros(2), 0.05, 0.1), 0.995 * theta)
    w = theta.clone().requires_grad_(True)
    reg.l2_penalty([w], 0.3).backward()
    torch.testing.assert_close(w.grad, 0.3 * theta)


@pytest.mark.parametrize("optimizer,momentum", [("sgd", 0.0), ("sgd", 0.9), ("adam", 0.0)])
def test_l2_in_the_loss_equals_torch_weight_decay(optimizer, momentum):
    X, y = _least_squares()
    a = reg.decay_trajectory(X, y, optimizer=optimizer, mode="l2", mu=0.1, lr=0.01, steps=50, momentum=momentum)
    b = reg.decay_trajectory(X, y, optimizer=optimizer, mode="coupled", mu=0.1, lr=0.01, steps=50, momentum=momentum)
    torch.testing.assert_close(a, b, rtol=0, atol=1e-12)


def test_decoupled_differs_from_coupled_for_adam_but_not_for_plain_sgd():
    X, y = _least_squares()
    kw = dict(mu=0.1, lr=0.01, steps=100)
    adam = reg.decay_trajectory(X, y, optimizer="adam", mode="coupled", **kw)
    adamw = reg.decay_trajectory(X, y, optimizer="adam", mode="decoupled", **kw)
    assert (adam[-1] - adamw[-1]).abs().max() > 1e-3
    sgd = reg.decay_trajectory(X, y, optimizer="sgd", mode="coupled", **kw)
    sgdw = reg.decay_trajectory(X, y, optimizer="sgd", mode="decoupled", **kw)
    torch.testing.assert_close(sgd, sgdw, rtol=0, atol=1e-12)


def test_ridge_equals_eigen_shrinkage_of_least_squares():
    X, y = _least_squares()
    gram = X.T @ X / len(X)
    lam, Q = torch.linalg.eigh(gram)
    ols = reg.ridge_solution(X, y, 0.0)
    ridge = reg.ridge_solution(X, y, 0.5)
    torch.testing.assert_close(Q.T @ ridge, reg.ridge_shrinkage(lam, 0.5) * (Q.T @ ols), rtol=0, atol=1e-12)


def test_gradient_descent_equals_closed_form_shrinkage():
    X, y = _least_squares()
    lam, Q = torch.linalg.eigh(X.T @ X / len(X))
    path = reg.gradient_descent_path(X, y, lr=0.1, steps=60)
    ols = reg.ridge_solution(X, y, 0.0)
    for t in (0, 1, 7, 60):
        torch.testing.assert_close(Q.T @ path[t], reg.early_stopping_shrinkage(lam, 0.1, t) * (Q.T @ ols),
                                   rtol=0, atol=1e-12)


def test_early_stopping_shrinkage_limits_at_the_equivalent_time():
    lr, mu = 0.01, 0.5
    t = round(reg.equivalent_steps(lr, mu))
    assert t == 200
    lam = torch.tensor([1e-4, 1e-3, 50.0], dtype=torch.float64)
    es, ridge = reg.early_stopping_shrinkage(lam, lr, t), reg.ridge_shrinkage(lam, mu)
    assert torch.all((es[:2] / ridge[:2] - 1).abs() < 0.02)   # small λ: both ≈ λ/μ
    assert es[2] > 0.999 and ridge[2] > 0.99                   # large λ: both ≈ 1
    assert torch.all(torch.diff(reg.early_stopping_shrinkage(torch.linspace(0, 100, 50), lr, t)) >= 0)


def test_best_epoch_with_patience():
    losses = [5, 4, 3, 3.5, 3.2, 2.9, 3.0, 3.1, 3.3, 2.0]
    assert reg.best_epoch(losses, 3) == reg.EarlyStop(best=5, stopped=8)
    assert reg.best_epoch(losses, 5) == (9, 9)
    assert reg.best_epoch([1.0], 2) == (0, 0)


def test_dropout_statistics_and_eval_identity():
    x = torch.ones(200_000)
    out = reg.dropout(x, 0.3, seed=1)
    kept = out[out != 0]
    assert torch.allclose(kept, torch.full_like(kept, 1 / 0.7))
    assert abs((out == 0).double().mean().item() - 0.3) < 5 * math.sqrt(0.21 / 200_000)
    assert abs(out.mean().item() - 1) < 5 * math.sqrt(0.3 / 0.7 / 200_000)
    assert torch.equal(reg.dropout(x, 0.3, training=False), x)
    assert torch.equal(reg.dropout(x, 1.0), torch.zeros_like(x))
    ref = F.dropout(x, 0.3, training=True)  # same law as torch's dropout
    assert set(torch.unique(ref).tolist()) == set(torch.unique(out).tolist())


def test_dropout_module_draws_a_new_mask_each_call_from_its_own_seed():
    x = torch.ones(10_000)
    layer, twin = reg.Dropout(0.4, seed=3), reg.Dropout(0.4, seed=3)
    torch.manual_seed(0)
    first, second = layer(x), layer(x)
    torch.manual_seed(1)  # the global stream plays no part
    assert torch.equal(first, twin(x)) and torch.equal(second, twin(x))
    assert not torch.equal(first, second)
    assert torch.allclose(torch.unique(first), torch.tensor([0.0, 1 / 0.6]))
    assert torch.equal(reg.Dropout(0.4).eval()(x), x)
    assert torch.equal(reg.Dropout(1.0)(x), torch.zeros_like(x))


def test_dropout_marginal_loss_closed_form_matches_monte_carlo():
    X, y = _least_squares(30, 4)
    w = torch.tensor([0.5, -1.0, 2.0, 0.3], dtype=torch.float64)
    exact = reg.dropout_marginal_loss(X, y, w, 0.7)
    mc = reg.dropout_marginal_loss(X, y, w, 0.7, num_masks=20_000, seed=2)
    assert abs(mc / exact - 1) < 0.01


def test_flip_labels_changes_exactly_the_requested_fraction():
    y = torch.arange(1000) % 10
    noisy = reg.flip_labels(y, 0.3, 10, seed=5)
    assert (noisy != y).sum().item() == 300
    assert noisy.min() >= 0 and noisy.max() <= 9
    assert torch.equal(reg.flip_labels(y, 0.0, 10), y)


def test_smoothed_cross_entropy_matches_torch():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(7, 5, generator=g, dtype=torch.float64)
    y = torch.randint(0, 5, (7,), generator=g)
    for eps in (0.0, 0.1, 0.5):
        torch.testing.assert_close(reg.smoothed_cross_entropy(logits, y, eps),
                                   F.cross_entropy(logits, y, label_smoothing=eps), rtol=0, atol=1e-12)
    targets = reg.smoothed_targets(y, 5, 0.2)
    assert targets.dtype == torch.float32
    torch.testing.assert_close(targets.sum(1), torch.ones(7))
    assert reg.smoothed_targets(y, 5, 0.2, dtype=torch.float64).dtype == torch.float64


def test_optimal_smoothed_logits_are_reached_by_optimization():
    gap, loss = optimum = reg.optimal_smoothed_logits(10, 0.1)
    assert optimum.gap == gap and optimum.loss == loss
    assert gap == pytest.approx(4.5109, abs=1e-4) and loss == pytest.approx(0.50029, abs=1e-5)
    z = torch.zeros(1, 10, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([z], max_iter=200, tolerance_grad=1e-12, tolerance_change=1e-14)

    def closure():
        opt.zero_grad()
        value = reg.smoothed_cross_entropy(z, torch.tensor([0]), 0.1)
        value.backward()
        return value

    opt.step(closure)
    assert (z[0, 0] - z[0, 1:].mean()).item() == pytest.approx(gap, abs=1e-4)


def test_soft_cross_entropy_gradient_is_q_minus_p_over_t():
    g = torch.Generator().manual_seed(1)
    G = torch.randn(4, 6, generator=g, dtype=torch.float64, requires_grad=True)
    Fl = torch.randn(4, 6, generator=g, dtype=torch.float64)
    T = 3.0
    reg.soft_cross_entropy(G, Fl, T).backward()
    expected = (F.softmax(G.detach() / T, 1) - F.softmax(Fl / T, 1)) / (T * 4)
    torch.testing.assert_close(G.grad, expected, rtol=0, atol=1e-15)
    assert reg.soft_cross_entropy(G, Fl, T).item() > 0   # a cross-entropy, with its minus sign


def test_distillation_loss_mixes_soft_and_hard_terms():
    g = torch.Generator().manual_seed(2)
    G, Fl = torch.randn(5, 4, generator=g), torch.randn(5, 4, generator=g)
    y = torch.tensor([0, 1, 2, 3, 0])
    mixed = reg.distillation_loss(G, Fl, y, 2.0, 0.25)
    expected = 0.25 * 4 * reg.soft_cross_entropy(G, Fl, 2.0) + 0.75 * F.cross_entropy(G, y)
    torch.testing.assert_close(mixed, expected)
    torch.testing.assert_close(reg.distillation_loss(G, Fl, y, 2.0, 0.0), F.cross_entropy(G, y))


def test_shift_images_moves_pixels_without_wrapping():
    X = torch.arange(64, dtype=torch.float32).reshape(1, 64)
    right = reg.shift_images(X, 1, 0).reshape(8, 8)
    assert torch.equal(right[:, 0], torch.zeros(8))
    assert torch.equal(right[:, 1:], X.reshape(8, 8)[:, :-1])
    down = reg.shift_images(X, 0, 2).reshape(8, 8)
    assert torch.equal(down[2:], X.reshape(8, 8)[:-2]) and torch.equal(down[:2], torch.zeros(2, 8))
    Xa, ya = reg.augment_with_shifts(X, torch.tensor([3]), 1)
    assert Xa.shape == (9, 64) and torch.equal(ya, torch.full((9,), 3))


def test_label_noise_run_is_cached_and_uses_decoupled_decay(monkeypatch):
    from dlbook import train

    train.clear_cache()
    config = reg.NoiseRun(0.2, weight_decay=1.0, num_train=100, widths=(64, 16, 10), epochs=3)
    built = []
    original = torch.optim.AdamW
    monkeypatch.setattr(torch.optim, "AdamW", lambda *a, **k: built.append(k) or original(*a, **k))
    history = reg.label_noise_run(config)
    assert history.num_epochs == 3 and 0 <= history["train_acc"][-1] <= 1
    assert set(history.values) == {"train_loss", "train_acc", "val_loss", "val_acc"}
    assert built == [{"lr": 3e-3, "weight_decay": 1.0}]
    again = reg.label_noise_run(config)  # from the cache: no second optimizer, equal curves
    assert len(built) == 1 and again.values == history.values
    with pytest.raises(TypeError, match="frozen dataclass"):
        reg.label_noise_run({"flip_fraction": 0.2})
    train.clear_cache()


def test_label_noise_run_with_dropout_does_not_depend_on_the_global_stream():
    from dlbook import train

    config = reg.NoiseRun(0.3, dropout=0.5, num_train=60, widths=(64, 8, 10), epochs=2)
    train.clear_cache()
    torch.manual_seed(0)
    first = reg.label_noise_run(config)
    train.clear_cache()
    torch.manual_seed(1)
    assert reg.label_noise_run(config).values == first.values
    train.clear_cache()


def test_label_noise_run_flips_labels_and_is_reproducible():
    from dlbook import train

    train.clear_cache()
    small = dict(num_train=60, widths=(64, 8, 10), epochs=2)
    clean = reg.label_noise_run(reg.NoiseRun(0.0, **small))
    train.clear_cache()
    assert reg.label_noise_run(reg.NoiseRun(0.0, **small)).values == clean.values
    noisy = reg.label_noise_run(reg.NoiseRun(0.5, **small))
    assert noisy.values != clean.values
    train.clear_cache()


@pytest.mark.parametrize("call,match", [
    (lambda: reg.l2_penalty([], 0.1), "parameters"),
    (lambda: reg.l2_penalty([torch.ones(2)], -1.0), "mu"),
    (lambda: reg.weight_decay_step(torch.ones(2), torch.ones(3), 0.1, 0.1), "grad"),
    (lambda: reg.weight_decay_step(torch.ones(2, dtype=torch.int64), torch.ones(2), 0.1, 0.1), "theta"),
    (lambda: reg.ridge_solution(torch.ones(3, 2), torch.ones(4), 0.1), "X and y"),
    (lambda: reg.ridge_solution(torch.ones(3, 2, dtype=torch.int64), torch.ones(3), 0.1), "X"),
    (lambda: reg.early_stopped_solution(torch.ones(3, 2), torch.ones(3, dtype=torch.int64), 0.1, 2), "y"),
    (lambda: reg.decay_trajectory(torch.ones(3, 2, dtype=torch.int64), torch.ones(3), optimizer="sgd",
                                  mode="l2", mu=0.1, lr=0.1, steps=2), "X"),
    (lambda: reg.decay_trajectory(torch.ones(3, 2), torch.ones(3), optimizer="rmsprop", mode="l2",
                                  mu=0.1, lr=0.1, steps=2), "optimizer"),
    (lambda: reg.decay_trajectory(torch.ones(3, 2), torch.ones(3), optimizer="sgd", mode="both",
                                  mu=0.1, lr=0.1, steps=2), "mode"),
    (lambda: reg.early_stopping_shrinkage(torch.tensor([1.0, 30.0]), 0.1, 5), "lr"),
    (lambda: reg.early_stopping_shrinkage(torch.tensor([-1.0]), 0.1, 5), "eigenvalues"),
    (lambda: reg.equivalent_steps(0.1, 0.0), "mu"),
    (lambda: reg.best_epoch([], 2), "val_losses"),
    (lambda: reg.best_epoch([1.0, 2.0], 0), "patience"),
    (lambda: reg.dropout(torch.ones(3), 1.5), "drop_prob"),
    (lambda: reg.dropout(torch.ones(3, dtype=torch.int64), 0.5), "x"),
    (lambda: reg.dropout(torch.ones(3), 0.5, training=1), "training"),
    (lambda: reg.dropout_marginal_loss(torch.ones(3, 2), torch.ones(3), torch.ones(3), 0.5), "w"),
    (lambda: reg.dropout_marginal_loss(torch.ones(3, 2), torch.ones(3), torch.ones(2), 1.5), "keep_prob"),
    (lambda: reg.dropout_marginal_loss(torch.ones(3, 2, dtype=torch.int64), torch.ones(3), torch.ones(2), 0.5),
     "X"),
    (lambda: reg.flip_labels(torch.tensor([0, 1]), 1.2, 10), "fraction"),
    (lambda: reg.flip_labels(torch.tensor([0, 11]), 0.1, 10), "y"),
    (lambda: reg.flip_labels(torch.tensor([0.0, 1.0]), 0.1, 10), "y"),
    (lambda: reg.smoothed_cross_entropy(torch.ones(3, 4), torch.tensor([0, 1]), 0.1), "y"),
    (lambda: reg.smoothed_cross_entropy(torch.ones(3, 4), torch.tensor([0, 1, 2]), 1.5), "eps"),
    (lambda: reg.soft_cross_entropy(torch.ones(3, 4), torch.ones(3, 5), 2.0), "teacher_logits"),
    (lambda: reg.soft_cross_entropy(torch.ones(3, 4), torch.ones(3, 4), 0.0), "temperature"),
    (lambda: reg.distillation_loss(torch.ones(3, 4), torch.ones(3, 4), torch.tensor([0, 1, 2]), 2.0, 2.0), "alpha"),
    (lambda: reg.shift_images(torch.ones(2, 10), 1, 0), "X"),
    (lambda: reg.shift_images(torch.ones(2, 64), 1.5, 0), "dx"),
    (lambda: reg.smoothed_cross_entropy(torch.ones(3, 4, dtype=torch.int64), torch.tensor([0, 1, 2]), 0.1),
     "logits"),
    (lambda: reg.smoothed_targets(torch.tensor([0, 1]), 3, 0.1, dtype=torch.int64), "dtype"),
    (lambda: reg.NoiseRun(0.2, dropout=1.0), "dropout"),
    (lambda: reg.Dropout(1.5), "drop_prob"),
    (lambda: reg.Dropout(0.5)(torch.ones(3, dtype=torch.int64)), "x"),
    (lambda: reg.NoiseRun(1.5), "flip_fraction"),
    (lambda: reg.NoiseRun(0.2, widths=[64, 10]), "widths"),
    (lambda: reg.NoiseRun(0.2, device=3.5), "device"),
])
def test_bad_arguments_are_named(call, match):
    with pytest.raises((TypeError, ValueError), match=match):
        call()


def test_early_stopped_solution_equals_the_gradient_descent_loop():
    X, y = _least_squares()
    path = reg.gradient_descent_path(X, y, lr=0.2, steps=40)
    for t in (0, 5, 40):
        torch.testing.assert_close(reg.early_stopped_solution(X, y, 0.2, t), path[t], rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="rank"):
        reg.early_stopped_solution(torch.ones(5, 2, dtype=torch.float64), torch.ones(5), 0.1, 3)


def test_ill_conditioned_regression_shapes_and_determinism():
    a = reg.ill_conditioned_regression(20, 5, num_val=30, seed=3)
    b = reg.ill_conditioned_regression(20, 5, num_val=30, seed=3)
    assert a.X_train.shape == (20, 5) and a.y_test.shape == (30,)
    assert torch.equal(a.X_train, b.X_train)
    with pytest.raises(ValueError, match="noise"):
        reg.ill_conditioned_regression(noise=-1.0)
