"""Autoencoders: a linear one that finds the PCA subspace, nonlinear ones built from the book's MLPs,
and the yardsticks used to compare codes (Chapter 9).

An autoencoder is an ``nn.Sequential(encoder, decoder)``: ``model[0]`` maps an input
to its code, ``model[1]`` maps a code back. The loss is the squared error summed over
features and averaged over examples, so that on centred data the best linear code of
size k reaches exactly sum_{j>k} lambda_j (dlbook.pca's convention).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import nn

from . import data, nets, train
from .runtime import generator
from .validation import as_tensor, check_device, check_dtype, check_float, check_int, check_ints, describe


def linear_autoencoder(num_inputs: int, code_size: int, *, init_std: float = 0.1, seed: int = 0,
                       dtype: torch.dtype = torch.float32, device="cpu") -> nn.Sequential:
    """A bias-free linear autoencoder x -> D E x with untied E (code_size x num_inputs) and D (Chapter 9).

    Weights are N(0, init_std^2) draws from ``seed``. On centred data its global minima
    span the top-k principal subspace (Baldi and Hornik).
    """
    num_inputs = check_int("num_inputs", num_inputs, minimum=1)
    code_size = check_int("code_size", code_size, minimum=1, maximum=num_inputs)
    init_std = check_float("init_std", init_std, low=0.0, low_open=True)
    dtype, device = check_dtype("dtype", dtype), check_device("device", device)
    rng = generator(check_int("seed", seed, minimum=0))
    encoder = nn.Linear(num_inputs, code_size, bias=False, dtype=dtype, device=device)
    decoder = nn.Linear(code_size, num_inputs, bias=False, dtype=dtype, device=device)
    with torch.no_grad():
        for layer in (encoder, decoder):
            layer.weight.copy_(init_std * torch.randn(layer.weight.shape, generator=rng, dtype=torch.float64))
    return nn.Sequential(encoder, decoder)


def mirrored_autoencoder(widths, *, activation: str = "relu", seed: int = 0,
                         dtype: torch.dtype = torch.float32, device="cpu") -> nn.Sequential:
    """An MLP encoder with widths (inputs, hidden..., code) and the mirrored decoder (Chapter 9).

    ``mirrored_autoencoder((64, 128, 2))`` is 64-128-2-128-64: the code layer and the
    output are linear, every hidden layer uses ``activation`` (both halves come from
    nets.mlp).
    """
    widths = check_ints("widths", widths, minimum=1, min_length=2)
    seed = check_int("seed", seed, minimum=0)
    encoder = nets.mlp(widths, activation=activation, seed=seed, dtype=dtype, device=device)
    decoder = nets.mlp(widths[::-1], activation=activation, seed=seed + 1, dtype=dtype, device=device)
    return nn.Sequential(encoder, decoder)


def squared_error(X_hat, X) -> torch.Tensor:
    """The reconstruction loss (1/n) ||X - X_hat||_F^2: summed over features, averaged over rows (Chapter 9)."""
    X_hat = as_tensor("X_hat", X_hat, ndim=2, floating=True)
    X = as_tensor("X", X, ndim=2, floating=True)
    if X_hat.shape != X.shape:
        raise ValueError(f"X_hat and X must have the same shape, got {tuple(X_hat.shape)} and {tuple(X.shape)}")
    return ((X_hat - X) ** 2).sum(1).mean()


def _autoencoder(model) -> nn.Sequential:
    if not isinstance(model, nn.Sequential) or len(model) != 2:
        raise TypeError(f"model must be an autoencoder nn.Sequential(encoder, decoder), got {describe(model)}")
    return model


@torch.no_grad()
def encode(model, X) -> torch.Tensor:
    """The codes model[0](X) of the rows of X, without gradients (Chapter 9)."""
    model = _autoencoder(model)
    return model[0](as_tensor("X", X, ndim=2, floating=True))


@torch.no_grad()
def reconstruction_error(model, X) -> float:
    """The per-example squared error (1/n) ||X - model(X)||_F^2 in evaluation mode (Chapter 9)."""
    model = _autoencoder(model)
    X = as_tensor("X", X, ndim=2, floating=True)
    was_training = model.training
    model.eval()
    error = squared_error(model(X), X).item()
    model.train(was_training)
    return error


def decoder_matrix(model) -> torch.Tensor:
    """The decoder weight D (num_inputs x code_size) of a linear autoencoder: its columns span the code's
    image (Chapter 9)."""
    model = _autoencoder(model)
    if not isinstance(model[1], nn.Linear) or model[1].bias is not None:
        raise TypeError("model must be a bias-free linear autoencoder (from linear_autoencoder)")
    return model[1].weight.detach().clone()


def mix_code(model, M) -> nn.Sequential:
    """The linear autoencoder with encoder M E and decoder D M^-1: the same map x -> D E x (Chapter 9).

    Any invertible k x k matrix M gives the same reconstructions and loss, so the loss
    cannot single out the eigenvectors, only their span.
    """
    model = _autoencoder(model)
    E, D = model[0].weight.detach(), decoder_matrix(model)
    M = as_tensor("M", M, shape=(E.shape[0], E.shape[0]), floating=True).to(E)
    if torch.linalg.matrix_rank(M.double()) < len(M):
        raise ValueError("M must be invertible")
    mixed = linear_autoencoder(E.shape[1], E.shape[0], dtype=E.dtype, device=E.device)
    with torch.no_grad():
        mixed[0].weight.copy_(M @ E)
        mixed[1].weight.copy_(torch.linalg.solve(M.T, D.T).T)   # D M^-1
    return mixed


def linear_probe_accuracy(Z_train, y_train, Z_test, y_test, *, max_iter: int = 2000) -> float:
    """Test accuracy of a logistic regression trained on codes: how linearly readable the labels are
    (Chapter 9).

    Codes are standardised with the training set's mean and spread first, so that codes of
    different scales are compared fairly.
    """
    from sklearn.linear_model import LogisticRegression

    Z_train = as_tensor("Z_train", Z_train, ndim=2, floating=True).detach().cpu().double()
    Z_test = as_tensor("Z_test", Z_test, shape=(None, Z_train.shape[1]), floating=True).detach().cpu().double()
    y_train = as_tensor("y_train", y_train, ndim=1).cpu()
    y_test = as_tensor("y_test", y_test, ndim=1).cpu()
    if len(Z_train) != len(y_train) or len(Z_test) != len(y_test):
        raise ValueError("codes and labels must have the same number of rows")
    max_iter = check_int("max_iter", max_iter, minimum=1)
    mean, std = Z_train.mean(0), Z_train.std(0).clamp(min=1e-12)
    probe = LogisticRegression(max_iter=max_iter)
    probe.fit(((Z_train - mean) / std).numpy(), y_train.numpy())
    return float(probe.score(((Z_test - mean) / std).numpy(), y_test.numpy()))


def image_grid(images, *, rows: int, image_shape=(8, 8), gap: int = 1) -> torch.Tensor:
    """Tile flattened images (N, h*w) into one array with ``rows`` rows, separated by NaN gaps
    (drawn blank by imshow) (Chapter 9)."""
    images = as_tensor("images", images, ndim=2, floating=True).detach().cpu().double()
    rows = check_int("rows", rows, minimum=1)
    h, w = check_ints("image_shape", image_shape, minimum=1)
    if images.shape[1] != h * w:
        raise ValueError(f"images must have {h * w} columns for image_shape {(h, w)}, got {images.shape[1]}")
    gap = check_int("gap", gap, minimum=0)
    cols = math.ceil(len(images) / rows)
    tiles = torch.full((rows * cols, h + gap, w + gap), math.nan, dtype=torch.float64)
    tiles[:len(images), :h, :w] = images.reshape(-1, h, w)
    canvas = tiles.reshape(rows, cols, h + gap, w + gap).permute(0, 2, 1, 3)   # (rows, h+gap, cols, w+gap)
    return canvas.reshape(rows * (h + gap), cols * (w + gap))[:rows * (h + gap) - gap, :cols * (w + gap) - gap]


# ---------------------------------------------------------------------------
# Trained autoencoders on the digits (cached: figures and checkpoints share them)
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class AutoencoderRun:
    """Settings of a mirrored autoencoder (64, hidden, code_size) trained on the digits' training split."""

    code_size: int
    hidden: int = 128
    epochs: int = 25
    batch_size: int = 128
    lr: float = 3e-3
    seed: int = 0
    device: str = "cpu"


class TrainedAutoencoder(NamedTuple):
    model: nn.Sequential
    history: train.History


@train.cached
def digits_autoencoder(config: AutoencoderRun) -> TrainedAutoencoder:
    """Train a 64-hidden-k-hidden-64 ReLU autoencoder on the digits by Adam on the squared error (Chapter 9)."""
    digits = data.load_digits(device=config.device)
    model = mirrored_autoencoder((64, config.hidden, config.code_size), seed=config.seed, device=config.device)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr)
    history = train.fit(model, squared_error, optimizer, (digits.X_train, digits.X_train), epochs=config.epochs,
                        batch_size=config.batch_size, seed=config.seed)
    return TrainedAutoencoder(model, history)
