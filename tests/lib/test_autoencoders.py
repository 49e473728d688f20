"""Tests of dlbook.autoencoders: the linear autoencoder and PCA, mixing codes, probes, image grids."""
import math

import pytest
import torch

from dlbook import autoencoders, pca, train


@pytest.fixture(scope="module")
def centred():
    gen = torch.Generator().manual_seed(0)
    X = torch.randn(400, 6, generator=gen, dtype=torch.float64) * torch.tensor([3.0, 2.0, 1.5, 0.5, 0.3, 0.2],
                                                                               dtype=torch.float64)
    X = X @ torch.linalg.qr(torch.randn(6, 6, generator=gen, dtype=torch.float64))[0]
    return X - X.mean(0)


def test_linear_autoencoder_finds_the_principal_subspace(centred):
    model = autoencoders.linear_autoencoder(6, 2, seed=0, dtype=torch.float64)
    assert [type(m).__name__ for m in model] == ["Linear", "Linear"] and model[0].bias is None
    train.fit(model, autoencoders.squared_error, torch.optim.Adam(model.parameters(), lr=0.02),
              (centred, centred), epochs=800)
    fitted = pca.pca_eigh(centred)
    angles = pca.principal_angles(autoencoders.decoder_matrix(model), fitted.components[:, :2])
    assert angles.max() < 1e-3
    error = autoencoders.reconstruction_error(model, centred)
    assert abs(error / fitted.eigenvalues[2:].sum().item() - 1) < 1e-3


def test_mixing_the_code_changes_the_weights_but_not_the_map(centred):
    model = autoencoders.linear_autoencoder(6, 3, seed=1, dtype=torch.float64)
    M = torch.tensor([[2.0, 1.0, 0.0], [0.0, 1.0, -1.0], [1.0, 0.0, 3.0]], dtype=torch.float64)
    mixed = autoencoders.mix_code(model, M)
    assert torch.allclose(mixed(centred), model(centred), atol=1e-12)
    assert not torch.allclose(mixed[0].weight, model[0].weight)
    with pytest.raises(ValueError, match="M must be invertible"):
        autoencoders.mix_code(model, torch.ones(3, 3, dtype=torch.float64))


def test_mirrored_autoencoder_shapes_and_codes():
    model = autoencoders.mirrored_autoencoder((64, 32, 3), seed=0)
    widths = [(m.in_features, m.out_features) for m in model.modules() if isinstance(m, torch.nn.Linear)]
    assert widths == [(64, 32), (32, 3), (3, 32), (32, 64)]
    X = torch.rand(5, 64, generator=torch.Generator().manual_seed(0))
    assert autoencoders.encode(model, X).shape == (5, 3) and model(X).shape == (5, 64)
    assert autoencoders.reconstruction_error(model, X) == pytest.approx(((model(X) - X) ** 2).sum(1).mean().item())


def test_squared_error_is_the_per_example_sum():
    X = torch.tensor([[1.0, 2.0], [0.0, 0.0]])
    assert autoencoders.squared_error(torch.zeros(2, 2), X).item() == pytest.approx(2.5)


def test_linear_probe_reads_separable_codes():
    gen = torch.Generator().manual_seed(0)
    y = torch.arange(200) % 2
    Z = torch.randn(200, 2, generator=gen) + 6.0 * y[:, None]
    assert autoencoders.linear_probe_accuracy(Z[:150], y[:150], Z[150:], y[150:]) > 0.95
    noise = torch.randn(200, 2, generator=gen)
    assert autoencoders.linear_probe_accuracy(noise[:150], y[:150], noise[150:], y[150:]) < 0.75


def test_image_grid_places_each_image():
    images = torch.arange(3 * 4, dtype=torch.float64).reshape(3, 4)      # three 2 x 2 images
    grid = autoencoders.image_grid(images, rows=2, image_shape=(2, 2), gap=1)
    assert grid.shape == (5, 5)
    assert torch.equal(grid[:2, :2], images[0].reshape(2, 2)) and torch.equal(grid[:2, 3:], images[1].reshape(2, 2))
    assert torch.equal(grid[3:, :2], images[2].reshape(2, 2))
    assert math.isnan(grid[2, 0]) and torch.isnan(grid[3:, 3:]).all()


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="code_size must be <= 4"):
        autoencoders.linear_autoencoder(4, 5)
    with pytest.raises(TypeError, match="model must be an autoencoder"):
        autoencoders.encode(torch.nn.Linear(2, 2), torch.zeros(1, 2))
    with pytest.raises(TypeError, match="bias-free linear autoencoder"):
        autoencoders.decoder_matrix(autoencoders.mirrored_autoencoder((4, 3, 2)))
    with pytest.raises(ValueError, match="X_hat and X must have the same shape"):
        autoencoders.squared_error(torch.zeros(2, 3), torch.zeros(2, 2))
    with pytest.raises(ValueError, match="images must have 64 columns"):
        autoencoders.image_grid(torch.zeros(2, 10), rows=1)
