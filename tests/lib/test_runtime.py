import random

import numpy as np
import pytest
import torch

import dlbook
from dlbook import runtime


def test_setup_seeds_everything_and_returns_a_device(capsys):
    device = dlbook.setup(seed=3)
    first = (random.random(), np.random.rand(), torch.rand(1).item())
    dlbook.setup(seed=3, quiet=True)
    second = (random.random(), np.random.rand(), torch.rand(1).item())
    assert first == second
    assert isinstance(device, torch.device)
    assert "device=" in capsys.readouterr().out


def test_setup_uses_one_thread_by_default(monkeypatch):
    monkeypatch.delenv(runtime.THREADS_ENV, raising=False)
    dlbook.setup(quiet=True)
    assert torch.get_num_threads() == 1
    from threadpoolctl import threadpool_info
    assert all(pool["num_threads"] == 1 for pool in threadpool_info())  # BLAS and OpenMP pools too


def test_thread_count_can_be_overridden(monkeypatch):
    monkeypatch.setenv(runtime.THREADS_ENV, "2")
    assert runtime.set_threads() == 2
    runtime.set_threads(1)


def test_get_device_prefers_cuda_then_mps_then_cpu(monkeypatch):
    monkeypatch.delenv(runtime.DEVICE_ENV, raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(runtime, "_mps_available", lambda: False)
    assert runtime.get_device().type == "cpu"
    monkeypatch.setattr(runtime, "_mps_available", lambda: True)
    assert runtime.get_device().type == "mps"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert runtime.get_device().type == "cuda"


def test_get_device_honours_environment(monkeypatch):
    monkeypatch.setenv(runtime.DEVICE_ENV, "cpu")
    assert runtime.get_device().type == "cpu"


def test_generator_gives_same_numbers_for_same_seed():
    a = torch.randn(5, generator=runtime.generator(7))
    b = torch.randn(5, generator=runtime.generator(7))
    assert torch.equal(a, b)


def test_environment_detection(monkeypatch):
    monkeypatch.setenv(runtime.BOOK_BUILD_ENV, "1")
    assert runtime.in_book_build()
    monkeypatch.setenv(runtime.BOOK_BUILD_ENV, "0")
    assert not runtime.in_book_build()
    monkeypatch.setenv("CI", "true")
    assert runtime.in_ci()
    assert not runtime.in_colab()


@pytest.mark.parametrize("call, match", [
    (lambda: runtime.get_device("tpu"), "prefer"),
    (lambda: runtime.seed_everything(-1), "seed"),
    (lambda: runtime.seed_everything(1.5), "seed"),
    (lambda: runtime.set_threads(0), "num_threads"),
    (lambda: runtime.generator("x"), "seed"),
])
def test_bad_arguments_name_the_argument(call, match):
    with pytest.raises((TypeError, ValueError), match=match):
        call()


@pytest.mark.skipif(torch.cuda.is_available(), reason="machine has CUDA")
def test_asking_for_missing_cuda_is_a_clear_error():
    with pytest.raises(ValueError, match="CUDA"):
        runtime.get_device("cuda")


def test_scale_switch(monkeypatch):
    monkeypatch.delenv(runtime.SCALE_ENV, raising=False)
    assert runtime.scale() == "default" and runtime.at_scale(8, 30) == 8
    monkeypatch.setenv(runtime.SCALE_ENV, "full")
    assert runtime.scale() == "full" and runtime.at_scale(8, 30) == 30
    monkeypatch.setenv(runtime.SCALE_ENV, "huge")
    with pytest.raises(ValueError, match="DLBOOK_SCALE"):
        runtime.scale()


def test_a_test_run_is_not_a_kernel():
    assert runtime.in_kernel() is False
