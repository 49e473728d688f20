"""Tests of dlbook.pca: three routes to the same PCA, Eckart-Young, principal angles, Hebb and Oja."""
import numpy as np
import pytest
import torch
from scipy.linalg import subspace_angles
from sklearn.decomposition import PCA as SklearnPCA

from dlbook import pca


@pytest.fixture(scope="module")
def X():
    gen = torch.Generator().manual_seed(0)
    # Columns of very different scales, so the eigenvalues are well separated.
    return torch.randn(300, 8, generator=gen, dtype=torch.float64) * torch.linspace(3, 0.2, 8, dtype=torch.float64) + 5


def test_svd_and_eigh_agree(X):
    a, b = pca.pca_svd(X), pca.pca_eigh(X)
    assert torch.allclose(a.mean, X.mean(0))
    assert ((a.eigenvalues - b.eigenvalues).abs() / a.eigenvalues).max() < 1e-10
    assert (a.components - b.components).abs().max() < 1e-10          # same signs by convention
    assert torch.allclose(a.components.T @ a.components, torch.eye(8, dtype=torch.float64), atol=1e-12)
    assert (a.eigenvalues[:-1] >= a.eigenvalues[1:]).all()


def test_scores_have_the_eigenvalues_as_variances_and_match_sklearn(X):
    fitted = pca.pca_svd(X)
    Z = pca.scores(X, fitted, 8)
    assert torch.allclose(Z.var(0, unbiased=False), fitted.eigenvalues, rtol=1e-10)
    sklearn = SklearnPCA().fit(X.numpy())
    n = len(X)
    # scikit-learn divides by n - 1; the book divides by n.
    assert np.allclose(sklearn.explained_variance_ * (n - 1) / n, fitted.eigenvalues.numpy(), rtol=1e-10)
    assert np.allclose(np.abs(sklearn.components_), fitted.components.T.abs().numpy(), atol=1e-8)


def test_reconstruction_error_is_n_times_the_discarded_eigenvalues(X):
    fitted = pca.pca_eigh(X)
    for k in range(8):
        error = pca.reconstruction_error(X, fitted, k)
        assert abs(error / (len(X) * fitted.eigenvalues[k:].sum()) - 1) < 1e-8
    assert pca.reconstruction_error(X, fitted, 8) < 1e-18 * len(X) + 1e-16


def test_wide_data_gets_zero_eigenvalues():
    X = torch.randn(4, 6, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    a, b = pca.pca_svd(X), pca.pca_eigh(X)
    assert a.components.shape == (6, 6) and a.eigenvalues[3:].abs().max() < 1e-15
    assert (a.eigenvalues - b.eigenvalues).abs().max() < 1e-12


def test_explained_variance_and_components_for():
    eigenvalues = torch.tensor([4.0, 3.0, 2.0, 1.0], dtype=torch.float64)
    assert torch.allclose(pca.explained_variance(eigenvalues), torch.tensor([0.4, 0.7, 0.9, 1.0], dtype=torch.float64))
    assert [pca.components_for(eigenvalues, f) for f in (0.4, 0.41, 0.9, 1.0)] == [1, 2, 3, 4]


@pytest.mark.parametrize("shapes", [((10, 3), (10, 3)), ((12, 2), (12, 4)), ((6, 1), (6, 1))])
def test_principal_angles_match_scipy(shapes):
    gen = torch.Generator().manual_seed(2)
    A, B = (torch.randn(*s, generator=gen, dtype=torch.float64) for s in shapes)
    assert np.allclose(pca.principal_angles(A, B).numpy(), subspace_angles(A.numpy(), B.numpy()), atol=1e-12)


def test_small_principal_angles_are_accurate():
    gen = torch.Generator().manual_seed(3)
    A = torch.randn(20, 3, generator=gen, dtype=torch.float64)
    B = A @ torch.randn(3, 3, generator=gen, dtype=torch.float64) + 1e-9 * torch.randn(20, 3, generator=gen,
                                                                                        dtype=torch.float64)
    ours, theirs = pca.principal_angles(A, B).numpy(), subspace_angles(A.numpy(), B.numpy())
    assert ours.max() < 1e-8 and np.allclose(ours, theirs, rtol=1e-5, atol=1e-16)
    assert pca.principal_angles(A, A @ torch.randn(3, 3, generator=gen, dtype=torch.float64)).max() < 1e-14


def test_oja_finds_the_top_eigenvector_and_hebb_grows():
    Q = torch.linalg.qr(torch.randn(5, 5, generator=torch.Generator().manual_seed(1), dtype=torch.float64))[0]
    C = Q @ torch.diag(torch.tensor([4.0, 1.0, 0.8, 0.5, 0.2], dtype=torch.float64)) @ Q.T
    top = Q[:, 0]
    stream = pca.gaussian_stream(C, 4000, seed=0)
    w0 = torch.ones(5, dtype=torch.float64) / 5**0.5
    oja_path = pca.oja(stream, w0, 0.005)
    assert oja_path.shape == (4001, 5) and torch.equal(oja_path[0], w0)
    assert pca.abs_cosine(oja_path[-1], top) > 0.99 and abs(oja_path[-1].norm() - 1) < 0.01
    hebb_path = pca.hebb(stream[:300], w0, 0.05)
    assert hebb_path[-1].norm() > 1e3


def test_one_step_of_each_rule_by_hand():
    x = torch.tensor([[1.0, 2.0]], dtype=torch.float64)
    w0 = torch.tensor([0.5, -1.0], dtype=torch.float64)
    y = -1.5
    assert torch.allclose(pca.hebb(x, w0, 0.1)[1], w0 + 0.1 * y * x[0])
    assert torch.allclose(pca.oja(x, w0, 0.1)[1], w0 + 0.1 * y * (x[0] - y * w0))


def test_hebb_is_linear_in_expectation():
    C = pca.random_covariance(3, seed=4)
    w0 = torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64)
    streams = pca.gaussian_stream(C, 30, num_streams=20000, seed=5)
    paths = pca.hebb(streams, w0, 0.02)
    assert paths.shape == (31, 20000, 3)
    expected = pca.hebb_expectation(C, w0, 0.02, 30)
    z = (paths.mean(1) - expected) / (paths.std(1) / 20000**0.5 + 1e-300)
    assert z[1:].abs().max() < 5
    assert torch.allclose(expected[1], w0 + 0.02 * C @ w0)


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="X must have 2 dimension"):
        pca.pca_svd(torch.zeros(5, dtype=torch.float64))
    with pytest.raises(TypeError, match="X must hold floating-point"):
        pca.pca_eigh(torch.zeros(5, 3, dtype=torch.int64))
    with pytest.raises(ValueError, match="X must be finite"):
        pca.pca_svd(torch.tensor([[1.0, float("nan")], [0.0, 1.0]]))
    with pytest.raises(ValueError, match="k must be <= 3"):
        pca.reconstruct(torch.zeros(4, 3), pca.pca_svd(torch.randn(4, 3, generator=torch.Generator())), 4)
    with pytest.raises(TypeError, match="pca must be a dlbook.pca.PCA"):
        pca.scores(torch.zeros(4, 3), (1, 2, 3), 1)
    with pytest.raises(ValueError, match="A and B must have the same number of rows"):
        pca.principal_angles(torch.zeros(4, 2), torch.zeros(5, 2))
    with pytest.raises(ValueError, match="w0 must have 3 entries"):
        pca.oja(torch.zeros(10, 3), torch.zeros(2), 0.1)
    with pytest.raises(ValueError, match="lr must be a positive number or 10"):
        pca.hebb(torch.zeros(10, 3), torch.zeros(3), torch.ones(9))
    with pytest.raises(ValueError, match="fraction must be > 0"):
        pca.components_for(torch.ones(3), 0.0)
